"""The first run on an accelerator (benchmarks/accelerator_check.py): the real pretraining path
at XLNet-Base's shape under mixed_bfloat16 with XLA, checked against float32 and measured.

In order:
  1. The accelerator: the GPUs TensorFlow sees, or the TPU named by --tpu. With neither, the
     command says so in one line and exits 0, unless --cpu_dry_run, which runs everything
     below on the CPU at a tiny shape (`DRY_RUN`), to test this code where no accelerator is.
  2. The data: TFRecords prepared as a user prepares theirs (tools/docstring_data.py: a
     docstring corpus, a SentencePiece model trained on it, create_tfrecords), bi_data, one
     stream per forward/backward pair of the batch. On an accelerator host this costs a few
     minutes of CPU, and a kept --workdir is reused.
  3. The initial weights of a fresh model are written to a checkpoint and both runs start from
     it through --init_checkpoint, so they see the same weights, batches and dropout masks
     (masks are keyed by seed, step and example, layers/dropout.py): a one-step float32 run
     (TF32 off, so float32 means float32), then --steps steps under --precision. Both are
     `build_trainer(config).train()` with jit_compile: exactly the path of run_pretrain.py.
  4. The check: |first-step loss (precision) - first-step loss (float32)| <= --loss_tolerance
     x the float32 loss. Why 1% by default: bfloat16 keeps 8 significant bits (unit roundoff
     u = 2^-8 = 0.39%); activations and weights are rounded once per op while the softmax,
     layer norms and the loss stay in float32 (Keras' mixed policy), and the rounding errors,
     independent across the B x P targets, largely cancel in the mean loss. 1% is 2.6 u of
     the loss value: above what rounding gives (the CPU dry run's difference is in
     BENCHMARKS.md), far below what a wrong mask, a cast dropping a stream or a missing layer
     does to the initial loss. It is a coarse check: a fresh model's loss is close to
     ln(vocabulary size) whatever its weights, so it catches what breaks the numerics (an
     overflow, a NaN, a stream or a layer dropped) rather than small drifts. The first
     step's gradient norm, which depends on every weight and mask, is printed beside it for a
     finer look; it is not checked, as no bfloat16 tolerance for it has been measured on an
     accelerator yet.
  5. The report: step time (the median over the loops after the first, which compiles),
     tokens/s, MFU against the data-sheet peak of the device at that precision
     (training/device_peak.py; measured matmul throughput for a device it does not know) and
     device memory (tf.config.experimental.get_memory_info: in use after the run, and peak).
Each stage prints one progress line first ("[accelerator_check] ...").

The vocabulary: how many pieces SentencePiece can make from the corpus depends on the text
the machine has (the installed packages' docstrings), so --vocab_size is an upper bound and
one line says how many pieces the model got; the shape's FLOPs barely change (the vocabulary
only enters the embedding and the softmax over the predicted tokens).

`run_export` (--export_step=DIR) instead writes the step this check times as a portable XLA
program (tools/step_export.py), from the real Trainer at the same shape on the same data;
it needs no accelerator. With --cpu_dry_run it adds the weights and TensorFlow's first step,
to validate a runner's result.
"""

from __future__ import annotations

import dataclasses
import gc
import os
import shutil
import statistics
import time
from typing import Dict, List, Optional

import keras
import tensorflow as tf

from xlnet_tf2.data.params import DataParams
from xlnet_tf2.models.saving import save_pretrained
from xlnet_tf2.tasks.pretraining import PretrainTask, build_trainer
from xlnet_tf2.tasks.pretraining_config import PretrainConfig
from benchmarks.tools import step_export
from benchmarks.tools.docstring_data import prepare_docstring_data
from xlnet_tf2.training.device_peak import device_peak_flops, measure_matmul_peak
from xlnet_tf2.training.distribution import resolve_strategy

# The tiny shape of --cpu_dry_run: the same code, seconds of CPU.
DRY_RUN = dict(model_config="tiny", batch_size=4, seq_len=32, reuse_len=16, mem_len=16,
               num_predict=5, steps=6, steps_per_loop=2, vocab_size=300,
               corpus_bytes=250_000)
SHAPE_KEYS = tuple(DRY_RUN)


def accelerators() -> List[str]:
    """Names of the GPUs TensorFlow sees (its driver's name when it gives one)."""
    names = []
    for gpu in tf.config.list_physical_devices("GPU"):
        try:
            details = tf.config.experimental.get_device_details(gpu)
        except (ValueError, RuntimeError):
            details = {}
        names.append(details.get("device_name") or gpu.name)
    return names


def device_memory(strategy: tf.distribute.Strategy) -> Optional[Dict[str, float]]:
    """{"device", "current_gb", "peak_gb"} of the first device of the run; None on a CPU,
    where TensorFlow keeps no such count."""
    device = strategy.extended.worker_devices[0]
    name = device.split("device:")[-1]  # "/job:.../device:GPU:0" -> "GPU:0"
    if name.upper().startswith("CPU"):
        return None
    try:
        info = tf.config.experimental.get_memory_info(name)
    except (ValueError, RuntimeError):
        return None
    return {"device": name, "current_gb": info["current"] / 1e9, "peak_gb": info["peak"] / 1e9}


def run_shape(c, dry_run: bool) -> dict:
    """The shape and run length: the flags of AcceleratorCheckConfig `c`, or DRY_RUN."""
    return dict(DRY_RUN) if dry_run else {k: getattr(c, k) for k in SHAPE_KEYS}


def data_params(shape: dict) -> DataParams:
    """Pretraining's data layout at `shape`: bi_data, one stream per forward/backward pair,
    factorization orders permuted within blocks of reuse_len (the paper's perm_size) when
    they divide both halves, else within one block per position."""
    seq, reuse = shape["seq_len"], shape["reuse_len"]
    return DataParams(seq_len=seq, reuse_len=reuse, num_predict=shape["num_predict"],
                      bi_data=True, perm_size=reuse if seq == 2 * reuse else 1,
                      num_streams=shape["batch_size"] // 2, num_passes=1, seed=0)


def say(line: str) -> None:
    """One progress line of the check."""
    print(f"[accelerator_check] {line}", flush=True)


def vocabulary_line(asked: int, made: int, corpus_bytes: int) -> str:
    """The vocabulary the run uses, and why when it is smaller than --vocab_size."""
    if made >= asked:
        return f"vocabulary: {made:,} pieces (--vocab_size)"
    return (f"vocabulary: {made:,} pieces, fewer than --vocab_size={asked:,}: SentencePiece "
            f"makes no more from the {corpus_bytes:,} bytes of docstrings on this machine (a "
            "larger --corpus_bytes gives more)")


def prepare_data(c, shape: dict) -> tuple:
    """Step 2: the prepared data in WORKDIR/data_prep, with a progress line before and after
    and the vocabulary line. Returns (prepared record, `shape` with the vocabulary made)."""
    workdir = os.path.join(c.workdir, "data_prep")
    say(f"data: a docstring corpus of {shape['corpus_bytes']:,} bytes, a SentencePiece model "
        f"of up to {shape['vocab_size']:,} pieces and TFRecords (seq {shape['seq_len']}, "
        f"{shape['num_predict']} predictions, bi_data) in {workdir}, unless prepared there "
        "before with the same settings")
    prepared = prepare_docstring_data(workdir, data_params(shape), shape["vocab_size"],
                                      shape["corpus_bytes"], fewer_pieces_ok=True)
    if prepared["reused"]:
        say(f"data: reused ({prepared['tokens']:,} tokens)")
    else:
        say(f"data: {prepared['tokens']:,} tokens from {prepared['corpus_bytes']:,} bytes of "
            f"docstrings (corpus {prepared['corpus_s']:.0f} s, SentencePiece "
            f"{prepared['sentencepiece_s']:.0f} s, TFRecords {prepared['create_tfrecords_s']:.0f}"
            " s)")
    say(vocabulary_line(shape["vocab_size"], prepared["vocab_size"], prepared["corpus_bytes"]))
    return prepared, dict(shape, vocab_size=prepared["vocab_size"])


def _shape_text(shape: dict) -> str:
    return (f"model {shape['model_config']}, batch {shape['batch_size']}, seq "
            f"{shape['seq_len']}, reuse {shape['reuse_len']}, memory {shape['mem_len']}, "
            f"{shape['num_predict']} predictions, bi_data, {shape['vocab_size']:,}-piece "
            "vocabulary")


def _write_initial_weights(config: PretrainConfig, path: str) -> str:
    """A fresh model of the run's architecture (vocabulary from the data), in float32, saved
    as a model directory `path` (its xlnet_config.json beside the checkpoint, which
    --init_checkpoint's loader reads) both runs start from; returns the checkpoint's prefix.
    Seeded as the Trainer seeds its fresh models (--seed), so these are the weights
    --export_step exports."""
    keras.utils.set_random_seed(config.loop.seed)
    model = PretrainTask(config).build_model()
    prefix = save_pretrained(model, path)
    del model
    gc.collect()
    return prefix


def run_check(c, dry_run: bool = False) -> dict:
    """Runs steps 2-5 of the module docstring in `c.workdir`; `c` is an
    AcceleratorCheckConfig. Returns the report's values (`format_report` prints them)."""
    shape = run_shape(c, dry_run)
    # Before any other TensorFlow op: a TPU needs a fresh runtime.
    strategy = resolve_strategy(c.distribution.strategy, c.distribution.tpu,
                                c.distribution.tpu_timeout)
    prepared, shape = prepare_data(c, shape)
    common = dict(data_dir=(prepared["data_dir"],), model_config=shape["model_config"],
                  train_batch_size=shape["batch_size"], mem_len=shape["mem_len"],
                  steps_per_loop=shape["steps_per_loop"], jit_compile=True, seed=c.seed,
                  dropout=c.dropout, dropatt=c.dropatt,
                  attention_implementation=c.attention_implementation,
                  position_scores=c.position_scores)
    say(f"initial weights: a fresh model ({_shape_text(shape)}) written to "
        f"{os.path.join(c.workdir, 'initial')}; both runs start from it")
    initial = _write_initial_weights(
        PretrainConfig.flat(model_dir=os.path.join(c.workdir, "unused"), **common),
        os.path.join(c.workdir, "initial"))
    say("float32 run: one step (TF32 off), compiled first")

    tf32 = tf.config.experimental.tensor_float_32_execution_enabled()
    tf.config.experimental.enable_tensor_float_32_execution(False)
    try:
        reference = build_trainer(PretrainConfig.flat(
            model_dir=os.path.join(c.workdir, "float32"), train_steps=1, precision="float32",
            init_checkpoint=initial, **common), strategy).train()
    finally:
        tf.config.experimental.enable_tensor_float_32_execution(tf32)
    gc.collect()
    memory = device_memory(strategy)
    if memory is not None:
        tf.config.experimental.reset_memory_stats(memory["device"])

    say(f"{c.precision} run: {shape['steps']} steps in loops of {shape['steps_per_loop']}, "
        "the first loop compiled and not timed")
    trainer = build_trainer(PretrainConfig.flat(
        model_dir=os.path.join(c.workdir, c.precision), train_steps=shape["steps"],
        precision=c.precision, init_checkpoint=initial, **common), strategy)
    try:
        result = trainer.train()
    finally:  # the Trainer sets the global policy; leave float32 behind
        keras.mixed_precision.set_global_policy("float32")
    step_s = statistics.median(loop["seconds"] / loop["steps"] for loop in result.loops[1:])
    flops = trainer.task.flops_per_step(shape["batch_size"], trainer.num_replicas)
    peak, peak_source = device_peak_flops(c.precision), "data sheet"
    if peak is None:
        peak = measure_matmul_peak(tf.bfloat16 if "bfloat16" in c.precision else tf.float16)
        peak_source = "measured matmul"
    elif dry_run:
        peak_source = "this CPU's derived peak (dry run)"
    reference_loss = reference.steps[0]["loss"]
    loss = result.steps[0]["loss"]
    relative = abs(loss - reference_loss) / abs(reference_loss)
    norms = (reference.steps[0]["grad_norm"], result.steps[0]["grad_norm"])
    return {
        "devices": accelerators() or ["CPU (dry run)"], "replicas": trainer.num_replicas,
        "whole_step_compiled": trainer.whole_step_compiled, "precision": c.precision,
        "prepared": prepared, "shape": shape, "first_step_loss_float32": reference_loss,
        "first_step_loss": loss, "relative_difference": relative,
        "loss_tolerance": c.loss_tolerance, "passed": relative <= c.loss_tolerance,
        "first_step_grad_norm_float32": norms[0], "first_step_grad_norm": norms[1],
        "grad_norm_relative_difference": abs(norms[1] - norms[0]) / norms[0],
        "last_loss": result.steps[-1]["loss"], "steps": len(result.steps),
        "step_ms": 1000 * step_s, "tokens_per_s": shape["batch_size"] * shape["seq_len"] / step_s,
        "mfu": flops / step_s / (peak * trainer.num_replicas), "flops_per_step": flops,
        "peak_flops_per_device": peak, "peak_source": peak_source,
        "first_loop_s": result.loops[0]["seconds"], "device_memory": device_memory(strategy)}


def run_export(c, outdir: str, dry_run: bool = False) -> dict:
    """--export_step=OUTDIR: the step of the check's timed run (same shape, data, precision
    and seed; the real Trainer) written by tools/step_export.py, with progress lines; with
    `dry_run` (the tiny shape) also the weights and TensorFlow's first step, or the weights
    alone where --attention_implementation forces a GPU-only implementation (cudnn, triton:
    this CPU cannot run that step). `c` is an AcceleratorCheckConfig whose workdir is set.
    Returns export_step's values."""
    start = time.perf_counter()
    validate = dry_run and c.attention_implementation in ("auto", "reference")
    shape = run_shape(c, dry_run)
    prepared, shape = prepare_data(c, shape)
    model_dir = os.path.join(c.workdir, "export_run")
    shutil.rmtree(model_dir, ignore_errors=True)  # a fresh run: its first step is step 1
    device = c.export_target.upper() + (f" {c.tpu_generation}" if c.export_target == "tpu"
                                         else "")
    say(f"export: the Trainer at {_shape_text(shape)}, {c.precision}; tracing its step as on "
        f"a {device} and lowering it to XLA"
        + ("; then TensorFlow's first step from the same weights and batch, for validation"
           if validate else ""))
    trainer = build_trainer(PretrainConfig.flat(
        data_dir=(prepared["data_dir"],), model_config=shape["model_config"],
        train_batch_size=shape["batch_size"], mem_len=shape["mem_len"], steps_per_loop=1,
        jit_compile=True, seed=c.seed, train_steps=1, precision=c.precision,
        dropout=c.dropout, dropatt=c.dropatt, attention_implementation=c.attention_implementation,
        position_scores=c.position_scores,
        model_dir=model_dir))
    try:
        result = step_export.export_step(trainer, outdir, shape, validate=validate,
                                           target=c.export_target,
                                           tpu_generation=c.tpu_generation, weights=dry_run)
    finally:  # the Trainer sets the global policy; leave float32 behind
        keras.mixed_precision.set_global_policy("float32")
    hlo = result["hlo"]
    say(f"export: {step_export.HLO_FILE} {hlo['bytes'] / 1e6:.1f} MB ({hlo['parameters']} "
        f"parameters; {hlo['constants']} constants, {hlo['constant_bytes'] / 1e6:.1f} MB), "
        f"traced and lowered in {result['trace_s']:.0f} s")
    if validate:
        say(f"export: TensorFlow's first step: loss {result['tf_loss']:.6f}, gradient norm "
            f"{result['tf_grad_norm']:.6f} (meta.json; the weights in "
            f"{step_export.CAPTURED_FILE})")
    say(f"export: written to {outdir} in {time.perf_counter() - start:.0f} s")
    return result


# --gpu_bundle's steps: (directory, --cpu_dry_run, --attention_implementation).
GPU_BUNDLE = (("base_triton", False, "triton"), ("base_reference", False, "reference"),
              ("tiny_triton", True, "triton"), ("tiny_reference", True, "reference"))


def run_gpu_bundle(c, outdir: str) -> None:
    """--gpu_bundle=OUTDIR: what benchmarks/gpu/step_comparison.py measures on a GPU machine
    without TensorFlow, exported for a GPU: the check's step (its shape and settings) with the
    Triton kernels and with the reference attention, and the tiny shape's two with their
    weights (and TensorFlow's first step for the reference). `c` is an AcceleratorCheckConfig
    whose workdir is set."""
    os.makedirs(outdir, exist_ok=True)
    for name, dry_run, implementation in GPU_BUNDLE:
        say(f"gpu bundle: {name}")
        # Each shape's data in a folder of its own, prepared once.
        workdir = os.path.join(c.workdir, "tiny" if dry_run else "base")
        run_export(dataclasses.replace(c, attention_implementation=implementation,
                                       export_target="gpu", workdir=workdir),
                   os.path.join(outdir, name), dry_run=dry_run)


def format_report(r: dict) -> str:
    """The report's lines: devices, shape, the loss check, speed, memory."""
    s = r["shape"]
    memory = r["device_memory"]
    memory_text = ("n/a (TensorFlow counts device memory only on accelerators)" if memory is None
                   else f"{memory['current_gb']:.2f} GB in use after the run, peak "
                        f"{memory['peak_gb']:.2f} GB ({memory['device']})")
    verdict = "OK" if r["passed"] else "FAILED"
    return "\n".join([
        f"devices: {', '.join(r['devices'])}; {r['replicas']} replica(s); whole step under XLA: "
        f"{r['whole_step_compiled']}",
        f"shape: {_shape_text(s)}; data: TFRecords prepared from "
        f"{r['prepared']['corpus_bytes']:,} bytes of docstrings",
        f"first-step loss: float32 {r['first_step_loss_float32']:.5f}, {r['precision']} "
        f"{r['first_step_loss']:.5f}: relative difference {100 * r['relative_difference']:.3f}% "
        f"(tolerance {100 * r['loss_tolerance']:.2f}%) {verdict}",
        f"first-step gradient norm (before clipping): float32 "
        f"{r['first_step_grad_norm_float32']:.5f}, {r['precision']} "
        f"{r['first_step_grad_norm']:.5f}: relative difference "
        f"{100 * r['grad_norm_relative_difference']:.3f}% (reported, not checked)",
        f"{r['precision']} + XLA, {r['steps']} steps in loops of {s['steps_per_loop']} (the "
        f"first, {r['first_loop_s']:.1f} s with compilation, not timed): step "
        f"{r['step_ms']:.1f} ms, {r['tokens_per_s']:,.0f} tokens/s, MFU "
        f"{100 * r['mfu']:.1f}% of {r['peak_flops_per_device'] / 1e12:.2f} TFLOP/s per device "
        f"({r['peak_source']}); last loss {r['last_loss']:.4f}",
        f"device memory: {memory_text}"])
