"""A token-classification SavedModel serves raw sentences: its in-graph layout equals the
offline layout of tasks/token_classification.py token for token, and its tags equal the
offline prediction's, words past seq_len included ("O")."""

import numpy as np
import pytest
import tensorflow as tf

from xlnet_tf2.export.export_config import ExportConfig
from xlnet_tf2.export.saved_model import export_model_dir
from xlnet_tf2.models.xlnet_token_classifier import TokenClassifier
from xlnet_tf2.tasks.finetuned_model import load_task_model
from xlnet_tf2.tasks.token_classification import Sentence, build_features, word_tags
from xlnet_tf2.tokenizers.in_graph_tokenizer import InGraphTokenizer
from xlnet_tf2.tokenizers.sentencepiece_tokenizer import SentencePieceTokenizer
from xlnet_tf2.tokenizers.xlnet_word_preprocessor import layout_words

from fixtures.task_files import train_tiny_spm
from fixtures.tf1_checkpoints import tiny_config

# A SavedModel written and loaded (about 35 s on 2 cores), and the module fixture's model.
pytestmark = pytest.mark.slow

TAGS = ["O", "B-LOC", "B-PER", "I-PER"]
SEQ_LEN = 16
TEXTS = ["Peter lives in Paris", "Anna  lives in Berlin today with Maria and her friends",
         "", "unusual\u00e9 words: x"]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("tagger")
    spm = train_tiny_spm(str(root))
    model = TokenClassifier(tiny_config(n_token=500), len(TAGS)).build_weights()
    model.save_pretrained(str(root / "model"), spm, label_list=TAGS, seq_len=SEQ_LEN)
    return str(root / "model")


def _offline(model_dir):
    model, spec, spm = load_task_model(model_dir, "token_classification")
    sentences = [Sentence(tuple(t.split()), ("O",) * len(t.split()), 1) for t in TEXTS]
    features = build_features(sentences, SentencePieceTokenizer.from_file(spm), spec.seq_len,
                              [[0] * len(s.words) for s in sentences])
    inputs = {k: features[k] for k in ("input_ids", "segment_ids", "attention_mask")}
    logits = model(inputs, training=False)["logits"].numpy()
    return spm, features, word_tags(logits, features, TAGS, [len(s.words) for s in sentences])


def test_in_graph_layout_is_the_offline_layout(model_dir):
    spm, features, _ = _offline(model_dir)
    inputs, first = layout_words(InGraphTokenizer(spm).encode_ids,
                                 tf.strings.split(tf.constant(TEXTS)), SEQ_LEN)
    for name, value in inputs.items():
        np.testing.assert_array_equal(value.numpy(), features[name], err_msg=name)
    # Each kept word's first piece is where the offline label sits; the cut words are -1.
    for row, positions in enumerate(first.to_list()):
        labeled = np.flatnonzero(features["label"][row] >= 0).tolist()
        assert [p for p in positions if p >= 0] == labeled
    assert -1 in first.to_list()[1]  # the long sentence loses words to seq_len


def test_served_tags_equal_the_offline_prediction(model_dir, tmp_path):
    _, _, expected = _offline(model_dir)
    # No --kind: the model_dir's task.json says what it computes.
    path = export_model_dir(ExportConfig(model_dir=model_dir,
                                         export_dir=str(tmp_path / "export")))
    served = tf.saved_model.load(path).signatures["serving_default"](text=tf.constant(TEXTS))
    counts = served["num_words"].numpy().tolist()
    assert counts == [len(t.split()) for t in TEXTS]
    for row, count in enumerate(counts):
        words = [w.decode() for w in served["words"].numpy()[row][:count]]
        tags = [t.decode() for t in served["tags"].numpy()[row][:count]]
        assert words == TEXTS[row].split() and tags == expected[row]
        assert set(t.decode() for t in served["tags"].numpy()[row][count:]) <= {""}
