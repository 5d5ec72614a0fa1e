"""The README's Python examples run as written."""

import os
import re

import pytest

README = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "README.md")


def _python_blocks():
    text = open(README).read()
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def test_model_api_example_runs():
    block = next(b for b in _python_blocks() if "XLNetLMHeadModel(config)" in b)
    namespace = {}
    exec(compile(block, "README.md", "exec"), namespace)
    out = namespace["out"]
    assert tuple(out["logits"].shape) == (2, 3, 1000)
    assert tuple(out["hidden"].shape) == (2, 3, 64)
    assert tuple(out["new_mems"][0].shape) == (2, 8, 64)


def _run_block(marker):
    block = next(b for b in _python_blocks() if marker in b)
    namespace = {}
    exec(compile(block, "README.md", "exec"), namespace)
    return namespace


@pytest.fixture
def converted_base(tmp_path, monkeypatch):
    """A tiny converted directory standing in for converted/base, in the working directory."""
    import xlnet_tf2
    from fixtures.task_files import train_tiny_spm

    spm = train_tiny_spm(str(tmp_path))
    config = xlnet_tf2.XLNetConfig.preset("tiny", n_token=500)
    model = xlnet_tf2.XLNetLMHeadModel(config)
    model.build()
    xlnet_tf2.save_pretrained(model, str(tmp_path / "converted" / "base"), spm_model=spm)
    monkeypatch.chdir(tmp_path)
    return config


def test_huggingface_style_example_runs(converted_base):
    """The example as written, on a tiny converted directory standing in for converted/base."""
    config = converted_base
    namespace = _run_block("from_pretrained(path")
    out, batch = namespace["out"], namespace["batch"]
    assert tuple(out["last_hidden_state"].shape) == (2, batch["input_ids"].shape[1],
                                                     config.d_model)
    assert len(out["hidden_states"]) == config.n_layer + 1 and len(out["mems"]) == config.n_layer
    assert namespace["tokenizer"].decode(batch["input_ids"][0], skip_special_tokens=True) == \
        "Sort the list in place."
    text = namespace["generate_text"](namespace["model"], namespace["tokenizer"], "The list is",
                                      max_new_tokens=8)
    assert len(text) == 1 and text[0].startswith("The list is")


def test_keras_hub_style_example_runs(converted_base):
    import numpy as np

    namespace = _run_block('XLNetClassifier.from_preset("converted/base", num_classes=2')
    classifier, restored = namespace["classifier"], namespace["restored"]
    texts = namespace["texts"]
    assert namespace["logits"].shape == (1, 2) and namespace["pairs"].shape == (4, 2)
    expected = classifier.predict(texts, verbose=0)
    np.testing.assert_allclose(restored.predict(texts, verbose=0), expected, atol=1e-6)
    np.testing.assert_allclose(namespace["again"].predict(texts, verbose=0), expected, atol=1e-6)
    assert 0.0 <= namespace["accuracy"] <= 1.0 and namespace["loss"] > 0


def test_back_to_huggingface_example_runs(converted_base):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    namespace = _run_block('format="huggingface")  # config.json')
    assert namespace["diff"] <= 1e-5
    assert namespace["hf_classifier"].config.id2label == {0: "negative", 1: "positive"}
