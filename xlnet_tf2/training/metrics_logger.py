"""TensorBoard scalars and the console line of a training run, and the analytic FLOP count
behind its MFU (`pretrain_step_flops`).

Every `--log_steps` steps: train/loss, train/learning_rate, train/grad_norm (means over the
steps since the last line), perf/tokens_per_sec, perf/step_time, perf/mfu; the console line
has the same numbers and an ETA. Speed counts only compiled loops: a line after nothing but the
first loop of a run or of a restart (tracing and compilation) says how long that took instead.
"""

from __future__ import annotations

import dataclasses
import os
from typing import List, Optional

import tensorflow as tf
from tensorflow.core.framework import summary_pb2

from xlnet_tf2.config import XLNetConfig
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


@dataclasses.dataclass(frozen=True)
class StepFlops:
    forward_per_example: float
    per_batch: float  # shared position projection, counted once per replica batch
    train_per_step: float  # whole global batch, forward + backward


def pretrain_step_flops(config: XLNetConfig, *, seq_len: int, num_predict: int,
                        global_batch_size: int, num_replicas: int = 1) -> StepFlops:
    """Analytic FLOPs of one training step of the graph this project runs, over the global
    batch: the MFU numerator (the denominator, a device's peak FLOP/s, is device_peak.py).

    Counted (multiply-add = 2 FLOPs), per layer, for B examples of L tokens with M memory
    positions (the model's `config.mem_len`; K = M + L keys), P predicted rows, T = K + L
    encoded relative distances, X direction groups (2 with bi_data), D width, N heads of size
    H (NH = N * H), F = d_inner, V vocabulary:

      content stream (all L rows)   q: 2 L D NH      k, v over K keys: 4 K D NH
                                    ac: 2 L K NH     bd (before rel-shift, T columns): 2 L T NH
                                    ef: 2 L 2 NH     probs . v: 2 L K NH      o: 2 L NH D
                                    feed-forward: 4 L D F
      query stream (P rows only)    q: 2 P D NH      ac: 2 P K NH   bd: 2 P T NH   ef: 2 P 2 NH
                                    probs . v: 2 P K NH   o: 2 P NH D   feed-forward: 4 P D F
      per batch (not per example)   relative-position projection r: 2 X T D NH
      LM head (P rows)              2 P D V

    Training = forward + backward = 3x forward. Element-wise work (softmax, LayerNorm, GELU,
    masks) and the embedding lookup are not counted, as is usual for MFU. A fine-tuning
    step (no memory, no query stream) is num_predict=0 with a model of mem_len 0."""
    L, M, P = seq_len, config.mem_len, num_predict
    K = M + L
    T = K + L if config.attn_type == "bi" else K + 1
    X = 2 if config.bi_data else 1
    D, NH, F, V = config.d_model, config.n_head * config.d_head, config.d_inner, config.n_token
    content = 2 * L * D * NH + 4 * K * D * NH + 2 * L * K * NH + 2 * L * T * NH \
        + 2 * L * 2 * NH + 2 * L * K * NH + 2 * L * NH * D + 4 * L * D * F
    query = 2 * P * D * NH + 2 * P * K * NH + 2 * P * T * NH + 2 * P * 2 * NH \
        + 2 * P * K * NH + 2 * P * NH * D + 4 * P * D * F
    per_example = config.n_layer * (content + query) + 2 * P * D * V
    per_batch = config.n_layer * 2 * X * T * D * NH
    train = 3.0 * (per_example * global_batch_size + per_batch * num_replicas)
    return StepFlops(float(per_example), float(per_batch), float(train))


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

    def step_time(self) -> Optional[float]:
        """Seconds per step of the compiled loops since the last line; None when every loop
        since then included tracing and compilation (the first loop of a run or of a restart),
        whose time says nothing of a step's."""
        if self._timed_steps:
            return self._timed_seconds / self._timed_steps
        return None

    def write(self, step: int) -> dict:
        if not self._pending:
            return {}
        n = len(self._pending)
        step_time = self.step_time()
        values = {
            "train/loss": sum(r["loss"] for r in self._pending) / n,
            "train/learning_rate": self._pending[-1]["learning_rate"],
            "train/grad_norm": sum(r["grad_norm"] for r in self._pending) / n,
        }
        if step_time is not None:
            values.update({"perf/step_time": step_time,
                           "perf/tokens_per_sec": self.tokens_per_step / step_time,
                           "perf/mfu": self.flops_per_step / step_time / self.peak_flops})
            speed = (f"{values['perf/tokens_per_sec']:,.0f} tok/s | step "
                     f"{step_time * 1000:.1f} ms | MFU {100 * values['perf/mfu']:.2f}% | ETA "
                     f"{format_eta((self.total_steps - step) * step_time)}")
        else:
            speed = (f"start-up and compilation {self._all_steps_seconds:.1f} s (speed from the "
                     "next line)")
        self._pending = []
        self._timed_steps, self._timed_seconds = 0, 0.0
        self._all_steps_seconds = 0.0
        line = (f"step {step:>7d}/{self.total_steps} | loss {values['train/loss']:.4f} | "
                f"lr {values['train/learning_rate']:.3g} | grad_norm {values['train/grad_norm']:.3f} | "
                f"{speed}")
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
