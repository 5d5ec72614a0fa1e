"""On a GPU machine with JAX and PyTorch and no TensorFlow: the pretraining step with the flash
Triton kernels against the same step with the reference attention and against HuggingFace's
XLNet under torch.compile, in one call, as one table.

    python benchmarks/gpu/step_comparison.py BUNDLE [--steps 20] [--hf_steps 10]

BUNDLE is what `python benchmarks/accelerator_check.py --gpu_bundle=BUNDLE` writes on any
machine with the project (it needs no GPU): four exported steps (benchmarks/tools/
step_export.py), each a directory with step.hlo.pb, inputs.npz and meta.json:
  base_triton, base_reference   XLNet-Base at the paper's settings (batch 16, seq 512, memory
                                384, 85 predictions, bi_data, dropout 0.1, mixed_bfloat16),
                                traced for a GPU with --attention_implementation=triton and
                                =reference: timed;
  tiny_triton, tiny_reference   the accelerator check's tiny shape with the weights
                                (captured.npz) and, for the reference, TensorFlow's first-step
                                loss and gradient norm on a CPU: their first steps compared.
What runs, in order (each program compiled by JAX's XLA: the computation TensorFlow hands to
XLA; the weights and optimizer slots not shipped are filled at random, the same for both
implementations of a shape): the two tiny steps' first step, then each Base step's first step
and its time (2 warm-up steps, then the mean of --steps, the updated variables fed back as the
training loop does), then HuggingFace's step in a process of its own (benchmarks/gpu/
hf_xlnet_step.py, same shape, bf16 autocast, AdamW, torch.compile). Prints one JSON line per
program, then the table. MFU: the project's FLOPs per step (meta.json) against
--peak_tflops (the H100's and H200's data-sheet dense bf16 peak by default).

On a lent GPU machine (the project's device tool; the bundle, about 26 MB, travels in an
ignored folder of the checkout named in `carry`): `PYTHONUNBUFFERED=1 python3
benchmarks/gpu/step_comparison.py .gpu_bundle` (about 6 to 8 minutes: two Base compiles, the
timed steps, torch.compile).

A program the machine cannot compile or run is a row saying why (on a CPU: the Triton custom
calls have no implementation there), so the script can be rehearsed without a GPU up to the
point where one is needed: `JAX_PLATFORMS=cpu python benchmarks/gpu/step_comparison.py BUNDLE
--rehearse` converts every program as a GPU run does (HLO text, StableHLO), runs the tiny ones
and a tiny HuggingFace step (eager) on the CPU, and leaves the Base programs uncompiled (a Base
step is minutes of a CPU).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

import numpy as np
import jax
import ml_dtypes
from jax._src.lib import _jax, xla_client

jax.config.update("jax_enable_x64", True)  # the step's counters are int64

STEPS = ("tiny_reference", "tiny_triton", "base_reference", "base_triton")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("bundle", help="the directory accelerator_check.py --gpu_bundle wrote")
    p.add_argument("--steps", type=int, default=20, help="timed steps of each Base program")
    p.add_argument("--hf_steps", type=int, default=10, help="timed HuggingFace steps")
    p.add_argument("--hf_python", default=sys.executable,
                   help="the Python with torch and transformers that runs HuggingFace's step")
    p.add_argument("--hf_tiny", action="store_true",
                   help="HuggingFace's step at a tiny shape without torch.compile (rehearsal)")
    p.add_argument("--no_hf", action="store_true", help="leave HuggingFace's step out")
    p.add_argument("--rehearse", action="store_true",
                   help="on a CPU: the Base programs converted, not compiled; HuggingFace's "
                   "step tiny and eager")
    p.add_argument("--peak_tflops", type=float, default=989.4)
    return p.parse_args(argv)


def load_module(step_dir: str) -> bytes:
    """The step's HloModuleProto, through HLO text with `copy(x)` written as `maximum(x, x)`
    (the same values): jaxlib 0.11's StableHLO converter refuses the copies TensorFlow writes
    for the returned variables."""
    with open(os.path.join(step_dir, "step.hlo.pb"), "rb") as f:
        computation = xla_client.XlaComputation(f.read())
    # JAX 0.10 has these under xla_client.hlo, JAX 0.8 (the project's test venv) on _jax.
    hlo = getattr(xla_client, "hlo", _jax)
    options = hlo.HloPrintOptions.short_parsable()
    options.print_large_constants = True
    options.print_metadata = False
    text = computation.get_hlo_module().to_string(options)
    text = re.sub(r" copy\(([%\w.\-]+)\)", r" maximum(\1, \1)", text)
    return hlo.hlo_module_from_text(text).as_serialized_hlo_module_proto()


def arguments(step_dir: str, proto: bytes, device) -> tuple:
    """The step's parameters on `device`: the shipped batch, the captured weights where
    shipped, the rest random (|N(0, 1)| * 0.02 for floats, 0 for integers; a fixed seed, so
    two programs with the same parameters get the same values). Returns (arrays, filled)."""
    meta = json.load(open(os.path.join(step_dir, "meta.json")))
    shapes = xla_client.XlaComputation(proto).program_shape().parameter_shapes()
    shipped = dict(np.load(os.path.join(step_dir, "inputs.npz")))
    captured_path = os.path.join(step_dir, "captured.npz")
    if os.path.exists(captured_path):
        shipped.update(np.load(captured_path))
    names = ([f"a{i}" for i in range(meta["n_explicit"])]
             + [f"c{i}" for i in range(meta["n_captured"])])
    rng = np.random.default_rng(0)
    values, filled = [], 0
    for name, shape in zip(names, shapes):
        dtype = np.dtype(shape.numpy_dtype())
        value = shipped.get(name)
        if value is None:
            filled += 1
            if dtype.kind in "iub":
                value = np.zeros(shape.dimensions(), dtype)
            else:
                value = (np.abs(rng.standard_normal(shape.dimensions(), np.float32))
                         * 0.02).astype(dtype)
        value = np.asarray(value)
        if value.dtype.kind == "V":  # numpy's view of bfloat16
            value = value.view(ml_dtypes.bfloat16)
        values.append(jax.device_put(value, device))
    return values, filled


def run_step(step_dir: str, steps: int, peak: float, compile_it: bool = True) -> dict:
    """Compiles the step, runs its first step (loss, gradient norm) and, with `steps`, times
    it (without `compile_it`: converts it only). Returns its JSON record; `error` says why
    where the machine cannot run it."""
    meta = json.load(open(os.path.join(step_dir, "meta.json")))
    record = dict(program=os.path.basename(step_dir.rstrip("/")), shape=meta["shape"],
                  precision=meta["precision"])
    device = jax.devices()[0]
    record["device"] = device.device_kind
    try:
        proto = load_module(step_dir)
        args, record["filled_at_random"] = arguments(step_dir, proto, device)
        stablehlo = _jax.mlir.hlo_to_stablehlo(proto)
        if not compile_it:
            record["error"] = "converted, not compiled (--rehearse)"
            return record
        start = time.perf_counter()
        executable = device.client.compile_and_load(
            stablehlo, xla_client.DeviceList((device,)), xla_client.CompileOptions())
        record["compile_s"] = round(time.perf_counter() - start, 1)
    except Exception as e:  # noqa: BLE001 - a row that says why
        record["error"] = f"{type(e).__name__}: {str(e).strip().splitlines()[0][:300]}"
        return record
    # The step updates the variables in place (input_output_alias): each run's updated
    # variables are the next run's inputs, as in the training loop.
    header = xla_client.XlaComputation(proto).as_hlo_text().split("\n", 1)[0]
    alias = [(int(o), int(i)) for o, i in re.findall(r"\{(\d+)\}: \((\d+), \{\}", header)]

    def run():
        out = executable.execute_sharded(args).disassemble_into_single_device_arrays()
        for o, i in alias:
            args[i] = out[o][0]
        return out

    first = run()
    # The outputs: the carried state (one memory per layer), then the loss and the gradient
    # norm, the first two scalars.
    scalars = [float(np.asarray(o[0])) for o in first if np.asarray(o[0]).shape == ()]
    record["loss"], record["grad_norm"] = scalars[:2]
    for key in ("tf_loss", "tf_grad_norm"):
        if key in meta:
            record[key] = meta[key]
    if steps:
        for _ in range(2):
            jax.block_until_ready(run())
        start = time.perf_counter()
        for _ in range(steps):
            out = run()
        jax.block_until_ready(out)
        seconds = (time.perf_counter() - start) / steps
        shape = meta["shape"]
        record.update(step_ms=round(seconds * 1e3, 2),
                      tokens_per_s=round(shape["batch_size"] * shape["seq_len"] / seconds),
                      mfu=round(meta["flops_per_step"] / seconds / peak, 4))
    return record


def run_huggingface(args, shape: dict) -> dict:
    """HuggingFace's step in a process of its own (its own GPU memory), at the Base step's
    shape, its MFU at the project's FLOPs per step."""
    here = os.path.dirname(os.path.abspath(__file__))
    command = [args.hf_python, os.path.join(here, "hf_xlnet_step.py"),
               "--steps", str(args.hf_steps)]
    if args.hf_tiny or args.rehearse:
        command += ["--tiny"]
    else:
        command += ["--compile", "--batch", str(shape["batch_size"]), "--seq",
                    str(shape["seq_len"]), "--mem", str(shape["mem_len"]), "--reuse",
                    str(shape["reuse_len"]), "--predict", str(shape["num_predict"]),
                    "--vocab", str(shape["vocab_size"])]
    run = subprocess.run(command, capture_output=True, text=True, timeout=480)
    lines = [line for line in run.stdout.splitlines() if line.startswith("{")]
    if run.returncode or not lines:
        said = (run.stderr.strip().splitlines() or ["no output"])[-1][:300]
        return dict(program="huggingface", error=f"exit {run.returncode}: {said}")
    return json.loads(lines[-1])


def _agreement(a: dict, b: dict, key: str) -> str:
    if key not in a or key not in b:
        return "n/a"
    return f"{abs(a[key] - b[key]) / abs(b[key]):.2e}"


def table(records: dict, hf: dict, flops_per_step: float, peak: float) -> str:
    """The one table: time and agreement."""
    lines = [f"{'program':34s} {'step ms':>9s} {'tokens/s':>10s} {'MFU':>7s} "
             f"{'first loss':>11s} {'grad norm':>10s}  note"]

    def row(name, r):
        if "error" in r:
            return f"{name:34s} {'-':>9s} {'-':>10s} {'-':>7s} {'-':>11s} {'-':>10s}  " + \
                   r["error"][:120]
        ms = f"{r['step_ms']:.2f}" if "step_ms" in r else "-"
        tps = f"{r['tokens_per_s']:,}" if "tokens_per_s" in r else "-"
        mfu = f"{100 * r['mfu']:.1f}%" if "mfu" in r else "-"
        loss = f"{r['loss']:.6f}" if "loss" in r else "-"
        norm = f"{r['grad_norm']:.5f}" if "grad_norm" in r else "-"
        return f"{name:34s} {ms:>9s} {tps:>10s} {mfu:>7s} {loss:>11s} {norm:>10s}  " + \
            r.get("device", "")

    names = {"base_triton": "Base, Triton kernels", "base_reference": "Base, reference attention",
             "tiny_triton": "tiny, Triton kernels", "tiny_reference": "tiny, reference attention"}
    for key in ("base_triton", "base_reference", "tiny_triton", "tiny_reference"):
        if key in records:
            lines.append(row(names[key], records[key]))
    if hf:
        if "step_ms" in hf and "tokens_per_s" in hf:
            # HuggingFace's tokens/s at the project's FLOPs per token (it does more work: its
            # query stream runs over all positions).
            tokens = records.get("base_triton", {}).get("shape", {})
            per_token = flops_per_step / (tokens.get("batch_size", 16) * tokens.get("seq_len", 512))
            hf = dict(hf, mfu=hf["tokens_per_s"] * per_token / peak)
        lines.append(row(f"HuggingFace, {hf.get('mode', '')}", hf))
    tri, ref = records.get("base_triton", {}), records.get("base_reference", {})
    if "step_ms" in tri and "step_ms" in ref:
        lines.append(f"Triton kernels vs reference attention: {ref['step_ms'] / tri['step_ms']:.2f}x")
    if "step_ms" in tri and hf and "step_ms" in hf:
        lines.append(f"Triton step vs HuggingFace ({hf.get('mode')}): "
                     f"{hf['step_ms'] / tri['step_ms']:.2f}x")
    for shape in ("tiny", "base"):
        t, r = records.get(f"{shape}_triton", {}), records.get(f"{shape}_reference", {})
        lines.append(f"{shape}: first-step loss / gradient norm, Triton vs reference (relative): "
                     f"{_agreement(t, r, 'loss')} / {_agreement(t, r, 'grad_norm')}"
                     + (f"; reference vs TensorFlow on a CPU: "
                        f"{_agreement(r, dict(loss=r['tf_loss'], grad_norm=r['tf_grad_norm']), 'loss')}"
                        f" / {_agreement(r, dict(loss=r['tf_loss'], grad_norm=r['tf_grad_norm']), 'grad_norm')}"
                        if "tf_loss" in r and "loss" in r else ""))
    return "\n".join(lines)


def main(argv=None) -> int:
    args = parse_args(argv)
    peak = args.peak_tflops * 1e12
    records = {}
    for name in STEPS:
        step_dir = os.path.join(args.bundle, name)
        if not os.path.isdir(step_dir):
            print(f"step_comparison: {step_dir} is missing: `python benchmarks/"
                  f"accelerator_check.py --gpu_bundle={args.bundle}` writes it.", flush=True)
            return 2
        tiny = name.startswith("tiny")
        records[name] = run_step(step_dir, 0 if tiny else args.steps, peak,
                                 compile_it=tiny or not args.rehearse)
        print(json.dumps(records[name]), flush=True)
    base_meta = json.load(open(os.path.join(args.bundle, "base_triton", "meta.json")))
    hf = {}
    if not args.no_hf:
        hf = run_huggingface(args, base_meta["shape"])
        print(json.dumps(hf), flush=True)
    print(table(records, hf, base_meta["flops_per_step"], peak), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
