"""The pretraining step compiled for an accelerator this machine does not have: an NVIDIA H100
or one Cloud TPU chip, on a CPU-only machine (XLA's deviceless compilation), and what the
program the accelerator would run says about its speed and memory.

    python benchmarks/accelerator_check.py --export_step=STEP_DIR      # first, any machine
    python benchmarks/accelerator_compile.py --target=h100 STEP_DIR
    python benchmarks/accelerator_compile.py --target=tpu_v5e STEP_DIR --json=v5e.json
    python benchmarks/accelerator_compile.py --target=tpu_v4 --venv=/tmp/aot-tpu STEP_DIR \\
        --save_hlo=v4.hlo.txt --top=30

Prints the compile (device, versions, seconds), the program's kernels, bytes and matrix FLOPs,
then for the H100 the time proxy (per kernel max(bytes / 3.35 TB/s, FLOPs / 989 TFLOP/s) + 2
us, summed), the H100 time it predicts through its calibration on measured steps (with the
error bar) and the MFU at that time; for a TPU whether the program fits the chip's HBM (the
memory it needs; a program libtpu refuses is one line, "does not fit: needs X of Y GiB"),
libtpu's cost analysis and its cycle estimates summed; for every target the time by part of
the model (attention scores, position scores and rel shift, softmax, dropout, feed-forward,
optimizer, ...), by kind of kernel, and the most expensive kernel classes. --json writes it
all. The compile runs in a venv of its own (scripts/setup_accelerator_compile.sh; the command
says which is missing). At XLNet-Base a compile takes minutes; run it with nice on a shared
machine. benchmarks/tools/deviceless_compile.py says how; the flags are the settings of
`AcceleratorCompileConfig` (benchmarks/tools/command_configs.py).
"""

import _paths  # noqa: E402,F401  (the checkout's root and tests/ on sys.path)

from xlnet_tf2 import cli, fileio

cli.quiet_startup()  # nothing here imports TensorFlow; the same start-up as every command

from xlnet_tf2.config_flags import RunConfigError, config_from_flags, define_flags  # noqa: E402
from benchmarks.tools.command_configs import AcceleratorCompileConfig  # noqa: E402

define_flags(AcceleratorCompileConfig, exclude=("step_dir",))


def main(argv):
    if len(argv) != 2:
        raise RunConfigError("give one STEP_DIR, the directory benchmarks/accelerator_check.py "
                             f"--export_step wrote (got {len(argv) - 1} arguments).")
    c = config_from_flags(AcceleratorCompileConfig, exclude=("step_dir",), step_dir=argv[1])
    from benchmarks.tools import deviceless_compile

    report = deviceless_compile.run(c.step_dir, c.target, venv=c.venv, top=c.top,
                                    save_hlo=c.save_hlo)
    print(deviceless_compile.format_report(report), flush=True)
    if c.json:
        fileio.write_json_atomically(c.json, report)
    return 0


if __name__ == "__main__":
    cli.run(main, takes_arguments=True)
