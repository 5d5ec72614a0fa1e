"""Analytic FLOP count of one pretraining step of the graph this project runs, and MFU.

Counted (multiply-add = 2 FLOPs), per layer, for B examples of L tokens with M memory
positions (K = M + L keys), P predicted rows, T = K + L encoded relative distances, X direction
groups (2 with bi_data), D width, N heads of size H (NH = N * H), F = d_inner, V vocabulary:

  content stream (all L rows)   q: 2 L D NH      k, v over K keys: 4 K D NH
                                ac: 2 L K NH     bd (before rel-shift, T columns): 2 L T NH
                                ef: 2 L 2 NH     probs . v: 2 L K NH      o: 2 L NH D
                                feed-forward: 4 L D F
  query stream (P rows only)    q: 2 P D NH      ac: 2 P K NH   bd: 2 P T NH   ef: 2 P 2 NH
                                probs . v: 2 P K NH   o: 2 P NH D   feed-forward: 4 P D F
  per batch (not per example)   relative-position projection r: 2 X T D NH
  LM head (P rows)              2 P D V

Training = forward + backward = 3x forward. Element-wise work (softmax, LayerNorm, GELU,
masks) and the embedding lookup are not counted, as is usual for MFU.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import tensorflow as tf

from xlnet_tf2.config import XLNetConfig


@dataclasses.dataclass(frozen=True)
class StepFlops:
    forward_per_example: float
    per_batch: float  # shared position projection, counted once per replica batch
    train_per_step: float  # whole global batch, forward + backward


def pretrain_step_flops(config: XLNetConfig, *, seq_len: int, mem_len: int, num_predict: int,
                        global_batch_size: int, num_replicas: int = 1) -> StepFlops:
    """FLOPs of one training step over the global batch (see module doc)."""
    L, M, P = seq_len, mem_len, num_predict
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


# Dense peak FLOP/s per device for the precisions we run (vendor data sheets).
_PEAK_FLOPS = {
    # substring of the device name: {precision: FLOP/s}
    "H100": {"float32": 67e12, "mixed_bfloat16": 989e12, "mixed_float16": 989e12},
    "H200": {"float32": 67e12, "mixed_bfloat16": 989e12, "mixed_float16": 989e12},
    "A100": {"float32": 19.5e12, "mixed_bfloat16": 312e12, "mixed_float16": 312e12},
    "V100": {"float32": 15.7e12, "mixed_float16": 125e12},
    "L4": {"float32": 30.3e12, "mixed_bfloat16": 121e12, "mixed_float16": 121e12},
    "TPU v2": {"float32": 46e12 / 2, "mixed_bfloat16": 46e12 / 2},  # per core
    "TPU v3": {"float32": 123e12 / 2, "mixed_bfloat16": 123e12 / 2},  # per core
    "TPU v4": {"float32": 275e12, "mixed_bfloat16": 275e12},  # per chip (one device)
    "TPU v5 lite": {"float32": 197e12, "mixed_bfloat16": 197e12},
    "TPU v5": {"float32": 459e12, "mixed_bfloat16": 459e12},
}


def device_peak_flops(precision: str) -> Optional[float]:
    """Data-sheet peak FLOP/s of one accelerator of this machine, or None when unknown.

    GPUs are named by the driver; TPUs by the ACCELERATOR_TYPE / TPU_ACCELERATOR_TYPE
    environment variable of TPU VMs (e.g. "v4-8"). Pass --peak_tflops to override.
    """
    import os

    name = ""
    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        try:
            name = tf.config.experimental.get_device_details(gpus[0]).get("device_name", "")
        except (ValueError, RuntimeError):
            name = ""
    elif tf.config.list_logical_devices("TPU"):
        kind = os.environ.get("TPU_ACCELERATOR_TYPE", os.environ.get("ACCELERATOR_TYPE", ""))
        kind = kind.lower().replace("litepod", "lite").replace("v5e", "v5 lite")
        name = "TPU " + kind.split("-")[0]
    for key, table in _PEAK_FLOPS.items():
        if name and key.lower() in name.lower():
            return table.get(precision) or table.get("float32")
    return None


def measure_matmul_peak(dtype=tf.float32, size: int = 1024, repeats: int = 8) -> float:
    """Measured dense matmul FLOP/s of the default device: the MFU denominator on CPUs and
    unknown devices, where no data-sheet peak applies."""
    import time

    a = tf.random.stateless_normal([size, size], seed=[1, 2], dtype=dtype)
    b = tf.random.stateless_normal([size, size], seed=[3, 4], dtype=dtype)

    @tf.function
    def run(a, b):
        x = a
        for _ in range(repeats):
            x = tf.matmul(x, b) * 1e-3
        return tf.reduce_sum(x)

    run(a, b).numpy()
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        run(a, b).numpy()
        best = min(best, time.perf_counter() - start)
    return 2.0 * size ** 3 * repeats / best
