"""On a GPU machine with JAX and no TensorFlow: runs the attention op's programs written by
benchmarks/tools/attention_op_export.py, compares cuDNN's flash attention with the reference
(outputs and every gradient, on the same random inputs) and times each program. Prints one
JSON line per program and one for the comparison.

    python benchmarks/gpu/attention_op_check.py DIR [--steps 20]
"""
import argparse
import json
import os
import re
import time

import numpy as np
import jax
import jax.numpy as jnp
from jax._src.lib import _jax, xla_client

p = argparse.ArgumentParser()
p.add_argument("dir")
p.add_argument("--steps", type=int, default=20)
a = p.parse_args()
meta = json.load(open(os.path.join(a.dir, "meta.json")))
b, n, s, k, h = meta["shape"]
dev = jax.devices()[0]


def load(name):
    text = open(os.path.join(a.dir, f"{name}.hlo.txt")).read()
    # jaxlib 0.11's StableHLO converter refuses the copies TensorFlow writes for its results.
    text = re.sub(r" copy\(([%\w.\-]+)\)", r" maximum(\1, \1)", text)
    proto = xla_client.hlo.hlo_module_from_text(text).as_serialized_hlo_module_proto()
    t = time.perf_counter()
    exe = dev.client.compile_and_load(_jax.mlir.hlo_to_stablehlo(proto),
                                      xla_client.DeviceList((dev,)), xla_client.CompileOptions())
    return exe, time.perf_counter() - t


rng = np.random.default_rng(0)
normal = lambda *shape: rng.standard_normal(shape, np.float32)
queries, keys, values = normal(b, n, s, h), normal(b, n, k, h), normal(b, n, k, h)
bias = normal(b, n, s, k)
# About a third of the keys blocked for every row, as the two-stream masks do, none fully.
blocked = rng.random((b, s, k)) < 0.35
blocked[:, :, 0] = False
inputs = [jax.device_put(jnp.asarray(x, jnp.bfloat16), dev) for x in (queries, keys, values, bias)]
inputs.append(jax.device_put(blocked, dev))


def run(exe):
    return [np.asarray(jnp.asarray(x[0], jnp.float32))
            for x in exe.execute_sharded(inputs).disassemble_into_single_device_arrays()]


def timed(exe):
    for _ in range(3):
        run(exe)
    t = time.perf_counter()
    for _ in range(a.steps):
        out = exe.execute_sharded(inputs).disassemble_into_single_device_arrays()
    jax.block_until_ready(out)
    return (time.perf_counter() - t) / a.steps * 1e3


names = ["out", "d_queries", "d_keys", "d_values", "d_bias"]
results = {}
for name in meta["programs"]:
    try:
        exe, compile_s = load(name)
        results[name] = run(exe)
        text = exe.hlo_modules()[0].to_string()
        print(json.dumps({"program": name, "device": str(dev.device_kind), "jax": jax.__version__,
                          "shape": meta["shape"], "compile_s": round(compile_s, 2),
                          "ms_forward_backward": round(timed(exe), 3),
                          "cudnn_calls": text.count("__cudnn$fmha")}), flush=True)
    except Exception as e:  # one line per failing program, then go on
        print(json.dumps({"program": name, "error": repr(e)[:2000]}), flush=True)
if "reference" in results and "cudnn" in results:
    comparison = {"compare": "cudnn vs reference (bf16 programs, same inputs)"}
    for i, field in enumerate(names):
        ref, fused = results["reference"][i], results["cudnn"][i]
        comparison[field + "_rel_err"] = float(np.linalg.norm(fused - ref) / np.linalg.norm(ref))
    print(json.dumps(comparison), flush=True)
