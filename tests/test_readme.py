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


def test_huggingface_style_tokenizer_and_generation_examples_run(tmp_path, monkeypatch,
                                                                  capsys):
    """The section's three blocks in order (one namespace, as a reader runs them), on a tiny
    converted directory; what they print and build is checked."""
    import numpy as np

    import xlnet_tf2
    from fixtures.task_files import train_tiny_spm

    spm = train_tiny_spm(str(tmp_path))
    model = xlnet_tf2.XLNetLMHeadModel(xlnet_tf2.XLNetConfig.preset("tiny", n_token=500))
    model.build()
    xlnet_tf2.save_pretrained(model, str(tmp_path / "converted" / "base"), spm_model=spm)
    monkeypatch.chdir(tmp_path)
    blocks = _python_blocks()
    first = next(i for i, b in enumerate(blocks) if "from_pretrained(path" in b)
    section = blocks[first:first + 3]
    assert "return_offsets_mapping=True" in section[1] and "num_beams=4" in section[2]
    namespace = {}
    for block in section:
        exec(compile(block, "README.md", "exec"), namespace)
    printed = capsys.readouterr().out
    tokenizer, windows = namespace["tokenizer"], namespace["windows"]
    context = namespace["context"]
    # windows: several, all from the one pair, each holding a piece of the context
    assert len(windows["input_ids"]) > 2 and not windows["overflow_to_sample_mapping"].any()
    for ids, spans, types in zip(windows["input_ids"], windows["offset_mapping"],
                                 windows["token_type_ids"]):
        for token_id, (start, end), kind in zip(ids, spans, types):
            if kind == 1 and end > start:   # a context token: its span holds its characters
                piece = tokenizer.convert_ids_to_tokens(int(token_id)).replace("\u2581", "")
                assert piece in context[start:end] or token_id == 0
    assert "Sort it.<sep>Keep it.<sep><cls>" in printed
    assert "(2, 8)" in printed                                    # padded to a multiple of 8
    assert sorted(os.listdir("my_tokenizer")) == ["special_tokens_map.json", "spiece.model",
                                                  "tokenizer_config.json"]
    transformers = pytest.importorskip("transformers")
    hf = transformers.AutoTokenizer.from_pretrained("my_tokenizer")
    assert hf("Sort the list.")["input_ids"] == tokenizer.encode("Sort the list.")
    # generation: 2 of 4 beams; the streamer saw every new token in order
    assert namespace["beams"].shape[0] == 2
    greedy, prompt = namespace["greedy"], namespace["prompt"]
    assert namespace["streamed"] == greedy[0, len(prompt[0]):].tolist()
    assert len(namespace["streamed"]) == 8
    assert len(namespace["samples"]) == 3 and all(s.startswith("The list is")
                                                  for s in namespace["samples"])
    np.testing.assert_array_equal(greedy, namespace["model"].generate(
        prompt, max_new_tokens=8, eos_token_id=None))


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
