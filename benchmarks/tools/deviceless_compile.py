"""benchmarks/accelerator_compile.py: an exported step (benchmarks/accelerator_check.py
--export_step) compiled for an accelerator this machine does not have, and what the compiled
program says.

1. The venv: the compile runs in a separate Python with JAX and the accelerator's compiler
   (scripts/setup_accelerator_compile.sh makes them): for --target=h100 JAX's CUDA plugin, for
   the TPU targets libtpu. `accelerator_python` finds it: --venv, else the environment
   variable XLNET_TF2_AOT_GPU_VENV / XLNET_TF2_AOT_TPU_VENV, else .venv-aot-gpu /
   .venv-aot-tpu in the checkout; for a TPU target, failing those, this Python when it has
   jaxlib and libtpu (the project's .venv with the `test` extra has them). A missing venv is
   one line naming the script that makes it.
2. The compile: tools/deviceless_worker.py in that Python, with the environment that lets the
   plugin start without a device; it writes the optimized program's HLO text and the compile
   record (memory, libtpu's cost analysis, or libtpu's refusal when the program does not fit
   HBM).
3. The analysis, here: the program's kernels (tools/optimized_hlo.py), what each computes
   (tools/kernel_parts.py), the H100 proxy (tools/h100_proxy.py) or libtpu's HBM fit and cycle
   estimates (tools/tpu_estimate.py), grouped into tables; `format_report` prints them.
"""

from __future__ import annotations

import collections
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional

from xlnet_tf2 import fileio
from xlnet_tf2.config import XLNetConfig
from xlnet_tf2.config_flags import RunConfigError
from benchmarks.tools import h100_proxy, tpu_estimate
from benchmarks.tools.kernel_parts import StepShape, direction, part, short_op_name
from benchmarks.tools.optimized_hlo import Kernel, kernels

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TARGETS = ("h100",) + tuple(tpu_estimate.CHIPS)
VENV_DIRS = {"gpu": ".venv-aot-gpu", "tpu": ".venv-aot-tpu"}
VENV_VARIABLES = {"gpu": "XLNET_TF2_AOT_GPU_VENV", "tpu": "XLNET_TF2_AOT_TPU_VENV"}
# What the plugins need to start on a machine without the device. libtpu takes a lock file in
# /tmp that a second process waits on or fails at; a compile-only client shares no device, so
# two compiles (two users, or a test beside a run) may go at once. TPU_ACCELERATOR_TYPE is left
# unset (libtpu warns that it cannot tell which TPU host it is on): with it set to "v4-8",
# libtpu 0.0.30 aborts in the v4 program's cost analysis looking for a chip-config file.
_GPU_ENV = {"CUDA_VISIBLE_DEVICES": "-1", "JAX_SKIP_CUDA_CONSTRAINTS_CHECK": "1"}
_TPU_ENV = {"JAX_PLATFORMS": "cpu", "TPU_SKIP_MDS_QUERY": "1",
            "TPU_WORKER_HOSTNAMES": "localhost", "ALLOW_MULTIPLE_LIBTPU_LOAD": "1"}


class AcceleratorCompileError(RunConfigError):
    """The step, the venv or the compile is not usable; the message says what to do."""


def say(line: str) -> None:
    print(f"[accelerator_compile] {line}", flush=True)


def venv_kind(target: str) -> str:
    return "gpu" if target == "h100" else "tpu"


def _has_libtpu() -> bool:
    return all(importlib.util.find_spec(m) is not None for m in ("jaxlib", "libtpu"))


def accelerator_python(target: str, venv: Optional[str] = None,
                       environ: Optional[Dict[str, str]] = None) -> str:
    """The Python that compiles for `target` (see the module docstring, 1.)."""
    environ = os.environ if environ is None else environ
    kind = venv_kind(target)
    variable = VENV_VARIABLES[kind]
    chosen = venv or environ.get(variable)
    path = os.path.abspath(chosen or os.path.join(ROOT, VENV_DIRS[kind]))
    python = os.path.join(path, "bin", "python")
    if os.path.exists(python):
        return python
    if not chosen and kind == "tpu" and _has_libtpu():
        return sys.executable
    where = (f"--venv={venv}" if venv else f"{variable}={chosen}" if chosen
             else f"{path} (the default; --venv or {variable} name another)")
    raise AcceleratorCompileError(
        f"no {kind.upper()} compile venv at {where}: `bash "
        f"scripts/setup_accelerator_compile.sh {kind}` creates it.")


def worker_target(target: str) -> dict:
    if target == "h100":
        return {"platform": "cuda"}
    chip = tpu_estimate.CHIPS[target]
    return {"platform": "tpu", "topology": chip.topology, "chip_config": chip.chip_config}


def worker_env(target: str, environ: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    env = dict(os.environ if environ is None else environ)
    env.update(_GPU_ENV if target == "h100" else _TPU_ENV)
    if target != "h100":
        env.pop("TPU_ACCELERATOR_TYPE", None)
    env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def read_step(step_dir: str) -> dict:
    """meta.json of an export, checked: the step's HLO is there."""
    hlo = os.path.join(step_dir, "step.hlo.pb")
    meta_path = os.path.join(step_dir, "meta.json")
    fix = "pass a directory written by benchmarks/accelerator_check.py --export_step=DIR"
    if not os.path.isdir(step_dir):
        raise AcceleratorCompileError(f"STEP_DIR {step_dir} is not a directory: {fix}.")
    for path in (hlo, meta_path):
        if not os.path.isfile(path):
            raise AcceleratorCompileError(f"{path} is missing: {fix}.")
    try:
        with open(meta_path) as f:
            meta = json.load(f)
        meta["shape"]["batch_size"], meta["flops_per_step"]  # noqa: B018 - present?
    except (ValueError, KeyError, TypeError) as e:
        raise AcceleratorCompileError(f"{meta_path} is not an export's meta.json ({e!r}): "
                                      f"{fix}.") from None
    return meta


def step_shape(meta: dict) -> StepShape:
    s = meta["shape"]
    config = XLNetConfig.resolve(s["model_config"])
    return StepShape(batch=s["batch_size"], seq_len=s["seq_len"], mem_len=s["mem_len"],
                     num_predict=s["num_predict"], n_head=config.n_head)


def compile_in_venv(target: str, step_dir: str, python: str, workdir: str) -> dict:
    """Runs tools/deviceless_worker.py; returns its compile record, with `optimized_hlo`
    (the text) unless the compiler refused the program."""
    command = [python, "-m", "benchmarks.tools.deviceless_worker",
               f"--target={json.dumps(worker_target(target))}",
               f"--hlo={os.path.join(step_dir, 'step.hlo.pb')}", f"--out={workdir}"]
    if target == "h100":
        command.append(f"--gpu_config={h100_proxy.TARGET_CONFIG}")
    run = subprocess.run(command, cwd=ROOT, env=worker_env(target), capture_output=True,
                         text=True)
    record_path = os.path.join(workdir, "compile.json")
    if run.returncode != 0 or not os.path.isfile(record_path):
        last = [line for line in run.stderr.strip().splitlines() if line.strip()][-1:] or [
            f"exit status {run.returncode}"]
        raise AcceleratorCompileError(f"the {target} compile in {python} failed: {last[0]}")
    with open(record_path) as f:
        record = json.load(f)
    text_path = os.path.join(workdir, "optimized.hlo.txt")
    if os.path.isfile(text_path):
        with open(text_path) as f:
            record["optimized_hlo"] = f.read()
    return record


def kernel_us(target: str, k: Kernel) -> float:
    """The target's time for one launch of the kernel: the H100 proxy, or libtpu's cycles at
    the chip's clock."""
    if target == "h100":
        return h100_proxy.kernel_us(k)
    return tpu_estimate.kernel_us(k, tpu_estimate.CHIPS[target])


def _group(rows: List[dict], keys) -> List[dict]:
    """The kernels' rows summed by `keys` (kernels, bytes, FLOPs, ms), the costliest first."""
    groups: Dict[tuple, dict] = {}
    for r in rows:
        key = tuple(r[k] for k in keys)
        g = groups.setdefault(key, dict(zip(keys, key), kernels=0, bytes=0, flops=0, ms=0.0))
        for field in ("kernels", "bytes", "flops", "ms"):
            g[field] = None if r[field] is None else g[field] + r[field]
    return sorted(groups.values(), key=lambda g: (-g["ms"], -g["bytes"]))


def analyse(target: str, meta: dict, record: dict, top: int = 15) -> dict:
    """The report's values from a compile record (see `format_report`)."""
    shape = step_shape(meta)
    report = {"target": target, "device": record.get("device_kind"),
              "versions": record.get("versions"), "compile_s": record.get("compile_s"),
              "shape": meta["shape"], "precision": meta.get("precision"),
              "export_target": meta.get("target"), "flops_per_step": meta["flops_per_step"],
              "memory": record.get("memory")}
    text = record.get("optimized_hlo", "")
    found = kernels(text) if text else []
    rows = []
    for k in found:
        rows.append({"part": part(k, shape), "dir": direction(k),
                     "op_name": short_op_name(k.op_name), "kind": k.kind, "shape": k.shape,
                     "kernels": k.count, "bytes": k.bytes * k.count,
                     "flops": k.flops * k.count, "ms": kernel_us(target, k) * k.count / 1e3})
    report.update(kernels=sum(k.count for k in found),
                  fusions=sum(k.count for k in found if k.opcode == "fusion"),
                  bytes=sum(r["bytes"] for r in rows), flops=sum(r["flops"] for r in rows))
    if target == "h100":
        report["h100"] = h100_proxy.summary(found, meta["flops_per_step"],
                                            h100_proxy.calibration())
    else:
        # libtpu writes batched matrix products as convolutions whose windows, padding and
        # dilation stand for batch dimensions: their FLOPs are libtpu's cost analysis's to
        # count, not this reading's; and a TPU kernel's operands include what moves through
        # VMEM, so the bytes that reach HBM are libtpu's count too.
        cost = record.get("cost_analysis") or {}
        report.update(flops=cost.get("flops"), bytes=cost.get("bytes accessed"))
        for r in rows:
            r["flops"] = None
        report["tpu"] = tpu_estimate.summary(found, record, tpu_estimate.CHIPS[target],
                                             meta["flops_per_step"], text)
    report["parts"] = _group(rows, ("part", "dir"))
    report["part_totals"] = _group(rows, ("part",))
    report["kinds"] = _group(rows, ("kind",))
    report["top_classes"] = _group(rows, ("part", "dir", "op_name", "kind", "shape"))[:top]
    return report


def check_generation(step_dir: str, meta: dict, target: str) -> None:
    """A step whose Pallas kernels (tpu_custom_calls) were written for a v5e or newer holds a
    strided rotate a v4 lacks: refused for tpu_v4 in one line before libtpu refuses it."""
    generation = meta.get("tpu_generation")
    if target != "tpu_v4" or generation in (None, "v4"):
        return
    with open(os.path.join(step_dir, "step.hlo.pb"), "rb") as f:
        if b"tpu_custom_call" not in f.read():
            return
    raise AcceleratorCompileError(
        f"{step_dir}'s Pallas attention kernels were written for a TPU {generation} (a strided "
        "rotate a v4 lacks): export the step with --tpu_generation=v4 to compile it for "
        "tpu_v4.")


def run(step_dir: str, target: str, venv: Optional[str] = None, top: int = 15,
        save_hlo: Optional[str] = None) -> dict:
    """Steps 1-3 of the module docstring; the report's values."""
    step_dir = os.path.abspath(step_dir)
    meta = read_step(step_dir)
    python = accelerator_python(target, venv)
    check_generation(step_dir, meta, target)
    device = "an H100" if target == "h100" else f"one {tpu_estimate.CHIPS[target].device} chip"
    say(f"compiling {step_dir}/step.hlo.pb for {device} in {python} (XLNet-Base takes "
        "minutes)")
    workdir = tempfile.mkdtemp(prefix="accelerator_compile_")
    start = time.perf_counter()
    try:
        record = compile_in_venv(target, step_dir, python, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if save_hlo and "optimized_hlo" in record:
        fileio.write_atomically(save_hlo, record["optimized_hlo"].encode())
    say(f"compiled in {time.perf_counter() - start:.0f} s; analysing the program")
    report = analyse(target, meta, record, top)
    report["step_dir"] = step_dir
    return report


# ------------------------------------------------------------------------------- the report
def _gb(n: float) -> str:
    return f"{n / 1e9:,.1f} GB" if n >= 1e9 else f"{n / 1e6:,.2f} MB"


def _gib(n: float) -> str:
    return f"{n / tpu_estimate.GIB:.2f}"


def _shape_text(r: dict) -> str:
    s = r["shape"]
    return (f"model {s['model_config']}, batch {s['batch_size']}, seq {s['seq_len']}, memory "
            f"{s['mem_len']}, {s['num_predict']} predictions; {r['precision']}; traced for "
            f"{(r.get('export_target') or '?').upper()}")


def _table(rows: List[dict], keys, total_ms: float, label: str, limit: int = 0,
           traffic: bool = True) -> List[str]:
    """A table of grouped kernels: time, share, launches, then (with `traffic`) GB and GFLOP,
    then the `keys` columns (name, width)."""
    head = "  ".join(f"{k:<{w}}" for k, w in keys)
    lines = [f"{label}:", f"  {'ms':>8} {'share':>6} {'kernels':>7} "
             + (f"{'GB':>7} {'GFLOP':>8}  " if traffic else " ") + head]
    for r in rows[:limit or len(rows)]:
        share = 100 * r["ms"] / total_ms if total_ms else 0.0
        cells = "  ".join(f"{str(r[k])[:w]:<{w}}" for k, w in keys)
        lines.append(f"  {r['ms']:8.2f} {share:5.1f}% {r['kernels']:7,d} "
                     + (f"{r['bytes'] / 1e9:7.2f} {r['flops'] / 1e9:8.1f}  " if traffic else " ")
                     + cells.rstrip())
    return lines


def format_report(r: dict) -> str:
    """The report's text: the compile, the totals, the target's figures, then the time by part
    of the model (and direction), by kind of kernel, and the top kernel classes (one op of
    every layer summed)."""
    versions = ", ".join(f"{k} {v}" for k, v in (r.get("versions") or {}).items())
    lines = [f"{r.get('step_dir', 'step')} ({_shape_text(r)})",
             f"compiled for {r['device']} ({r['target']}) by {versions} in "
             f"{r['compile_s']:.0f} s"]
    tpu = r.get("tpu")
    if tpu is not None and not tpu["fits"]:
        if "needs_bytes" in tpu:
            lines.append(f"does not fit: needs {_gib(tpu['needs_bytes'])} of "
                         f"{_gib(tpu['available_bytes'])} GiB (libtpu refuses the program; the "
                         f"chip has {_gib(tpu['hbm_bytes'])} GiB of HBM)")
        else:
            lines.append(f"refused by libtpu: {tpu['error'][:400]}")
        return "\n".join(lines)
    counted = f"the project counts {r['flops_per_step'] / 1e12:.3f} T per step"
    if "h100" in r:
        lines.append(f"kernels {r['kernels']:,} ({r['fusions']:,} fusions); bytes (operands + "
                     f"outputs of each) {_gb(r['bytes'])}; matrix FLOPs "
                     f"{r['flops'] / 1e12:.3f} T ({counted})")
        h = r["h100"]
        low, high = h["predicted_ms_range"]
        lines += [
            f"H100 proxy {h['proxy_ms']:.2f} ms = sum over kernels of max(bytes / "
            f"{h['bandwidth'] / 1e12:.2f} TB/s, FLOPs / {h['peak_flops'] / 1e12:.0f} TFLOP/s) + "
            f"{h['launch_us']:g} us (memory alone {h['memory_only_ms']:.2f} ms, matrices alone "
            f"{h['matrix_only_ms']:.2f} ms, launches {h['launch_ms']:.2f} ms)",
            *([f"of which {h['triton_kernels']} Triton custom calls {h['triton_ms']:.2f} ms "
               f"({h['triton_flops'] / 1e12:.3f} TFLOP counted from their shapes, "
               f"{_gb(h['triton_bytes'])}) at ASSUMED efficiencies "
               f"{100 * h['triton_flops_share']:.0f}% of peak FLOPs, "
               f"{100 * h['triton_bandwidth_share']:.0f}% of HBM bandwidth (no GPU has "
               "measured the kernels)"] if h["triton_kernels"] else []),
            f"predicted H100 step {h['predicted_ms']:.1f} ms (+-{100 * h['error']:.0f}%: "
            f"{low:.1f}-{high:.1f} ms) = {h['ratio']:.3f} x proxy, the ratio of measured to "
            f"proxy time of a calibration step ({h['calibration']}); MFU "
            f"{100 * h['mfu']:.1f}% ({100 * h['mfu_range'][0]:.1f}-"
            f"{100 * h['mfu_range'][1]:.1f}%) of {h['peak_flops'] / 1e12:.0f} TFLOP/s"]
        total, unit = h["proxy_ms"], "H100 proxy"
    else:
        m, cost = r["memory"], tpu["cost_analysis"]
        lines.append(
            f"kernels {r['kernels']:,} top-level ops ({r['fusions']:,} fusions, "
            f"{tpu['kernels_with_cycles']:,} with a cycle estimate); FLOPs "
            f"{(r['flops'] or 0) / 1e12:.3f} T and bytes accessed {_gb(r['bytes'] or 0)} by "
            f"libtpu's cost analysis ({counted})")
        over = (" (libtpu compiled it, so it fits: near the limit the statistics' sum exceeds "
                "the chip's HBM)" if tpu["needs_bytes"] > tpu["hbm_bytes"] else "")
        lines.append(
            f"fits HBM{over}: needs {_gib(tpu['needs_bytes'])} of {_gib(tpu['hbm_bytes'])} GiB "
            f"(arguments {_gib(m['argument'])}, outputs not aliased to them "
            f"{_gib(m['output'] - m['alias'])}, temporaries {_gib(m['temp'])}, code "
            f"{_gib(m['generated_code'])} GiB)")
        if "optimal_seconds" in cost:
            corrected = cost.get("optimal_seconds_corrected")
            lines.append(
                f"libtpu's optimal_seconds {cost['optimal_seconds']:.4g}"
                + (f" ({corrected:.4g} with its {tpu['uncosted_custom_calls']} uncosted custom "
                   "calls' -1 each added back)" if tpu["uncosted_custom_calls"] else ""))
        mfu = tpu["serial_mfu"]
        libtpu_ms = tpu["serial_ms"] - tpu["pallas_ms"]
        lines.append(
            f"libtpu's estimated cycles, summed: "
            f"{tpu['estimated_cycles']:,.0f} = {libtpu_ms:.1f} ms at "
            f"{tpu['clock_ghz']:g} GHz (serial, no overlap: an estimate, not a measurement)")
        if tpu["pallas_kernels"]:
            lines.append(
                f"plus {tpu['pallas_kernels']} Pallas custom calls, which libtpu gives no "
                f"cycles: {tpu['pallas_ms']:.2f} ms for their {tpu['pallas_flops'] / 1e12:.3f} "
                f"TFLOP and {_gb(tpu['pallas_bytes'])} at ASSUMED shares "
                f"{100 * tpu['pallas_flops_share']:.0f}% of peak FLOPs, "
                f"{100 * tpu['pallas_bandwidth_share']:.0f}% of "
                f"{tpu['hbm_bandwidth'] / 1e9:.0f} GB/s (no TPU has timed the kernels)")
        lines.append(
            f"step: {tpu['cycles_equivalent']:,.0f} cycles-equivalent = "
            f"{tpu['serial_ms']:.1f} ms"
            + (f"; MFU at that time {100 * mfu:.1f}% of {tpu['peak_flops'] / 1e12:.0f} "
               "TFLOP/s" if mfu else ""))
        total, unit = tpu["serial_ms"], "libtpu's cycles"
    traffic = "h100" in r  # a TPU's FLOPs and HBM bytes are libtpu's totals only
    lines += [""] + _table(r["part_totals"], [("part", 40)], total,
                           f"time by part of the model ({unit})", traffic=traffic)
    lines += [""] + _table(r["parts"], [("part", 40), ("dir", 4)], total,
                           "by part and direction (fwd, bwd, opt)", traffic=traffic)
    lines += [""] + _table(r["kinds"], [("kind", 30)], total, "by kind of kernel", 12,
                           traffic=traffic)
    lines += [""] + _table(r["top_classes"], [("dir", 4), ("part", 28), ("shape", 28),
                                              ("op_name", 60)], total,
                           "top kernel classes (the same op of every layer summed)",
                           traffic=traffic)
    return "\n".join(lines)
