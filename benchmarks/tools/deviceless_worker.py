"""Compiles an exported step for an accelerator on a machine without one: the part of
benchmarks/accelerator_compile.py that runs under the accelerator venv's Python (JAX with its
CUDA plugin, or with libtpu; scripts/setup_accelerator_compile.sh makes those venvs).

    python -m benchmarks.tools.deviceless_worker --target=h100 --hlo=STEP/step.hlo.pb \
        --out=DIR [--gpu_config=FILE]

Writes DIR/optimized.hlo.txt (the program the accelerator would run: XLA's fusions, libtpu's
cycle estimates in each op's backend config) and DIR/compile.json: versions, the device
kind, compile seconds, the compiled memory statistics, libtpu's cost analysis (TPU only; the
GPU's compile-only client has none) or, where the compiler refuses the program (libtpu: it
does not fit HBM), `error` with its message and no HLO.

Imports nothing but the standard library and JAX: the accelerator venv has no TensorFlow, no
absl and not this project's dependencies. The environment variables that let the plugins
start without a device are set by the caller (`worker_env` in tools/deviceless_compile.py),
before JAX is imported here.
"""

import argparse
import json
import os
import sys
import time


def _compile_options(compiler, dev):
    return compiler.get_compile_options(num_replicas=1, num_partitions=1,
                                        device_assignment=[dev])


def _device(target: dict, gpu_config: str):
    """The first device of a compile-only topology for the target."""
    from jax.experimental import topologies

    if target["platform"] == "cuda":
        with open(gpu_config) as f:
            return topologies.get_topology_desc(platform="cuda", target_config=f.read(),
                                                topology="1x1x1").devices[0]
    extra = {"chip_config_name": target["chip_config"]} if target.get("chip_config") else {}
    return topologies.get_topology_desc(topology_name=target["topology"], platform="tpu",
                                        **extra).devices[0]


def _stablehlo_module(path: str, ir, xla_client):
    """The HloModuleProto at `path` as a StableHLO module, with every `copy` replaced by its
    operand: TensorFlow writes copies for returned variables, and the StableHLO converter
    refuses them (a copy is an identity at this level; XLA adds the copies it needs again).
    jaxlib 0.10 removes them from the HLO (its `_hlo` module); jaxlib 0.8 (the JAX of libtpu
    0.0.30) has no HLO editing and converts them to `mhlo.copy`, removed from the MLIR."""
    with open(path, "rb") as f:
        proto = f.read()
    try:
        from jaxlib import _hlo
    except ImportError:
        _hlo = None
    if _hlo is not None:
        module = _hlo.HloModule.from_serialized_hlo_module_proto(proto)
        for computation in module.computations():
            for instruction in list(computation.instructions()):
                if instruction.opcode == _hlo.HloOpcode.kCopy:
                    computation.replace_instruction(instruction, instruction.operands()[0])
        proto = module.as_serialized_hlo_module_proto()
    module = ir.Module.parse(xla_client._xla.mlir.hlo_to_stablehlo(proto))
    copies = []

    def visit(operation):
        for region in operation.regions:
            for block in region.blocks:
                for inner in block.operations:
                    if inner.operation.name == "mhlo.copy":
                        copies.append(inner.operation)
                    visit(inner.operation)

    visit(module.operation)
    for copy in copies:
        copy.result.replace_all_uses_with(copy.operands[0])
        copy.erase()
    return module


def _versions() -> dict:
    from importlib import metadata

    found = {}
    for name in ("jax", "jaxlib", "libtpu", "jax-cuda12-plugin"):
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return found


def compile_step(target: dict, hlo_path: str, out_dir: str, gpu_config: str) -> dict:
    """Compiles, writes DIR/optimized.hlo.txt; returns compile.json's values."""
    from jax._src import compiler
    from jax._src.interpreters import mlir as jax_mlir
    from jax._src.lib import xla_client
    from jax._src.lib.mlir import ir

    dev = _device(target, gpu_config)
    record = {"versions": _versions(), "device_kind": dev.device_kind}
    start = time.perf_counter()
    try:
        with jax_mlir.make_ir_context():
            module = _stablehlo_module(hlo_path, ir, xla_client)
            executable = compiler.backend_compile_and_load(
                dev.client, module, xla_client.DeviceList((dev,)),
                _compile_options(compiler, dev), [])
    except Exception as e:  # noqa: BLE001 - e.g. libtpu's RESOURCE_EXHAUSTED: out of HBM
        record.update(compile_s=time.perf_counter() - start,
                      error=f"{type(e).__name__}: {' '.join(str(e).split())}")
        return record
    record["compile_s"] = time.perf_counter() - start
    stats = executable.get_compiled_memory_stats()
    record["memory"] = {key: int(getattr(stats, key + "_size_in_bytes")) for key in
                        ("argument", "output", "alias", "temp", "generated_code")}
    if target["platform"] == "tpu":
        cost = executable.cost_analysis()
        cost = cost[0] if isinstance(cost, list) else cost
        record["cost_analysis"] = {k: float(v) for k, v in (cost or {}).items()
                                   if "{" not in k}  # per-operand entries left out
    text = executable.hlo_modules()[0].to_string()
    with open(os.path.join(out_dir, "optimized.hlo.txt"), "w") as f:
        f.write(text)
    return record


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", required=True, help="A target as JSON (platform, ...).")
    parser.add_argument("--hlo", required=True, help="The exported step.hlo.pb.")
    parser.add_argument("--out", required=True, help="Directory for the results.")
    parser.add_argument("--gpu_config", default=None, help="GpuTargetConfigProto text file.")
    args = parser.parse_args(argv)
    record = compile_step(json.loads(args.target), args.hlo, args.out, args.gpu_config)
    with open(os.path.join(args.out, "compile.json"), "w") as f:
        json.dump(record, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
