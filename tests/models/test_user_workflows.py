"""The models as HuggingFace and keras-hub users call them: the tokenizer's output straight into
every task model, compile(metrics=...) + fit, from_pretrained / from_preset / save_pretrained
round trips (our format and HuggingFace's), add_tokens, a functional model holding the
preprocessor saved to .keras and loaded after its spiece.model is gone, and the model's input
errors as one line."""

from __future__ import annotations

import os
import shutil
import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

import xlnet_tf2
from fixtures.task_files import train_tiny_spm
from xlnet_tf2 import XLNetConfig, XLNetLMHeadModel, XLNetModel, XLNetTokenizer
from xlnet_tf2.models import MultipleChoiceModel, SequenceClassifier, SquadModel

VOCAB = 500  # the tiny SentencePiece model's
L = 32
TEXTS = ["Return the sum of two numbers.", "Parse an email message from a file.",
         "Run the event loop until the future is done.", "Sort the list in place."]


@pytest.fixture(scope="module")
def spm(tmp_path_factory):
    return train_tiny_spm(str(tmp_path_factory.mktemp("spm")))


@pytest.fixture(scope="module")
def tokenizer(spm):
    return XLNetTokenizer(spm)


def _config():
    return XLNetConfig.preset("tiny", n_token=VOCAB, dropout=0.0, dropatt=0.0)


def _batch(tokenizer, texts=TEXTS, pairs=None):
    return tokenizer(texts, pairs, max_length=L, padding="max_length", truncation=True)


def _renamed(batch):
    """The same batch under this project's name for the segment ids."""
    out = {k: v for k, v in batch.items() if k != "token_type_ids"}
    out["segment_ids"] = batch["token_type_ids"]
    return out


def test_tokenizer_output_feeds_every_task_model_as_it_comes(tokenizer):
    batch = _batch(tokenizer, pairs=TEXTS[::-1])
    assert set(batch) == {"input_ids", "token_type_ids", "attention_mask"}
    # A 0, B 1, <cls> 2, padding 4; padding on the left
    assert set(np.unique(batch["token_type_ids"])) == {0, 1, 2, 4}
    assert batch["attention_mask"].min() == 0

    classifier = SequenceClassifier(_config(), 3)
    got = classifier(batch)["logits"].numpy()
    assert got.shape == (len(TEXTS), 3)
    np.testing.assert_array_equal(got, classifier(_renamed(batch))["logits"].numpy())
    # HuggingFace's way: the entries as keywords
    np.testing.assert_array_equal(got, classifier(**batch)["logits"].numpy())
    # The segment ids are read: the same ids as one segment give other hidden states.
    one_segment = dict(batch, token_type_ids=np.zeros_like(batch["token_type_ids"]))
    assert np.abs(classifier(one_segment)["hidden"].numpy() -
                  classifier(batch)["hidden"].numpy()).max() > 1e-5
    # A tokenizer asked for extra outputs: what the model does not read is refused, in one
    # line naming it and the valid keys (as HuggingFace's model(**batch) refuses a keyword).
    extra = tokenizer(TEXTS, max_length=L, padding="max_length", truncation=True,
                      return_special_tokens_mask=True, return_length=True)
    with pytest.raises(ValueError, match=r"SequenceClassifier got unknown input key\(s\) "
                       r"\['length', 'special_tokens_mask'\]; valid keys: \('input_ids'"):
        classifier(extra)

    choices = MultipleChoiceModel(_config(), num_choices=2)
    pairs = {k: v.reshape(2, 2, L) for k, v in batch.items()}  # [B, C, L]
    scores = choices(pairs)["logits"].numpy()
    assert scores.shape == (2, 2)
    np.testing.assert_array_equal(scores, choices(_renamed(pairs))["logits"].numpy())

    squad = SquadModel(_config(), 3, 3)
    answer_inputs = dict(p_mask=np.zeros((len(TEXTS), L), np.int32),
                         cls_index=np.full([len(TEXTS)], L - 1, np.int32))
    start = squad({**batch, **answer_inputs})["start_logits"].numpy()
    np.testing.assert_array_equal(
        start, squad({**_renamed(batch), **answer_inputs})["start_logits"].numpy())
    np.testing.assert_array_equal(start, squad(**batch, **answer_inputs)["start_logits"].numpy())
    with pytest.raises(ValueError, match=r"SquadModel needs \['cls_index', 'p_mask'\]"):
        squad(batch)


def test_every_model_takes_the_batch_as_keywords(tokenizer):
    batch = tokenizer(TEXTS, return_tensors="tf")
    lm = XLNetLMHeadModel(_config())
    np.testing.assert_array_equal(lm(**batch)["logits"].numpy(), lm(batch)["logits"].numpy())
    backbone = lm.transformer
    np.testing.assert_array_equal(backbone(**batch, output_hidden_states=True)["hidden_states"][-1],
                                  backbone(batch)["last_hidden_state"])
    # in a functional model, called with keywords
    symbolic = {k: keras.Input(shape=(batch["input_ids"].shape[1],), dtype="int32", name=k)
                for k in batch}
    functional = keras.Model(symbolic, lm(**symbolic)["logits"])
    np.testing.assert_allclose(functional(dict(batch)).numpy(), lm(batch)["logits"].numpy(),
                               atol=1e-6)
    with pytest.raises(ValueError) as error:
        lm(batch, input_ids=batch["input_ids"])
    assert "\n" not in str(error.value) and "not both" in str(error.value)
    with pytest.raises(ValueError, match="needs its inputs"):
        SequenceClassifier(_config(), 2)()


def test_attention_mask_may_be_left_out(tokenizer):
    batch = tokenizer(TEXTS[:2], max_length=L, padding="max_length", truncation=True)
    full = {k: v[:, -6:] for k, v in batch.items()}  # last 6 tokens: no padding
    assert full["attention_mask"].min() == 1
    classifier = SequenceClassifier(_config(), 2)
    without = {k: v for k, v in full.items() if k != "attention_mask"}
    np.testing.assert_array_equal(classifier(full)["logits"].numpy(),
                                  classifier(without)["logits"].numpy())


# compile as Keras documents it for a one-output model, and keyed by output name as for a model
# with named outputs (loss={"logits": ...}, metrics={"logits": [...]}, labels {"logits": y}):
# the outputs given no loss (pooled, hidden) are not asked for one.
@pytest.mark.parametrize("loss_by_output, metrics_by_output, labels_by_output",
                         [(False, False, False), (True, True, False), (True, True, True),
                          (False, True, True)],
                         ids=["plain", "loss-dict", "loss-and-labels-dict", "labels-dict"])
def test_compile_with_metrics_fits_and_evaluates_on_the_logits(
        tokenizer, loss_by_output, metrics_by_output, labels_by_output):
    batch = _batch(tokenizer)
    labels = np.array([0, 1, 1, 0])
    classifier = SequenceClassifier(_config(), 2)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    classifier.compile(optimizer=keras.optimizers.Adam(1e-3),
                       loss={"logits": loss_fn} if loss_by_output else loss_fn,
                       metrics={"logits": ["accuracy"]} if metrics_by_output else ["accuracy"])
    y = {"logits": labels} if labels_by_output else labels
    untrained = classifier(batch)["logits"].numpy()
    before = [w.numpy().copy() for w in classifier.head.trainable_weights]
    assert before
    with warnings.catch_warnings():  # no "Gradients do not exist for mask_emb" on each step
        warnings.simplefilter("error", UserWarning)
        history = classifier.fit(batch, y, batch_size=4, epochs=1, verbose=0)
    assert set(history.history) == {"loss", "accuracy"}
    assert np.isfinite(history.history["loss"][0])
    assert any(np.abs(b - a.numpy()).max() > 0 for b, a in
               zip(before, classifier.head.trainable_weights))
    loss, accuracy = classifier.evaluate(batch, y, batch_size=4, verbose=0)
    logits = classifier(batch)["logits"].numpy()
    assert np.abs(logits - untrained).max() > 1e-5
    assert accuracy == pytest.approx(np.mean(logits.argmax(-1) == labels))
    assert loss == pytest.approx(float(loss_fn(labels, logits)), rel=1e-5)
    # predict returns every output, as a call does
    predicted = classifier.predict(batch, verbose=0)
    np.testing.assert_allclose(predicted["logits"], logits, rtol=1e-5, atol=1e-6)


def test_multiple_choice_compiles_on_its_scores(tokenizer):
    batch = {k: v.reshape(2, 2, L) for k, v in _batch(tokenizer).items()}
    model = MultipleChoiceModel(_config(), num_choices=2)
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    history = model.fit(batch, np.array([1, 0]), batch_size=2, epochs=1, verbose=0)
    assert 0.0 <= history.history["accuracy"][0] <= 1.0


def _backbone_out(model, batch):
    return model(batch)["last_hidden_state"].numpy()


def test_from_pretrained_and_save_pretrained_round_trips(tmp_path, tokenizer, spm):
    batch = _batch(tokenizer)
    lm = XLNetLMHeadModel(_config())
    lm.build()
    lm_dir = str(tmp_path / "lm")
    lm.save_pretrained(lm_dir, spm)
    assert sorted(os.listdir(lm_dir))[-1] == "xlnet_config.json"
    reference = _backbone_out(lm.transformer, batch)

    backbone = XLNetModel.from_pretrained(lm_dir)
    assert type(backbone) is XLNetModel
    np.testing.assert_array_equal(_backbone_out(backbone, batch), reference)
    np.testing.assert_array_equal(_backbone_out(XLNetModel.from_preset(lm_dir), batch),
                                  reference)
    assert XLNetModel.from_pretrained(lm_dir, mem_len=7).config.mem_len == 7
    assert "xlnet-base-cased" in XLNetModel.presets
    again = XLNetLMHeadModel.from_pretrained(lm_dir)
    np.testing.assert_array_equal(again(batch)["logits"].numpy(), lm(batch)["logits"].numpy())

    # the backbone's own save_pretrained, both formats
    backbone.save_pretrained(str(tmp_path / "backbone"))
    np.testing.assert_array_equal(
        _backbone_out(XLNetModel.from_pretrained(str(tmp_path / "backbone")), batch), reference)
    backbone.save_pretrained(str(tmp_path / "backbone_hf"), spm, format="huggingface")
    assert {"config.json", "model.safetensors", "spiece.model"} <= set(
        os.listdir(tmp_path / "backbone_hf"))
    np.testing.assert_allclose(
        _backbone_out(XLNetModel.from_pretrained(str(tmp_path / "backbone_hf")), batch),
        reference, atol=1e-5)

    # a task model: a new head on pretrained weights, then its own directory, both formats
    classifier = SequenceClassifier.from_pretrained(lm_dir, num_outputs=3)
    np.testing.assert_array_equal(_backbone_out(classifier.transformer, batch), reference)
    logits = classifier(batch)["logits"].numpy()
    task_dir = str(tmp_path / "classifier")
    classifier.save_pretrained(task_dir, spm, label_list=["a", "b", "c"], seq_len=L)
    loaded = SequenceClassifier.from_pretrained(task_dir)
    np.testing.assert_array_equal(loaded(batch)["logits"].numpy(), logits)
    # the backbone of a task directory, and the keras-hub task class on the same directory
    np.testing.assert_array_equal(_backbone_out(XLNetModel.from_pretrained(task_dir), batch),
                                  reference)
    task = xlnet_tf2.XLNetClassifier.from_preset(task_dir)
    np.testing.assert_allclose(task.predict(TEXTS, verbose=0), logits, atol=1e-6)
    classifier.save_pretrained(str(tmp_path / "classifier_hf"), spm, format="huggingface",
                               label_list=["a", "b", "c"])
    from_hf = SequenceClassifier.from_pretrained(str(tmp_path / "classifier_hf"))
    np.testing.assert_allclose(from_hf(batch)["logits"].numpy(), logits, atol=1e-5)

    with pytest.raises(ValueError, match="holds a classification model"):
        MultipleChoiceModel.from_pretrained(task_dir)
    with pytest.raises(ValueError, match="num_outputs"):
        SequenceClassifier.from_pretrained(task_dir, num_outputs=2)
    with pytest.raises(ValueError, match="label_list names 2 labels"):
        classifier.save_pretrained(str(tmp_path / "bad"), label_list=["a", "b"])


def test_other_task_models_save_and_load(tmp_path, tokenizer):
    batch = {k: v.reshape(2, 2, L) for k, v in _batch(tokenizer).items()}
    choices = MultipleChoiceModel(_config(), num_choices=2)
    scores = choices(batch)["logits"].numpy()
    choices.save_pretrained(str(tmp_path / "race"))
    loaded = MultipleChoiceModel.from_pretrained(str(tmp_path / "race"))
    assert loaded.num_choices == 2
    np.testing.assert_array_equal(loaded(batch)["logits"].numpy(), scores)

    squad = SquadModel(_config(), 3, 3)
    inputs = dict(_batch(tokenizer), p_mask=np.zeros((len(TEXTS), L), np.int32),
                  cls_index=np.full([len(TEXTS)], L - 1, np.int32))
    outputs = squad(inputs)
    squad.save_pretrained(str(tmp_path / "squad"), seq_len=L)
    again = SquadModel.from_pretrained(str(tmp_path / "squad"))
    assert (again.start_n_top, again.end_n_top) == (3, 3)
    for key in ("start_logits", "end_top_log_probs", "cls_logits"):
        np.testing.assert_array_equal(again(inputs)[key].numpy(), outputs[key].numpy())
    # the same weights through transformers' XLNetForQuestionAnswering directory
    squad.save_pretrained(str(tmp_path / "squad_hf"), format="huggingface")
    from_hf = SquadModel.from_pretrained(str(tmp_path / "squad_hf"))
    np.testing.assert_allclose(from_hf(inputs)["start_logits"].numpy(),
                               outputs["start_logits"].numpy(), atol=1e-5)


def test_add_tokens_adds_nothing_new_and_says_why(tokenizer):
    vocab = tokenizer.get_vocab()
    piece = next(p for p in vocab if p.startswith("\u2581") and len(p) > 2)
    assert tokenizer.add_tokens([piece, "<sep>"]) == 0
    assert tokenizer.add_tokens([]) == 0
    with pytest.raises(ValueError) as error:
        tokenizer.add_tokens(["<new_token>", piece])
    message = str(error.value)
    assert "\n" not in message and "['<new_token>']" in message
    assert "SentencePiece model" in message and "fixed" in message
    assert len(tokenizer) == len(vocab)  # nothing changed


def test_functional_model_with_preprocessor_loads_from_a_moved_keras_file(tmp_path, spm):
    own_spm = str(tmp_path / "spiece.model")
    shutil.copy(spm, own_spm)
    text = keras.Input(shape=(), dtype="string")
    preprocessor = xlnet_tf2.XLNetPreprocessor(own_spm, L)
    hidden = XLNetModel(_config())(preprocessor(text))["last_hidden_state"]
    model = keras.Model(text, hidden[:, -1])
    texts = tf.constant(TEXTS)
    expected = model(texts).numpy()
    path = str(tmp_path / "model.keras")
    model.save(path)
    moved = str(tmp_path / "elsewhere" / "model.keras")
    os.makedirs(os.path.dirname(moved))
    shutil.move(path, moved)
    os.remove(own_spm)

    loaded = keras.models.load_model(moved)
    np.testing.assert_array_equal(loaded(texts).numpy(), expected)
    layer = next(la for la in loaded.layers if isinstance(la, xlnet_tf2.XLNetPreprocessor))
    assert layer.model_bytes == open(spm, "rb").read()


def _one_line_error(call):
    with pytest.raises(ValueError) as error:
        call()
    message = str(error.value)
    assert "\n" not in message and "Exception encountered" not in message, message
    return message


def test_input_errors_are_one_line_at_every_depth(tokenizer):
    bad = _batch(tokenizer)
    bad["input_ids"] = bad["input_ids"].copy()
    bad["input_ids"][1, 3] = VOCAB + 4
    backbone = XLNetModel(_config())
    message = _one_line_error(lambda: backbone(bad))
    assert message.startswith(f"input_ids[1, 3] = {VOCAB + 4} is outside the vocabulary")
    classifier = SequenceClassifier(_config(), 2)
    assert _one_line_error(lambda: classifier(bad)) == message
    inputs = {k: keras.Input(shape=(L,), dtype="int32", name=k) for k in bad}
    functional = keras.Model(inputs, classifier(inputs)["logits"])
    assert _one_line_error(lambda: functional(bad)) == message
    negative = dict(bad, input_ids=-bad["input_ids"])
    assert "= -" in _one_line_error(lambda: classifier(negative))
    good = _batch(tokenizer)
    both = dict(_renamed(good), token_type_ids=good["token_type_ids"])
    assert "not both" in _one_line_error(lambda: backbone(both))
    assert "unknown input key" in _one_line_error(
        lambda: backbone({**good, "labels": good["input_ids"]}))


def _model_classes():
    """(name, build) of every model class: the backbone, the LM model and each declared
    task's model with a head and keras-hub-style model (xlnet_tf2/task_registry.py)."""
    from xlnet_tf2 import task_registry

    builds = {"XLNetModel": lambda: XLNetModel(_config()),
              "XLNetLMHeadModel": lambda: XLNetLMHeadModel(_config())}
    arguments = {"SequenceClassifier": (2,), "MultipleChoiceModel": (2,), "SquadModel": (3, 3),
                 "TokenClassifier": (3,)}
    keywords = {"XLNetClassifier": {"num_classes": 2}, "XLNetRegressor": {},
                "XLNetMultipleChoice": {"num_choices": 2}, "XLNetQuestionAnswerer": {},
                "XLNetTokenClassifier": {"num_labels": 3}}
    for name in task_registry.model_classes():
        cls = getattr(xlnet_tf2, name)
        builds[name] = (lambda cls=cls, name=name: cls(_config(), *arguments[name])
                        if name in arguments else cls(_config(), **keywords[name]))
    return builds


@pytest.mark.parametrize("name", list(_model_classes()))
def test_every_model_class_refuses_an_unknown_input_key_before_computing(name):
    """A misspelt key, or the original XLNet's input_mask (1 = padding), is one line naming
    the valid keys, raised before the model builds or runs (a task model took both silently
    and computed without a mask)."""
    model = _model_classes()[name]()
    built = model.built
    ids = np.full((2, 2, L) if "MultipleChoice" in name else (2, L), 5, np.int32)
    given = {"input_ids": ids, "segment_ids": np.zeros_like(ids), "input_maks": np.ones_like(ids)}
    message = _one_line_error(lambda: model(given))
    assert message.startswith(f"{name} got unknown input key(s) ['input_maks']; valid keys: (")
    valid = message.split("valid keys: ")[1]
    for key in ("'input_ids'", "'segment_ids'", "'token_type_ids'", "'attention_mask'"):
        assert key in valid, (key, valid)
    if not built:  # refused before Keras built a weight
        assert not model.built and not model.weights
    original = {"input_ids": ids, "input_mask": np.zeros_like(ids)}
    assert "(input_mask: the original XLNet's padding mask, 1 = padding: give attention_mask = " \
           "1 - input_mask)" in _one_line_error(lambda: model(original))
    assert "unknown input key(s) ['labels']" in _one_line_error(
        lambda: model({"input_ids": ids, "labels": ids[..., 0]}))
