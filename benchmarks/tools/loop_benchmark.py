"""The real pretraining loop side by side with the bare step and HuggingFace's loop
(`benchmarks/benchmark.py --workloads=loop`). TensorFlow-free: the HuggingFace contender's
process imports this module and must not carry TensorFlow's memory.

Three contenders at one shape, on one corpus:
  real loop     `run_task(PretrainTask, config)` exactly as experiments/run_pretrain.py runs
                it: TFRecords prepared by create_tfrecords from a docstring corpus, tf.data,
                the masks built on the device, memory carried, dropout 0.1, bi_data, XLA,
                `steps_per_loop`, logs and checkpoints at their default cadence (a log line
                and a checkpoint at the last step) -- tools/loop_contenders.py run_real_loop;
  bare step     tools/benchmarking.py tf_pretrain_step: one jit-compiled training step on a
                fixed batch with precomputed dense masks, called back to back
                (loop_contenders.py run_bare_step);
  HF loop       benchmarks/benchmark_reference.py hf_pretrain_loop: transformers'
                XLNetLMHeadModel, torch AdamW, gradient clipping, memory carried, on the same
                batches as the real loop (their dense masks built once by masks.dense_features).

Each contender runs in a process of its own (benchmarks/benchmark_loop_worker.py), so its
peak RSS is its own, and the contenders take turns in rounds (the order rotating every round)
so that background load on a shared machine hits all of them alike; /proc/loadavg is read
around every run.

Timing: every contender runs `steps` steps in loops of `steps_per_loop` (the real loop's own
loops; the others call their step that many times). The first loop (tracing, compilation,
warm-up) is left out. "step ms" is the median over the remaining loops of the loop's time per
step (for the real loop: its tf.function call with the results on the host, the figure its log
line reports); "wall ms" is the time from the start of the second loop to the end of the run
per step, i.e. with the host work between loops, the log line and the final checkpoint.
A contender's figure is the median over the rounds; the ratios are medians of the per-round
ratios.
"""

from __future__ import annotations

import dataclasses
import json
import os
import resource
import statistics
import subprocess
import time
from typing import Callable, Dict, List, Optional, Sequence

from xlnet_tf2.config import XLNetConfig

ROLES = ("real", "bare", "huggingface")
ROLE_NAMES = {"real": "real loop (run_pretrain.py)", "bare": "bare step (tf_pretrain_step)",
              "huggingface": "HuggingFace PyTorch loop"}
RESULT_FILE = "result.json"


@dataclasses.dataclass(frozen=True)
class LoopSpec:
    """The shape, the run and the scratch directory of one loop benchmark (written to
    `spec.json` for the contenders' processes)."""

    n_layer: int
    d_model: int
    n_head: int
    d_head: int
    d_inner: int
    vocab_size: int
    batch_size: int
    seq_len: int
    reuse_len: int
    mem_len: int
    num_predict: int
    bi_data: bool
    steps: int
    steps_per_loop: int
    workdir: str
    threads: Optional[int] = None
    dropout: float = 0.1

    @property
    def data_dir(self) -> str:
        return os.path.join(self.workdir, "data")

    @property
    def model_config_path(self) -> str:
        return os.path.join(self.workdir, "xlnet_config.json")

    @property
    def dense_batches_path(self) -> str:
        return os.path.join(self.workdir, "dense_batches.npz")

    @property
    def spec_path(self) -> str:
        return os.path.join(self.workdir, "spec.json")

    @property
    def tokens_per_step(self) -> int:
        return self.batch_size * self.seq_len

    def xlnet_config(self) -> XLNetConfig:
        """The model every contender trains: this architecture at the run-time settings of
        pretraining (dropout and attention dropout 0.1, memory, bi_data)."""
        return XLNetConfig.from_dict(dict(
            n_layer=self.n_layer, d_model=self.d_model, n_head=self.n_head, d_head=self.d_head,
            d_inner=self.d_inner, n_token=self.vocab_size, dropout=self.dropout,
            dropatt=self.dropout, mem_len=self.mem_len, reuse_len=self.reuse_len,
            bi_data=self.bi_data))

    def write(self) -> str:
        os.makedirs(self.workdir, exist_ok=True)
        with open(self.spec_path, "w") as f:
            json.dump(dataclasses.asdict(self), f, indent=1, sort_keys=True)
        return self.spec_path

    @classmethod
    def read(cls, path: str) -> "LoopSpec":
        with open(path) as f:
            return cls(**json.load(f))


def peak_rss_mb() -> float:
    """This process's peak resident set size so far, in MiB: VmHWM of /proc/self/status, the
    high-water mark of the program's own memory since it started (getrusage's ru_maxrss
    would include the forking parent's RSS from before exec), else ru_maxrss."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def contender_result(loops: Sequence[dict], finished: float, **extra) -> dict:
    """The result a contender's process reports.

    Args:
      loops: one dict per loop: steps, seconds, started (time.perf_counter at its start).
      finished: time.perf_counter when the run (checkpoint included) returned.
      extra: more fields (e.g. the last loss).
    """
    if len(loops) < 2:
        raise ValueError("A contender needs at least two loops: the first one (compilation) "
                         "is not timed.")
    timed = loops[1:]
    timed_steps = sum(loop["steps"] for loop in timed)
    ends = [loop["started"] + loop["seconds"] for loop in timed]
    loop_ms = [1000.0 * loop["seconds"] / loop["steps"] for loop in timed]
    return {"loop_ms": loop_ms, "step_ms": statistics.median(loop_ms),
            "wall_ms": 1000.0 * (finished - timed[0]["started"]) / timed_steps,
            # Where the wall clock goes outside the loops: host work between them (stats to
            # the host, log lines), and after the last one (final log line, checkpoint).
            "between_loops_s": sum(loop["started"] - end
                                   for loop, end in zip(timed[1:], ends[:-1], strict=True)),
            "after_loops_s": finished - ends[-1],
            "first_loop_s": loops[0]["seconds"], "steps": sum(loop["steps"] for loop in loops),
            "peak_rss_mb": peak_rss_mb(),
            # Whether this contender's process loaded TensorFlow (HuggingFace's must not).
            "tensorflow_imported": "tensorflow" in sys.modules, **extra}


def time_loops(run_steps: Callable[[int], object], steps: int, steps_per_loop: int) -> dict:
    """Runs `run_steps(n)` for loops of `steps_per_loop` steps up to `steps` and returns
    `contender_result` of them."""
    loops = []
    for first in range(0, steps, steps_per_loop):
        n = min(steps_per_loop, steps - first)
        started = time.perf_counter()
        run_steps(n)
        loops.append({"steps": n, "seconds": time.perf_counter() - started, "started": started})
    return contender_result(loops, time.perf_counter())


def load_average() -> Optional[float]:
    """The 1-minute load average (None where /proc/loadavg does not exist)."""
    try:
        with open("/proc/loadavg") as f:
            return float(f.read().split()[0])
    except OSError:
        return None


def run_rounds(spec: LoopSpec, roles: Sequence[str], repeats: int,
               worker_command: Sequence[str], env: Optional[dict] = None,
               log: Callable[[str], None] = print) -> List[Dict[str, dict]]:
    """Runs every contender `repeats` times, each in a process of its own
    (`worker_command + ["--role=R", "--spec=...", "--output=..."]`), the order rotating every
    round. Returns one {role: result} per round; each result also holds `load_before` and
    `load_after` (1-minute load averages) and `round`."""
    spec_path = spec.write()
    rounds = []
    for r in range(repeats):
        order = [roles[(i + r) % len(roles)] for i in range(len(roles))]
        results = {}
        for role in order:
            output = os.path.join(spec.workdir, f"{role}_{r}_{RESULT_FILE}")
            load_before = load_average()
            run = subprocess.run(list(worker_command) + [f"--role={role}", f"--spec={spec_path}",
                                                         f"--output={output}"],
                                 capture_output=True, text=True, env=env)
            if run.returncode != 0:
                raise RuntimeError(f"The {ROLE_NAMES[role]} contender failed (exit "
                                   f"{run.returncode}):\n{run.stdout[-2000:]}{run.stderr[-3000:]}")
            with open(output) as f:
                result = json.load(f)
            result.update(load_before=load_before, load_after=load_average(), round=r)
            results[role] = result
            log(f"round {r + 1}/{repeats} {ROLE_NAMES[role]}: {result['step_ms']:.1f} ms/step "
                f"in its loops, {result['wall_ms']:.1f} ms/step by the wall clock ("
                f"{result['between_loops_s']:.2f} s between loops, {result['after_loops_s']:.2f}"
                f" s after them), peak RSS "
                f"{result['peak_rss_mb']:,.0f} MB; 1-min load {_load_text(result)}")
        rounds.append(results)
    return rounds


def _load_text(result: dict) -> str:
    before, after = result.get("load_before"), result.get("load_after")
    return "n/a" if before is None else f"{before:.2f} -> {after:.2f}"


def _median_ratio(rounds, numerator: str, denominator: str, key: str) -> Optional[float]:
    ratios = [r[numerator][key] / r[denominator][key] for r in rounds
              if numerator in r and denominator in r]
    return statistics.median(ratios) if ratios else None


def summarize(rounds: List[Dict[str, dict]], spec: LoopSpec, flops_per_step: float,
              peak_flops: float) -> dict:
    """Rows (one per contender: medians over the rounds) and the median per-round ratios."""
    rows = []
    for role in ROLES:
        results = [r[role] for r in rounds if role in r]
        if not results:
            continue
        step_ms = statistics.median(x["step_ms"] for x in results)
        loads = [x[k] for x in results for k in ("load_before", "load_after")
                 if x.get(k) is not None]
        rows.append({
            "contender": ROLE_NAMES[role], "role": role, "runs": len(results),
            "step_ms": step_ms, "wall_ms": statistics.median(x["wall_ms"] for x in results),
            "step_ms_runs": [x["step_ms"] for x in results],
            "tokens_per_s": spec.tokens_per_step / (step_ms / 1000.0),
            "mfu": flops_per_step / (step_ms / 1000.0) / peak_flops,
            "peak_rss_mb": max(x["peak_rss_mb"] for x in results),
            "first_loop_s": statistics.median(x["first_loop_s"] for x in results),
            "load": statistics.mean(loads) if loads else None})
    ratios = {
        "real_over_bare_step_ms": _median_ratio(rounds, "real", "bare", "step_ms"),
        "real_over_bare_wall_ms": _median_ratio(rounds, "real", "bare", "wall_ms"),
        "huggingface_over_real_step_ms": _median_ratio(rounds, "huggingface", "real", "step_ms"),
        "huggingface_over_real_wall_ms": _median_ratio(rounds, "huggingface", "real", "wall_ms")}
    return {"rows": rows, "ratios": ratios, "flops_per_step": flops_per_step,
            "peak_flops": peak_flops}


def format_summary(summary: dict, spec: LoopSpec) -> str:
    """The loop table and its ratio lines, self-explanatory for a rerun on a quiet machine."""
    ratios = summary["ratios"]
    lines = [
        f"loop workload: {spec.n_layer} layers, d_model {spec.d_model}, batch {spec.batch_size}, "
        f"seq {spec.seq_len}, memory {spec.mem_len}, {spec.num_predict} predictions, "
        f"bi_data {spec.bi_data}, dropout {spec.dropout}, {spec.vocab_size}-piece vocabulary, "
        f"{spec.steps} steps in loops of {spec.steps_per_loop} (the first loop not timed); MFU "
        f"against {summary['peak_flops'] / 1e9:.0f} GFLOP/s (the peak the training loop uses), "
        f"{summary['flops_per_step'] / 1e9:.2f} GFLOP per step",
        "| contender | step ms (in its loops) | step ms (wall clock) | tokens/s | MFU | "
        "peak RSS MB | first loop s | runs | mean 1-min load |",
        "|---|---|---|---|---|---|---|---|---|"]
    for r in summary["rows"]:
        load = "n/a" if r["load"] is None else f"{r['load']:.1f}"
        lines.append(f"| {r['contender']} | {r['step_ms']:.1f} | {r['wall_ms']:.1f} | "
                     f"{r['tokens_per_s']:,.0f} | {100 * r['mfu']:.1f}% | "
                     f"{r['peak_rss_mb']:,.0f} | {r['first_loop_s']:.1f} | {r['runs']} | "
                     f"{load} |")
    if ratios["real_over_bare_step_ms"] is not None:
        lines.append(f"real loop / bare step, time per step: {ratios['real_over_bare_step_ms']:.3f}"
                     f" in the loops, {ratios['real_over_bare_wall_ms']:.3f} by the wall clock "
                     "(target <= 1.05)")
    if ratios["huggingface_over_real_step_ms"] is not None:
        lines.append(f"real loop speed / HuggingFace loop speed: "
                     f"{ratios['huggingface_over_real_step_ms']:.2f}x in the loops, "
                     f"{ratios['huggingface_over_real_wall_ms']:.2f}x by the wall clock "
                     "(target >= 2)")
    return "\n".join(lines)
