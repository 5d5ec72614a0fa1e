"""One contender of `benchmarks/benchmark.py --workloads=loop`, in a process of its own so that
its peak RSS is its own; benchmark.py starts it once per round:

    python benchmarks/benchmark_loop_worker.py --role=real --spec=WORKDIR/spec.json \
        --output=WORKDIR/real.json

--role=real runs the pretraining loop as experiments/run_pretrain.py builds it, bare the bare
jit-compiled step, huggingface the HuggingFace PyTorch loop (without importing TensorFlow).
The timings go to --output as JSON (benchmarks/tools/loop_benchmark.py says what they mean).
The flags are the settings of `LoopWorkerConfig` (benchmarks/tools/command_configs.py).
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import _paths  # noqa: E402,F401  (the checkout's root on sys.path)

from xlnet_tf2 import cli, fileio  # noqa: E402

cli.quiet_startup()  # no TensorFlow start-up noise unless --verbosity

from xlnet_tf2.config_flags import config_from_flags, define_flags  # noqa: E402
from benchmarks.tools.command_configs import LoopWorkerConfig  # noqa: E402

define_flags(LoopWorkerConfig)


def main(argv):
    del argv
    c = config_from_flags(LoopWorkerConfig)
    from benchmarks.tools.loop_benchmark import LoopSpec

    spec = LoopSpec.read(c.spec)
    if c.role == "huggingface":
        from benchmark_reference import hf_pretrain_loop

        result = hf_pretrain_loop(spec)
    else:
        from benchmarks.tools import loop_contenders

        loop_contenders.configure_threads(spec)
        if c.role == "real":
            result = loop_contenders.run_real_loop(spec, os.path.join(spec.workdir, "real_run"))
        else:
            result = loop_contenders.run_bare_step(spec)
    fileio.write_json_atomically(c.output, result)
    return 0


if __name__ == "__main__":
    cli.run(main)
