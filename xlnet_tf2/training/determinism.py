"""Bit-reproducible TensorFlow execution (`--deterministic`).

Every kernel being deterministic by itself is not enough: with several inter-op threads the
same training step run twice in one process gives losses that part by float rounding after a
few steps. With one inter-op thread (ops run one at a time, each still using all cores) the
losses and weights of repeated runs, and of a run resumed from any checkpoint, are
bit-identical (measurements: BENCHMARKS.md#figures-behind-choices-in-the-code). So
`--deterministic` sets one inter-op thread and TensorFlow's op determinism
(which also selects deterministic GPU kernels). The inter-op thread count can only be set
before TensorFlow's runtime starts: the commands call `apply(config.loop)` first thing
(training/run_task.py); in a process that already ran TensorFlow ops, `enable()` raises
unless the setting is already in force.
"""

from __future__ import annotations

import tensorflow as tf

from xlnet_tf2.config_flags import RunConfigError


def enable() -> None:
    """Turns on deterministic execution for this process (see the module docstring)."""
    tf.config.experimental.enable_op_determinism()
    if tf.config.threading.get_inter_op_parallelism_threads() == 1:
        return
    try:
        tf.config.threading.set_inter_op_parallelism_threads(1)
    except RuntimeError as e:
        raise RunConfigError(
            "--deterministic needs one inter-op thread, which can only be set before "
            "TensorFlow starts: call xlnet_tf2.training.determinism.enable() (or "
            "tf.config.threading.set_inter_op_parallelism_threads(1)) before running any "
            f"TensorFlow op in this process ({e}).") from None


def apply(loop) -> None:
    """`enable()` when a run's loop settings (a LoopConfig) ask for --deterministic."""
    if loop.deterministic:
        enable()
