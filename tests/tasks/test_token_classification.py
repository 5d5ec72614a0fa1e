"""Token classification's data: the CoNLL reader and its one-line errors, labels on each word's
first piece, the masked loss, and entity-level scores under conlleval's span rules."""

import numpy as np
import pytest
import tensorflow as tf

from xlnet_tf2 import special_ids as sid
from xlnet_tf2.tasks.entities import entity_scores, entity_spans
from xlnet_tf2.tasks.errors import TaskDataError
from xlnet_tf2.tasks.losses import token_classification_loss
from xlnet_tf2.tasks.token_classification import (IGNORE, build_features, label_list_of,
                                                  read_conll, tag_ids, word_tags)

CONLL = """-DOCSTART- -X- O O

EU NNP B-ORG
rejects VBZ O
German JJ B-MISC
call NN O

Peter NNP B-PER
Blackburn NNP I-PER
"""


class _Pieces:
    """A stand-in tokenizer: a word of n letters is ceil(n / 4) pieces (ids 10 + length)."""

    def encode_ids(self, word):
        return [10 + len(word)] * (-(-len(word) // 4))


def _write(tmp_path, text, name="train.txt"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_reader_splits_sentences_and_labels_first_pieces(tmp_path):
    sentences = read_conll(_write(tmp_path, CONLL))
    assert [s.words for s in sentences] == [("EU", "rejects", "German", "call"),
                                            ("Peter", "Blackburn")]
    assert sentences[1].tags == ("B-PER", "I-PER") and sentences[1].line == 8
    labels = label_list_of(sentences)
    assert labels == ["O", "B-MISC", "B-ORG", "B-PER", "I-PER"]
    features = build_features(sentences, _Pieces(), 12, tag_ids(sentences, labels, "t"))
    # Sentence 0: EU(1 piece) rejects(2) German(2) call(1) <sep> <cls>, left-padded to 12.
    ids = features["input_ids"][0].tolist()
    assert ids == [sid.PAD_ID] * 4 + [12, 17, 17, 16, 16, 14, sid.SEP_ID, sid.CLS_ID]
    assert features["label"][0].tolist() == [IGNORE] * 4 + [2, 0, IGNORE, 1, IGNORE, 0,
                                                            IGNORE, IGNORE]
    assert features["attention_mask"][0].tolist() == [0] * 4 + [1] * 8
    # Predictions read the first pieces back in order; a word cut by seq_len is "O".
    logits = np.zeros((2, 12, 5), np.float32)
    logits[0, 4, 2] = logits[0, 5, 0] = logits[0, 7, 3] = logits[0, 9, 0] = 1.0
    tags = word_tags(logits, features, labels, [4, 3])
    assert tags[0] == ["B-ORG", "O", "B-PER", "O"] and tags[1][2] == "O"


def test_words_past_seq_len_are_left_unlabeled():
    sentences = [type("S", (), {"words": ("ab",) * 5, "tags": ("O",) * 5})()]
    features = build_features(sentences, _Pieces(), 5, [[0] * 5])
    assert (features["label"][0] == 0).sum() == 3  # 5 - <sep> - <cls>


@pytest.mark.parametrize("text, message", [
    ("EU B-ORG\nrejects\n", "line 2: 'rejects' has no tag"),
    ("\n\n-DOCSTART- -X- O O\n\n", "holds no sentence"),
])
def test_bad_files_raise_one_line_naming_the_line(tmp_path, text, message):
    path = _write(tmp_path, text)
    with pytest.raises(TaskDataError, match=message) as error:
        read_conll(path)
    assert str(error.value).startswith(path) and "\n" not in str(error.value)


def test_unknown_tag_at_evaluation_names_its_line(tmp_path):
    sentences = read_conll(_write(tmp_path, "a B-PER\n\nb O\nc B-LOC\n", "dev.txt"))
    with pytest.raises(TaskDataError, match=r"dev.txt: record line 4: tag 'B-LOC' is not"):
        tag_ids(sentences, ["O", "B-PER"], str(tmp_path / "dev.txt"))


def test_missing_file_is_one_line(tmp_path):
    with pytest.raises(TaskDataError, match="does not exist"):
        read_conll(str(tmp_path / "none.txt"))


def test_loss_averages_labeled_positions_only():
    logits = tf.constant(np.log([[[0.5, 0.5], [0.9, 0.1], [0.2, 0.8]]]), tf.float32)
    labels = tf.constant([[IGNORE, 0, 1]])
    loss = token_classification_loss({"logits": logits}, {"label": labels}).numpy()
    np.testing.assert_allclose(loss, [-(np.log(0.9) + np.log(0.8)) / 2], rtol=1e-6)
    none = token_classification_loss({"logits": logits}, {"label": tf.fill([1, 3], IGNORE)})
    assert none.numpy().tolist() == [0.0]


def test_entity_spans_read_bio_and_iob_alike():
    assert entity_spans(["B-PER", "I-PER", "O", "B-LOC", "B-LOC", "I-ORG"]) == {
        ("PER", 0, 1), ("LOC", 3, 3), ("LOC", 4, 4), ("ORG", 5, 5)}
    # IOB1: I- starts an entity; B- splits two adjacent ones of one type.
    assert entity_spans(["I-PER", "I-PER", "B-PER", "O", "I-LOC"]) == {
        ("PER", 0, 1), ("PER", 2, 2), ("LOC", 4, 4)}


def test_entity_scores_count_exact_spans():
    gold = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "O"]]
    predicted = [["B-PER", "O", "O", "B-LOC"], ["B-ORG", "B-ORG"]]
    scores = entity_scores(gold, predicted)
    # gold {PER 0-1, LOC 3, ORG}, predicted {PER 0, LOC 3, ORG, ORG}: 2 hits.
    assert scores["precision"] == pytest.approx(2 / 4)
    assert scores["recall"] == pytest.approx(2 / 3)
    assert scores["f1"] == pytest.approx(2 * 0.5 * (2 / 3) / (0.5 + 2 / 3))
    assert scores["token_accuracy"] == pytest.approx(4 / 6)
