"""Checkpoint conversion: TF1 release layout and HuggingFace directories -> our format."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import xlnet_tf2
from xlnet_tf2.conversion import WeightMismatchError
from xlnet_tf2.models.directories import convert_checkpoint

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from benchmarks.tools.hf_reference import hf_state_numpy, random_hf_model, run_hf  # noqa: E402
from fixtures.paths import REPO_ROOT as REPO  # noqa: E402
from fixtures.tf1_checkpoints import original_tensors as _original_tensors  # noqa: E402
from fixtures.tf1_checkpoints import tiny_config as _config  # noqa: E402
from fixtures.tf1_checkpoints import two_stream_inputs as _inputs  # noqa: E402
from fixtures.tf1_checkpoints import write_tf1_checkpoint as _write_tf1_checkpoint  # noqa: E402


def _assert_matches_hf(model, hf_model):
    inputs = _inputs(np.random.default_rng(0))
    ours, theirs = model(inputs), run_hf(hf_model, inputs)
    diff = np.max(np.abs(ours["logits"].numpy() - theirs["logits"]))
    assert diff <= 1e-5, diff
    return diff


@pytest.mark.parametrize("untie_r", [True, False])
def test_original_tf1_checkpoint_converts_and_matches(tmp_path, untie_r):
    config = _config(untie_r=untie_r)
    hf_model = random_hf_model(config, seed=3)
    release = tmp_path / "release"
    prefix = _write_tf1_checkpoint(_original_tensors(hf_state_numpy(hf_model), config),
                                   str(release), config)
    spm = release / "spiece.model"
    spm.write_bytes(b"not checked here")
    report = convert_checkpoint("original", prefix, str(tmp_path / "out"), spm_model=str(spm))
    assert sorted(report["skipped"]) == ["global_step",
                                         "model/transformer/layer_0/ff/layer_1/kernel/adam_m"]
    assert report["unused"] == ["model/sequnece_summary/summary/kernel"]
    assert (tmp_path / "out" / "spiece.model").read_bytes() == b"not checked here"
    model = xlnet_tf2.from_pretrained(str(tmp_path / "out"))
    assert model.config.untie_r is untie_r
    print("original max abs diff", _assert_matches_hf(model, hf_model))


@pytest.mark.parametrize("file_format", ["safetensors", "bin"])
def test_huggingface_directory_converts_and_matches(tmp_path, file_format):
    config = _config()
    hf_model = random_hf_model(config, seed=5)
    hf_model.save_pretrained(str(tmp_path / "hf"), safe_serialization=(file_format == "safetensors"))
    convert_checkpoint("huggingface", str(tmp_path / "hf"), str(tmp_path / "out"))
    model = xlnet_tf2.from_pretrained(str(tmp_path / "out"))
    print("huggingface max abs diff", _assert_matches_hf(model, hf_model))


@pytest.mark.slow
def test_safetensors_converts_without_torch(tmp_path):
    config = _config()
    random_hf_model(config, seed=6).save_pretrained(str(tmp_path / "hf"))
    # A fresh interpreter where importing torch fails.
    script = (
        "import sys; sys.modules['torch'] = None\n"
        "from xlnet_tf2.models.directories import convert_checkpoint\n"
        f"convert_checkpoint('huggingface', {str(tmp_path / 'hf')!r}, {str(tmp_path / 'out')!r})\n"
        "import xlnet_tf2\n"
        f"m = xlnet_tf2.from_pretrained({str(tmp_path / 'out')!r})\n"
        "print('layers', m.config.n_layer)\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=300, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert result.returncode == 0, result.stderr[-3000:]
    assert "layers 2" in result.stdout


def test_missing_and_misshaped_tensors_are_named(tmp_path):
    config = _config()
    tensors = _original_tensors(hf_state_numpy(random_hf_model(config, seed=7)), config)
    broken = dict(tensors)
    del broken["model/transformer/layer_1/ff/layer_2/bias"]
    broken["model/transformer/layer_0/rel_attn/q/kernel"] = np.zeros((32, 4, 7), np.float32)
    prefix = _write_tf1_checkpoint(broken, str(tmp_path / "release"), config)
    with pytest.raises(WeightMismatchError) as info:
        convert_checkpoint("original", prefix, str(tmp_path / "out"))
    message = str(info.value)
    assert "missing tensor 'model/transformer/layer_1/ff/layer_2/bias'" in message
    assert "'model/transformer/layer_0/rel_attn/q/kernel' gives shape (32, 4, 7)" in message
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_command_line_reports_errors_without_traceback(tmp_path):
    script = os.path.join(REPO, "experiments", "convert_checkpoint.py")
    result = subprocess.run(
        [sys.executable, script, "--source=original", f"--checkpoint={tmp_path}/nothing.ckpt",
         f"--config={tmp_path}/missing.json", f"--output_dir={tmp_path}/out"],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert result.returncode == 2
    assert "missing.json" in result.stderr and "does not exist" in result.stderr
    assert "Traceback" not in result.stderr


def test_fine_tuned_original_checkpoint_converts_its_backbone(tmp_path):
    """A fine-tuned release (e.g. a GLUE run) has no mask_emb and no lm_loss/bias but a
    summary head and a classifier: the backbone converts exactly, the two pretraining-only
    tensors keep their initial values and are reported, the head tensors are reported."""
    config = _config()
    hf_model = random_hf_model(config, seed=11)
    tensors = _original_tensors(hf_state_numpy(hf_model), config)
    del tensors["model/transformer/mask_emb/mask_emb"], tensors["model/lm_loss/bias"]
    tensors["model/classification_finetune/logit/kernel"] = np.ones((32, 2), np.float32)
    prefix = _write_tf1_checkpoint(tensors, str(tmp_path / "finetuned"), config)
    report = convert_checkpoint("original", prefix, str(tmp_path / "out"))
    assert sorted(report["initialized"]) == ["model/lm_loss/bias",
                                             "model/transformer/mask_emb/mask_emb"]
    assert report["unused"] == ["model/classification_finetune/logit/kernel",
                                "model/sequnece_summary/summary/kernel"]
    assert any("mask_emb" in n and "pretraining" in n for n in report["notes"])
    model = xlnet_tf2.from_pretrained(str(tmp_path / "out"))
    # The content stream (what fine-tuning uses) equals HuggingFace's on the same weights.
    rng = np.random.default_rng(1)
    inputs = {"input_ids": rng.integers(0, 97, size=(2, 10)).astype(np.int32)}
    ours = model.transformer(inputs)["hidden"].numpy()
    theirs = hf_model.transformer(**{"input_ids": torch.tensor(inputs["input_ids"]).long()}
                                  ).last_hidden_state.detach().numpy()
    assert np.max(np.abs(ours - theirs)) < 1e-5
    np.testing.assert_array_equal(model.lm_bias.numpy(), 0.0)


@pytest.mark.slow
def test_layer_count_mismatch_and_truncated_checkpoint_are_errors(tmp_path):
    config = _config(n_layer=3)
    tensors = _original_tensors(hf_state_numpy(random_hf_model(config, seed=12)), config)
    prefix = _write_tf1_checkpoint(tensors, str(tmp_path / "release"), config)
    # A config with fewer layers would silently drop layer 2.
    small = tmp_path / "small.json"
    small.write_text(json.dumps({**_config(n_layer=2).architecture()}))
    with pytest.raises(WeightMismatchError, match=r"layers up to 2 but the config says n_layer=2"):
        convert_checkpoint("original", prefix, str(tmp_path / "out"), config_path=str(small))
    # More layers than the checkpoint: named, not an IndexError.
    large = tmp_path / "large.json"
    large.write_text(json.dumps({**_config(n_layer=4).architecture()}))
    with pytest.raises(WeightMismatchError, match="missing tensor 'model/transformer/layer_3/"):
        convert_checkpoint("original", prefix, str(tmp_path / "out"), config_path=str(large))
    # A data file cut short: one line naming the checkpoint, from the command line too.
    data = [p for p in os.listdir(tmp_path / "release") if ".data-" in p][0]
    path = tmp_path / "release" / data
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    result = subprocess.run(
        [sys.executable, os.path.join(REPO, "experiments", "convert_checkpoint.py"),
         "--source=original", f"--checkpoint={prefix}", f"--output_dir={tmp_path}/out2"],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert result.returncode == 2
    errors = [line for line in result.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and "truncated or corrupt" in errors[0], result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "out2").exists()


def test_huggingface_run_time_fields_are_reported_not_stored(tmp_path):
    config = _config()
    hf_model = random_hf_model(config, seed=13)
    hf_model.config.mem_len, hf_model.config.reuse_len = 16, 4
    hf_model.config.bi_data = True
    hf_model.save_pretrained(str(tmp_path / "hf"))
    report = convert_checkpoint("huggingface", str(tmp_path / "hf"), str(tmp_path / "out"))
    assert report["runtime_settings"]["mem_len"] == 16
    assert report["runtime_settings"]["reuse_len"] == 4
    assert report["runtime_settings"]["bi_data"] is True
    assert any("mem_len" in n for n in report["notes"])
    stored = json.loads((tmp_path / "out" / "xlnet_config.json").read_text())
    assert sorted(stored) == sorted(xlnet_tf2.config.ARCHITECTURE_KEYS)
    # Loaded with the run-time settings the user asks for, not those of the HF config.
    model = xlnet_tf2.from_pretrained(str(tmp_path / "out"), mem_len=16, reuse_len=4)
    assert model.config.mem_len == 16 and model.config.bi_data is False


def test_empty_memory_list_means_no_memory():
    model = xlnet_tf2.XLNetLMHeadModel(_config())
    ids = np.random.default_rng(0).integers(0, 97, size=(2, 6)).astype(np.int32)
    first = model({"input_ids": ids})
    assert first["new_mems"] == []  # mem_len 0
    again = model({"input_ids": ids, "mems": first["new_mems"]})
    np.testing.assert_allclose(again["logits"].numpy(), first["logits"].numpy(), atol=1e-6)
