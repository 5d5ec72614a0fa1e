"""How the step is traced: for which kind of device, and with which values kept out of
constant folding.

Which device ("cpu", "gpu" or "tpu"). A few layers and the training step trace a different
(numerically equivalent) program for each kind of device: the attention-dropout mask kept in a
stored tensor on a CPU and bit-packed on a GPU (layers/dropout.py), the shifts of the position
scores (layers/relative_position.py), both streams as one attention on a GPU
(layers/relative_attention.py), the clipping norm and the AdamW update one variable at a time
on a CPU and over groups of gradients elsewhere (training/optimization.py). Each asks `kind()`
while the step is traced; every such switch of the project goes through it, so forcing the
target (`tracing_for`) traces exactly the program that device would run, on any machine: that
is how a step is exported for an accelerator from a CPU-only machine
(benchmarks/tools/step_export.py).

Values known only at run time. TensorFlow folds every op whose inputs are all constants into a
literal before XLA sees the program, and XLA's algebraic simplifier folds what it can prove. A
table computed from constants alone (the relative position sinusoids) therefore becomes a
constant of its full size in the compiled program, read from memory at every step. Deriving
one input from a run-time tensor through arithmetic that no simplifier sees through
(`always_true`, `zero`, `int_zero`) keeps the computation in the program.
"""

from __future__ import annotations

import contextlib
from typing import Iterator, Optional

import tensorflow as tf

KINDS = ("cpu", "gpu", "tpu")

# A process-wide setting, not a thread-local one: MirroredStrategy traces each replica's step
# in a thread of its own, and every replica must see the forced target.
_forced: Optional[str] = None


def kind() -> str:
    """The target of the step being traced: the forced one inside `tracing_for`, else "tpu"
    when TensorFlow sees a TPU, "gpu" when it sees a GPU, "cpu" otherwise. Asked at trace time,
    not cached: a TPU system initialized later in the process changes the answer."""
    if _forced is not None:
        return _forced
    if tf.config.list_logical_devices("TPU"):
        return "tpu"
    if tf.config.list_logical_devices("GPU"):
        return "gpu"
    return "cpu"


@contextlib.contextmanager
def tracing_for(target: str) -> Iterator[None]:
    """Traces inside the block as for `target` ("cpu", "gpu" or "tpu"), whatever devices this
    machine has."""
    global _forced
    if target not in KINDS:
        raise ValueError(f"Unknown trace target {target!r}; expected one of {', '.join(KINDS)}.")
    previous, _forced = _forced, target
    try:
        yield
    finally:
        _forced = previous


def always_true(x: tf.Tensor) -> tf.Tensor:
    """bool scalar, true for every value of `x` (an integer tensor of any shape, possibly
    empty, that is not a constant), computed at run time from its largest element u:
    u + 1 != u in uint32 arithmetic (wrapping), which no simplifier folds."""
    if x.dtype != tf.uint32:
        x = tf.bitcast(tf.cast(x, tf.int32), tf.uint32)
    largest = tf.reduce_max(x)
    return tf.not_equal(largest + tf.constant(1, tf.uint32), largest)


def zero(x: tf.Tensor) -> tf.Tensor:
    """float32 scalar 0.0 (positive zero), computed at run time from `x` (see `always_true`)."""
    return 1.0 - tf.cast(always_true(x), tf.float32)


def int_zero(x: tf.Tensor) -> tf.Tensor:
    """int32 scalar 0, computed at run time from `x` (see `always_true`): added to a
    `tf.range`, it keeps index patterns built from the range ([L, K] masks) in the program."""
    return 1 - tf.cast(always_true(x), tf.int32)
