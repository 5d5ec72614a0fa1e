"""The hidden dropouts' backward hashes its bits again where it uses them (layers/dropout.py's
`_recomputed_dropout`): the values and gradients are bit for bit those of the mask applied by
tf.where (autodiff), and the traced step holds a second hash, fed keys that XLA cannot prove
equal to the forward's, instead of the forward's mask."""

import numpy as np
import pytest
import tensorflow as tf

from fixtures.traced_graphs import operations_through_calls
from xlnet_tf2.layers import Dropout
from xlnet_tf2.layers.dropout import hashed_bits
from xlnet_tf2.layers.step_plan import DropoutKeys, StepPlan


def _plan():
    return StepPlan(device="gpu").with_dropout_keys(
        DropoutKeys.of(11, tf.constant(7), tf.constant([3, 0, 2]), 4))


def _independent(x, dy, layer, plan, row_draws):
    """tf.where(keep, x / (1 - rate), 0) and its autodiff gradient, the keep mask drawn from
    the layer's own keys with hashed_bits, part by part."""
    parts = [x.shape[-2]] if row_draws is None else row_draws
    threshold = tf.constant(layer._threshold, tf.uint32)
    keeps = []
    for rows in parts:
        k0, k1 = layer._keys(False, x.shape[0], plan)
        keeps.append(hashed_bits(list(x.shape[:-2]) + [rows, x.shape[-1]], k0, k1) >= threshold)
    keep = tf.concat(keeps, axis=-2)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = tf.where(keep, x / tf.cast(1.0 - layer.rate, x.dtype), tf.zeros_like(x))
    return y, tape.gradient(y, x, output_gradients=dy)


def _ours(x, dy, layer, plan, row_draws):
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = layer(x, training=True, row_draws=row_draws, plan=plan)
    return y, tape.gradient(y, x, output_gradients=dy)


def _bits(t):
    return tf.bitcast(t, tf.uint16 if t.dtype == tf.bfloat16 else tf.uint32).numpy()


@pytest.mark.xla
def test_values_and_gradients_are_the_masks_bit_for_bit():
    """Eager against eager, compiled against compiled (XLA may divide by a constant as a
    multiply: the same in both programs)."""
    rng = np.random.default_rng(0)
    for dtype in (tf.float32, tf.bfloat16):
        layer = Dropout(0.3, dtype=dtype.name)
        layer.salt = 5  # the keys are the plan's: each call below draws with a fresh plan
        x = tf.cast(rng.normal(size=[3, 9, 16]), dtype)
        dy = tf.cast(rng.normal(size=[3, 9, 16]), dtype)
        for row_draws in (None, (6, 3)):
            for run in (lambda f: f, lambda f: tf.function(f, jit_compile=True)):
                want = run(lambda a, b: _independent(a, b, layer, _plan(), row_draws))(x, dy)
                got = run(lambda a, b: _ours(a, b, layer, _plan(), row_draws))(x, dy)
                for w, g in zip(want, got):
                    np.testing.assert_array_equal(_bits(g), _bits(w))
            dropped = float(tf.reduce_mean(tf.cast(want[0] == 0, tf.float32)))
            assert 0.15 < dropped < 0.45


def test_the_backward_hashes_the_bits_itself():
    """In the traced forward and backward, the hash runs twice (twice the fmix rounds): the
    backward's own, not a mask kept from the forward."""
    layer = Dropout(0.3)
    x = tf.ones([3, 9, 16])

    @tf.function
    def step(a):
        with tf.GradientTape() as tape:
            tape.watch(a)
            y = layer(a, training=True, plan=_plan())
        return tape.gradient(y, a)

    graph = step.get_concrete_function(x).graph
    forward_only = tf.function(lambda a: layer(a, training=True, plan=_plan()))
    once = operations_through_calls(forward_only.get_concrete_function(x).graph, "BitwiseXor")
    assert once > 0
    assert operations_through_calls(graph, "BitwiseXor") == 2 * once
