"""TensorBoard scalars and the console line of a pretraining run.

Every `--log_steps` steps: train/loss, train/learning_rate, train/grad_norm (means over the
steps since the last line), perf/tokens_per_sec, perf/step_time, perf/mfu; the console line
has the same numbers and an ETA. Throughput excludes the first loop (tracing and compilation).
"""

from __future__ import annotations

import os
from typing import List

import tensorflow as tf
from tensorflow.core.framework import summary_pb2

from xlnet_tf2.progress import format_eta

# tf.summary.scalar lives in the tensorboard package, which training does not need; writing
# the summary with TensorBoard's "scalars" plugin metadata gives the same event records.
_SCALAR_METADATA = summary_pb2.SummaryMetadata(
    plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars"))


def summary_writer(model_dir: str, name: str, enabled: bool = True):
    """TensorBoard's writer for model_dir/<name> ("train", "eval"); None when not enabled (a
    worker other than the chief writes no summaries)."""
    return tf.summary.create_file_writer(os.path.join(model_dir, name)) if enabled else None


def write_scalar(name: str, value: float, step: int) -> None:
    tf.summary.write(name, tf.constant(value, tf.float32), step=step, metadata=_SCALAR_METADATA)


class MetricsLogger:
    def __init__(self, model_dir: str, *, enabled: bool, total_steps: int, tokens_per_step: int,
                 flops_per_step: float, peak_flops: float):
        self.enabled = enabled
        self.total_steps = total_steps
        self.tokens_per_step = tokens_per_step
        self.flops_per_step = flops_per_step
        self.peak_flops = peak_flops
        self.writer = summary_writer(model_dir, "train", enabled)
        self._pending: List[dict] = []
        self._timed_steps = 0
        self._timed_seconds = 0.0
        self._all_steps_seconds = 0.0
        self.last_line = None

    def record_loop(self, step: int, records: List[dict], seconds: float, compiled: bool) -> None:
        """`compiled`: this loop included tracing/compilation and is left out of throughput."""
        self._pending.extend(records)
        self._all_steps_seconds += seconds
        if not compiled:
            self._timed_steps += len(records)
            self._timed_seconds += seconds

    def step_time(self) -> float:
        if self._timed_steps:
            return self._timed_seconds / self._timed_steps
        return self._all_steps_seconds / max(len(self._pending), 1)

    def write(self, step: int) -> dict:
        if not self._pending:
            return {}
        n = len(self._pending)
        step_time = self.step_time()
        values = {
            "train/loss": sum(r["loss"] for r in self._pending) / n,
            "train/learning_rate": self._pending[-1]["learning_rate"],
            "train/grad_norm": sum(r["grad_norm"] for r in self._pending) / n,
            "perf/step_time": step_time,
            "perf/tokens_per_sec": self.tokens_per_step / step_time,
            "perf/mfu": self.flops_per_step / step_time / self.peak_flops,
        }
        self._pending = []
        self._timed_steps, self._timed_seconds = 0, 0.0
        self._all_steps_seconds = 0.0
        eta = format_eta((self.total_steps - step) * step_time)
        line = (f"step {step:>7d}/{self.total_steps} | loss {values['train/loss']:.4f} | "
                f"lr {values['train/learning_rate']:.3g} | grad_norm {values['train/grad_norm']:.3f} | "
                f"{values['perf/tokens_per_sec']:,.0f} tok/s | step {step_time * 1000:.1f} ms | "
                f"MFU {100 * values['perf/mfu']:.2f}% | ETA {eta}")
        self.last_line = line
        if self.enabled:
            print(line, flush=True)
            with self.writer.as_default(step=step):
                for name, value in values.items():
                    write_scalar(name, value, step)
            self.writer.flush()
        return values

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
