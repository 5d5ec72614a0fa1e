"""Values known only at run time, so that tables are computed in the compiled program instead of
folded into constants.

TensorFlow folds every op whose inputs are all constants into a literal before XLA sees the
program, and XLA's algebraic simplifier folds what it can prove. A table computed from
constants alone (the relative position sinusoids) therefore becomes a constant of its full size
in the compiled program, read from memory at every step. Deriving one input from a run-time
tensor through arithmetic that no simplifier sees through (`always_true`, `zero`, `int_zero`)
keeps the computation in the program. (Which device a step is traced for is the step's plan:
layers/step_plan.py.)
"""

from __future__ import annotations

import tensorflow as tf


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
