"""benchmarks/accelerator_check.py: the one-line exit on a CPU-only machine, its settings'
checks, the report's text, the vocabulary the corpus gives (said in one line), the CPU dry run
of the whole path (data prepared, initial checkpoint, a float32 step and a mixed_bfloat16 run
from it, the report), and --export_step: the step as an XLA program that JAX's XLA runs to
TensorFlow's first-step loss."""

import json
import math
import os
import shutil
import subprocess
import sys

import keras
import numpy as np
import pytest
from fixtures.accelerator_exports import cpu_dry_run_export
from fixtures.paths import REPO_ROOT

from xlnet_tf2.config import XLNetConfig
from xlnet_tf2.config_flags import RunConfigError
from xlnet_tf2.data.pretrain_dataset import PretrainData
from benchmarks.tools.accelerator_check import (
    DRY_RUN,
    data_params,
    format_report,
    prepare_data,
    run_shape,
    vocabulary_line,
)
from benchmarks.tools.command_configs import AcceleratorCheckConfig
from benchmarks.tools.step_export import hlo_summary

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


@pytest.mark.xla
@pytest.mark.slow
def test_cpu_dry_run_runs_the_whole_path_and_compares_bfloat16_with_float32(tmp_path,
                                                                             tiny_export):
    out = tmp_path / "report.json"
    # The export's prepared data, copied into this test's workdir (the shared export is read
    # only; its prepared.json names the export's data, which the check reads): reused as a
    # kept --workdir's is; the runs' directories are the check's own (float32/,
    # mixed_bfloat16/).
    workdir = tmp_path / "work"
    shutil.copytree(tiny_export[0].parent / "work" / "data_prep", workdir / "data_prep")
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
    assert (workdir / "data_prep" / "data").is_dir() and "data: reused" in run.stdout
    assert (workdir / "float32" / "ckpt-1.index").exists()
    assert (workdir / "mixed_bfloat16" / f"ckpt-{DRY_RUN['steps']}.index").exists()
    for field in ("first-step loss: float32", "mixed_bfloat16 + XLA, 6 steps in loops of 2",
                  "tokens/s, MFU", "device memory: n/a"):
        assert field in run.stdout, field
    # --export_step exports this run's step: its weights (--seed), batch and first step.
    meta = json.loads((tiny_export[0] / "meta.json").read_text())
    assert meta["tf_loss"] == pytest.approx(report["first_step_loss"], rel=1e-6)
    assert meta["tf_grad_norm"] == pytest.approx(report["first_step_grad_norm"], rel=1e-6)


def test_vocabulary_line():
    assert vocabulary_line(300, 300, 250_000) == "vocabulary: 300 pieces (--vocab_size)"
    line = vocabulary_line(32000, 30713, 8_000_000)
    assert line == ("vocabulary: 30,713 pieces, fewer than --vocab_size=32,000: SentencePiece "
                    "makes no more from the 8,000,000 bytes of docstrings on this machine (a "
                    "larger --corpus_bytes gives more)")


def test_the_vocabulary_is_what_the_corpus_gives_said_in_one_line(tmp_path, capsys):
    """A corpus too small for --vocab_size pieces (as 8 MB of docstrings for 32000 on some
    machines): the model gets what SentencePiece can make, and one line says so."""
    shape = dict(DRY_RUN, vocab_size=5000, corpus_bytes=60_000)
    prepared, used = prepare_data(AcceleratorCheckConfig(workdir=str(tmp_path)), shape)
    made = prepared["vocab_size"]
    assert 300 < made < 5000
    assert used == dict(shape, vocab_size=made)  # the report and the model use what was made
    assert PretrainData.read(prepared["data_dir"]).vocab_size == made
    out = capsys.readouterr().out.splitlines()
    assert [line for line in out if "vocabulary:" in line] == [
        "[accelerator_check] " + vocabulary_line(5000, made, prepared["corpus_bytes"])]
    assert out[0].startswith("[accelerator_check] data: a docstring corpus of 60,000 bytes")
    assert out[1].startswith(f"[accelerator_check] data: {prepared['tokens']:,} tokens from")


@pytest.mark.slow
def test_export_step_that_is_a_file_is_one_line(tmp_path):
    target = tmp_path / "step"
    target.write_text("")
    run = _run("--cpu_dry_run", f"--export_step={target}", f"--workdir={tmp_path / 'work'}")
    assert run.returncode == 2, run.stdout + run.stderr
    assert "Traceback" not in run.stderr
    assert f"--export_step={target} is a file; pass a directory" in run.stderr
    assert not (tmp_path / "work").exists()


@pytest.fixture(scope="module")
def tiny_export(tmp_path_factory):
    """The command as a newcomer runs it: --cpu_dry_run --export_step into fresh directories,
    with the reference attention: the GPU's program under "auto" holds the Triton kernels'
    custom calls (tests/benchmarks/test_triton_export.py), which JAX's CPU cannot run. Run
    once per test run and shared, read only, with test_gpu_step_comparison.py
    (tests/fixtures/accelerator_exports.py): (the export's directory, the run)."""
    return cpu_dry_run_export(tmp_path_factory, "reference")


EXPORT_FILES = {"step.hlo.pb", "inputs.npz", "captured.npz", "meta.json"}
# What ../shared/gpu/run_step_hlo.py reads (and export_step_hlo.py wrote).
META_KEYS = {"shape", "target", "precision", "n_explicit", "explicit", "n_captured", "captured",
             "trainable_params", "flops_per_step", "tf_loss", "tf_grad_norm"}


@pytest.mark.xla
@pytest.mark.slow
def test_export_step_writes_the_program_a_batch_and_its_meta(tiny_export):
    outdir, run = tiny_export
    assert "Traceback" not in run.stderr
    progress = [line for line in run.stdout.splitlines() if line.startswith("[accelerator_check]")]
    for stage in ("data: a docstring corpus", "data: ", "vocabulary: 300 pieces",
                  "export: the Trainer at model tiny", "export: step.hlo.pb",
                  "export: TensorFlow's first step: loss", "export: written to"):
        assert any(line.startswith(f"[accelerator_check] {stage}") for line in progress), stage
    assert {p.name for p in outdir.iterdir()} == EXPORT_FILES
    meta = json.loads((outdir / "meta.json").read_text())
    assert set(meta) == META_KEYS
    assert meta["shape"] == dict(DRY_RUN) and meta["precision"] == "mixed_bfloat16"
    assert meta["trainable_params"] > 0 and meta["flops_per_step"] > 0
    hlo = hlo_summary((outdir / "step.hlo.pb").read_bytes())
    assert hlo["parameters"] == meta["n_explicit"] + meta["n_captured"]
    # Traced for a GPU (the default --export_target) on this CPU-only machine: no stored
    # dropout mask (a conditional in the program).
    assert meta["target"] == "gpu"
    assert hlo["conditionals"] == 0
    for name, prefix, count, specs in (
            ("inputs.npz", "a", meta["n_explicit"], meta["explicit"]),
            ("captured.npz", "c", meta["n_captured"], meta["captured"])):
        with np.load(outdir / name) as arrays:
            assert sorted(arrays.files) == sorted(f"{prefix}{i}" for i in range(count))
            for i, (dtype, dims) in enumerate(specs):
                assert list(arrays[f"{prefix}{i}"].shape) == dims, (name, i)
                assert arrays[f"{prefix}{i}"].dtype.itemsize == np.dtype(
                    "V2" if dtype == "bfloat16" else dtype).itemsize, (name, i)
    with np.load(outdir / "inputs.npz") as inputs:
        # A real batch: token ids of the 300-piece vocabulary, beyond the special pieces.
        ids = [inputs[k] for k in inputs.files
               if inputs[k].shape == (DRY_RUN["batch_size"], DRY_RUN["seq_len"])
               and inputs[k].dtype == np.int32 and inputs[k].max() > 8]
        assert ids and all(a.max() < 300 for a in ids)


@pytest.mark.xla
@pytest.mark.slow
def test_on_a_cpu_the_step_would_store_its_dropout_masks(tiny_export, tmp_path):
    """The contrast of the export's program: the same Trainer's step traced on this CPU
    without the export keeps its attention-dropout masks behind conditionals, and the gradient
    of its query-stream shift (the coordinate gather) is a scatter-add per layer, where the
    export's window read has a gather (the one scatter left in both is the embedding's
    gradient)."""
    from xlnet_tf2.tasks.pretraining import build_trainer
    from xlnet_tf2.tasks.pretraining_config import PretrainConfig

    outdir, _ = tiny_export
    shape = json.loads((outdir / "meta.json").read_text())["shape"]
    try:
        trainer = build_trainer(PretrainConfig.flat(
            data_dir=(str(outdir.parent / "work" / "data_prep" / "data"),),
            model_config=shape["model_config"], train_batch_size=shape["batch_size"],
            mem_len=shape["mem_len"], steps_per_loop=1, jit_compile=True, seed=0,
            train_steps=1, precision="mixed_bfloat16", model_dir=str(tmp_path / "run")))
        step_fn, args = trainer.first_step()
        hlo = hlo_summary(step_fn.experimental_get_compiler_ir(*args)(stage="hlo_serialized"))
    finally:  # the Trainer sets the global policy
        keras.mixed_precision.set_global_policy("float32")
    exported = hlo_summary((outdir / "step.hlo.pb").read_bytes())
    layers = XLNetConfig.preset(DRY_RUN["model_config"]).n_layer
    assert hlo["conditionals"] > 0
    assert hlo["scatters"] == exported["scatters"] + layers


def _run_on_jax_cpu(outdir):
    """Compiles step.hlo.pb with JAX's XLA client on the CPU and runs it once on the exported
    batch and weights, as ../shared/gpu/run_step_hlo.py does on a GPU; returns the outputs."""
    jax = pytest.importorskip("jax")
    import ml_dtypes
    from jax._src.lib import _jax, xla_client

    proto = (outdir / "step.hlo.pb").read_bytes()
    meta = json.loads((outdir / "meta.json").read_text())
    shapes = xla_client.XlaComputation(proto).program_shape().parameter_shapes()
    names = ([f"a{i}" for i in range(meta["n_explicit"])]
             + [f"c{i}" for i in range(meta["n_captured"])])
    values = {**np.load(outdir / "inputs.npz"), **np.load(outdir / "captured.npz")}
    device = jax.devices("cpu")[0]
    x64 = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)  # the step counter is int64
    try:
        args = []
        for name, shape in zip(names, shapes, strict=True):
            value = values[name]
            if value.dtype.kind == "V":  # bfloat16, stored by numpy as raw 2-byte values
                value = value.view(ml_dtypes.bfloat16)
            assert value.shape == tuple(shape.dimensions()), name
            assert value.dtype == np.dtype(shape.numpy_dtype()), name
            args.append(jax.device_put(value, device))
        executable = device.client.compile_and_load(
            _jax.mlir.hlo_to_stablehlo(proto), xla_client.DeviceList((device,)),
            xla_client.CompileOptions())
        outputs = executable.execute_sharded(args).disassemble_into_single_device_arrays()
        return [np.asarray(out[0]) for out in outputs], meta
    finally:
        jax.config.update("jax_enable_x64", x64)


@pytest.mark.xla
@pytest.mark.slow
def test_tiny_export_on_jax_xla_gives_tensorflows_first_step_loss(tiny_export):
    outdir, _ = tiny_export
    outputs, meta = _run_on_jax_cpu(outdir)
    layers = XLNetConfig.preset(DRY_RUN["model_config"]).n_layer  # 2
    # Outputs: the new memory (one per layer), the loss, the gradient norm, the variables.
    memory, loss, grad_norm = outputs[:layers], outputs[layers], outputs[layers + 1]
    width = XLNetConfig.preset(DRY_RUN["model_config"]).d_model
    assert all(m.shape == (DRY_RUN["batch_size"], DRY_RUN["mem_len"], width) for m in memory)
    assert abs(float(loss) - math.log(300)) < 0.5  # a fresh model's loss
    # The export is the GPU's program (the query stream's window read, no stored masks);
    # TensorFlow's validation step on this CPU traces the CPU's (the coordinate gather): the
    # same values up to bfloat16 rounding in a different order (1.3e-5 seen on the norm).
    assert float(loss) == pytest.approx(meta["tf_loss"], rel=1e-4)
    assert float(grad_norm) == pytest.approx(meta["tf_grad_norm"], rel=1e-4)
