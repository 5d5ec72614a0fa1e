"""A time for the step on an NVIDIA H100 SXM from the program XLA compiles for it without one:
the H100 target of benchmarks/accelerator_compile.py.

Per kernel (tools/optimized_hlo.py) a roofline time max(bytes / 3.35 TB/s, matrix FLOPs /
989 TFLOP/s) + 2 us of launch and tail; their sum is the proxy. A Triton custom call (the
project's flash attention kernels) is a kernel XLA does not generate: its FLOPs are counted from
its shapes (optimized_hlo.FLASH_FLOPS), its bytes are its operands and results, and its time is
max(bytes / (TRITON_BANDWIDTH_SHARE x 3.35 TB/s), FLOPs / (TRITON_FLOPS_SHARE x 989 TFLOP/s))
+ 2 us: stated efficiencies, an assumption until a GPU measures the kernels (the proxy
overstated cuDNN's gain tenfold when it counted its calls at their bytes alone). It knows no
autotuning (the deviceless compile has no device to tune on), no overlap and no cache, so it is calibrated on
measured steps (h100_calibration.json): the predicted H100 time is ratio x proxy, with the
calibration's error bar. Compare programs of the same shape: the ratio was measured at XLNet-Base
(batch 32 gives a larger one), and it moves with the program's structure (the file's points).
"""

from __future__ import annotations

import json
import os
from typing import Iterable

from benchmarks.tools.optimized_hlo import TRITON_KIND, Kernel

BANDWIDTH = 3.35e12  # HBM3 bytes/s, H100 SXM data sheet
PEAK_FLOPS = 989e12  # dense bf16 FLOP/s, H100 SXM data sheet (xlnet_tf2/training/device_peak.py)
LAUNCH_US = 2.0
# The Triton kernels' assumed shares of the peaks (module docstring): half of dense bf16 peak,
# which published flash attention kernels reach on an H100 at head size 64-128, and 80% of HBM.
TRITON_FLOPS_SHARE = 0.5
TRITON_BANDWIDTH_SHARE = 0.8
DEVICE = "NVIDIA H100 80GB HBM3"
HERE = os.path.dirname(os.path.abspath(__file__))
TARGET_CONFIG = os.path.join(HERE, "h100_sxm.txtpb")  # XLA's h100_sxm spec, one field less
CALIBRATION = os.path.join(HERE, "h100_calibration.json")


def kernel_us(k: Kernel) -> float:
    """The kernel's roofline time per launch in microseconds (a Triton custom call's at the
    stated shares of the peaks)."""
    if k.kind == TRITON_KIND:
        return max(k.bytes / (TRITON_BANDWIDTH_SHARE * BANDWIDTH),
                   k.flops / (TRITON_FLOPS_SHARE * PEAK_FLOPS)) * 1e6 + LAUNCH_US
    return max(k.bytes / BANDWIDTH, k.flops / PEAK_FLOPS) * 1e6 + LAUNCH_US


def calibration(path: str = CALIBRATION) -> dict:
    """The calibration file's values plus `ratio`: measured / proxy of its point at `commit`
    and `ratio_batch` with the default attention (the other points are the record)."""
    with open(path) as f:
        values = json.load(f)
    point = next(p for p in values["points"] if p["commit"] == values["commit"]
                 and p["batch"] == values["ratio_batch"] and "attention" not in p)
    return dict(values, ratio=point["measured_ms"] / point["proxy_ms"])


def summary(kernels: Iterable[Kernel], flops_per_step: float, cal: dict) -> dict:
    """The proxy of a program: proxy_ms (the sum), its memory-only, matrix-only and launch
    parts, the predicted H100 time (ratio x proxy, and the error bar's ends) and the MFU the
    project's FLOPs per step would reach at it."""
    kernels = list(kernels)
    proxy_ms = sum(kernel_us(k) * k.count for k in kernels) / 1e3
    predicted = cal["ratio"] * proxy_ms
    low, high = predicted * (1 - cal["error"]), predicted * (1 + cal["error"])

    def mfu(ms: float) -> float:
        return flops_per_step / (ms / 1e3) / PEAK_FLOPS

    triton = [k for k in kernels if k.kind == TRITON_KIND]
    return {"proxy_ms": proxy_ms,
            "triton_ms": sum(kernel_us(k) * k.count for k in triton) / 1e3,
            "triton_kernels": sum(k.count for k in triton),
            "triton_flops": sum(k.flops * k.count for k in triton),
            "triton_bytes": sum(k.bytes * k.count for k in triton),
            "triton_flops_share": TRITON_FLOPS_SHARE,
            "triton_bandwidth_share": TRITON_BANDWIDTH_SHARE,
            "memory_only_ms": sum(k.bytes * k.count for k in kernels) / BANDWIDTH * 1e3,
            "matrix_only_ms": sum(k.flops * k.count for k in kernels) / PEAK_FLOPS * 1e3,
            "launch_ms": sum(k.count for k in kernels) * LAUNCH_US / 1e3,
            "ratio": cal["ratio"], "error": cal["error"],
            "calibration": f"{cal['device']}, commit {cal['commit']}, batch "
                           f"{cal['ratio_batch']}",
            "predicted_ms": predicted, "predicted_ms_range": [low, high],
            "mfu": mfu(predicted), "mfu_range": [mfu(high), mfu(low)],
            "bandwidth": BANDWIDTH, "peak_flops": PEAK_FLOPS, "launch_us": LAUNCH_US}
