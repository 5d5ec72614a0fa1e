"""MFU denominators: the accelerator table (every entry, exact names) and the derived CPU peak."""

import pytest

from xlnet_tf2.training import device_peak
from xlnet_tf2.training.device_peak import (ACCELERATORS, accelerator_peak_flops, cpu_peak_flops,
                                            cpu_vector_units, gpu_key, read_cpu_info, tpu_key)

T = 1e12

# (name as the driver / TPU VM reports it, precision, tf32 enabled, expected per-device FLOP/s)
CASES = [
    # TPUs: per chip / TensorFlow devices per chip (v2, v3: one device per TensorCore).
    ("v2-8", "mixed_bfloat16", True, 22.5 * T),
    ("v2-32", "float32", True, 22.5 * T),
    ("v3-8", "mixed_bfloat16", True, 61.5 * T),
    ("v3-2048", "float32", True, 61.5 * T),
    ("v4-8", "mixed_bfloat16", True, 275 * T),
    ("TPU v4", "float32", True, 275 * T),
    ("v5litepod-16", "mixed_bfloat16", True, 197 * T),
    ("v5e-8", "mixed_bfloat16", True, 197 * T),
    ("TPU v5 lite", "mixed_bfloat16", True, 197 * T),
    ("v5p-8", "mixed_bfloat16", True, 459 * T),
    ("TPU v5", "float32", True, 459 * T),
    ("v6e-8", "mixed_bfloat16", True, 918 * T),
    ("TPU v6 lite", "mixed_bfloat16", True, 918 * T),
    # GPUs, dense.
    ("NVIDIA A100-SXM4-40GB", "float32", True, 156 * T),
    ("NVIDIA A100-SXM4-40GB", "float32", False, 19.5 * T),
    ("NVIDIA A100 80GB PCIe", "mixed_bfloat16", True, 312 * T),
    ("NVIDIA A100 80GB PCIe", "mixed_float16", True, 312 * T),
    ("NVIDIA H100 80GB HBM3", "float32", True, 494.5 * T),
    ("NVIDIA H100 80GB HBM3", "float32", False, 67 * T),
    ("NVIDIA H100 80GB HBM3", "mixed_bfloat16", True, 989.5 * T),
    ("NVIDIA H100 PCIe", "float32", True, 378 * T),
    ("NVIDIA H100 PCIe", "mixed_float16", True, 756.5 * T),
    ("NVIDIA H100 NVL", "mixed_bfloat16", True, 835.5 * T),
    ("NVIDIA H200", "mixed_bfloat16", True, 989.5 * T),
    ("NVIDIA L4", "float32", True, 60 * T),
    ("NVIDIA L4", "float32", False, 30.3 * T),
    ("NVIDIA L4", "mixed_bfloat16", True, 121 * T),
    ("NVIDIA L40S", "float32", True, 183 * T),
    ("NVIDIA L40S", "float32", False, 91.6 * T),
    ("NVIDIA L40S", "mixed_bfloat16", True, 362.05 * T),
    ("Tesla V100-SXM2-16GB", "float32", True, 15.7 * T),   # no TF32: fp32 either way
    ("Tesla V100-SXM2-16GB", "mixed_float16", True, 125 * T),
    ("Tesla V100-SXM2-16GB", "mixed_bfloat16", True, 15.7 * T),  # no bf16 units
    ("Tesla V100-PCIE-16GB", "mixed_float16", True, 112 * T),
]


@pytest.mark.parametrize("name,precision,tf32,expected", CASES)
def test_accelerator_peaks(name, precision, tf32, expected):
    assert accelerator_peak_flops(name, precision, tf32_enabled=tf32) == pytest.approx(expected)


def test_every_table_entry_is_tested():
    keys = {tpu_key(n) if not n.startswith(("NVIDIA", "Tesla")) else gpu_key(n)
            for n, *_ in CASES}
    assert keys == set(ACCELERATORS)


def test_names_match_exactly():
    assert gpu_key("NVIDIA L4") == "L4" and gpu_key("NVIDIA L40S") == "L40S"
    assert gpu_key("NVIDIA L40") is None           # not an L4 nor an L40S
    assert gpu_key("NVIDIA H100 80GB HBM3") == "H100"
    assert gpu_key("NVIDIA H100 PCIe") == "H100 PCIe"
    assert gpu_key("NVIDIA GeForce RTX 4090") is None
    assert gpu_key("NVIDIA A10") is None and gpu_key("NVIDIA A100-PCIE-40GB") == "A100"
    assert tpu_key("v5litepod-256") == "TPU v5e" and tpu_key("v5p-1024") == "TPU v5p"
    assert tpu_key("v7x-8") is None
    assert accelerator_peak_flops("NVIDIA L40", "float32") is None
    with pytest.raises(ValueError, match="precision"):
        ACCELERATORS["L4"].per_device("float64")


def _cpuinfo(model, vendor, family, flags, cpus, cores_per_socket=None, mhz=2000.0,
             threads_per_core=1):
    blocks = []
    for i in range(cpus):
        core = i // threads_per_core
        blocks.append("\n".join([
            f"processor\t: {i}", f"vendor_id\t: {vendor}", f"cpu family\t: {family}",
            f"model name\t: {model}", f"cpu MHz\t\t: {mhz}", "physical id\t: 0",
            f"core id\t\t: {core}", f"cpu cores\t: {cores_per_socket or cpus}",
            f"flags\t\t: {flags}"]))
    return "\n\n".join(blocks) + "\n"


AVX512 = "fpu sse sse2 avx fma avx2 avx512f avx512dq"


@pytest.mark.parametrize("text,cpus,expected,isa", [
    # Intel Xeon Platinum, AVX-512 with 2 FMA units: 4 cores x 2.2 GHz x 16 lanes x 2 x 2.
    (_cpuinfo("Intel(R) Xeon(R) Platinum 8273CL CPU @ 2.20GHz", "GenuineIntel", 6, AVX512, 8,
              threads_per_core=2, mhz=3100.0), 8, 4 * 2.2e9 * 64, "AVX-512"),
    # Xeon Silver: one AVX-512 FMA unit.
    (_cpuinfo("Intel(R) Xeon(R) Silver 4114 CPU @ 2.20GHz", "GenuineIntel", 6, AVX512, 2), 2,
     2 * 2.2e9 * 32, "AVX-512"),
    # AMD Zen 4 (this project's VM): 512-bit ops on two 256-bit pipes; clock from cpu MHz.
    (_cpuinfo("AMD EPYC", "AuthenticAMD", 25, AVX512, 2, mhz=2596.13), 2,
     2 * 2.59613e9 * 32, "AVX-512"),
    (_cpuinfo("AMD EPYC 9B45", "AuthenticAMD", 26, AVX512, 4, mhz=3000.0), 4,
     4 * 3.0e9 * 64, "AVX-512"),
    (_cpuinfo("Intel(R) Core(TM) i7-4770 CPU @ 3.40GHz", "GenuineIntel", 6,
              "sse sse2 avx fma avx2", 8, threads_per_core=2), 8, 4 * 3.4e9 * 32, "AVX2+FMA"),
    (_cpuinfo("Intel(R) Xeon(R) CPU E5-2670 0 @ 2.60GHz", "GenuineIntel", 6, "sse sse2 avx", 2),
     2, 2 * 2.6e9 * 16, "AVX"),
    (_cpuinfo("Old CPU", "GenuineIntel", 6, "sse sse2", 1, mhz=1000.0), 1, 1e9 * 8, "SSE"),
    # A process limited to 2 of the 8 physical cores gets 2 cores' peak.
    (_cpuinfo("AMD EPYC", "AuthenticAMD", 25, AVX512, 8, mhz=2000.0), 2, 2 * 2e9 * 32,
     "AVX-512"),
])
def test_cpu_peak_formula(text, cpus, expected, isa):
    info = read_cpu_info(text)
    assert cpu_vector_units(info)[0] == isa
    assert cpu_peak_flops(info, cpus=cpus) == pytest.approx(expected)


def test_this_machine_cpu_peak_is_stable_and_plausible():
    peaks = {cpu_peak_flops() for _ in range(3)}
    assert len(peaks) == 1  # no measurement, no load dependence
    peak = peaks.pop()
    assert 1e9 < peak < 1e14
    # The trainer's denominator on a machine without accelerators is this derived value.
    assert device_peak.device_peak_flops("float32") == peak
