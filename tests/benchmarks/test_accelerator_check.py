"""benchmarks/accelerator_check.py: the one-line exit on a CPU-only machine, its settings'
checks, the report's text, and the CPU dry run of the whole path (data prepared, initial
checkpoint, a float32 step and a mixed_bfloat16 run from it, the report)."""

import json
import math
import os
import subprocess
import sys

import pytest
from fixtures.paths import REPO_ROOT

from xlnet_tf2.config_flags import RunConfigError
from benchmarks.tools.accelerator_check import (
    DRY_RUN,
    data_params,
    format_report,
    run_shape,
)
from benchmarks.tools.command_configs import AcceleratorCheckConfig

COMMAND = [sys.executable, "benchmarks/accelerator_check.py"]
CPU_ONLY = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")


def _run(*flags, timeout=600):
    return subprocess.run(COMMAND + list(flags), cwd=REPO_ROOT, env=CPU_ONLY,
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
def test_cpu_only_machine_gets_one_line_and_exit_0(tmp_path):
    run = _run(f"--workdir={tmp_path / 'work'}")
    assert run.returncode == 0, run.stderr[-2000:]
    lines = run.stdout.strip().splitlines()
    assert len(lines) == 1, run.stdout
    assert "no GPU or TPU" in lines[0] and "--cpu_dry_run" in lines[0]
    assert not (tmp_path / "work").exists()  # nothing prepared, nothing written


def test_settings_are_checked_with_the_flag_named():
    assert AcceleratorCheckConfig().batch_size == 16  # the Base shape by default
    c = AcceleratorCheckConfig()
    assert (c.model_config, c.seq_len, c.reuse_len, c.mem_len, c.num_predict) == (
        "base", 512, 256, 384, 85)
    for bad, message in [(dict(batch_size=15), "--batch_size=15 must be even"),
                         (dict(steps=60, steps_per_loop=50), "--steps=60 must be at least"),
                         (dict(precision="float32"), "--precision must be one of"),
                         (dict(loss_tolerance=0.0), "--loss_tolerance must be in"),
                         (dict(reuse_len=600), "--reuse_len=600 must not exceed")]:
        with pytest.raises(RunConfigError, match=message):
            AcceleratorCheckConfig(**bad)


def test_shape_and_data_layout():
    c = AcceleratorCheckConfig(batch_size=32)
    assert run_shape(c, dry_run=False)["batch_size"] == 32
    assert run_shape(c, dry_run=True) == DRY_RUN
    params = data_params(run_shape(c, dry_run=False))
    # One stream per forward/backward pair; the paper's perm_size (reuse_len) at 512/256.
    assert (params.num_streams, params.perm_size, params.bi_data) == (16, 256, True)
    assert data_params(dict(DRY_RUN, seq_len=30, reuse_len=16)).perm_size == 1


def _report(**changes):
    report = {
        "devices": ["NVIDIA H100 80GB HBM3"], "replicas": 1, "whole_step_compiled": True,
        "precision": "mixed_bfloat16", "prepared": {"corpus_bytes": 8_000_000},
        "shape": dict(DRY_RUN, model_config="base", batch_size=16, seq_len=512,
                      steps_per_loop=50),
        "first_step_loss_float32": 10.37, "first_step_loss": 10.40,
        "first_step_grad_norm_float32": 2.0, "first_step_grad_norm": 2.1,
        "grad_norm_relative_difference": 0.05,
        "relative_difference": 0.03 / 10.37, "loss_tolerance": 0.01, "passed": True,
        "last_loss": 7.25, "steps": 300, "step_ms": 250.0, "tokens_per_s": 32768.0,
        "mfu": 0.41, "peak_flops_per_device": 989e12, "peak_source": "data sheet",
        "first_loop_s": 95.0,
        "device_memory": {"device": "GPU:0", "current_gb": 3.5, "peak_gb": 41.25}}
    report.update(changes)
    return report


def test_report_prints_every_field():
    text = format_report(_report())
    assert "devices: NVIDIA H100 80GB HBM3; 1 replica(s); whole step under XLA: True" in text
    assert "relative difference 0.289% (tolerance 1.00%) OK" in text
    assert ("step 250.0 ms, 32,768 tokens/s, MFU 41.0% of 989.00 TFLOP/s per device "
            "(data sheet)") in text
    assert "3.50 GB in use after the run, peak 41.25 GB (GPU:0)" in text
    assert ("gradient norm (before clipping): float32 2.00000, mixed_bfloat16 2.10000: "
            "relative difference 5.000% (reported, not checked)") in text
    failed = format_report(_report(passed=False, relative_difference=0.05))
    assert "relative difference 5.000% (tolerance 1.00%) FAILED" in failed
    assert "device memory: n/a" in format_report(_report(device_memory=None))


@pytest.mark.slow
def test_cpu_dry_run_runs_the_whole_path_and_compares_bfloat16_with_float32(tmp_path):
    out = tmp_path / "report.json"
    workdir = tmp_path / "work"
    run = _run("--cpu_dry_run", f"--workdir={workdir}", f"--output_json={out}")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["devices"] == ["CPU (dry run)"] and report["replicas"] == 1
    assert report["whole_step_compiled"] is True and report["steps"] == DRY_RUN["steps"]
    # A fresh model's first loss is about ln(vocabulary) in both precisions ...
    vocab = DRY_RUN["vocab_size"]
    for key in ("first_step_loss_float32", "first_step_loss"):
        assert abs(report[key] - math.log(vocab)) < 0.5, (key, report[key])
    # ... and bfloat16 rounding moves it, a little: the comparison is not float32 twice.
    assert 0 < report["relative_difference"] <= report["loss_tolerance"]
    assert report["relative_difference"] == pytest.approx(
        abs(report["first_step_loss"] - report["first_step_loss_float32"])
        / report["first_step_loss_float32"])
    assert report["passed"] is True and math.isfinite(report["last_loss"])
    # Same weights, batch and dropout masks: the gradients agree to bfloat16's precision.
    assert report["first_step_grad_norm_float32"] > 0
    assert 0 < report["grad_norm_relative_difference"] < 0.05
    assert report["tokens_per_s"] == pytest.approx(
        DRY_RUN["batch_size"] * DRY_RUN["seq_len"] / (report["step_ms"] / 1000))
    assert 0 < report["mfu"] < 1 and report["device_memory"] is None
    assert report["flops_per_step"] > 0 and report["peak_flops_per_device"] > 0
    # Both runs are the real path: prepared TFRecords, checkpoints in their model_dirs.
    assert (workdir / "data_prep" / "data").is_dir()
    assert (workdir / "float32" / "ckpt-1.index").exists()
    assert (workdir / "mixed_bfloat16" / f"ckpt-{DRY_RUN['steps']}.index").exists()
    for field in ("first-step loss: float32", "mixed_bfloat16 + XLA, 6 steps in loops of 2",
                  "tokens/s, MFU", "device memory: n/a"):
        assert field in run.stdout, field
