"""Bad input at serving time and at the model call: ids outside the vocabulary, text that is
not UTF-8, wrong shapes, in every serving signature (the exported classification, SQuAD,
RACE and features SavedModels, loaded as TF Serving loads them), and the model called
eagerly, traced and compiled; see tests/fixtures/battery.py. Nothing here writes a file."""

from __future__ import annotations

import os

import numpy as np
import pytest

from fixtures.battery import Case, api, as_params, clear, run_case, works
from fixtures.battery_artefacts import artefact

_LOADED = {}


def signatures(name: str = "export"):
    """The signatures of export artefact `name` as TF Serving sees them (loaded once,
    read-only)."""
    if name not in _LOADED:
        import tensorflow as tf
        import tensorflow_text  # noqa: F401 - the SentencePiece op

        _LOADED[name] = tf.saved_model.load(os.path.join(artefact(name), "1"))
    return _LOADED[name].signatures


def saved_model():
    return signatures("export")


def lm():
    if "lm" not in _LOADED:
        import xlnet_tf2

        _LOADED["lm"] = xlnet_tf2.from_pretrained(artefact("converted"))
    return _LOADED["lm"]


def ids(values, width=32, pad=5):
    rows = [list(v) + [pad] * (width - len(v)) for v in values]
    return np.asarray(rows, np.int32)


def token_inputs(values, width=32):
    import tensorflow as tf

    input_ids = ids(values, width)
    return dict(input_ids=tf.constant(input_ids),
                segment_ids=tf.zeros_like(input_ids), attention_mask=tf.ones_like(input_ids))


def serve_ids(values, width=32):
    return lambda ws: saved_model()["serve_token_ids"](**token_inputs(values, width))


def serve_text(*texts):
    import tensorflow as tf

    return lambda ws: saved_model()["serving_default"](text=tf.constant(list(texts)))


def squad_text(questions, contexts):
    import tensorflow as tf

    return lambda ws: signatures("squad_export")["serving_default"](
        question=tf.constant(questions), context=tf.constant(contexts))


def race_text(articles, questions, options):
    import tensorflow as tf

    return lambda ws: signatures("race_export")["serving_default"](
        article=tf.constant(articles), question=tf.constant(questions),
        options=tf.constant(options))


def race_ids(value):
    import tensorflow as tf

    def call(ws):
        x = np.full((1, 4, 64), 5, np.int32)
        x[0, 2, 10] = value
        return signatures("race_export")["serve_token_ids"](
            input_ids=tf.constant(x), segment_ids=tf.zeros_like(x), attention_mask=tf.ones_like(x))
    return call


def features_ids(values):
    return lambda ws: signatures("features_export")["serve_token_ids"](
        **token_inputs(values))


def squad_ids(values):
    return lambda ws: signatures("squad_export")["serve_token_ids"](
        **token_inputs(values, 64))


def probabilities_sum_to_one(ws, result):
    p = result.value["probabilities"].numpy()
    np.testing.assert_allclose(p.sum(-1), 1.0, rtol=1e-5)


def same_as_text_signature(text):
    """A check: serve_token_ids on the tokenizer's ids of `text` answers as serving_default."""
    def check(ws, result):
        probabilities_sum_to_one(ws, result)
        np.testing.assert_allclose(result.value["probabilities"].numpy(),
                                   serve_text(text)(ws)["probabilities"].numpy(), atol=1e-6)
    return check


def serve_encoded(text):
    """serve_token_ids on the offline tokenizer's inputs of `text`."""
    def call(ws):
        import tensorflow as tf

        from xlnet_tf2.tokenizers.packing import encode_sequence_pair
        from xlnet_tf2.tokenizers.sentencepiece_tokenizer import SentencePieceTokenizer

        tokenizer = SentencePieceTokenizer.from_file(artefact("sp.model"))
        inputs = encode_sequence_pair(tokenizer.encode_ids(text), None, 32)
        return saved_model()["serve_token_ids"](
            **{k: tf.constant(v[None]) for k, v in inputs.items()})
    return call


def model_call(values, mode):
    import tensorflow as tf

    def call(ws):
        inputs = {"input_ids": ids(values, 8)}
        if mode == "eager":
            return lm()(inputs)
        model = lm()  # loaded eagerly: a first load inside the trace would run under AutoGraph
        fn = tf.function(lambda x: model({"input_ids": x}), jit_compile=(mode == "xla"))
        return fn(tf.constant(inputs["input_ids"]))
    return call


def task_model_call(values, how):
    """A classifier on the converted backbone called as users call it: on the tokenizer's
    names (token_type_ids) directly, or inside a functional Keras model."""
    import keras
    import tensorflow as tf

    def call(ws):
        from xlnet_tf2.models import SequenceClassifier

        if "classifier" not in _LOADED:
            model = SequenceClassifier(lm().config, 2)
            model(model.dummy_inputs(8))
            model.transformer.set_weights(lm().transformer.get_weights())
            _LOADED["classifier"] = model
        model = _LOADED["classifier"]
        input_ids = ids(values, 8)
        inputs = dict(input_ids=input_ids, token_type_ids=np.zeros_like(input_ids),
                      attention_mask=np.ones_like(input_ids))
        if how == "functional":
            symbolic = {k: keras.Input(shape=(8,), dtype="int32", name=k) for k in inputs}
            model = keras.Model(symbolic, model(symbolic)["logits"])
            return {"logits": model({k: tf.constant(v) for k, v in inputs.items()})}
        return model(inputs)
    return call


def finite_logits(ws, result):
    assert np.isfinite(result.value["logits"].numpy()).all()


def generate(values):
    def call(ws):
        from xlnet_tf2.models.generation import generate as run

        return run(lm(), ids(values, 6), max_new_tokens=2)
    return call


BAD_UTF8 = b"caf\xe9 in latin-1"
OVERLONG = b"\xc0\xaf slash"
SURROGATE = b"\xed\xa0\x80 half a pair"
CASES = [
    # --- the classification SavedModel (what TF Serving loads)
    Case("serve/ids-negative", api(serve_ids([[1, 2, -1]])), clear("input_ids", "[0, 500)")),
    Case("serve/ids-at-n-token", api(serve_ids([[1, 500]])), clear("input_ids", "largest id")),
    Case("serve/ids-huge", api(serve_ids([[2 ** 31 - 1]])), clear("input_ids", "[0, 500)")),
    Case("serve/ids-bad-in-second-row", api(serve_ids([[1, 2], [3, 900]])), clear("input_ids")),
    Case("serve/ids-wrong-length", api(serve_ids([[1, 2]], width=20)), clear("seq_len=32")),
    Case("serve/ids-valid", api(serve_encoded("Parse an email message.")),
         works(same_as_text_signature("Parse an email message."))),
    Case("serve/text-latin1-row-0", api(serve_text(BAD_UTF8, "fine")),
         clear("input text, request row] [0]", "UTF-8")),
    Case("serve/text-latin1-row-2", api(serve_text("fine", "also fine", BAD_UTF8)),
         clear("input text, request row] [2]")),
    Case("serve/text-overlong-encoding", api(serve_text(OVERLONG)), clear("input text", "UTF-8")),
    Case("serve/text-lone-surrogate", api(serve_text(SURROGATE)), clear("input text", "UTF-8")),
    Case("serve/text-truncated-multibyte", api(serve_text("caf\u00e9".encode()[:-1])),
         clear("input text", "UTF-8")),
    Case("serve/text-replacement-character-is-valid", api(serve_text("a \ufffd b")),
         works(probabilities_sum_to_one)),
    Case("serve/text-empty-string", api(serve_text("")), works(probabilities_sum_to_one)),
    Case("serve/text-batch-of-none", api(lambda ws: saved_model()["serving_default"](
        text=__import__("tensorflow").constant([], dtype="string"))),
        works(lambda ws, r: r.value["probabilities"].shape[0] == 0)),
    # --- the SQuAD, RACE and features signatures
    Case("serve/squad-context-latin1", api(squad_text(["What?"], [BAD_UTF8])),
         clear("input context, request row] [0]")),
    Case("serve/squad-question-latin1", api(squad_text(["fine", BAD_UTF8], ["a", "b"])),
         clear("input question, request row] [1]")),
    Case("serve/squad-ids-out-of-range", api(squad_ids([[4, 600]])), clear("input_ids")),
    Case("serve/squad-valid", api(squad_text(["What does it return?"],
                                             ["It returns the sum of two numbers."])),
         works(lambda ws, r: r.value["num_windows"].numpy().tolist() == [1])),
    Case("serve/race-options-latin1", api(race_text(["An article."], ["Which?"],
                                                    [["a", "b", BAD_UTF8, "d"]])),
         clear("input options, request row] [0]")),
    Case("serve/race-article-latin1", api(race_text([BAD_UTF8], ["Which?"],
                                                    [["a", "b", "c", "d"]])),
         clear("input article")),
    Case("serve/race-ids-out-of-range", api(race_ids(-3)), clear("input_ids", "smallest id")),
    Case("serve/features-ids-out-of-range", api(features_ids([[1, 2, 555]])),
         clear("input_ids", "[0, 500)")),
    # --- the model call, eager, traced and compiled
    Case("model/eager-negative-id", api(model_call([[1, 2, -1]], "eager")),
         clear("input_ids[0, 2] = -1", "[0, 500)")),
    Case("model/eager-id-at-n-token", api(model_call([[1, 500]], "eager")),
         clear("input_ids[0, 1] = 500")),
    Case("model/traced-negative-id", api(model_call([[1, -7]], "traced")),
         clear("input_ids holds ids outside the vocabulary", "-7")),
    Case("model/traced-large-id", api(model_call([[1, 9999]], "traced")),
         clear("input_ids", "9999")),
    Case("model/compiled-valid-ids", api(model_call([[1, 2, 3]], "xla")), works(finite_logits),
         xla=True),
    Case("model/eager-valid-ids", api(model_call([[1, 2, 3], [4, 5, 6]], "eager")),
         works(finite_logits)),
    # the model inside a task model and a functional model: the same one line, no Keras
    # "Exception encountered when calling" around it (harness)
    Case("model/task-model-bad-id", api(task_model_call([[1, 500]], "direct")),
         clear("input_ids[0, 1] = 500", "[0, 500)")),
    Case("model/functional-model-negative-id", api(task_model_call([[3, 4, -2]], "functional")),
         clear("input_ids[0, 2] = -2")),
    Case("model/task-model-token-type-ids", api(task_model_call([[17, 29, 43, 4, 3]], "direct")),
         works(finite_logits)),
    Case("model/generate-from-bad-ids", api(generate([[1, 2, 700]])), clear("input_ids", "700")),
]


@pytest.mark.parametrize("case", as_params(CASES))
def test_serving_and_model_inputs(case, tmp_path):
    run_case(case, str(tmp_path), artefact)
