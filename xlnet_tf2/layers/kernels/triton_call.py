"""A Triton kernel inside the step's XLA program: XLA GPU's `__gpu$xla.gpu.triton` custom call.

`ttir(kernel, pointer_types, constexprs, generation, ...)` lowers a @triton.jit function to its
Triton IR (TTIR) for a GPU generation with the pinned `triton` package (the `gpu` extra: 3.6.0,
whose TTIR TensorFlow 2.20's XLA parses and verifies: tests/layers/kernels/
test_triton_attention.py) when the step is traced; no GPU is needed. `triton_call(operands,
results, ...)` emits one custom call whose backend_config carries that TTIR as **text** (MLIR
bytecode carries a dialect version: TensorFlow 2.21's XLA rejected Pallas's) in the MLIR
DictionaryAttr that XLA's `TritonCall::Parse` reads:

    {debug = false, grid_x = X : i32, grid_y = Y : i32, grid_z = Z : i32, ir = "<TTIR>",
     name = "<tt.func>", num_stages = S : i32, num_warps = W : i32}

The kernel ABI XLA launches: pointer arguments only, the operands' buffers then the results'
(row-major), every size a tl.constexpr; grid_x * grid_y * grid_z programs of 32 * num_warps
threads. Only an XLA program compiled for a GPU runs the call (the step traced for a GPU under
jit_compile); any other backend rejects it when it compiles.
"""

from __future__ import annotations

import functools
from typing import Dict, Sequence, Tuple

import tensorflow as tf

TARGET = "__gpu$xla.gpu.triton"
GENERATIONS = {"sm_80": 80, "sm_90": 90}

# Triton's pointer element types of the TensorFlow dtypes a kernel takes.
POINTER_TYPES = {tf.bfloat16: "*bf16", tf.float16: "*fp16", tf.float32: "*fp32",
                 tf.int32: "*i32", tf.uint32: "*u32"}


def mlir_string(text: bytes) -> str:
    """The body of an MLIR string literal: printable ASCII as is, `"`, `\\` and every other
    byte as \\XX (hex)."""
    return "".join(chr(c) if 32 <= c < 127 and c not in (34, 92) else "\\%02X" % c for c in text)


def backend_config(ir: str, name: str, grid: Sequence[int], num_warps: int,
                   num_stages: int) -> str:
    """The DictionaryAttr text of a `__gpu$xla.gpu.triton` call (keys in sorted order)."""
    gx, gy, gz = (int(g) for g in grid)
    return (f"{{debug = false, grid_x = {gx} : i32, grid_y = {gy} : i32, grid_z = {gz} : i32, "
            f'ir = "{mlir_string(ir.encode())}", name = "{name}", '
            f"num_stages = {int(num_stages)} : i32, num_warps = {int(num_warps)} : i32}}")


def _hashable(constexprs: Dict[str, object]) -> Tuple:
    return tuple(sorted(constexprs.items()))


def ttir(kernel, pointer_types: Dict[str, str], constexprs: Dict[str, object], *,
         generation: str, num_warps: int, num_stages: int) -> str:
    """The TTIR text of @triton.jit `kernel` with `pointer_types` (parameter -> "*bf16", ...,
    in signature order; every pointer 16-byte aligned, as XLA's buffers are) and `constexprs`
    (every other parameter) for GPU `generation` ("sm_80", "sm_90")."""
    return _ttir(kernel, tuple(pointer_types.items()), _hashable(constexprs), generation,
                 num_warps, num_stages)


@functools.lru_cache(maxsize=64)
def _ttir(kernel, pointer_types, constexprs, generation, num_warps, num_stages) -> str:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    if generation not in GENERATIONS:
        raise ValueError(f"Triton GPU generation {generation!r}: one of "
                         f"{', '.join(GENERATIONS)}")
    constants = dict(constexprs)
    signature = dict(pointer_types)
    signature.update({name: "constexpr" for name in constants})
    aligned = {(i,): [["tt.divisibility", 16]] for i in range(len(pointer_types))}
    source = ASTSource(kernel, signature, constants, aligned)
    target = GPUTarget("cuda", GENERATIONS[generation], 32)
    backend = triton.compiler.make_backend(target)
    options = backend.parse_options({"num_warps": num_warps, "num_stages": num_stages})
    context = triton._C.libtriton.ir.context()
    triton._C.libtriton.ir.load_dialects(context)
    backend.load_dialects(context)
    module = source.make_ir(target, options, backend.get_codegen_implementation(options),
                            backend.get_module_map(), context)
    stages: Dict[str, object] = {}
    backend.add_stages(stages, options, source.language)
    return str(stages["ttir"](module, {}))


def triton_call(operands: Sequence[tf.Tensor], results: Sequence[tf.TensorSpec], *, ir: str,
                name: str, grid: Sequence[int], num_warps: int, num_stages: int):
    """One `__gpu$xla.gpu.triton` custom call running TTIR `ir`'s function `name` on
    `operands` (its first pointers) into fresh buffers of `results` (its last pointers).
    Returns the results' tensors, in order."""
    from tensorflow.compiler.tf2xla.python import xla  # private: the custom call's only op

    return xla.custom_call_v2(TARGET, list(operands), list(results),
                              backend_config=backend_config(ir, name, grid, num_warps,
                                                            num_stages))
