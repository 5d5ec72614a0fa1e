"""A Pallas kernel inside the step's XLA program on a TPU: XLA's `tpu_custom_call`.

`lowered(fn, operands)` lowers a JAX function that is one `pl.pallas_call` for the TPU with
`jax.export` (platforms=["tpu"]) when the step is traced; no TPU is needed. JAX writes the
kernel as a custom call whose backend_config is a JSON string,

    {"custom_call_config": {"body": "<base64 Mosaic MLIR bytecode>", "cost_estimate": {...},
     "serialization_format": 1, "needs_layout_passes": true}}

`tpu_custom_call(operands, results, backend_config)` emits that call from TensorFlow, with the
backend_config verbatim, through the private `custom_call_v2` (registered for every XLA device,
the TPU's included; TensorFlow gives its operands and results the row-major layouts JAX's
lowering asks for). Only an XLA program compiled by libtpu runs the call; libtpu compiles the
Mosaic body for the chip it targets, which is where a kernel a generation cannot run is refused.

The Mosaic body carries a version: the JAX that lowers it must be one whose Mosaic the TPU's
libtpu reads (the `tpu` extra pins jax 0.8.1, which libtpu 0.0.30, the one tensorflow-tpu 2.20
loads, reads; a newer JAX's body is refused). JAX is an optional dependency: `jax_module` imports
it (and the kernels' module) only when a step with the kernels is traced, on JAX's CPU platform:
the TPU belongs to TensorFlow's runtime, and the lowering needs no device.
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import re
import sys
from typing import List, Sequence, Tuple

import tensorflow as tf

TARGET = "tpu_custom_call"
KERNELS_MODULE = "xlnet_tf2.layers.kernels.pallas_relative_attention"

_CALL = re.compile(r"stablehlo\.custom_call @" + TARGET + r"\(([^)]*)\)")
_CONFIG = re.compile(r'backend_config = "((?:[^"\\]|\\.)*)"')
_MLIR_ESCAPE = re.compile(r"\\([0-9A-Fa-f]{2})")


def jax_module():
    """The Pallas kernels' module (and with it JAX), imported on JAX's CPU platform.

    JAX is the optional `tpu` extra: imported here, when a step with the kernels is traced,
    not when the package is. JAX_PLATFORMS=cpu (unless the environment says otherwise) keeps
    JAX from opening the TPU that TensorFlow's runtime owns; the lowering needs no device."""
    if "jax" not in sys.modules:
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
    return importlib.import_module(KERNELS_MODULE)


def _mlir_string(text: str) -> str:
    """The value of an MLIR string literal's body (\\XX hex escapes, \\" and \\\\)."""
    text = _MLIR_ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), text)
    return text.replace('\\"', '"').replace("\\\\", "\\")


def backend_config_of(module_text: str, n_operands: int) -> str:
    """The backend_config of the one `tpu_custom_call` of an exported module whose main
    function passes its `n_operands` arguments to that call in order and returns its results
    (a ValueError otherwise)."""
    calls = _CALL.findall(module_text)
    if len(calls) != 1:
        raise ValueError(f"the lowered kernel holds {len(calls)} {TARGET} calls, not one")
    arguments = [a.strip() for a in calls[0].split(",") if a.strip()]
    if arguments != [f"%arg{i}" for i in range(n_operands)]:
        raise ValueError(f"the lowered kernel's call takes {arguments}, not the function's "
                         f"{n_operands} arguments in order")
    line = next(line for line in module_text.splitlines() if "@" + TARGET in line)
    config = _mlir_string(_CONFIG.search(line).group(1))
    json.loads(config)  # a JSON object, or the lowering changed
    return config


@functools.lru_cache(maxsize=32)
def _lowered(fn, operands: Tuple[Tuple[Tuple[int, ...], str], ...]):
    jax_module()                         # JAX, on its CPU platform
    jax = importlib.import_module("jax")
    args = [jax.ShapeDtypeStruct(shape, dtype) for shape, dtype in operands]
    exported = jax.export.export(jax.jit(fn), platforms=["tpu"])(*args)
    results = tuple((tuple(a.shape), str(a.dtype)) for a in exported.out_avals)
    return backend_config_of(exported.mlir_module(), len(args)), results


def lowered(fn, operands: Sequence[Tuple[Sequence[int], str]]):
    """(backend_config, results [(shape, dtype name)]) of JAX function `fn` (one pallas_call)
    lowered for the TPU with operands of these (shape, dtype name). `fn` must be hashable and
    stable across calls for the cache (the kernels' module caches its calls per geometry)."""
    return _lowered(fn, tuple((tuple(int(d) for d in s), str(t)) for s, t in operands))


def tpu_custom_call(operands: Sequence[tf.Tensor], results: Sequence[tf.TensorSpec],
                    backend_config: str) -> List[tf.Tensor]:
    """One `tpu_custom_call` running the lowered kernel on `operands` into fresh buffers of
    `results`; the results' tensors, in order."""
    from tensorflow.compiler.tf2xla.python import xla  # private: the custom call's only op

    out = xla.custom_call_v2(TARGET, list(operands), list(results),
                             backend_config=backend_config)
    return list(out) if isinstance(out, (list, tuple)) else [out]
