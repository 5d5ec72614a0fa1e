"""Does TensorFlow's own XLA read the `__gpu$xla.gpu.triton` custom calls of an exported step,
and parse and verify their Triton IR? No GPU needed: via ctypes, the C++ functions of
libtensorflow_cc.so.2 that XLA GPU's emitter calls first on such a call:
xla::gpu::TritonCall::Parse on its backend_config (name, TTIR, stages, warps, grid), then, in
an MLIR context with xla::gpu::LoadMlirDialectsForTriton's dialects,
xla::ParseMlirModuleString on the TTIR (parse + verify). The TTIR -> PTX lowering after that
needs TensorFlow's GPU build and is not checked here.

    python -m benchmarks.tools.triton_parse_check STEP_DIR/step.hlo.pb

The symbols and the layouts of the structures they return (libstdc++ std::string, absl's
StatusOr, TritonCall's fields) are TensorFlow 2.20's (and 2.21's): one without them fails `_library`
with one line.
"""

from __future__ import annotations

import argparse
import ctypes
import dataclasses
import functools
import os
from typing import List

import tensorflow as tf
from tensorflow.compiler.xla.service import hlo_pb2

TARGET = "__gpu$xla.gpu.triton"
_PARSE = ("_ZN3xla3gpu10TritonCall5ParseESt17basic_string_viewIcSt11char_traitsIcEE"
          "PN4mlir11MLIRContextE")
_PARSE_MODULE = ("_ZN3xla21ParseMlirModuleStringESt17basic_string_viewIcSt11char_traitsIcEE"
                 "RN4mlir11MLIRContextE")
_DIALECTS = "_ZN3xla3gpu25LoadMlirDialectsForTritonERN4mlir11MLIRContextE"


@dataclasses.dataclass(frozen=True)
class TritonCallCheck:
    """One custom call as TensorFlow's XLA reads it: `name` (the tt.func), `ir_bytes`,
    `num_stages`, `num_warps`, `grid`, and `module`: "OK" or the parser's error."""
    name: str
    ir_bytes: int
    num_stages: int
    num_warps: int
    grid: tuple
    module: str


@functools.lru_cache(maxsize=None)
def _library():
    """(libtensorflow_cc, an MLIRContext with the Triton dialects loaded)."""
    root = os.path.dirname(tf.__file__)
    framework = ctypes.CDLL(os.path.join(root, "libtensorflow_framework.so.2"),
                            mode=ctypes.RTLD_GLOBAL)
    cc = ctypes.CDLL(os.path.join(root, "libtensorflow_cc.so.2"), mode=ctypes.RTLD_GLOBAL)
    for symbol in (_PARSE, _PARSE_MODULE, _DIALECTS):
        if not hasattr(cc, symbol):
            raise RuntimeError(f"TensorFlow {tf.__version__}'s libtensorflow_cc has no "
                               f"{symbol}: this check reads TensorFlow 2.20's XLA")
    context = ctypes.create_string_buffer(512)                     # an mlir::MLIRContext
    framework._ZN4mlir11MLIRContextC1ENS0_9ThreadingE(context, 0)  # Threading::DISABLED
    getattr(cc, _DIALECTS)(context)
    for symbol in (_PARSE, _PARSE_MODULE):  # (sret, string_view {len, ptr}, context)
        getattr(cc, symbol).argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p,
                                        ctypes.c_void_p]
    return cc, context


def _std_string(address: int) -> bytes:
    """A libstdc++ std::string at `address`: {char* data, size_t size, ...}."""
    data = ctypes.c_void_p.from_address(address).value
    return ctypes.string_at(data, ctypes.c_size_t.from_address(address + 8).value)


def parse_module(text: bytes) -> str:
    """xla::ParseMlirModuleString(text) in the Triton context: "OK" or the error."""
    cc, context = _library()
    result = ctypes.create_string_buffer(16)  # StatusOr<OwningOpRef<ModuleOp>>
    getattr(cc, _PARSE_MODULE)(ctypes.addressof(result), len(text), text,
                               ctypes.addressof(context))
    rep = ctypes.c_size_t.from_address(ctypes.addressof(result)).value
    if rep == 1:  # absl's inlined OK status
        return "OK"
    if rep & 1:
        return f"error code {rep >> 2}"
    return "error: " + _std_string(rep + 8).decode(errors="replace")  # StatusRep {ref, code, msg}


def check_call(config: bytes) -> TritonCallCheck:
    """TritonCall::Parse(config), then the module check of its TTIR."""
    cc, context = _library()
    # TritonCall: {std::string name, std::string ir, int64 num_stages, int64 num_warps,
    # int32 grid_x, grid_y, grid_z}
    result = ctypes.create_string_buffer(128)
    getattr(cc, _PARSE)(ctypes.addressof(result), len(config), config,
                        ctypes.addressof(context))
    base = ctypes.addressof(result)
    ir = _std_string(base + 32)
    return TritonCallCheck(
        name=_std_string(base).decode(), ir_bytes=len(ir),
        num_stages=ctypes.c_int64.from_address(base + 64).value,
        num_warps=ctypes.c_int64.from_address(base + 72).value,
        grid=tuple(ctypes.c_int32.from_address(base + 80 + 4 * i).value for i in range(3)),
        module=parse_module(ir))


def check_module(serialized: bytes) -> List[TritonCallCheck]:
    """Every `__gpu$xla.gpu.triton` call of an HloModuleProto, checked."""
    module = hlo_pb2.HloModuleProto.FromString(serialized)
    return [check_call(instruction.backend_config)
            for computation in module.computations for instruction in computation.instructions
            if instruction.opcode == "custom-call" and instruction.custom_call_target == TARGET]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("module", help="an HloModuleProto (step.hlo.pb)")
    args = parser.parse_args(argv)
    with open(args.module, "rb") as f:
        checks = check_module(f.read())
    for c in checks:
        print(f"{c.name}: TTIR {c.ir_bytes} bytes, grid {c.grid}, {c.num_warps} warps, "
              f"{c.num_stages} stages: {c.module[:500]}")
    print(f"{len(checks)} Triton calls, {sum(c.module == 'OK' for c in checks)} parsed and "
          "verified by TensorFlow's XLA")
    return 0 if checks and all(c.module == "OK" for c in checks) else 1


if __name__ == "__main__":
    raise SystemExit(main())
