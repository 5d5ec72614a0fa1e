"""XLNetTokenClassifier, keras-hub style: fit on raw word lists (a tag id per word, labels on
each word's first piece), token accuracy over labeled positions only, predict_tags per word,
and a preset written by save_to_preset reads back with the same predictions."""

import keras
import pytest
import tensorflow as tf

from xlnet_tf2.models.xlnet_token_classifier import IGNORE, TokenAccuracy, XLNetTokenClassifier
from xlnet_tf2.tokenizers.xlnet_word_preprocessor import XLNetWordPreprocessor

from fixtures.task_files import train_tiny_spm
from fixtures.tf1_checkpoints import tiny_config

TAGS = ["O", "B-PER", "B-LOC"]
WORDS = [["Peter", "lives", "in", "Paris"], ["Anna", "visited", "Berlin"],
         ["Maria", "lives", "in", "London", "now"]] * 8
LABELS = [[1, 0, 0, 2], [1, 0, 2], [1, 0, 0, 2, 0]] * 8


@pytest.fixture(scope="module")
def spm(tmp_path_factory):
    return train_tiny_spm(str(tmp_path_factory.mktemp("spm")))


def test_token_accuracy_skips_ignored_positions():
    metric = TokenAccuracy()
    logits = tf.constant([[[2.0, 0.0], [0.0, 2.0], [2.0, 0.0]]])
    metric.update_state(tf.constant([[0, 0, IGNORE]]), logits)
    assert float(metric.result()) == pytest.approx(0.5)


@pytest.mark.slow
def test_fits_on_word_lists_and_reloads_from_its_preset(spm, tmp_path):
    tagger = XLNetTokenClassifier(tiny_config(n_token=500), preprocessor=XLNetWordPreprocessor(
        spm, 32), label_list=TAGS, head_dropout=0.0)
    # Labels land on first pieces only: as many labeled positions as words.
    inputs, labels = tagger.prepare_labels(None, tagger.preprocess(tf.ragged.constant(WORDS[:3])),
                                           tf.ragged.constant(LABELS[:3]))
    assert "first_piece" not in inputs
    assert [(row != IGNORE).sum() for row in labels.numpy()] == [4, 3, 5]
    # The defaults: cross-entropy and token accuracy over labeled positions.
    tagger.compile(optimizer=keras.optimizers.Adam(1e-2))
    history = tagger.fit(WORDS, LABELS, batch_size=8, epochs=8, verbose=0)
    assert history.history["loss"][-1] < 0.5 * history.history["loss"][0]
    assert history.history["token_accuracy"][-1] > 0.8
    tags = tagger.predict_tags(WORDS[:3])
    assert [len(t) for t in tags] == [4, 3, 5] and all(set(t) <= set(TAGS) for t in tags)
    tagger.save_to_preset(str(tmp_path / "preset"))
    back = XLNetTokenClassifier.from_preset(str(tmp_path / "preset"))
    assert back.label_list == TAGS
    assert back.predict_tags(WORDS[:3]) == tagger.predict_tags(WORDS[:3])
