"""What libtpu says about the step compiled for one Cloud TPU chip without one: the TPU
targets of benchmarks/accelerator_compile.py.

libtpu's compile-only client compiles the program for a described topology and refuses one
that does not fit the chip's HBM (RESOURCE_EXHAUSTED, "Used X of Y hbm"). Of a program that
fits it gives the memory it needs (arguments, outputs less the ones aliased to arguments,
temporaries, code), its cost analysis (FLOPs, bytes accessed, `optimal_seconds`) and in every
op's backend config `estimated_cycles`. Summed over the kernels and divided by the chip's clock,
the cycles give a serial time: no overlap of the asynchronous copies with compute, an estimate
of libtpu's cost model, not a measurement.

libtpu gives a Mosaic kernel (tpu_custom_call: the project's Pallas attention) no cycles. Such
a kernel is priced by its own FLOPs and bytes (the cost estimate its backend_config carries:
layers/kernels/pallas_relative_attention.py's `flops`, `bytes_accessed`) at stated shares of
the chip's peaks: max(FLOPs / (PALLAS_FLOPS_SHARE x peak), bytes / (PALLAS_BANDWIDTH_SHARE x
HBM bandwidth)). An assumption until a TPU times the kernels; BENCHMARKS.md says why 25%.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Iterable, Optional

from benchmarks.tools.optimized_hlo import PALLAS_KIND, Kernel

GIB = 2 ** 30
# The Pallas kernels' assumed shares of the chip's peaks (module docstring): a quarter of the
# dense bf16 peak (every product of the kernel has a side of H = 64, half the MXU's 128, and
# the kernel's vector work, counted in BENCHMARKS.md, is of the same order as its matrix
# work), 80% of HBM bandwidth.
PALLAS_FLOPS_SHARE = 0.25
PALLAS_BANDWIDTH_SHARE = 0.8


@dataclasses.dataclass(frozen=True)
class Chip:
    """A TPU generation as the deviceless compile sees it: the smallest topology libtpu
    describes (`topology`, `chip_config`: one device per chip) and data-sheet figures."""
    device: str  # libtpu's device kind
    topology: str
    chip_config: Optional[str]
    hbm_gib: float  # per chip, data sheet
    peak_flops: float  # dense bf16 FLOP/s per chip, data sheet (training/device_peak.py)
    clock_ghz: float  # peak / (MXUs x 128 x 128 x 2): derived, not read from libtpu
    hbm_bandwidth: float  # bytes/s per chip, data sheet


CHIPS = {
    "tpu_v5e": Chip("TPU v5 lite", "v5e:2x2", None, 16, 197e12, 1.5, 819e9),
    "tpu_v4": Chip("TPU v4", "v4:2x2x1", "megacore", 32, 275e12, 1.05, 1200e9),
    "tpu_v5p": Chip("TPU v5", "v5p:2x2x1", "megacore", 95, 459e12, 1.75, 2765e9),
}
_SIZE = r"([\d.]+)\s*([KMGT]i?)?B?"
_UNITS = {"": 1, "K": 2 ** 10, "M": 2 ** 20, "G": 2 ** 30, "T": 2 ** 40}


def _bytes(number: str, unit: Optional[str]) -> float:
    return float(number) * _UNITS[(unit or "").rstrip("i")]


def refused_for_memory(error: str) -> Optional[dict]:
    """{"needs_bytes", "available_bytes"} from libtpu's out-of-HBM error, else None."""
    m = re.search(r"Used " + _SIZE + r" of " + _SIZE + r" hbm", error)
    if m:
        return {"needs_bytes": _bytes(m.group(1), m.group(2)),
                "available_bytes": _bytes(m.group(3), m.group(4))}
    m = re.search(r"required for HLO temporaries \(" + _SIZE + r"\) exceeds available HBM \("
                  + _SIZE + r"\)", error)
    if m:
        return {"needs_bytes": _bytes(m.group(1), m.group(2)),
                "available_bytes": _bytes(m.group(3), m.group(4))}
    return None


def needed_bytes(memory: dict) -> int:
    """HBM the compiled program needs on its device: arguments + outputs not aliased to an
    argument + temporaries + generated code."""
    return (memory["argument"] + memory["output"] - memory["alias"] + memory["temp"]
            + memory["generated_code"])


def summary(kernels: Iterable[Kernel], record: dict, chip: Chip, flops_per_step: float,
            optimized_text: str = "") -> dict:
    """The TPU figures of a compile record (tools/deviceless_worker.py's compile.json):
    fits (bool), needs/HBM bytes, libtpu's cost analysis, the serial cycle sum and its time
    at the chip's clock, and the MFU the project's FLOPs would reach at that time. A refused
    program gets `fits` False and what libtpu said."""
    hbm = chip.hbm_gib * GIB
    out = {"hbm_bytes": hbm, "clock_ghz": chip.clock_ghz, "peak_flops": chip.peak_flops}
    if "error" in record:
        refused = refused_for_memory(record["error"])
        out.update(fits=False, error=record["error"], **(refused or {}))
        return out
    kernels = list(kernels)
    cycles = sum((k.cycles or 0) * k.count for k in kernels)
    pallas = [k for k in kernels if k.kind == PALLAS_KIND]
    pallas_ms = sum(kernel_us(k, chip) * k.count for k in pallas) / 1e3
    serial_ms = cycles / (chip.clock_ghz * 1e9) * 1e3 + pallas_ms
    needs = needed_bytes(record["memory"])
    cost = dict(record.get("cost_analysis", {}))
    # optimal_seconds counts -1 for every custom call libtpu has no cost for (Mosaic kernels,
    # tpu_custom_call, are costed): add them back.
    uncosted = len(re.findall(r' custom-call\(.*custom_call_target="(?!tpu_custom_call)',
                              optimized_text))
    if "optimal_seconds" in cost:
        cost["optimal_seconds_corrected"] = cost["optimal_seconds"] + uncosted
    # libtpu refuses what does not fit: a compiled program fits, whatever the statistics'
    # sum says (near the limit it exceeds the chip's HBM: buffers counted in two statistics).
    out.update(fits=True, needs_bytes=needs, cost_analysis=cost,
               uncosted_custom_calls=uncosted, estimated_cycles=cycles, serial_ms=serial_ms,
               pallas_kernels=sum(k.count for k in pallas), pallas_ms=pallas_ms,
               pallas_flops=sum(k.flops * k.count for k in pallas),
               pallas_bytes=sum(k.bytes * k.count for k in pallas),
               pallas_flops_share=PALLAS_FLOPS_SHARE,
               pallas_bandwidth_share=PALLAS_BANDWIDTH_SHARE,
               hbm_bandwidth=chip.hbm_bandwidth,
               cycles_equivalent=serial_ms * chip.clock_ghz * 1e6,
               kernels_with_cycles=sum(k.count for k in kernels if k.cycles),
               serial_mfu=flops_per_step / (serial_ms / 1e3) / chip.peak_flops
               if serial_ms else None)
    return out


def kernel_us(k: Kernel, chip: Chip) -> float:
    """libtpu's estimate for one launch of the kernel in microseconds (0 without one); a
    Pallas kernel's, its FLOPs and bytes at the stated shares of the chip's peaks."""
    if k.kind == PALLAS_KIND:
        return max(k.flops / (PALLAS_FLOPS_SHARE * chip.peak_flops),
                   k.bytes / (PALLAS_BANDWIDTH_SHARE * chip.hbm_bandwidth)) * 1e6
    return (k.cycles or 0) / (chip.clock_ghz * 1e3)
