"""The first run on a GPU or TPU: the real pretraining path at XLNet-Base's shape under
mixed_bfloat16 with XLA, its first-step loss checked against float32, then timed.

    python benchmarks/accelerator_check.py                    # Base, batch 16, 300 steps
    python benchmarks/accelerator_check.py --steps=500 --batch_size=32 --output_json=gpu.json
    python benchmarks/accelerator_check.py --tpu=local        # on a TPU VM
    python benchmarks/accelerator_check.py --cpu_dry_run      # this code on a CPU, tiny shape
    python benchmarks/accelerator_check.py --export_step=DIR  # the step as an XLA program
    python benchmarks/accelerator_check.py --gpu_bundle=DIR   # for benchmarks/gpu/step_comparison.py

Prints the devices, the first-step losses (float32 and --precision, from the same weights,
batch and dropout masks) and whether they agree within --loss_tolerance, then step time,
tokens/s, MFU against the device's data-sheet peak and the device memory in use. On a machine
without an accelerator it says so in one line and exits 0 (unless --cpu_dry_run). Exit status
1 when the losses disagree. With --export_step=DIR it writes the step of that run as a
portable XLA program instead (on any machine, CPU-only included) and checks nothing.
benchmarks/tools/accelerator_check.py says what runs and why; the flags are the settings of
`AcceleratorCheckConfig` (benchmarks/tools/command_configs.py).
"""

import dataclasses
import os
import shutil
import tempfile

import _paths  # noqa: E402,F401  (the checkout's root on sys.path)

from xlnet_tf2 import cli, fileio

cli.quiet_startup()  # no TensorFlow start-up noise unless --verbosity

from xlnet_tf2.config_flags import RunConfigError, config_from_flags, define_flags  # noqa: E402
from benchmarks.tools.command_configs import AcceleratorCheckConfig  # noqa: E402

define_flags(AcceleratorCheckConfig)


def main(argv):
    del argv
    c = config_from_flags(AcceleratorCheckConfig)
    export = c.export_step and os.path.abspath(c.export_step)
    if export and os.path.isfile(export):
        raise RunConfigError(f"--export_step={c.export_step} is a file; pass a directory (new, "
                             "or an earlier export to replace).")
    from benchmarks.tools import accelerator_check

    if c.gpu_bundle:
        workdir = os.path.abspath(c.workdir or tempfile.mkdtemp(prefix="xlnet_gpu_bundle_"))
        try:
            accelerator_check.run_gpu_bundle(dataclasses.replace(c, workdir=workdir),
                                             os.path.abspath(c.gpu_bundle))
        finally:
            if c.workdir is None:
                shutil.rmtree(workdir, ignore_errors=True)
        return 0
    if not (export or c.distribution.tpu or c.cpu_dry_run or accelerator_check.accelerators()):
        print(f"{cli.program_name()}: no GPU or TPU is visible to TensorFlow on this machine "
              "(CPU only): nothing to check (--cpu_dry_run runs the same code on the CPU at a "
              "tiny shape).", flush=True)
        return 0
    temporary = c.workdir is None
    workdir = os.path.abspath(c.workdir or tempfile.mkdtemp(prefix="xlnet_accelerator_check_"))
    try:
        if export:
            accelerator_check.run_export(dataclasses.replace(c, workdir=workdir), export,
                                         dry_run=c.cpu_dry_run)
            return 0
        report = accelerator_check.run_check(dataclasses.replace(c, workdir=workdir),
                                             dry_run=c.cpu_dry_run)
    finally:
        if temporary:
            shutil.rmtree(workdir, ignore_errors=True)
    print(accelerator_check.format_report(report), flush=True)
    if c.output_json:
        fileio.write_json_atomically(c.output_json, report)
    return 0 if report["passed"] else 1


if __name__ == "__main__":
    cli.run(main)
