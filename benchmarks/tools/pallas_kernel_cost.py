"""What the Pallas attention kernels (xlnet_tf2/layers/kernels/pallas_relative_attention.py)
do per call, counted from their traced programs (JAX's jaxpr of each kernel body, loops
unrolled by their trip counts): matrix FLOPs on the MXU, element operations by the unit that
runs them (VPU arithmetic, logic, compares and selects; the XLU's rotates, gathers and
transposes; the EUP's exponentials), VMEM loads and stores, and HBM bytes. libtpu gives a
Mosaic kernel no cycle estimate, so these counts and stated unit rates are what its time is
judged by (BENCHMARKS.md, "The Pallas attention kernels on TPUs").

    python -m benchmarks.tools.pallas_kernel_cost                  # XLNet-Base, batch 16
    python -m benchmarks.tools.pallas_kernel_cost --batch=2 --generation=v4

Counts are per call (all B x N programs); "per step" multiplies by the layers. A vector op
on a [R, C] array counts R x C elements; a vreg holds 8 x 128 32-bit elements.
"""

from __future__ import annotations

import argparse
import collections
import math
import os
from typing import Dict

os.environ.setdefault("JAX_PLATFORMS", "cpu")  # counting needs no device

import jax  # noqa: E402

from xlnet_tf2.layers.kernels import pallas_relative_attention as pa  # noqa: E402

VREG = 8 * 128
# The unit each primitive of the kernels runs on. Reshapes, slices, broadcasts and
# concatenations are layout (often free: a view of the same vregs) and are listed apart.
UNITS = {
    "valu": {"add", "sub", "mul", "div", "max", "min", "neg", "and", "or", "xor", "not",
             "shift_right_logical", "shift_left", "eq", "ne", "lt", "le", "gt", "ge",
             "select_n", "convert_element_type", "bitcast_convert_type", "sign", "rem",
             "reduce_max", "reduce_sum", "iota"},
    "eup": {"exp", "log", "tanh", "logistic"},
    "xlu": {"roll", "gather", "transpose"},
    "memory": {"get", "swap"},
    "layout": {"broadcast_in_dim", "reshape", "slice", "concatenate", "squeeze",
               "expand_dims", "dynamic_slice"},
}
_NESTED = ("jit", "pjit", "closed_call", "custom_jvp_call", "custom_vjp_call", "remat")
_IGNORED = {"program_id", "multiple_of", "dot_general", "scan", "while", "cond"}


def base_geometry(batch: int = 16, generation: str = "v5e", dtype: str = "bfloat16"
                  ) -> "pa.Geometry":
    """One layer's attention in XLNet-Base pretraining (seq 512, memory 384, 85 predictions,
    bi_data, dropout 0.1, segments, masks) at `batch`."""
    return pa.Geometry(batch=batch, heads=12, head_size=64, seq_len=512, query_rows=85,
                       keys=896, distances=1408, groups=2, scale=0.125, dropout_rate=0.1,
                       has_segment=True, has_mask=True, dtype=dtype, generation=generation)


def _kernel_jaxpr(g: "pa.Geometry", backward: bool):
    shapes = pa.shapes(g)
    names = ("keys",) + pa.operand_names(g, backward)
    call = pa.backward_call(g) if backward else pa.forward_call(g)
    closed = jax.make_jaxpr(call)(*[jax.ShapeDtypeStruct(*shapes[n]) for n in names])
    return next(e for e in closed.jaxpr.eqns if e.primitive.name == "pallas_call").params[
        "jaxpr"]


def count(jaxpr, times: int = 1, tally=None) -> Dict[str, float]:
    """Element operations by primitive (and `mxu_flops`) of a kernel body run `times` times
    (loops: scans of a static length)."""
    tally = collections.Counter() if tally is None else tally
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if name == "while":  # fori_loop with bounds known when traced is a scan
            raise ValueError("a loop of the kernel has no static trip count")
        if name == "scan":
            count(eqn.params["jaxpr"].jaxpr, times * eqn.params["length"], tally)
        elif name == "cond":
            for branch in eqn.params["branches"]:
                count(branch.jaxpr, times, tally)
        elif name in _NESTED:
            inner = eqn.params.get("jaxpr") or eqn.params.get("call_jaxpr")
            count(getattr(inner, "jaxpr", inner), times, tally)
        elif name == "dot_general":
            (contracting, _), _ = eqn.params["dimension_numbers"]
            lhs = eqn.invars[0].aval.shape
            out = math.prod(eqn.outvars[0].aval.shape)
            tally["mxu_flops"] += times * 2 * out * math.prod(lhs[d] for d in contracting)
        elif name not in _IGNORED:
            size = max(math.prod(v.aval.shape) for v in eqn.outvars)
            tally[name] += times * size
    return tally


def kernel_counts(g: "pa.Geometry") -> Dict[str, Dict[str, float]]:
    """Per call, forward and backward: mxu_flops, the element ops of each unit (UNITS), the
    ones of no listed unit (`other`), the HBM bytes and the cost estimate's FLOPs."""
    out = {}
    for backward in (False, True):
        per_program = count(_kernel_jaxpr(g, backward))
        programs = g.batch * g.heads
        units = collections.Counter()
        for name, elements in per_program.items():
            if name == "mxu_flops":
                continue
            unit = next((u for u, names in UNITS.items() if name in names), "other")
            units[unit] += elements * programs
        units["mxu_flops"] = per_program["mxu_flops"] * programs
        units["hbm_bytes"] = pa.bytes_accessed(g, backward)
        units["estimated_flops"] = pa.flops(g, backward)
        out["backward" if backward else "forward"] = dict(units)
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--generation", default="v5e")
    args = parser.parse_args(argv)
    g = base_geometry(args.batch, args.generation)
    counts = kernel_counts(g)
    print(f"XLNet-Base attention, batch {args.batch}, {args.generation}: per call, and per "
          f"step of {args.layers} layers (forward + backward)")
    rows = ["mxu_flops", "estimated_flops", "valu", "xlu", "eup", "memory", "layout",
            "other", "hbm_bytes"]
    for key in rows:
        fwd, bwd = counts["forward"].get(key, 0), counts["backward"].get(key, 0)
        per_step = (fwd + bwd) * args.layers
        unit = "" if key.endswith(("flops", "bytes")) else f"  {per_step / VREG / 1e6:8.1f} M vreg-ops"
        print(f"  {key:16s} forward {fwd / 1e9:9.3f} G  backward {bwd / 1e9:9.3f} G  "
              f"step {per_step / 1e12:8.4f} T{unit}")


if __name__ == "__main__":
    main()
