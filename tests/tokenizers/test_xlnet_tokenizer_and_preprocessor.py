"""XLNetTokenizer (Python, HuggingFace-style) and XLNetPreprocessor (Keras layer on the in-graph
SentencePiece op): hand-worked layouts, padding and truncation, decoding, and the same ids and
layout from both on real text (raw stdlib docstrings: accents, quote pairs, whitespace runs)."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from fixtures.stdlib_text import alignment_texts, docstring_paragraphs
from fixtures.task_files import train_tiny_spm

PAD, SEP, CLS = 5, 4, 3


@pytest.fixture(scope="module")
def spm(tmp_path_factory):
    return train_tiny_spm(str(tmp_path_factory.mktemp("spm")))


@pytest.fixture(scope="module")
def texts():
    raw = alignment_texts()[:150]
    odd = ["", "   ", "Caf\u00e9  na\u00efve\tr\u00e9sum\u00e9 ``quoted'' 2,000, 3,4",
           "\u00a0non\u2003breaking\u3000spaces\n\nand \ufb01 ligatures", "x" * 300]
    return raw + docstring_paragraphs("json")[:60] + odd


def test_hand_worked_layout_padding_and_truncation(spm):
    from xlnet_tf2.tokenizers import XLNetTokenizer

    tok = XLNetTokenizer(spm)
    a, b = tok.encode("Return the value", add_special_tokens=False), tok.encode(
        "of the header", add_special_tokens=False)
    short = tok.encode("x", add_special_tokens=False)
    assert tok.encode("Return the value", "of the header") == a + [SEP] + b + [SEP, CLS]
    batch = tok(["Return the value", "x"], ["of the header", "x"])
    n = len(a) + len(b) + 3
    assert batch["input_ids"].shape == (2, n) and batch["input_ids"].dtype == np.int32
    assert batch["input_ids"][0].tolist() == a + [SEP] + b + [SEP, CLS]
    pad = n - 2 * len(short) - 3  # left padding: <cls> stays last
    assert batch["input_ids"][1].tolist() == [PAD] * pad + short + [SEP] + short + [SEP, CLS]
    assert batch["token_type_ids"][1].tolist() == [4] * pad + [0] * (len(short) + 1) + \
        [1] * (len(short) + 1) + [2]
    assert batch["attention_mask"][1].tolist() == [0] * pad + [1] * (n - pad)
    # truncation: the longer text loses its end first
    cut = tok(["Return the value"], ["of the header"], max_length=n - 2)
    keep_a, keep_b = len(a), len(b)
    while keep_a + keep_b > n - 2 - 3:  # the original _truncate_seq_pair
        if keep_a > keep_b:
            keep_a -= 1
        else:
            keep_b -= 1
    assert cut["input_ids"][0].tolist() == a[:keep_a] + [SEP] + b[:keep_b] + [SEP, CLS]
    whole = tok(["Return the value"], ["of the header"], max_length=n - 2, truncation=False)
    assert whole["input_ids"].shape == (1, n)
    fixed = tok("x", padding="max_length", max_length=12, return_tensors="tf")
    assert isinstance(fixed["input_ids"], tf.Tensor) and fixed["input_ids"].shape == (1, 12)
    ragged = tok(["Return the value", "x"], padding=False, return_tensors=None)
    assert ragged["input_ids"] == [a + [SEP, CLS], short + [SEP, CLS]]
    assert ragged["attention_mask"][1] == [1] * (len(short) + 2)
    assert tok("", padding=False, return_tensors=None)["input_ids"] == [SEP, CLS]  # not batched
    assert tok([""], padding=False, return_tensors=None)["input_ids"] == [[SEP, CLS]]
    with pytest.raises(ValueError, match="cannot be stacked"):
        tok(["a", "b c d"], padding=False)
    with pytest.raises(ValueError, match="needs max_length"):
        tok("a", padding="max_length")
    with pytest.raises(ValueError, match="text_pair has 1 entries for 2 texts"):
        tok(["a", "b"], ["c"])


def test_decode(spm):
    from xlnet_tf2.tokenizers.sentencepiece_tokenizer import preprocess_text
    from xlnet_tf2.tokenizers import XLNetTokenizer

    tok = XLNetTokenizer(spm)
    text = "Return  the ``header'' value,  caf\u00e9."
    batch = tok([text, "x"], ["of it", "y"], max_length=32, padding="max_length")
    row = batch["input_ids"][0]
    assert tok.decode(tok.encode(text, add_special_tokens=False)) == preprocess_text(text)
    assert tok.decode(row, skip_special_tokens=True) == preprocess_text(text) + " of it"
    pads = int((row == PAD).sum())
    # HF's slow tokenizer's spacing: no spaces around special tokens
    assert pads > 0 and tok.decode(row) == "<pad>" * pads + preprocess_text(text) + \
        "<sep>of it<sep><cls>"
    assert tok.decode(tf.constant(batch["input_ids"][1]), skip_special_tokens=True) == "x y"
    assert tok.batch_decode(batch["input_ids"], skip_special_tokens=True) == [
        preprocess_text(text) + " of it", "x y"]
    assert tok.convert_ids_to_tokens(row[-2:].tolist()) == ["<sep>", "<cls>"]
    assert tok.convert_ids_to_tokens(row[-1]) == "<cls>"
    assert tok.convert_ids_to_tokens(row, skip_special_tokens=True) == tok.tokenize(text) + \
        tok.tokenize("of it")
    assert tok.convert_tokens_to_ids(tok.tokenize(text)) == tok.encode(text,
                                                                       add_special_tokens=False)
    assert tok.pad_token_id == PAD and tok.cls_token == "<cls>" and len(tok) == 500


@pytest.mark.parametrize("layout", ["cls_last", "cls_first"])
def test_python_tokenizer_and_keras_layer_agree_on_real_text(spm, texts, layout):
    from xlnet_tf2.tokenizers import XLNetPreprocessor, XLNetTokenizer

    tok = XLNetTokenizer(spm)
    pairs = texts[::-1]
    for seq_len in (12, 96):
        layer = XLNetPreprocessor(spm, seq_len, layout=layout)
        for second in (None, pairs):
            want = tok(texts, second, padding="max_length", max_length=seq_len, layout=layout)
            got = layer(tf.constant(texts), None if second is None else tf.constant(second))
            for key in want:  # (the layer names the segment ids segment_ids)
                name = key if key in got else "segment_ids"
                np.testing.assert_array_equal(got[name].numpy(), want[key], err_msg=key)
    # the corpus exercises normalization and truncation
    assert any("\u00e9" in t for t in texts) and any("``" in t for t in texts)
    assert max(len(tok.encode(t)) for t in texts) > 96


def test_preprocessor_in_tf_data_and_config_round_trip(spm, texts):
    import keras

    from xlnet_tf2.tokenizers import XLNetPreprocessor

    layer = XLNetPreprocessor(spm, 24)
    sample = texts[:8]
    eager = layer(tf.constant(sample), tf.constant(sample[::-1]))
    # batched (text, pair) elements, and single scalar elements batched afterwards
    pairs = tf.data.Dataset.from_tensor_slices((sample, sample[::-1])).batch(8).map(layer)
    singles = tf.data.Dataset.from_tensor_slices(sample).map(layer).batch(8)
    from_pairs = next(iter(pairs))
    from_singles = next(iter(singles))
    alone = layer(tf.constant(sample))
    for key in eager:
        np.testing.assert_array_equal(from_pairs[key].numpy(), eager[key].numpy())
        np.testing.assert_array_equal(from_singles[key].numpy(), alone[key].numpy())
    clone = XLNetPreprocessor.from_config(layer.get_config())
    np.testing.assert_array_equal(clone(tf.constant(sample))["input_ids"].numpy(),
                                  alone["input_ids"].numpy())
    assert keras.saving.get_registered_object("xlnet_tf2>XLNetPreprocessor") is XLNetPreprocessor


@pytest.mark.parametrize("kind", ["text", "multiple_choice", "question_answering"])
def test_symbolic_call_without_the_model_gives_the_shapes_of_the_real_one(spm, kind):
    """A functional model is rebuilt from its config before load_assets gives the layer its
    SentencePiece model (a .keras file whose spm_model path is gone): the layer answers the
    symbolic call with the output shapes and dtypes it gives with the model."""
    import keras

    import xlnet_tf2

    if kind == "text":
        layer = xlnet_tf2.XLNetPreprocessor(spm, 24)
        symbolic = [keras.Input(shape=(), dtype="string")]
    elif kind == "multiple_choice":
        layer = xlnet_tf2.XLNetMultipleChoicePreprocessor(spm, 24, num_choices=3,
                                                          max_qa_length=8)
        symbolic = [keras.Input(shape=(), dtype="string"), keras.Input(shape=(), dtype="string"),
                    keras.Input(shape=(3,), dtype="string")]
    else:
        layer = xlnet_tf2.XLNetQuestionAnsweringPreprocessor(spm, 24, max_query_length=8)
        symbolic = [keras.Input(shape=(), dtype="string"), keras.Input(shape=(), dtype="string")]
    config = dict(layer.get_config(), spm_model="/nonexistent/spiece.model")
    without = type(layer).from_config(config)
    assert without.tokenizer is None
    want = {k: (tuple(v.shape), v.dtype) for k, v in layer(*symbolic).items()}
    got = {k: (tuple(v.shape), v.dtype) for k, v in without(*symbolic).items()}
    assert got == want and want["input_ids"] == ((None,) + (3,) * (kind == "multiple_choice")
                                                 + (24,), "int32")
    eager = [tf.constant(["an eager call needs the model"])] * len(symbolic)
    if kind == "multiple_choice":
        eager[2] = tf.constant([["a", "b", "c"]])
    with pytest.raises(ValueError) as error:
        without(*eager)
    assert str(error.value) == (
        f"{type(layer).__name__} {without.name!r} has no SentencePiece model "
        "(/nonexistent/spiece.model does not exist here): pass spm_model, or load the layer "
        "from a .keras file, which carries it.")
