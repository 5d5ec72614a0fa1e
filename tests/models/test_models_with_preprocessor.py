"""keras-hub-style task models: fit / evaluate / predict on raw strings equal the token-dict
path (offline tokenization), compile(metrics=...) works on the main output, training lowers
the loss, `.keras` files carry the SentencePiece model and load in a fresh process after
`import xlnet_tf2` alone, from_preset reads our LM and task directories and HuggingFace task
directories, save_to_preset writes both formats."""

import json
import os
import shutil
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

import xlnet_tf2
from xlnet_tf2 import tensorflow_build
from xlnet_tf2.tokenizers.packing import encode_sequence_pair
from xlnet_tf2.tokenizers.sentencepiece_tokenizer import SentencePieceTokenizer

from fixtures.paths import REPO_ROOT as REPO
from fixtures.task_files import train_tiny_spm
SEQ_LEN = 24
TEXTS = ["Return the number of items in a container.", "Sort the list in place.",
         "Create a new event loop.", "Parse an email message from a string.",
         "Run the coroutine until it completes.", "Split the header into parts.",
         "Cancel the task and wait for it.", "Encode the message body as base64."]
LABELS = [0, 0, 1, 2, 1, 2, 1, 2]


def _config(**overrides):
    values = dict(n_layer=2, d_model=32, n_head=4, d_head=8, d_inner=64, n_token=500,
                  dropout=0.0, dropatt=0.0)
    values.update(overrides)
    return xlnet_tf2.XLNetConfig.from_dict(values)


@pytest.fixture(scope="module")
def spm(tmp_path_factory):
    return train_tiny_spm(str(tmp_path_factory.mktemp("spm")))


def _offline(spm, texts, pairs=None, seq_len=SEQ_LEN):
    """Token dicts from the offline tokenizer and packing (the reference layout)."""
    tokenizer = SentencePieceTokenizer.from_file(spm)
    rows = [encode_sequence_pair(tokenizer.encode_ids(a),
                                 None if pairs is None else tokenizer.encode_ids(pairs[i]),
                                 seq_len, "cls_last") for i, a in enumerate(texts)]
    return {k: np.stack([r[k] for r in rows]) for k in rows[0]}


def _classifier(spm, **kwargs):
    return xlnet_tf2.XLNetClassifier(_config(), num_classes=3, head_dropout=0.0,
                                     preprocessor=xlnet_tf2.XLNetPreprocessor(spm, SEQ_LEN),
                                     **kwargs)


def test_default_compile_keeps_xla_off_where_tensorflow_has_none_for_the_cpu(monkeypatch):
    """Keras' jit_compile="auto" compiles fit's step with XLA on a machine with any device
    but CPUs; TensorFlow's TPU build lists its TPU_SYSTEM device on a plain CPU machine and
    has XLA only for the TPU, so the step would fail ("could not find registered transfer
    manager for platform Host"). Under that build, outside a TPU strategy, the default compile
    leaves XLA off; a jit_compile the user asks for is kept."""
    from tensorflow.python.framework import config as tf_config

    devices = [tf.config.PhysicalDevice("/physical_device:CPU:0", "CPU"),
               tf.config.PhysicalDevice("/physical_device:TPU_SYSTEM:0", "TPU_SYSTEM")]
    monkeypatch.setattr(tf.config, "list_physical_devices", lambda *a: devices)
    monkeypatch.setattr(tf_config, "is_op_determinism_enabled", lambda: False)
    monkeypatch.setattr(tensorflow_build, "xla_on_cpu_missing", lambda: "the TPU build")
    model = xlnet_tf2.XLNetClassifier(_config(), num_classes=2)  # compiled at construction
    assert model.jit_compile is False
    model.compile(jit_compile=True)
    assert model.jit_compile is True
    monkeypatch.setattr(tensorflow_build, "xla_on_cpu_missing", lambda: None)
    model.compile()  # the plain wheel: Keras' own choice (XLA, with a device beside the CPU)
    assert model.jit_compile is True


def test_fit_on_strings_makes_one_pipeline_iterator_for_all_epochs(spm, monkeypatch):
    """Each epoch is one pass over the examples in batches, and the preprocessing pipeline is
    iterated from one iterator across epochs (Keras would make one per epoch, each
    instantiating the preprocessor's map function anew: seconds apiece for SQuAD's)."""
    from tensorflow.python.data.ops import iterator_ops

    made = []
    real_init = iterator_ops.OwnedIterator.__init__

    def counting_init(self, *args, **kwargs):
        made.append(1)
        return real_init(self, *args, **kwargs)

    monkeypatch.setattr(iterator_ops.OwnedIterator, "__init__", counting_init)

    class Batches(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            self.seen.append(0)

        def on_train_batch_end(self, batch, logs=None):
            self.seen[-1] += 1

    classifier = _classifier(spm)

    def fit(epochs):
        made.clear()
        counter = Batches()
        counter.seen = []
        history = classifier.fit(TEXTS[:5], LABELS[:5], batch_size=2, epochs=epochs, verbose=0,
                                 callbacks=[counter])
        assert len(history.history["loss"]) == epochs
        assert counter.seen == [3] * epochs  # 5 examples in batches of 2: 2, 2, 1
        return len(made)

    fit(1)  # the first fit also traces the step (Keras iterates the data more there)
    assert fit(4) == fit(1)


@pytest.mark.slow
def test_classifier_on_strings_and_token_dicts(spm):
    classifier = _classifier(spm)
    # The case: metrics on the main output, then fit.
    classifier.compile(optimizer=keras.optimizers.Adam(5e-3),
                       metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")])
    history = classifier.fit(TEXTS, LABELS, batch_size=4, epochs=15, verbose=0).history
    assert history["loss"][-1] < 0.6 * history["loss"][0], history["loss"]
    logits = classifier.predict(TEXTS, batch_size=3, verbose=0)
    tokens = _offline(spm, TEXTS)
    np.testing.assert_allclose(classifier.predict(tokens, verbose=0), logits, atol=1e-6)
    np.testing.assert_allclose(classifier.task_model(tokens)["logits"].numpy(), logits, atol=1e-5)
    # HuggingFace's token_type_ids are accepted; a missing attention_mask means no padding
    hf_names = {"input_ids": tokens["input_ids"], "token_type_ids": tokens["segment_ids"],
                "attention_mask": tokens["attention_mask"]}
    np.testing.assert_allclose(classifier.predict(hf_names, verbose=0), logits, atol=1e-6)
    full = _offline(spm, TEXTS, seq_len=8)
    assert full["attention_mask"].all()
    np.testing.assert_array_equal(
        classifier.predict({"input_ids": full["input_ids"], "segment_ids": full["segment_ids"]},
                           verbose=0), classifier.predict(full, verbose=0))
    loss, accuracy = classifier.evaluate(TEXTS, LABELS, batch_size=4, verbose=0)
    assert accuracy == pytest.approx(np.mean(logits.argmax(-1) == LABELS))
    expected = np.mean(keras.losses.sparse_categorical_crossentropy(
        np.array(LABELS), logits, from_logits=True))
    assert loss == pytest.approx(float(expected), rel=1e-5)
    # a tf.data pipeline of (strings, labels) batches, and text pairs
    dataset = tf.data.Dataset.from_tensor_slices((TEXTS, LABELS)).batch(4)
    assert classifier.evaluate(dataset, verbose=0) == pytest.approx([loss, accuracy], rel=1e-5)
    pairs = TEXTS[::-1]
    np.testing.assert_allclose(classifier.predict((TEXTS, pairs), verbose=0),
                               classifier.predict(_offline(spm, TEXTS, pairs), verbose=0),
                               atol=1e-6)
    with pytest.raises(ValueError, match="token dicts"):
        classifier(tf.constant(TEXTS))


@pytest.mark.slow
def test_keras_file_carries_the_spm_and_loads_after_import_xlnet_tf2(spm, tmp_path):
    local_spm = tmp_path / "spiece.model"
    shutil.copy(spm, local_spm)
    classifier = _classifier(str(local_spm), label_list=["a", "b", "c"])
    classifier.fit(TEXTS, LABELS, batch_size=4, epochs=1, verbose=0)
    expected = classifier.predict(TEXTS, verbose=0)
    classifier.save(str(tmp_path / "first.keras"))
    moved = tmp_path / "elsewhere" / "classifier.keras"
    moved.parent.mkdir()
    shutil.move(str(tmp_path / "first.keras"), moved)
    os.remove(local_spm)  # the file must carry the model itself
    np.save(tmp_path / "expected.npy", expected)
    script = (
        "import json, sys\n"
        "import xlnet_tf2\n"
        "no_tensorflow = 'tensorflow' not in sys.modules\n"
        "import keras, numpy as np\n"
        f"model = keras.models.load_model({str(moved)!r})\n"
        f"texts = json.loads({json.dumps(json.dumps(TEXTS))})\n"
        f"expected = np.load({str(tmp_path / 'expected.npy')!r})\n"
        "diff = np.max(np.abs(model.predict(texts, verbose=0) - expected))\n"
        "print(json.dumps({'no_tensorflow': no_tensorflow, 'class': type(model).__name__,\n"
        "                  'labels': model.label_list, 'diff': float(diff),\n"
        "                  'optimizer_variables': len(model.optimizer.variables)}))\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=300, cwd=str(tmp_path),
                            env={**os.environ, "PYTHONPATH": REPO, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report == {"no_tensorflow": True, "class": "XLNetClassifier",
                      "labels": ["a", "b", "c"], "diff": 0.0,
                      "optimizer_variables": len(classifier.optimizer.variables)}


def test_from_preset_and_save_to_preset(spm, tmp_path):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    # an LM directory of ours -> its backbone under a new head
    lm = xlnet_tf2.XLNetLMHeadModel(_config())
    lm.build()
    xlnet_tf2.save_pretrained(lm, str(tmp_path / "lm"), spm_model=spm)
    classifier = xlnet_tf2.XLNetClassifier.from_preset(str(tmp_path / "lm"), num_classes=3,
                                                       seq_len=16)
    assert classifier.preprocessor.seq_len == 16
    for ours, theirs in zip(classifier.backbone.weights, lm.transformer.weights):
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    reloaded_lm = xlnet_tf2.XLNetLMHeadModel.from_preset(str(tmp_path / "lm"))
    ids = _offline(spm, TEXTS[:2], seq_len=16)
    np.testing.assert_array_equal(reloaded_lm(ids)["logits"].numpy(), lm(ids)["logits"].numpy())
    assert set(xlnet_tf2.XLNetLMHeadModel.presets) == {"xlnet-base-cased", "xlnet-large-cased"}
    assert xlnet_tf2.XLNetClassifier.presets["xlnet-base-cased"]["architecture"]["n_layer"] == 12
    # our task directory round trip (task.json, checkpoint, spiece.model)
    classifier.fit(TEXTS, LABELS, epochs=1, verbose=0)
    classifier.save_to_preset(str(tmp_path / "task"))
    settings = json.loads((tmp_path / "task" / "task.json").read_text())
    assert settings == {"kind": "classification", "seq_len": 16, "layout": "cls_last",
                        "lower": False, "summary_type": "last", "label_list": ["0", "1", "2"]}
    again = xlnet_tf2.XLNetClassifier.from_preset(str(tmp_path / "task"))
    np.testing.assert_array_equal(again.predict(TEXTS, verbose=0),
                                  classifier.predict(TEXTS, verbose=0))
    with pytest.raises(ValueError, match="classification model.*XLNetRegressor loads regression"):
        xlnet_tf2.XLNetRegressor.from_preset(str(tmp_path / "task"))
    with pytest.raises(ValueError, match="classification task directory, not a language model"):
        xlnet_tf2.XLNetLMHeadModel.from_preset(str(tmp_path / "task"))
    # HuggingFace: our task out, transformers in, and an HF task directory back as a preset
    classifier.save_to_preset(str(tmp_path / "hf"), format="huggingface")
    hf = transformers.XLNetForSequenceClassification.from_pretrained(str(tmp_path / "hf")).eval()
    with torch.no_grad():
        hf_logits = hf(input_ids=torch.tensor(ids["input_ids"]).long(),
                       token_type_ids=torch.tensor(ids["segment_ids"]).long(),
                       attention_mask=torch.tensor(ids["attention_mask"]).float()).logits.numpy()
    ours = classifier.predict(TEXTS[:2], verbose=0)
    assert np.max(np.abs(hf_logits - ours)) <= 1e-5
    from_hf = xlnet_tf2.XLNetClassifier.from_preset(str(tmp_path / "hf"), seq_len=16)
    np.testing.assert_allclose(from_hf.predict(TEXTS[:2], verbose=0), hf_logits, atol=1e-5)
    hf_lm = tmp_path / "hf_lm"
    xlnet_tf2.save_pretrained(lm, str(hf_lm), format="huggingface")
    np.testing.assert_allclose(xlnet_tf2.XLNetLMHeadModel.from_preset(str(hf_lm))(ids)["logits"],
                               lm(ids)["logits"].numpy(), atol=1e-5)


@pytest.mark.slow  # 27 s on the quiet machine (two models fitted, predicted, evaluated)
def test_regressor_and_multiple_choice(spm):
    from xlnet_tf2.tasks.race import RaceExample, encode_example

    # regression on text pairs: scores [N], the head's single logit
    regressor = xlnet_tf2.XLNetRegressor(_config(), head_dropout=0.0,
                                         preprocessor=xlnet_tf2.XLNetPreprocessor(spm, SEQ_LEN))
    scores = np.linspace(0.0, 1.0, len(TEXTS)).astype(np.float32)
    regressor.fit((TEXTS, TEXTS[::-1]), scores, batch_size=4, epochs=1, verbose=0)
    predicted = regressor.predict((TEXTS, TEXTS[::-1]), verbose=0)
    tokens = _offline(spm, TEXTS, TEXTS[::-1])
    assert predicted.shape == (len(TEXTS),)
    np.testing.assert_allclose(predicted, regressor.task_model(tokens)["logits"][:, 0], atol=1e-5)
    loss, mae = regressor.evaluate((TEXTS, TEXTS[::-1]), scores, verbose=0)
    assert loss == pytest.approx(float(np.mean((predicted - scores) ** 2)), rel=1e-5)
    assert mae == pytest.approx(float(np.mean(np.abs(predicted - scores))), rel=1e-5)

    # multiple choice: the in-graph layout is RACE fine-tuning's
    tokenizer = SentencePieceTokenizer.from_file(spm)
    x = {"article": TEXTS[:4], "question": ["What does it _?", "Which one?", "Why?", "How _ it"],
         "options": [TEXTS[4:8], TEXTS[:4], TEXTS[2:6], TEXTS[1:5]]}
    answers = [0, 1, 2, 3]
    chooser = xlnet_tf2.XLNetMultipleChoice(
        _config(), num_choices=4, head_dropout=0.0,
        preprocessor=xlnet_tf2.XLNetMultipleChoicePreprocessor(spm, SEQ_LEN, max_qa_length=10))
    packed = chooser.preprocessor(x)
    for i in range(4):
        want = encode_example(RaceExample("q", x["article"][i], x["question"][i],
                                          x["options"][i], None), tokenizer, SEQ_LEN, 10)
        for key in want:
            np.testing.assert_array_equal(packed[key][i].numpy(), want[key], err_msg=key)
    chooser.fit(x, answers, batch_size=2, epochs=1, verbose=0)
    logits = chooser.predict(x, verbose=0)
    assert logits.shape == (4, 4)
    np.testing.assert_allclose(logits, chooser.task_model(packed)["logits"].numpy(), atol=1e-5)



def test_in_memory_inputs_are_preprocessed_once_in_chunks_without_a_map(spm, monkeypatch):
    """Lists and arrays are tokenized eagerly, PREPROCESS_ROWS rows a call, before batching:
    no tf.data map is traced per fit/evaluate/predict, the chunks joined give what one call
    gives (ragged word lists too), and an empty input is one line."""
    from xlnet_tf2.models import model_with_preprocessor
    from xlnet_tf2.models.xlnet_token_classifier import XLNetTokenClassifier
    from xlnet_tf2.tokenizers.xlnet_word_preprocessor import XLNetWordPreprocessor

    classifier = _classifier(spm)
    whole = classifier._preprocessed(*[model_with_preprocessor._as_column(c)
                                       for c in ((TEXTS, TEXTS[::-1]), LABELS, None)])
    maps = []
    real_map = tf.data.Dataset.map
    monkeypatch.setattr(tf.data.Dataset, "map",
                        lambda self, *a, **k: maps.append(1) or real_map(self, *a, **k))
    monkeypatch.setattr(model_with_preprocessor, "PREPROCESS_ROWS", 3)  # 8 rows: 3 + 3 + 2
    chunked = classifier._preprocessed(*[model_with_preprocessor._as_column(c)
                                         for c in ((TEXTS, TEXTS[::-1]), LABELS, None)])
    for key in whole[0]:
        np.testing.assert_array_equal(chunked[0][key].numpy(), whole[0][key].numpy(),
                                      err_msg=key)
    np.testing.assert_array_equal(chunked[1].numpy(), LABELS)
    np.testing.assert_array_equal(chunked[0]["input_ids"].numpy(),
                                  _offline(spm, TEXTS, TEXTS[::-1])["input_ids"])
    classifier.fit((TEXTS, TEXTS[::-1]), LABELS, batch_size=4, epochs=1, verbose=0)
    classifier.evaluate((TEXTS, TEXTS[::-1]), LABELS, verbose=0)
    logits = classifier.predict((TEXTS, TEXTS[::-1]), batch_size=3, verbose=0)
    assert maps == []
    np.testing.assert_allclose(logits, classifier((_offline(spm, TEXTS, TEXTS[::-1])))
                               .numpy(), atol=1e-5)

    words = [["Peter", "lives", "in", "Paris"], ["Anna", "visited", "Berlin"],
             ["Maria", "lives", "in", "London", "now"], ["Bob"]] * 2
    tags = [[1, 0, 0, 2], [1, 0, 2], [1, 0, 0, 2, 0], [1]] * 2
    tagger = XLNetTokenClassifier(_config(), num_labels=3, head_dropout=0.0,
                                  preprocessor=XLNetWordPreprocessor(spm, SEQ_LEN))
    inputs, labels = tagger._preprocessed(tf.ragged.constant(words), tf.ragged.constant(tags))
    one_call = tagger.prepare_labels(None, tagger.preprocess(tf.ragged.constant(words)),
                                     tf.ragged.constant(tags))
    np.testing.assert_array_equal(labels.numpy(), one_call[1].numpy())
    np.testing.assert_array_equal(inputs["input_ids"].numpy(), one_call[0]["input_ids"].numpy())
    with pytest.raises(ValueError, match="got no examples"):
        classifier.predict(np.array([], dtype=object), verbose=0)


@pytest.mark.slow
def test_question_answerer_on_raw_answers(spm):
    """The first SQuAD window; labels from raw answers are the token positions fine-tuning's
    data gives (an answer past the window, and none: <cls>); the loss is the original's."""
    from xlnet_tf2.tasks.squad_data import SquadExample, build_windows, tokenize_context

    tokenizer = SentencePieceTokenizer.from_file(spm)
    contexts = [" ".join(TEXTS[i:i + 3]) for i in range(4)] + [" ".join(TEXTS)] * 2
    questions = ["What is sorted?", "What runs?", "What is parsed?", "What is split?",
                 "What is encoded?", "What is missing?"]
    answers = [("list", contexts[0].index("list")), ("event loop", contexts[1].index("event")),
               ("email message", contexts[2].index("email")),
               ("header", contexts[3].index("header")),
               ("message body", contexts[4].index("message body")), None]
    windows = [build_windows(SquadExample("q", q, c, () if a is None else (a,), a is None), 0,
                             tokenize_context(c, tokenizer), tokenizer.encode_ids(q),
                             SEQ_LEN * 2, 128, 16)[0]
               for q, c, a in zip(questions, contexts, answers)]
    qa = xlnet_tf2.XLNetQuestionAnswerer(
        _config(), head_dropout=0.0, start_n_top=3, end_n_top=3,
        preprocessor=xlnet_tf2.XLNetQuestionAnsweringPreprocessor(spm, SEQ_LEN * 2,
                                                                   max_query_length=16))
    x = {"question": questions, "context": contexts}
    packed = qa.preprocessor(x)
    for key in ("input_ids", "segment_ids", "attention_mask", "p_mask", "cls_index"):
        np.testing.assert_array_equal(packed[key].numpy(),
                                      np.stack([w.inputs[key] for w in windows]), err_msg=key)
    y = {"start_positions": np.array([w.start_position for w in windows]),
         "end_positions": np.array([w.end_position for w in windows]),
         "is_impossible": np.array([float(w.is_impossible) for w in windows])}
    raw = {"answer_start": [0 if a is None else a[1] for a in answers],
           "answer_text": ["" if a is None else a[0] for a in answers]}
    labels = qa.preprocessor.answer_labels(contexts, raw["answer_start"], raw["answer_text"],
                                           packed)
    for key in y:
        np.testing.assert_array_equal(labels[key].numpy(), y[key], err_msg=key)
    assert y["is_impossible"].tolist() == [0, 0, 0, 0, 1, 1]  # past the window, no answer
    qa.compile(optimizer=keras.optimizers.Adam(2e-3))
    before = qa.evaluate(x, raw, batch_size=3, verbose=0)
    # the default loss is the original's: (start + end cross-entropy) / 2 + answer class / 2
    out = qa.task_model({**packed, "start_positions": y["start_positions"]})
    xent = keras.losses.sparse_categorical_crossentropy
    want = np.mean(0.5 * (xent(y["start_positions"], out["start_logits"], from_logits=True)
                          + xent(y["end_positions"], out["end_logits"], from_logits=True))
                   + 0.5 * keras.losses.binary_crossentropy(
                       y["is_impossible"][:, None], out["cls_logits"][:, None],
                       from_logits=True))
    assert before == pytest.approx(float(want), rel=1e-5)
    qa.fit(x, raw, batch_size=3, epochs=8, verbose=0)
    assert qa.evaluate(x, raw, batch_size=3, verbose=0) < 0.7 * before
    predicted = qa.predict(x, verbose=0)
    assert predicted["start_top_index"].shape == (6, 3)
    assert predicted["end_top_index"].shape == (6, 3, 3)
    direct = qa.task_model(packed)  # inference form: the beam
    np.testing.assert_array_equal(predicted["start_top_index"], direct["start_top_index"].numpy())
    np.testing.assert_array_equal(predicted["end_top_index"], direct["end_top_index"].numpy())
    np.testing.assert_allclose(predicted["cls_logits"], direct["cls_logits"].numpy(), atol=1e-5)
