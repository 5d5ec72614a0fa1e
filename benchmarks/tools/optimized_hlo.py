"""The kernels of an optimized XLA program, read from its HLO text (what XLA prints after
fusion and scheduling: `HloModule.to_string()` of a compiled executable), in plain Python.

A kernel is a top-level instruction of the entry computation that does work (a fusion, a
library call such as a cuBLAS GEMM, a copy, an unfused op), with the bodies of while loops
counted trip-count times, conditional branches once each and called computations inlined.
For each: its bytes (operands once each plus outputs; a fused parameter read only through
slices or gathers counts what they read; an in-place dynamic-update-slice counts the update;
a cuBLAS workspace is left out), its matrix FLOPs (2 x output elements x contracted elements
of every dot or convolution inside, or of the library call), the TensorFlow op names of the
instructions inside (the metadata TensorFlow writes, e.g.
`xlnet_lm/transformer/layer_3/rel_attn/einsum_4/Einsum`), its opcodes, the dimensions of every
array it reads or writes, and libtpu's `estimated_cycles` where the backend config has one.
"""

from __future__ import annotations

import collections
import dataclasses
import math
import re
from typing import Dict, List, Optional, Tuple

ELEMENT_BYTES = {"pred": 1, "s4": 0.5, "u4": 0.5, "s8": 1, "u8": 1, "f8e4m3fn": 1, "f8e5m2": 1,
                 "s16": 2, "u16": 2, "f16": 2, "bf16": 2, "s32": 4, "u32": 4, "f32": 4,
                 "s64": 8, "u64": 8, "f64": 8, "c64": 8, "c128": 16, "token": 0}
_ARRAY = re.compile(r"\b(pred|[suf]\d+|bf16|c64|c128|f8e4m3fn|f8e5m2|token)\[([\d,]*)\]")
_INSTRUCTION = re.compile(r"\s*(ROOT )?%?([\w.\-]+) = ")
_COMPUTATION = re.compile(r"(ENTRY )?%?([\w.\-]+) ")
_OP_NAME = re.compile(r'op_name="([^"]*)"')
_CYCLES = re.compile(r'"estimated_cycles":"(\d+)"')
_TARGET = re.compile(r'custom_call_target="([^"]+)"')
TRITON_TARGET = "__gpu$xla.gpu.triton"
TRITON_KIND = "Triton custom call"
_TRITON_NAME = re.compile(r'\bname = "(\w+)"')  # the backend_config's tt.func name
# libtpu's Mosaic kernels (the project's Pallas attention, layers/kernels/pallas_call.py): the
# backend_config carries the kernel's own cost estimate, which libtpu leaves out of its cycles.
PALLAS_TARGET = "tpu_custom_call"
PALLAS_KIND = "Pallas custom call"
_PALLAS_FLOPS = re.compile(r'"cost_estimate":\{"flops":"?(\d+)')
# Matrix FLOPs of the project's flash attention kernels per B * N * S * K * H, 2 per
# multiply-add: xlnet_tf2/layers/kernels/flash_relative_attention.py's MATRIX_FLOPS (its
# docstring says what each launch computes; written here because this module imports no
# TensorFlow, tests/benchmarks/test_triton_proxy.py holds the two equal): the forward q.k, a
# k_r panel and p.v; dk/dv recomputes q.k and two panels, then d_out.v, p^T.d_out and ds^T.q;
# dq recomputes q.k and a panel, then d_out.v, ds.k, dG.k_r and dG^T.q_r.
FLASH_FLOPS = {"flash_fwd": 6, "flash_bwd_dkdv": 12, "flash_bwd_dq": 12}


def flash_flops(name: str, q_dims: Tuple[int, ...], k_dims: Tuple[int, ...]) -> int:
    """Matrix FLOPs of one launch of flash kernel `name` with q [B, S, N, H] and
    k [B, K, N, H]; 0 for a Triton kernel the table does not know."""
    if name not in FLASH_FLOPS or len(q_dims) != 4 or len(k_dims) != 4:
        return 0
    return FLASH_FLOPS[name] * math.prod(q_dims) * k_dims[1]


_TRIP_COUNT = re.compile(r'"known_trip_count":\{"n":"(\d+)"')
# Instructions that launch nothing: they name, alias or wait for buffers (so does every
# asynchronous `*-done`, e.g. libtpu's slice-done).
NOT_KERNELS = {"parameter", "constant", "bitcast", "get-tuple-element", "tuple", "after-all",
               "add-dependency", "opt-barrier", "partition-id", "replica-id", "while", "call",
               "conditional", "async-done", "copy-done", "all-reduce-done", "all-gather-done",
               "collective-permute-done", "send-done", "recv-done"}
# Inner opcodes that move or name data: not arithmetic.
_DATA_MOVEMENT = {"parameter", "constant", "bitcast", "broadcast", "reshape", "transpose",
                  "slice", "dynamic-slice", "concatenate", "copy", "tuple", "get-tuple-element",
                  "iota", "pad", "reverse", "gather", "dynamic-update-slice", "fusion",
                  "bitcast-convert"}


def arrays(shape: str) -> List[Tuple[str, Tuple[int, ...]]]:
    """[(dtype, dims)] of a shape string, a tuple's elements in order (layouts ignored)."""
    return [(t, tuple(int(x) for x in d.split(",")) if d else ()) for t, d in
            _ARRAY.findall(shape)]


def shape_bytes(shape: str) -> int:
    return int(sum(ELEMENT_BYTES.get(t, 4) * math.prod(d) for t, d in arrays(shape)))


def shape_elements(shape: str) -> int:
    return sum(math.prod(d) for _, d in arrays(shape))


@dataclasses.dataclass
class Instruction:
    name: str
    shape: str
    opcode: str
    operands: List[str]
    attrs: str  # everything after the operand list
    root: bool
    parameter_number: int = -1

    def attr(self, key: str) -> Optional[str]:
        m = re.search(r"\b" + key + r"=%?([\w.\-]+)", self.attrs)
        return m.group(1) if m else None

    def dims_attr(self, key: str) -> List[int]:
        m = re.search(key + r"=\{([\d,]*)\}", self.attrs)
        return [int(x) for x in m.group(1).split(",")] if m and m.group(1) else []

    @property
    def op_name(self) -> str:
        m = _OP_NAME.search(self.attrs)
        return m.group(1) if m else ""


@dataclasses.dataclass
class Kernel:
    """One kernel of the program (see the module docstring); bytes and FLOPs per launch,
    `count` launches per step."""
    name: str
    opcode: str
    kind: str
    shape: str
    in_bytes: int
    out_bytes: int
    flops: int
    count: int
    op_name: str
    op_names: Tuple[str, ...]
    opcodes: Tuple[str, ...]
    dims: Tuple[Tuple[int, ...], ...]  # of every array the kernel reads or writes
    dot_dims: Tuple[Tuple[int, ...], ...]  # of the operands and outputs of its matrix products
    cycles: Optional[int] = None

    @property
    def has_dot(self) -> bool:
        return bool(self.dot_dims)

    @property
    def bytes(self) -> int:
        return self.in_bytes + self.out_bytes

    @property
    def max_elements(self) -> int:
        return max((math.prod(d) for d in self.dims), default=0)


def _closing(s: str, start: int) -> int:
    """Index of the parenthesis closing the one at `start`."""
    depth = 0
    for j in range(start, len(s)):
        if s[j] == "(":
            depth += 1
        elif s[j] == ")":
            depth -= 1
            if depth == 0:
                return j
    return len(s) - 1


def parse_instruction(line: str) -> Optional[Instruction]:
    m = _INSTRUCTION.match(line)
    if not m:
        return None
    i = m.end()
    if line[i] == "(":  # a tuple shape
        j = _closing(line, i)
        shape, i = line[i:j + 1], j + 2
    else:
        j = line.index(" ", i)
        shape, i = line[i:j], j + 1
    k = line.index("(", i)
    end = _closing(line, k)
    opcode = line[i:k]
    inside = line[k + 1:end]
    operands = [] if opcode == "constant" else re.findall(r"%([\w.\-]+)", inside)
    number = int(inside) if opcode == "parameter" and inside.isdigit() else -1
    return Instruction(m.group(2), shape, opcode, operands, line[end + 1:], bool(m.group(1)),
                       number)


def parse_module(text: str) -> Tuple[Dict[str, List[Instruction]], str]:
    """({computation name: its instructions}, the entry computation's name)."""
    computations: Dict[str, List[Instruction]] = {}
    current, entry = None, None
    for line in text.split("\n"):
        if not line.strip():
            continue
        if not line.startswith(" ") and line.rstrip().endswith("{") and "(" in line:
            m = _COMPUTATION.match(line)
            current = m.group(2)
            computations[current] = []
            if m.group(1):
                entry = current
        elif line.startswith("}"):
            current = None
        elif current is not None:
            instruction = parse_instruction(line)
            if instruction:
                computations[current].append(instruction)
    if entry is None:
        raise ValueError("no ENTRY computation in the HLO text")
    return computations, entry


class _Module:
    def __init__(self, text: str):
        self.computations, self.entry = parse_module(text)
        self.shapes = {i.name: i.shape for c in self.computations.values() for i in c}

    def body(self, name: Optional[str], seen=None) -> List[Instruction]:
        """The instructions of a fused computation and of the computations it calls."""
        seen = set() if seen is None else seen
        if not name or name in seen or name not in self.computations:
            return []
        seen.add(name)
        out = []
        for i in self.computations[name]:
            out.append(i)
            if i.opcode == "fusion" or "calls=" in i.attrs:
                out += self.body(i.attr("calls"), seen)
        return out

    def dot_flops(self, i: Instruction, shapes: Dict[str, str]) -> int:
        if i.opcode == "dot":
            lhs = arrays(shapes.get(i.operands[0], ""))[0][1]
            contracted = math.prod(lhs[d] for d in i.dims_attr("lhs_contracting_dims"))
            return 2 * shape_elements(i.shape) * contracted
        if i.opcode == "convolution":  # 2 x output elements x (kernel elements / features)
            kernel = arrays(shapes.get(i.operands[1], ""))[0][1]
            m = re.search(r"dim_labels=\w+_(\w+)->", i.attrs)
            features = kernel[m.group(1).index("o")] if m and "o" in m.group(1) else 1
            return 2 * shape_elements(i.shape) * math.prod(kernel) // max(features, 1)
        return 0

    def kernel(self, i: Instruction, count: int) -> Kernel:
        called = i.attr("calls") if (i.opcode in ("fusion", "async-start")
                                     or "calls=" in i.attrs) else None
        body = self.body(called) if called else [i]
        shapes = dict(self.shapes, **{x.name: x.shape for x in body})
        target = (_TARGET.search(i.attrs) or [None, ""])[1]
        outputs = arrays(i.shape)
        out_bytes = shape_bytes(i.shape)
        if "cublas" in target and len(outputs) > 1 and outputs[-1][0] in ("s8", "u8"):
            out_bytes -= math.prod(outputs[-1][1])  # the GEMM's workspace
        in_place = set()  # a fused dynamic-update-slice into a parameter: written in place
        if called:
            inner = self.computations[called]
            parameters = {x.name for x in inner if x.opcode == "parameter"}
            root = next(x for x in inner if x.root)
            roots = ([next(y for y in inner if y.name == o) for o in root.operands]
                     if root.opcode == "tuple" else [root])
            for r in roots:
                if r.opcode == "dynamic-update-slice" and r.operands[0] in parameters:
                    in_place.add(r.operands[0])
                    out_bytes -= shape_bytes(r.shape) - shape_bytes(shapes[r.operands[1]])
        in_bytes = self._read_bytes(i, called, in_place)
        if i.opcode == "dynamic-update-slice":
            in_bytes -= shape_bytes(self.shapes.get(i.operands[0], ""))
            out_bytes = shape_bytes(self.shapes.get(i.operands[1], ""))
        if target.startswith("__cublas") and "lhs_contracting_dimensions" in i.attrs:
            m = re.search(r'"lhs_contracting_dimensions":\[([^\]]*)\]', i.attrs)
            lhs = arrays(self.shapes[i.operands[0]])[0][1]
            contracted = math.prod(lhs[int(d)] for d in m.group(1).replace('"', "").split(",")
                                   if d)
            flops = 2 * math.prod(outputs[0][1]) * contracted
        elif target == PALLAS_TARGET:
            estimate = _PALLAS_FLOPS.search(i.attrs)
            flops = int(estimate.group(1)) if estimate else 0
        elif target == TRITON_TARGET:
            name = _TRITON_NAME.search(i.attrs)
            # The kernels' operands open with q [B, S, N, H], r_w, r_r, k [B, K, N, H].
            q_dims, k_dims = ((arrays(self.shapes.get(o, "")) or [("", ())])[0][1]
                              for o in i.operands[0:4:3])
            flops = flash_flops(name.group(1) if name else "", q_dims, k_dims)
        else:
            flops = sum(self.dot_flops(x, shapes) for x in body)
        opcodes = collections.Counter(x.opcode for x in body if x.opcode not in (
            "parameter", "bitcast", "constant", "tuple", "get-tuple-element", "fusion"))
        names = collections.Counter()
        for x in body:
            if x.opcode not in ("parameter", "constant", "bitcast", "tuple",
                                "get-tuple-element") and x.op_name:
                names[x.op_name] += shape_elements(x.shape)
        dots = [x for x in body if x.opcode in ("dot", "convolution")]
        main = _main_op_name(i, dots, names)
        dims = tuple(d for _, d in outputs) + tuple(
            d for o in i.operands for _, d in arrays(self.shapes.get(o, "")))
        dot_dims = dims if target.startswith("__cublas") else tuple(
            d for x in dots for s in [x.shape] + [shapes.get(o, "") for o in x.operands]
            for _, d in arrays(s))
        cycles = _CYCLES.search(i.attrs)
        return Kernel(
            name=i.name, opcode=i.opcode, kind=_kind(i, target, opcodes), shape=re.sub(
                r"\{[^}]*\}", "", i.shape), in_bytes=in_bytes, out_bytes=out_bytes,
            flops=flops, count=count, op_name=main,
            op_names=tuple(n for n, _ in names.most_common()),
            opcodes=tuple(o for o, _ in opcodes.most_common()), dims=dims, dot_dims=dot_dims,
            cycles=int(cycles.group(1)) if cycles else None)

    def _read_bytes(self, i: Instruction, called: Optional[str], in_place) -> int:
        """Bytes the kernel reads: each distinct operand once; a fused parameter read only
        through slices, dynamic slices or gathers (also behind bitcasts and reshapes) counts
        what they read, one updated in place (`in_place`) nothing."""
        parameters, users = {}, collections.defaultdict(list)
        if called:
            for x in self.computations[called]:
                if x.opcode == "parameter":
                    parameters[x.parameter_number] = x
                for o in x.operands:
                    users[o].append(x)
        total, seen = 0, set()
        for index, operand in enumerate(i.operands):
            if operand in seen:
                continue
            seen.add(operand)
            full = shape_bytes(self.shapes.get(operand, ""))
            p = parameters.get(index)
            if p is None:
                total += full
            elif p.name not in in_place:
                total += min(full, _sliced_read(p.name, users, full))
        return total


def _sliced_read(name: str, users, full: int, depth: int = 0) -> int:
    total = 0
    for u in users.get(name, []) or [None]:
        if u is None or depth > 8:
            return full
        if u.opcode in ("bitcast", "reshape"):
            total += _sliced_read(u.name, users, full, depth + 1)
        elif u.opcode in ("slice", "dynamic-slice", "gather") and u.operands[0] == name:
            total += shape_bytes(u.shape)
        else:
            return full
        if total >= full:
            return full
    return total


def _main_op_name(i: Instruction, dots: List[Instruction], names: collections.Counter) -> str:
    """The op name a kernel is known by: its dot's, else its own when scoped, else the
    scoped name covering the most elements (a gradient's first: a backward kernel recomputing
    forward ops is a backward kernel)."""
    for d in dots:
        if d.op_name:
            return d.op_name
    if "/" in i.op_name:
        return i.op_name
    scoped = [n for n, _ in names.most_common() if "/" in n]
    scoped.sort(key=lambda n: "gradient_tape/" not in n)  # stable: weight order kept
    return scoped[0] if scoped else (i.op_name or next(iter(names), ""))


def _kind(i: Instruction, target: str, opcodes: collections.Counter) -> str:
    """A coarse kind of kernel: a library call, the emitter XLA chose, or the opcode."""
    backend = re.search(r'"kind":"(\w+)"', i.attrs)
    backend = backend.group(1) if backend else ""
    if target:
        return ("gemm (cuBLAS)" if "cublas" in target else "cuDNN" if "cudnn" in target
                else TRITON_KIND if target == TRITON_TARGET else PALLAS_KIND
                if target == PALLAS_TARGET else f"custom-call {target}")
    if "gemm" in backend or (backend.startswith("__triton") and opcodes.get("dot")):
        return "gemm (Triton)"
    if backend.startswith("__triton"):
        return "Triton softmax/norm" if opcodes.get("reduce") else "Triton elementwise"
    if backend.startswith(("__cublas", "__cudnn")):
        return backend.strip("_")
    if i.opcode == "fusion":
        fusion_kind = i.attr("kind") or ""
        if opcodes.get("dot") or opcodes.get("convolution"):
            return "matmul fusion"
        if opcodes.get("reduce"):
            return "reduction fusion"
        if set(opcodes) <= _DATA_MOVEMENT | {"convert", "select"}:
            return "data movement fusion"
        return {"kLoop": "loop fusion", "kInput": "input fusion",
                "kOutput": "output fusion"}.get(fusion_kind, f"fusion {fusion_kind}".strip())
    return i.opcode


def kernels(text: str) -> List[Kernel]:
    """The kernels of an optimized module's HLO text, in program order."""
    module = _Module(text)
    found: List[Kernel] = []

    def walk(name: Optional[str], count: int) -> None:
        for i in module.computations.get(name or "", []):
            if i.opcode == "while":
                m = _TRIP_COUNT.search(i.attrs)
                trips = int(m.group(1)) if m else 1  # unknown: counted once
                walk(i.attr("body"), count * trips)
                walk(i.attr("condition"), count * (trips + 1))
            elif i.opcode == "conditional":
                branches = re.search(r"branch_computations=\{([^}]*)\}", i.attrs)
                for b in (re.findall(r"%?([\w.\-]+)", branches.group(1)) if branches else
                          [i.attr("true_computation"), i.attr("false_computation")]):
                    walk(b, count)
            elif i.opcode == "call":
                walk(i.attr("to_apply"), count)
            elif i.opcode not in NOT_KERNELS and not i.opcode.endswith("-done"):
                found.append(module.kernel(i, count))

    walk(module.entry, 1)
    return found
