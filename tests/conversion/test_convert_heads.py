"""Fine-tuned original (zihangdai/xlnet) TF1 checkpoints convert WITH their heads: a checkpoint
written under the original's variable names (function_builder.py: model/sequnece_summary,
model/classification_<task>/logit, model/regression_<task>/logit, logits/dense, start_logits,
end_logits, answer_class) converts into our task model, whose outputs equal the original's
head math (numpy here) on HuggingFace's backbone with the same weights."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from xlnet_tf2.conversion import HeadOptions, WeightMismatchError
from xlnet_tf2.models import HeadModel
from xlnet_tf2.models.directories import convert_checkpoint
from xlnet_tf2.models.saving import read_task_settings

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from benchmarks.tools.hf_reference import hf_state_numpy, random_hf_model  # noqa: E402
from fixtures.paths import REPO_ROOT as REPO  # noqa: E402
from fixtures.tf1_checkpoints import original_tensors as _original_tensors  # noqa: E402
from fixtures.tf1_checkpoints import tiny_config as _config  # noqa: E402
from fixtures.tf1_checkpoints import write_tf1_checkpoint as _write_tf1_checkpoint  # noqa: E402
B, L, D = 3, 10, 32


def _dense(rng, name, fan_in, fan_out, bias=True):
    out = {f"{name}/kernel": rng.normal(0, 0.2, (fan_in, fan_out)).astype(np.float32)}
    if bias:
        out[f"{name}/bias"] = rng.normal(0, 0.2, (fan_out,)).astype(np.float32)
    return out


def _head_tensors(task, seed=0, scope="imdb"):
    rng = np.random.default_rng(seed)
    summary = _dense(rng, "model/sequnece_summary/summary", D, D)
    if task == "classification":
        return {**summary, **_dense(rng, f"model/classification_{scope}/logit", D, 2)}
    if task == "regression":
        return {**summary, **_dense(rng, f"model/regression_{scope}/logit", D, 1)}
    if task == "race":
        return {**summary, **_dense(rng, "logits/dense", D, 1)}
    return {**_dense(rng, "start_logits/dense", D, 1),
            **_dense(rng, "end_logits/dense_0", 2 * D, D),
            "end_logits/LayerNorm/gamma": (1 + rng.normal(0, 0.1, D)).astype(np.float32),
            "end_logits/LayerNorm/beta": rng.normal(0, 0.1, D).astype(np.float32),
            **_dense(rng, "end_logits/dense_1", D, 1),
            **_dense(rng, "answer_class/dense_0", 2 * D, D),
            **_dense(rng, "answer_class/dense_1", D, 1, bias=False)}


def _fine_tuned_checkpoint(directory, task, hf, **head_kwargs):
    """The backbone as fine-tuning saved it (no mask_emb, no LM bias), a head, an optimizer
    slot of the head and global_step."""
    config = _config()
    tensors = _original_tensors(hf_state_numpy(hf), config)
    for name in ("model/transformer/mask_emb/mask_emb", "model/lm_loss/bias",
                 "model/sequnece_summary/summary/kernel"):  # test_conversion's stand-in head
        tensors.pop(name)
    head = _head_tensors(task, **head_kwargs)
    tensors.update(head)
    first = sorted(head)[0]
    tensors[first + "/adam_m"] = np.zeros_like(head[first])
    return _write_tf1_checkpoint(tensors, str(directory), config), head


def _hidden(hf, inputs):
    """HuggingFace's backbone output [N, L, D] on the same weights."""
    with torch.no_grad():
        return hf.transformer(
            input_ids=torch.tensor(inputs["input_ids"].reshape(-1, L)).long(),
            token_type_ids=torch.tensor(inputs["segment_ids"].reshape(-1, L)).long(),
            attention_mask=torch.tensor(inputs["attention_mask"].reshape(-1, L)).float(),
        )[0].numpy()


def _inputs(seed, choices=None):
    rng = np.random.default_rng(seed)
    shape = (B, L) if choices is None else (B, choices, L)
    mask = np.ones(shape, np.int32)
    mask[0, ..., :2] = 0
    return {"input_ids": rng.integers(9, 97, size=shape).astype(np.int32),
            "segment_ids": np.broadcast_to((np.arange(L) >= 5).astype(np.int32), shape).copy(),
            "attention_mask": mask}


def _summary_logits(hidden, head, logit):
    """The original's summarize_sequence('last', use_proj=True) then its logit dense."""
    summary = np.tanh(hidden[:, -1] @ head["model/sequnece_summary/summary/kernel"]
                      + head["model/sequnece_summary/summary/bias"])
    return summary @ head[logit + "/kernel"] + head[logit + "/bias"]


def _masked(x, p_mask):
    return x * (1 - p_mask) - 1e30 * p_mask


def _layer_norm(x, gamma, beta):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-12) * gamma + beta


def _squad_math(hidden, head, p_mask, cls_index, starts):
    """function_builder.get_qa_outputs (training branch) and its answer class."""
    start = _masked((hidden @ head["start_logits/dense/kernel"])[..., 0]
                    + head["start_logits/dense/bias"], p_mask)
    start_feature = hidden[np.arange(B), starts]                              # [B, D]
    x = np.concatenate([hidden, np.broadcast_to(start_feature[:, None], hidden.shape)], -1)
    x = np.tanh(x @ head["end_logits/dense_0/kernel"] + head["end_logits/dense_0/bias"])
    x = _layer_norm(x, head["end_logits/LayerNorm/gamma"], head["end_logits/LayerNorm/beta"])
    end = _masked((x @ head["end_logits/dense_1/kernel"])[..., 0]
                  + head["end_logits/dense_1/bias"], p_mask)
    probs = np.exp(start - start.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    weighted = np.einsum("bld,bl->bd", hidden, probs)
    x = np.concatenate([weighted, hidden[np.arange(B), cls_index]], -1)
    x = np.tanh(x @ head["answer_class/dense_0/kernel"] + head["answer_class/dense_0/bias"])
    return start, end, (x @ head["answer_class/dense_1/kernel"])[:, 0]


@pytest.fixture(scope="module")
def hf():
    return random_hf_model(_config(), seed=23)


@pytest.mark.parametrize("task", ["classification", "regression", "race", "squad"])
def test_original_head_converts_and_computes_the_original_math(tmp_path, hf, task):
    prefix, head = _fine_tuned_checkpoint(tmp_path / "tf1", task, hf)
    labels = ["negative", "positive"] if task == "classification" else None
    report = convert_checkpoint("original", prefix, str(tmp_path / "ours"),
                                head=HeadOptions(task, seq_len=L, label_list=labels))
    assert report["unused"] == []
    assert report["initialized"] == ["model/transformer/mask_emb/mask_emb"]
    assert any(name.endswith("/adam_m") for name in report["skipped"])
    model = HeadModel.from_pretrained(str(tmp_path / "ours"))
    settings = read_task_settings(str(tmp_path / "ours"))
    assert settings["kind"] == task and settings["seq_len"] == L
    if task == "squad":
        inputs = _inputs(7)
        p_mask = np.zeros((B, L), np.float32)
        p_mask[:, 5:] = 1
        p_mask[:, -1] = 0
        cls_index = np.full([B], L - 1)
        starts = np.array([0, 3, 4])
        out = model({**inputs, "p_mask": p_mask.astype(np.int32),
                     "cls_index": cls_index.astype(np.int32), "start_positions": starts})
        want = _squad_math(_hidden(hf, inputs), head, p_mask, cls_index, starts)
        visible = p_mask == 0
        diffs = [np.max(np.abs(out["start_logits"].numpy()[visible] - want[0][visible])),
                 np.max(np.abs(out["end_logits"].numpy()[visible] - want[1][visible])),
                 np.max(np.abs(out["cls_logits"].numpy() - want[2]))]
        np.testing.assert_array_equal(out["start_logits"].numpy()[~visible], np.float32(-1e30))
    else:
        inputs = _inputs(7, choices=4 if task == "race" else None)
        logit = {"classification": "model/classification_imdb/logit",
                 "regression": "model/regression_imdb/logit", "race": "logits/dense"}[task]
        want = _summary_logits(_hidden(hf, inputs), head, logit)
        got = model(inputs)["logits"].numpy()
        diffs = [np.max(np.abs(got.reshape(-1) - want.reshape(-1)))]
        assert got.shape == ((B, 4) if task == "race" else (B, want.shape[-1]))
        if task == "classification":
            assert settings["label_list"] == labels
    print(f"original {task} head max abs diffs: {[f'{d:.2e}' for d in diffs]}")
    assert max(diffs) <= 1e-5


def test_original_scope_is_found_or_asked_for(tmp_path, hf):
    config = _config()
    tensors = _original_tensors(hf_state_numpy(hf), config)
    tensors.update(_head_tensors("classification", scope="imdb"))
    tensors.update(_head_tensors("classification", seed=1, scope="yelp5"))
    prefix = _write_tf1_checkpoint(tensors, str(tmp_path / "two"), config)
    with pytest.raises(WeightMismatchError, match=r"2 classification heads \['imdb', 'yelp5'\]"
                                                  ".*--cls_scope"):
        convert_checkpoint("original", prefix, str(tmp_path / "out"),
                           head=HeadOptions("classification"))
    report = convert_checkpoint("original", prefix, str(tmp_path / "out"),
                                head=HeadOptions("classification", cls_scope="yelp5"))
    assert report["unused"] == ["model/classification_imdb/logit/bias",
                                "model/classification_imdb/logit/kernel", "model/lm_loss/bias"]
    assert report["head"]["label_list"] == ["0", "1"]
    with pytest.raises(WeightMismatchError, match="no regression head.*classification_imdb"):
        convert_checkpoint("original", prefix, str(tmp_path / "bad"),
                           head=HeadOptions("regression"))
    assert not (tmp_path / "bad").exists()


def test_original_attention_summary_is_refused(tmp_path, hf):
    config = _config()
    tensors = _original_tensors(hf_state_numpy(hf), config)
    tensors.update(_head_tensors("classification"))
    tensors["model/sequnece_summary/summary_bias"] = np.zeros([D], np.float32)
    tensors["model/sequnece_summary/abs_attn/q/kernel"] = np.zeros([D, 4, 8], np.float32)
    prefix = _write_tf1_checkpoint(tensors, str(tmp_path / "attn"), config)
    with pytest.raises(WeightMismatchError, match="'attn' does not map.*LayerNorm"):
        convert_checkpoint("original", prefix, str(tmp_path / "out"),
                           head=HeadOptions("classification"))


@pytest.mark.slow
def test_cli_original_fine_tuned_to_huggingface(tmp_path, hf):
    """One command: a TF1 fine-tuned classifier -> XLNetForSequenceClassification."""
    prefix, head = _fine_tuned_checkpoint(tmp_path / "tf1", "classification", hf)
    result = subprocess.run(
        [sys.executable, os.path.join(REPO, "experiments", "convert_checkpoint.py"),
         "--source=original", "--target=huggingface", "--kind=classification",
         f"--checkpoint={prefix}", "--label_list=negative,positive",
         f"--output_dir={tmp_path / 'hf'}"], capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": REPO})
    assert result.returncode == 0, result.stderr[-3000:]
    assert "with the classification head" in result.stdout
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert config["id2label"] == {"0": "negative", "1": "positive"}
    reloaded = transformers.XLNetForSequenceClassification.from_pretrained(
        str(tmp_path / "hf")).eval()
    inputs = _inputs(9)
    with torch.no_grad():
        got = reloaded(input_ids=torch.tensor(inputs["input_ids"]).long(),
                       token_type_ids=torch.tensor(inputs["segment_ids"]).long(),
                       attention_mask=torch.tensor(inputs["attention_mask"]).float()).logits
    want = _summary_logits(_hidden(hf, inputs), head, "model/classification_imdb/logit")
    assert np.max(np.abs(got.numpy() - want)) <= 1e-5


def test_the_old_task_options_name_still_builds_head_options():
    """TaskOptions(task, ...) (before HeadOptions(kind, ...)): the same options, with one
    DeprecationWarning naming the new name."""
    from xlnet_tf2.conversion import TaskOptions

    with pytest.warns(DeprecationWarning, match=r"use HeadOptions\(kind=\.\.\.\)"):
        old = TaskOptions("race", seq_len=64, num_choices=3)
    assert old == HeadOptions("race", seq_len=64, num_choices=3)
    assert old.kind == "race"
    with pytest.raises(ValueError, match="--kind must be one of"):
        HeadOptions("tagging")
