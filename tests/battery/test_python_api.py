"""Bad input to the public Python API: from_pretrained / save_pretrained,
XLNetTokenizer, XLNetConfig and the keras-hub-style task classes; see
tests/fixtures/battery.py (an API case is clear when it raises an error of the project's
or Python's input kinds whose message names what is wrong)."""

from __future__ import annotations


import numpy as np
import pytest

from fixtures.battery import (Case, api, as_params, bitflip, clear, copy, edit_json, faults, move,
                              put, read_only, remove, run_case, truncate, works)
from fixtures.battery_artefacts import artefact


def from_pretrained(path, **kwargs):
    def call(ws):
        import xlnet_tf2

        return xlnet_tf2.from_pretrained(ws.fmt(path), **kwargs)
    return call


def tokenizer(*args, **kwargs):
    def call(ws):
        from xlnet_tf2 import XLNetTokenizer

        return XLNetTokenizer(*[ws.fmt(a) if isinstance(a, str) else a for a in args], **kwargs)
    return call


def tokenizer_from(path):
    def call(ws):
        from xlnet_tf2 import XLNetTokenizer

        return XLNetTokenizer.from_pretrained(ws.fmt(path))
    return call


def encode(text):
    def call(ws):
        from xlnet_tf2 import XLNetTokenizer

        return XLNetTokenizer(ws.path("sp.model"))(text)
    return call


def decode(ids):
    def call(ws):
        from xlnet_tf2 import XLNetTokenizer

        return XLNetTokenizer(ws.path("sp.model")).decode(ids)
    return call


def backbone_from(path):
    def call(ws):
        from xlnet_tf2 import XLNetModel

        return XLNetModel.from_pretrained(ws.fmt(path))
    return call


def same_backbone_as(name):
    def check(ws, result):
        import xlnet_tf2

        reference = xlnet_tf2.from_pretrained(artefact(name)).transformer
        for got, want in zip(result.value.weights, reference.weights):
            np.testing.assert_array_equal(got.numpy(), want.numpy())
    return check


def task_model_from(path, **kwargs):
    def call(ws):
        from xlnet_tf2.models import SequenceClassifier

        return SequenceClassifier.from_pretrained(ws.fmt(path), **kwargs)
    return call


def save_task_model(path, **kwargs):
    def call(ws):
        from xlnet_tf2 import XLNetConfig
        from xlnet_tf2.models import SequenceClassifier

        model = SequenceClassifier(XLNetConfig.preset("tiny", n_token=500), 2)
        model(model.dummy_inputs(8))
        return model.save_pretrained(ws.fmt(path), **kwargs)
    return call


def add_tokens(tokens):
    def call(ws):
        from xlnet_tf2 import XLNetTokenizer

        return XLNetTokenizer(ws.path("sp.model")).add_tokens(tokens)
    return call


def config_file(path):
    def call(ws):
        from xlnet_tf2 import XLNetConfig

        return XLNetConfig.from_json_file(ws.fmt(path))
    return call


def config(**values):
    def call(ws):
        from xlnet_tf2 import XLNetConfig

        return XLNetConfig.from_dict(values)
    return call


def classifier(path):
    def call(ws):
        import xlnet_tf2

        return xlnet_tf2.XLNetClassifier.from_preset(ws.fmt(path))
    return call


def save(path):
    def call(ws):
        import xlnet_tf2

        model = xlnet_tf2.XLNetLMHeadModel(xlnet_tf2.XLNetConfig.preset("tiny", n_token=50))
        model.build()
        return xlnet_tf2.save_pretrained(model, ws.fmt(path))
    return call


def lm_of_two_layers(ws, result):
    assert result.value.config.n_layer == 2 and result.value.config.n_token == 500


def same_weights_as(name):
    def check(ws, result):
        import xlnet_tf2

        reference = xlnet_tf2.from_pretrained(artefact(name))
        for a, b in zip(result.value.weights, reference.weights):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
    return check


def encodes(ws, result):
    assert result.value.vocab_size == 500 and result.value.encode("Return the sum.")


CONFIG = {"n_layer": 2, "d_model": 32, "n_head": 4, "d_head": 8, "d_inner": 64, "n_token": 100}
CASES = [
    # --- from_pretrained / save_pretrained
    Case("api/from-pretrained-missing-directory", api(from_pretrained("{ws}/none")),
         clear("{ws}/none")),
    Case("api/from-pretrained-empty-directory", api(from_pretrained("{ws}/empty")),
         clear("{ws}/empty", "holds no model"), put("{ws}/empty/readme.txt", "x")),
    Case("api/from-pretrained-checkpoint-truncated", api(from_pretrained("{converted}")),
         clear("{converted}", "damaged"), truncate("{converted}/model.ckpt.data-00000-of-00001")),
    Case("api/from-pretrained-index-bitflip", api(from_pretrained("{converted}")),
         clear("{converted}"), bitflip("{converted}/model.ckpt.index", 0.5)),
    Case("api/from-pretrained-config-truncated", api(from_pretrained("{converted}")),
         clear("{converted}/xlnet_config.json", "JSON"), truncate("{converted}/xlnet_config.json")),
    Case("api/from-pretrained-config-other-layers", api(from_pretrained("{converted}")),
         clear("{converted}", "does not hold this model's weights"),
         edit_json("{converted}/xlnet_config.json", lambda c: c.update(n_layer=3))),
    Case("api/from-pretrained-config-other-width", api(from_pretrained("{converted}")),
         clear("{converted}", "does not hold this model's weights"),
         edit_json("{converted}/xlnet_config.json", lambda c: c.update(d_inner=48))),
    Case("api/from-pretrained-architecture-keyword", api(from_pretrained("{converted}", n_layer=3)),
         clear("n_layer", "run-time settings")),
    Case("api/from-pretrained-unknown-keyword", api(from_pretrained("{converted}", men_len=8)),
         clear("men_len")),
    Case("api/from-pretrained-pretraining-run-latest-truncated", api(from_pretrained("{pretrain}")),
         clear("{pretrain}/ckpt-4", "damaged"), truncate("{pretrain}/ckpt-4.data-00000-of-00001")),
    Case("api/from-pretrained-moved-run", api(from_pretrained("{ws}/moved")),
         works(same_weights_as("pretrain")), move("{pretrain}", "{ws}/moved")),
    Case("api/from-pretrained-hf-weights-truncated", api(from_pretrained("{hf}")),
         clear("{hf}/model.safetensors"), truncate("{hf}/model.safetensors")),
    Case("api/from-pretrained-hf-config-truncated", api(from_pretrained("{hf}")),
         clear("{hf}/config.json", "JSON"), truncate("{hf}/config.json")),
    Case("api/from-pretrained-original-release", api(from_pretrained("{original}")),
         works(lm_of_two_layers)),
    Case("api/from-pretrained-original-data-truncated", api(from_pretrained("{original}")),
         clear("{original}/xlnet_model.ckpt", "truncated or corrupt"),
         truncate("{original}/xlnet_model.ckpt.data-00000-of-00001")),
    Case("api/from-pretrained-unknown-name-offline",
         api(lambda ws: __import__("xlnet_tf2").from_pretrained("nobody/no-such-xlnet",
                                                                local_files_only=True)),
         clear("nobody/no-such-xlnet")),
    Case("api/save-pretrained-read-only", api(save("{ws}/ro/model")),
         clear("{ws}/ro/model", "Read-only file system"), read_only("{ws}/ro")),
    Case("api/save-pretrained-over-a-file", api(save("{ws}/file")), clear("{ws}/file"),
         put("{ws}/file", "x")),
    # --- XLNetTokenizer
    Case("api/tokenizer-of-bytes", api(tokenizer(b"\x0a\x0bproto bytes")),
         clear("vocab_file", "bytes")),
    Case("api/tokenizer-of-none", api(tokenizer(None)), clear("vocab_file")),
    Case("api/tokenizer-missing-file", api(tokenizer("{ws}/none.model")),
         clear("{ws}/none.model", "does not exist")),
    Case("api/tokenizer-truncated-file", api(tokenizer("{sp.model}")),
         clear("{sp.model}", "not a valid SentencePiece model"), truncate("{sp.model}")),
    Case("api/tokenizer-text-file", api(tokenizer("{ws}/x.model")),
         clear("{ws}/x.model", "not a valid SentencePiece model"), put("{ws}/x.model", "text")),
    Case("api/tokenizer-directory-without-spm", api(tokenizer_from("{ws}/empty")),
         clear("{ws}/empty"), put("{ws}/empty/config.json", "{}")),
    Case("api/tokenizer-from-moved-run", api(tokenizer_from("{ws}/moved")), works(encodes),
         move("{finetune}", "{ws}/moved")),
    Case("api/tokenizer-encode-bytes", api(encode(b"caf\xc3\xa9")), clear("bytes")),
    Case("api/tokenizer-encode-none", api(encode(None)), clear("None")),
    Case("api/tokenizer-encode-number", api(encode(7)), clear("int")),
    Case("api/tokenizer-decode-out-of-range", api(decode([1, 2, 9999])), clear("9999")),
    Case("api/tokenizer-decode-negative", api(decode([-1])), clear("-1")),
    # --- XLNetConfig
    Case("api/config-file-truncated", api(config_file("{ws}/c.json")),
         clear("{ws}/c.json", "JSON"),
         faults(copy("{converted}/xlnet_config.json", "{ws}/c.json"), truncate("{ws}/c.json"))),
    Case("api/config-file-a-list", api(config_file("{ws}/c.json")), clear("{ws}/c.json", "object"),
         put("{ws}/c.json", "[2, 32]")),
    Case("api/config-file-missing", api(config_file("{ws}/none.json")),
         clear("{ws}/none.json", "does not exist")),
    Case("api/config-file-not-utf8", api(config_file("{ws}/c.json")), clear("{ws}/c.json"),
         put("{ws}/c.json", b'{"n_layer": 2, "name": "caf\xe9"}')),
    Case("api/config-unknown-key", api(config(**CONFIG, n_layers=3)), clear("n_layers")),
    Case("api/config-negative-layers", api(config(**{**CONFIG, "n_layer": -1})),
         clear("n_layer", "-1")),
    Case("api/config-layers-as-text", api(config(**{**CONFIG, "n_layer": "2"})),
         clear("n_layer", "'2'")),
    Case("api/config-odd-width", api(config(**{**CONFIG, "d_model": 33})), clear("d_model")),
    Case("api/config-dropout-above-one", api(config(**CONFIG, dropout=1.5)), clear("dropout")),
    Case("api/config-unknown-preset", api(lambda ws: __import__("xlnet_tf2").XLNetConfig.preset(
        "huge")), clear("huge")),
    # --- HuggingFace's names on the model classes
    Case("api/backbone-from-pretrained-moved-converted", api(backbone_from("{ws}/moved")),
         works(same_backbone_as("converted")), move("{converted}", "{ws}/moved")),
    Case("api/backbone-from-pretrained-missing", api(backbone_from("{ws}/none")),
         clear("{ws}/none")),
    Case("api/backbone-from-pretrained-truncated", api(backbone_from("{converted}")),
         clear("{converted}/model.ckpt", "damaged"),
         truncate("{converted}/model.ckpt.data-00000-of-00001")),
    Case("api/task-model-from-pretrained-missing-head-argument",
         api(task_model_from("{converted}")), clear("num_outputs")),
    Case("api/task-model-save-pretrained-label-list-wrong-length",
         api(save_task_model("{ws}/out", label_list=["a", "b", "c"])),
         clear("label_list", "3 labels", "2 outputs")),
    Case("api/tokenizer-add-new-token", api(add_tokens(["<new>", "\u2581the"])),
         clear("['<new>']", "SentencePiece model")),
    Case("api/tokenizer-add-existing-pieces", api(add_tokens(["<sep>", "<cls>"])),
         works(lambda ws, r: r.value == 0)),
    # --- keras-hub-style tasks
    Case("api/classifier-from-copied-run-best-deleted", api(classifier("{ws}/copy")),
         clear("{ws}/copy/best/ckpt-2.index", "best_eval.json"),
         faults(copy("{finetune}", "{ws}/copy"), remove("{ws}/copy/best"))),
    Case("api/classifier-from-run-task-json-truncated", api(classifier("{finetune}")),
         clear("{finetune}/task.json", "JSON"), truncate("{finetune}/task.json")),
    Case("api/classifier-from-moved-run", api(classifier("{ws}/moved")),
         works(lambda ws, r: r.value.predict(["Parse an email message."]).shape == (1, 2)),
         move("{finetune}", "{ws}/moved")),
]


@pytest.mark.parametrize("case", as_params(CASES))
def test_python_api(case, tmp_path):
    run_case(case, str(tmp_path), artefact)
