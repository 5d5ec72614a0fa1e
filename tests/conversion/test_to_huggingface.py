"""Back to HuggingFace: our models written as config.json + model.safetensors load in
transformers with the same outputs; HF -> ours -> HF gives every tensor back bit for bit; HF
task checkpoints (classification, regression, multiple choice, SQuAD) convert with their heads
and compute what HF computes on the same weights."""

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import xlnet_tf2
from xlnet_tf2.conversion import HeadOptions, WeightMismatchError
from xlnet_tf2.models import HeadModel
from xlnet_tf2.models.directories import convert_checkpoint
from xlnet_tf2.models.saving import read_task_settings

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
from safetensors.numpy import load_file  # noqa: E402

from benchmarks.tools.hf_reference import random_hf_model  # noqa: E402
from fixtures.paths import REPO_ROOT as REPO  # noqa: E402
from fixtures.task_files import train_tiny_spm  # noqa: E402
from fixtures.tf1_checkpoints import tiny_config as _config  # noqa: E402
B, L, V = 3, 10, 97
TASKS = {"classification": ("XLNetForSequenceClassification", {"num_labels": 3}),
         "regression": ("XLNetForSequenceClassification", {"num_labels": 1}),
         "race": ("XLNetForMultipleChoice", {}),
         "squad": ("XLNetForQuestionAnswering", {})}


def _inputs(seed=0, choices=None):
    """Token dicts with two segments and left padding; [B, C, L] for multiple choice."""
    rng = np.random.default_rng(seed)
    shape = (B, L) if choices is None else (B, choices, L)
    segments = np.broadcast_to((np.arange(L) >= 6).astype(np.int32), shape)
    mask = np.ones(shape, np.int32)
    mask[0, ..., :3] = 0
    return {"input_ids": rng.integers(9, V, size=shape).astype(np.int32),
            "segment_ids": np.ascontiguousarray(segments), "attention_mask": mask}


def _hf_call(hf_model, inputs, **extra):
    kwargs = {"input_ids": torch.tensor(inputs["input_ids"]).long(),
              "token_type_ids": torch.tensor(inputs["segment_ids"]).long(),
              "attention_mask": torch.tensor(inputs["attention_mask"]).float()}
    kwargs.update({k: torch.tensor(v) for k, v in extra.items()})
    with torch.no_grad():
        return hf_model(**kwargs)


def _assert_same_tensors(path_a, path_b):
    a, b = load_file(path_a), load_file(path_b)
    assert sorted(a) == sorted(b)
    for name in a:
        assert a[name].dtype == b[name].dtype and np.array_equal(a[name], b[name]), name


@pytest.mark.parametrize("untie_r", [True, False])
def test_lm_round_trip_is_bit_exact_and_transformers_loads_it(tmp_path, untie_r):
    hf = random_hf_model(_config(untie_r=untie_r), seed=11)
    hf.save_pretrained(str(tmp_path / "hf"))
    convert_checkpoint("huggingface", str(tmp_path / "hf"), str(tmp_path / "ours"))
    model = xlnet_tf2.from_pretrained(str(tmp_path / "ours"))
    xlnet_tf2.save_pretrained(model, str(tmp_path / "back"), format="huggingface")
    _assert_same_tensors(tmp_path / "hf" / "model.safetensors",
                         tmp_path / "back" / "model.safetensors")
    config = json.loads((tmp_path / "back" / "config.json").read_text())
    assert config["architectures"] == ["XLNetLMHeadModel"]
    assert config["ff_activation"] == "gelu_new"  # the tanh GELU, as ours
    reloaded = transformers.XLNetLMHeadModel.from_pretrained(str(tmp_path / "back")).eval()
    inputs = _inputs(1)
    ours = model(inputs)["logits"].numpy()
    diff = np.max(np.abs(_hf_call(reloaded, inputs).logits.numpy() - ours))
    print(f"LM logits max abs diff (untie_r={untie_r}): {diff:.2e}")
    assert diff <= 1e-5


def test_a_model_of_ours_loads_in_transformers(tmp_path):
    """Weights that never came from HF (our own initialization), relu and a bare backbone."""
    config = _config(ff_activation="relu")
    model = xlnet_tf2.XLNetLMHeadModel(config)
    model.build()
    xlnet_tf2.save_pretrained(model, str(tmp_path / "lm"), format="huggingface")
    xlnet_tf2.save_pretrained(model.transformer, str(tmp_path / "base"), format="huggingface")
    inputs = _inputs(2)
    lm = transformers.XLNetLMHeadModel.from_pretrained(str(tmp_path / "lm")).eval()
    base = transformers.XLNetModel.from_pretrained(str(tmp_path / "base")).eval()
    ours = model(inputs)
    lm_diff = np.max(np.abs(_hf_call(lm, inputs).logits.numpy() - ours["logits"].numpy()))
    base_diff = np.max(np.abs(_hf_call(base, inputs).last_hidden_state.numpy()
                              - ours["hidden"].numpy()))
    print(f"fresh relu LM logits {lm_diff:.2e}, XLNetModel hidden {base_diff:.2e}")
    assert lm_diff <= 1e-5 and base_diff <= 1e-5


@pytest.fixture(scope="module")
def hf_tasks(tmp_path_factory):
    """Each HF task class with every weight random, saved; converted into our task dirs."""
    root = tmp_path_factory.mktemp("hf_tasks")
    out = {}
    for task, (architecture, overrides) in TASKS.items():
        hf = random_hf_model(_config(), seed=17, architecture=architecture, **overrides)
        if task == "classification":
            hf.config.id2label = {0: "neg", 1: "neutral", 2: "pos"}
            hf.config.label2id = {v: k for k, v in hf.config.id2label.items()}
        hf.save_pretrained(str(root / task / "hf"))
        report = convert_checkpoint("huggingface", str(root / task / "hf"),
                                    str(root / task / "ours"), head=HeadOptions(task, seq_len=L))
        assert report["unused"] == [] and report["initialized"] == []
        out[task] = (hf, root / task, report["head"])
    return out


@pytest.mark.parametrize("task", ["classification", "regression", "race"])
def test_hf_task_heads_convert_and_come_back(hf_tasks, task, tmp_path):
    hf, directory, settings = hf_tasks[task]
    model = HeadModel.from_pretrained(str(directory / "ours"))
    assert read_task_settings(str(directory / "ours")) == settings and settings["seq_len"] == L
    if task == "classification":
        assert settings["label_list"] == ["neg", "neutral", "pos"]
    inputs = _inputs(3, choices=4 if task == "race" else None)
    ours = model(inputs)["logits"].numpy()
    theirs = _hf_call(hf, inputs).logits.numpy()
    diff = np.max(np.abs(ours - theirs))
    print(f"{task} logits max abs diff: {diff:.2e}")
    assert ours.shape == theirs.shape and diff <= 1e-5
    # back: bit-exact tensors, the same class and labels, the same logits in transformers
    written = convert_checkpoint("xlnet_tf2", str(directory / "ours"), str(tmp_path / "back"),
                                 target="huggingface")
    assert written["architecture"] == TASKS[task][0]
    _assert_same_tensors(directory / "hf" / "model.safetensors",
                         tmp_path / "back" / "model.safetensors")
    reloaded = getattr(transformers, TASKS[task][0]).from_pretrained(str(tmp_path / "back"))
    assert reloaded.config.id2label == hf.config.id2label
    assert reloaded.config.problem_type == {"classification": "single_label_classification",
                                            "regression": "regression", "race": None}[task]
    np.testing.assert_allclose(_hf_call(reloaded.eval(), inputs).logits.numpy(), ours, atol=1e-5)


def test_squad_head_matches_xlnet_for_question_answering(hf_tasks, tmp_path):
    """Same weights, same numbers: start/end/answer-class logits in training form; in
    inference HF's *_log_probs are probabilities and its end beam is end-rank major."""
    hf, directory, settings = hf_tasks["squad"]
    assert settings["n_best_size"] == 5
    model = HeadModel.from_pretrained(str(directory / "ours"))
    inputs = _inputs(4)
    p_mask = np.zeros((B, L), np.int32)
    p_mask[:, 6:] = 1
    p_mask[:, -1] = 0  # <cls>
    cls_index = np.full([B], L - 1, np.int32)
    ours = {k: v.numpy() for k, v in model({**inputs, "p_mask": p_mask,
                                             "cls_index": cls_index}).items()}
    theirs = _hf_call(hf, inputs, p_mask=p_mask.astype(np.float32), cls_index=cls_index)
    k = e = 5
    end_index = theirs.end_top_index.numpy().reshape(B, e, k).transpose(0, 2, 1)
    end_probs = theirs.end_top_log_probs.numpy().reshape(B, e, k).transpose(0, 2, 1)
    np.testing.assert_array_equal(ours["start_top_index"], theirs.start_top_index.numpy())
    np.testing.assert_array_equal(ours["end_top_index"], end_index)
    diffs = {"start_probs": np.max(np.abs(np.exp(ours["start_top_log_probs"])
                                          - theirs.start_top_log_probs.numpy())),
             "end_probs": np.max(np.abs(np.exp(ours["end_top_log_probs"]) - end_probs)),
             "cls_logits": np.max(np.abs(ours["cls_logits"] - theirs.cls_logits.numpy()))}
    # training form: end logits conditioned on the gold start
    starts = np.array([1, 2, 4])
    trained = model({**inputs, "p_mask": p_mask, "cls_index": cls_index,
                     "start_positions": starts})
    with torch.no_grad():
        hidden = hf.transformer(input_ids=torch.tensor(inputs["input_ids"]).long(),
                                token_type_ids=torch.tensor(inputs["segment_ids"]).long(),
                                attention_mask=torch.tensor(inputs["attention_mask"]).float())[0]
        mask = torch.tensor(p_mask).float()
        hf_start = hf.start_logits(hidden, p_mask=mask).numpy()
        hf_end = hf.end_logits(hidden, start_positions=torch.tensor(starts), p_mask=mask).numpy()
    visible = p_mask == 0  # masked logits are -1e30 in both
    for name, theirs_logits in (("start_logits", hf_start), ("end_logits", hf_end)):
        got = trained[name].numpy()
        np.testing.assert_array_equal(got[~visible], theirs_logits[~visible])
        diffs[name] = np.max(np.abs(got[visible] - theirs_logits[visible]))
    print("squad max abs diffs:", {k: f"{v:.2e}" for k, v in diffs.items()})
    assert max(diffs.values()) <= 1e-5
    xlnet_tf2.save_pretrained(model, str(tmp_path / "back"), format="huggingface")
    _assert_same_tensors(directory / "hf" / "model.safetensors",
                         tmp_path / "back" / "model.safetensors")


def test_converted_task_directory_is_an_export_model_dir(hf_tasks, tmp_path):
    """tasks/task_spec.load_task_model (evaluation and SavedModel export) reads it."""
    from xlnet_tf2.tasks.finetuned_model import load_task_model

    _, directory, _ = hf_tasks["classification"]
    model_dir = tmp_path / "model_dir"
    shutil.copytree(directory / "ours", model_dir)
    shutil.copy(train_tiny_spm(str(tmp_path)), model_dir / "spiece.model")
    model, spec, _ = load_task_model(str(model_dir), "classification")
    ours = HeadModel.from_pretrained(str(directory / "ours"))
    inputs = _inputs(5)
    assert spec.label_list == ["neg", "neutral", "pos"] and spec.seq_len == L
    np.testing.assert_array_equal(model(inputs)["logits"].numpy(), ours(inputs)["logits"].numpy())


def test_heads_that_do_not_map_are_refused(tmp_path):
    hf = random_hf_model(_config(), seed=3, architecture="XLNetForSequenceClassification",
                         num_labels=2, summary_type="mean")
    hf.save_pretrained(str(tmp_path / "mean"))
    with pytest.raises(WeightMismatchError, match="'mean' does not map.*padding"):
        convert_checkpoint("huggingface", str(tmp_path / "mean"), str(tmp_path / "out"),
                           head=HeadOptions("classification"))
    with pytest.raises(WeightMismatchError, match="XLNetForSequenceClassification.*squad"):
        convert_checkpoint("huggingface", str(tmp_path / "mean"), str(tmp_path / "out"),
                           head=HeadOptions("squad"))
    assert not (tmp_path / "out").exists()
    attn = xlnet_tf2.XLNetClassifier(_config(), num_classes=2, summary_type="attn")
    with pytest.raises(WeightMismatchError, match="'attn' does not map"):
        xlnet_tf2.save_pretrained(attn.task_model, str(tmp_path / "attn"), format="huggingface")
    assert not (tmp_path / "attn" / "config.json").exists()


@pytest.mark.slow
def test_cli_writes_huggingface_without_torch(hf_tasks, tmp_path):
    """--target=huggingface in a fresh process where importing torch fails."""
    _, directory, _ = hf_tasks["regression"]
    script = ("import sys, runpy; sys.modules['torch'] = None; "
              "sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')")
    result = subprocess.run(
        [sys.executable, "-c", script, os.path.join(REPO, "experiments", "convert_checkpoint.py"),
         "--source=xlnet_tf2", "--target=huggingface", f"--checkpoint={directory / 'ours'}",
         f"--output_dir={tmp_path / 'hf'}"], capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": REPO})
    assert result.returncode == 0, result.stderr[-3000:]
    assert "XLNetForSequenceClassification" in result.stdout
    _assert_same_tensors(directory / "hf" / "model.safetensors",
                         tmp_path / "hf" / "model.safetensors")
