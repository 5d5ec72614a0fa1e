"""Peak FLOP/s of the device a run uses: the MFU denominator.

Data-sheet peaks of known accelerators (TPU v2-v6e; NVIDIA V100, A100, H100/H200, L4, L40S) by
precision class, a CPU's peak derived from its vector units and clock (/proc/cpuinfo), and a
measured dense-matmul throughput for an accelerator missing from the table.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Optional

import tensorflow as tf


# ---------------------------------------------------------------------------------------------
# Accelerator peaks: dense (no 2:4 sparsity) data-sheet FLOP/s, per *chip*, by precision class:
#   "fp32"  plain float32 on CUDA cores (float32 matmuls with TF32 disabled),
#   "tf32"  float32 matmuls on Tensor Cores (TF's default on Ampere and later),
#   "16bit" bfloat16 / float16 Tensor Core (GPU) or MXU (TPU) matmuls.
# TPUs run float32 matmuls on the bf16 MXU at default precision, so every TPU class is the bf16
# peak. Sources (checked Nov 2026):
#   TPU v2  45 TFLOPs/chip bf16, 2 TensorCores    cloud.google.com/tpu/docs/v2
#   TPU v3  123 TFLOPs/chip bf16, 2 TensorCores   cloud.google.com/tpu/docs/v3
#   TPU v4  275 TFLOPs/chip bf16 (megacore)       cloud.google.com/tpu/docs/v4
#   TPU v5e 197 TFLOPs/chip bf16, 1 TensorCore    cloud.google.com/tpu/docs/v5e
#   TPU v5p 459 TFLOPs/chip bf16 (megacore)       cloud.google.com/tpu/docs/v5p
#   TPU v6e 918 TFLOPs/chip bf16, 1 TensorCore    cloud.google.com/tpu/docs/v6e
#   A100 (SXM and PCIe)  FP32 19.5, TF32 156, BF16/FP16 312       NVIDIA A100 datasheet
#   H100 SXM (and H200)  FP32 67, TF32 494.5, BF16/FP16 989.5     NVIDIA H100 / H200 datasheets
#                        (the sheets print 989 / 1979 "with sparsity"; dense is half)
#   H100 PCIe            FP32 51, TF32 378, BF16/FP16 756.5        NVIDIA H100 datasheet
#   H100 NVL             FP32 60, TF32 417.5, BF16/FP16 835.5     NVIDIA H100 datasheet
#   L4                   FP32 30.3, TF32 60, BF16/FP16 121        NVIDIA L4 datasheet
#   L40S                 FP32 91.6, TF32 183, BF16/FP16 362.05    NVIDIA L40S datasheet
#   V100 SXM2 / PCIe     FP32 15.7 / 14, FP16 125 / 112, no TF32 or BF16 units  NVIDIA V100 sheet
# ---------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class AcceleratorPeak:
    name: str
    fp32: float
    tf32: Optional[float]      # None: no TF32 Tensor Cores (float32 runs at fp32)
    bf16: Optional[float]      # None: no bfloat16 matrix units (runs at fp32)
    fp16: float
    devices_per_chip: int = 1  # TensorFlow devices (replicas) per chip: 2 for TPU v2/v3 cores

    def per_device(self, precision: str, tf32_enabled: bool = True) -> float:
        """Peak FLOP/s of one TensorFlow device for a `--precision` value."""
        if precision == "mixed_bfloat16":
            chip = self.bf16 if self.bf16 is not None else self.fp32
        elif precision == "mixed_float16":
            chip = self.fp16
        elif precision == "float32":
            chip = self.tf32 if (tf32_enabled and self.tf32 is not None) else self.fp32
        else:
            raise ValueError(f"unknown precision {precision!r}")
        return chip / self.devices_per_chip


def _tpu(name, per_chip, devices_per_chip):
    return AcceleratorPeak(name, per_chip, per_chip, per_chip, per_chip, devices_per_chip)


T = 1e12
ACCELERATORS = {
    "TPU v2": _tpu("TPU v2", 45 * T, 2),
    "TPU v3": _tpu("TPU v3", 123 * T, 2),
    "TPU v4": _tpu("TPU v4", 275 * T, 1),
    "TPU v5e": _tpu("TPU v5e", 197 * T, 1),
    "TPU v5p": _tpu("TPU v5p", 459 * T, 1),
    "TPU v6e": _tpu("TPU v6e", 918 * T, 1),
    "A100": AcceleratorPeak("A100", 19.5 * T, 156 * T, 312 * T, 312 * T),
    "H100": AcceleratorPeak("H100", 67 * T, 494.5 * T, 989.5 * T, 989.5 * T),
    "H100 PCIe": AcceleratorPeak("H100 PCIe", 51 * T, 378 * T, 756.5 * T, 756.5 * T),
    "H100 NVL": AcceleratorPeak("H100 NVL", 60 * T, 417.5 * T, 835.5 * T, 835.5 * T),
    "H200": AcceleratorPeak("H200", 67 * T, 494.5 * T, 989.5 * T, 989.5 * T),
    "L4": AcceleratorPeak("L4", 30.3 * T, 60 * T, 121 * T, 121 * T),
    "L40S": AcceleratorPeak("L40S", 91.6 * T, 183 * T, 362.05 * T, 362.05 * T),
    "V100": AcceleratorPeak("V100", 15.7 * T, None, None, 125 * T),
    "V100 PCIe": AcceleratorPeak("V100 PCIe", 14 * T, None, None, 112 * T),
}
del T


def tpu_key(accelerator_type: str) -> Optional[str]:
    """Table key of a TPU from its accelerator type ("v5litepod-16", "v3-8", "v6e-8") or device
    kind ("TPU v5 lite", "TPU v4"); None when unknown."""
    kind = accelerator_type.strip().lower()
    kind = kind[4:] if kind.startswith("tpu ") else kind
    kind = kind.split("-")[0].replace(" ", "")
    aliases = {"v2": "v2", "v3": "v3", "v4": "v4", "v5litepod": "v5e", "v5lite": "v5e",
               "v5e": "v5e", "v5p": "v5p", "v5": "v5p", "v6e": "v6e", "v6lite": "v6e"}
    return f"TPU {aliases[kind]}" if kind in aliases else None


def gpu_key(device_name: str) -> Optional[str]:
    """Table key of an NVIDIA GPU from its driver name, matching the model exactly ("NVIDIA L4"
    is an L4, "NVIDIA L40S" an L40S; "NVIDIA H100 80GB HBM3" the SXM H100); None when unknown."""
    words = re.split(r"[\s\-_]+", device_name.strip())
    words = [w for w in words if w.upper() not in ("NVIDIA", "TESLA")]
    if not words:
        return None
    model = words[0].upper()
    upper = {w.upper() for w in words[1:]}
    if model == "H100":
        return "H100 NVL" if "NVL" in upper else "H100 PCIe" if "PCIE" in upper else "H100"
    if model == "V100":
        return "V100 PCIe" if "PCIE" in upper else "V100"
    for key in ("A100", "H200", "L4", "L40S"):
        if model == key:
            return key
    return None


def accelerator_peak_flops(name: str, precision: str, *, tf32_enabled: bool = True
                           ) -> Optional[float]:
    """Per-device dense peak of an accelerator given its GPU driver name or TPU type; None
    when the name is not in the table."""
    key = tpu_key(name) if (name.lower().startswith("tpu") or re.match(r"v\d", name.lower())) \
        else gpu_key(name)
    return ACCELERATORS[key].per_device(precision, tf32_enabled) if key else None


# ---------------------------------------------------------------------------------------------
# CPU peak, derived from the hardware instead of measured (a measurement depends on the load of
# the machine at start-up and moves by a factor of two between runs on a shared VM, see
# BENCHMARKS.md#figures-behind-choices-in-the-code):
#
#   peak FLOP/s = cores x clock x float32 lanes per vector x 2 (multiply + add) x FMA units
#
#   ISA (from /proc/cpuinfo flags)   lanes  units  FLOPs/cycle/core
#   AVX-512 (avx512f), Intel           16     2        64   (1 unit on Xeon Bronze/Silver and
#                                                            Skylake/Cascade Lake Gold 51xx/52xx)
#   AVX-512, AMD Zen 4 (family 25)      8     2        32   (512-bit ops run on 2 x 256-bit pipes)
#   AVX-512, AMD Zen 5 (family 26)     16     2        64
#   AVX2 + FMA                           8     2        32
#   AVX without FMA                      8     1        16   (one add and one multiply port)
#   SSE2                                 4     1         8
#
# cores: physical cores (hyper-threads share the FMA units), capped by the CPUs this process may
# use (affinity mask and cgroup quota). clock: the nominal frequency in the model name ("@
# 2.20GHz"), else the largest "cpu MHz" (turbo clocks can exceed it, so a tiny matmul on an
# idle machine can beat this peak by up to the turbo ratio). The same peak is used for every
# precision: bfloat16 on CPUs (AVX512_BF16/AMX) is not what the MFU of these runs is about.
# ---------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class CpuInfo:
    vendor: str
    family: int
    model_name: str
    flags: frozenset
    physical_cores: int
    mhz: float


def read_cpu_info(text: Optional[str] = None) -> CpuInfo:
    """Parses /proc/cpuinfo (or `text` in its format)."""
    if text is None:
        with open("/proc/cpuinfo") as f:
            text = f.read()
    processors = [dict(line.split(":", 1) for line in block.splitlines() if ":" in line)
                  for block in text.strip().split("\n\n") if block.strip()]
    processors = [{k.strip(): v.strip() for k, v in p.items()} for p in processors]
    first = processors[0]
    cores = {(p.get("physical id", "0"), p.get("core id", str(i)))
             for i, p in enumerate(processors)}
    mhz = max(float(p.get("cpu MHz", 0) or 0) for p in processors)
    return CpuInfo(vendor=first.get("vendor_id", ""), family=int(first.get("cpu family", 0)),
                   model_name=first.get("model name", ""),
                   flags=frozenset(first.get("flags", "").split()),
                   physical_cores=len(cores), mhz=mhz)


def cpu_vector_units(info: CpuInfo):
    """(ISA name, float32 lanes per vector, FMA units per core) of the table above."""
    flags = info.flags
    if "avx512f" in flags:
        if info.vendor == "AuthenticAMD":
            return ("AVX-512", 16, 2) if info.family >= 26 else ("AVX-512", 8, 2)
        one_unit = re.search(r"Bronze|Silver|Gold 5[12]\d\d", info.model_name)
        return "AVX-512", 16, 1 if one_unit else 2
    if "avx2" in flags and "fma" in flags:
        return "AVX2+FMA", 8, 2
    if "avx" in flags:
        return "AVX", 8, 1
    return "SSE", 4, 1


def cpu_clock_hz(info: CpuInfo) -> float:
    nominal = re.search(r"@\s*([\d.]+)\s*GHz", info.model_name)
    if nominal:
        return float(nominal.group(1)) * 1e9
    return info.mhz * 1e6


def usable_cpus() -> int:
    """CPUs this process may run on: the affinity mask, capped by a cgroup v2 CPU quota."""
    import os

    count = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    try:
        with open("/sys/fs/cgroup/cpu.max") as f:
            quota, period = f.read().split()
        if quota != "max":
            count = min(count, max(1, int(float(quota) / float(period))))
    except (OSError, ValueError):
        pass
    return int(count or 1)


def cpu_peak_flops(info: Optional[CpuInfo] = None, cpus: Optional[int] = None) -> float:
    """float32 peak FLOP/s of this machine's CPU from the formula above."""
    info = info or read_cpu_info()
    cpus = usable_cpus() if cpus is None else cpus
    _, lanes, units = cpu_vector_units(info)
    cores = max(1, min(info.physical_cores, cpus))
    return float(cores * cpu_clock_hz(info) * lanes * 2 * units)


def device_peak_flops(precision: str) -> Optional[float]:
    """Peak FLOP/s of one device (replica) of this machine, or None for an unknown accelerator.

    GPUs are named by the driver (float32 counts TF32 when TensorFlow has it enabled, its
    default); TPUs by the ACCELERATOR_TYPE / TPU_ACCELERATOR_TYPE environment variable of TPU
    VMs (e.g. "v4-8"); a machine without accelerators gets the derived CPU peak. Pass
    --peak_tflops to override.
    """
    import os

    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        try:
            name = tf.config.experimental.get_device_details(gpus[0]).get("device_name", "")
        except (ValueError, RuntimeError):
            name = ""
        tf32 = tf.config.experimental.tensor_float_32_execution_enabled()
        return accelerator_peak_flops(name, precision, tf32_enabled=tf32) if name else None
    if tf.config.list_logical_devices("TPU"):
        kind = os.environ.get("TPU_ACCELERATOR_TYPE", os.environ.get("ACCELERATOR_TYPE", ""))
        key = tpu_key(kind) if kind else None
        return ACCELERATORS[key].per_device(precision) if key else None
    try:
        return cpu_peak_flops()
    except (OSError, ValueError, IndexError):
        return None


def measure_matmul_peak(dtype=tf.float32, size: int = 1024, repeats: int = 8) -> float:
    """Measured dense matmul FLOP/s of the default device: the MFU denominator on accelerators
    missing from the table (it depends on the machine's load, hence not used on CPUs)."""
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
