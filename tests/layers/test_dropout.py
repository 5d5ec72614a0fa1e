"""The hashed dropout layer: Keras dropout semantics, independent masks, XLA-ready."""

import numpy as np
import pytest
import tensorflow as tf

from xlnet_tf2.layers import Dropout
from xlnet_tf2.layers.dropout import (_always_true, dropout_keys, hashed_uniform_bits,
                                     masks_are_stored_here)


def test_inference_is_identity_and_training_drops_and_rescales():
    layer = Dropout(0.25, seed=3)
    x = tf.ones([64, 256])
    np.testing.assert_array_equal(layer(x, training=False).numpy(), x.numpy())
    y = layer(x, training=True).numpy()
    dropped = np.mean(y == 0.0)
    assert abs(dropped - 0.25) < 0.014  # 16384 draws: 4 standard deviations
    np.testing.assert_allclose(y[y != 0.0], 1.0 / 0.75, rtol=1e-6)


def test_bits_are_uniform_and_neighbours_independent():
    bits = hashed_uniform_bits(tf.constant([1 << 18]), tf.constant([12345, 678], tf.uint32))
    u = bits.numpy().astype(np.float64) / 2.0 ** 32
    # Uniform: every 1/16 bin holds 1/16 of the values (4 sigma of a binomial count).
    counts = np.bincount((u * 16).astype(int), minlength=16)
    expected = u.size / 16
    assert np.all(np.abs(counts - expected) < 4 * np.sqrt(expected * 15 / 16))
    # Neighbouring elements (and elements a row apart) are uncorrelated.
    for lag in (1, 2, 64, 1024):
        corr = np.corrcoef(u[:-lag], u[lag:])[0, 1]
        assert abs(corr) < 4 / np.sqrt(u.size), (lag, corr)
    # Keys that differ in one bit give unrelated streams.
    other = hashed_uniform_bits(tf.constant([1 << 18]), tf.constant([12345, 679], tf.uint32))
    corr = np.corrcoef(u, other.numpy().astype(np.float64))[0, 1]
    assert abs(corr) < 4 / np.sqrt(u.size)


def test_masks_differ_between_calls_and_compile_under_xla():
    layer = Dropout(0.5, seed=1)
    step = tf.function(lambda x: layer(x, training=True), jit_compile=True)
    x = tf.ones([64, 64])
    a, b = step(x).numpy() == 0, step(x).numpy() == 0
    # Independent masks of rate 1/2 disagree on half the elements.
    assert abs(np.mean(a != b) - 0.5) < 4 * 0.5 / np.sqrt(a.size)


def test_same_seed_same_stream_and_zero_rate_is_free():
    x = tf.ones([16, 16])
    a = Dropout(0.3, seed=9)(x, training=True).numpy()
    b = Dropout(0.3, seed=9)(x, training=True).numpy()
    np.testing.assert_array_equal(a, b)
    assert Dropout(0.0).seed_generator is None
    np.testing.assert_array_equal(Dropout(0.0)(x, training=True).numpy(), x.numpy())


# ------------------------------------------------------------------ stored masks (store_mask)
def _keyed_dropout(store_mask: bool):
    """A jit-compiled training call of Dropout(0.3, store_mask) inside the training loop's key
    scope (the step is a run-time value, as in the trainer), with its gradient."""
    layer = Dropout(0.3, store_mask=store_mask)

    @tf.function(jit_compile=True)
    def call(x, step):
        with dropout_keys(seed=5, step=step, example_ids=tf.range(4), examples_per_step=4):
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = layer(x, training=True)
                loss = tf.reduce_sum(y * y)
        return y, tape.gradient(loss, x)
    return call


def test_stored_mask_gives_the_same_values_and_gradients():
    x = tf.random.stateless_normal([4, 3, 16, 24], seed=[1, 2])
    step = tf.constant(7, tf.int64)
    y_stored, g_stored = _keyed_dropout(True)(x, step)
    y_plain, g_plain = _keyed_dropout(False)(x, step)
    np.testing.assert_array_equal(y_stored.numpy(), y_plain.numpy())
    np.testing.assert_array_equal(g_stored.numpy(), g_plain.numpy())
    dropped = np.mean(y_plain.numpy() == 0.0)
    assert abs(dropped - 0.3) < 0.05
    # Outside the key scope (the layer's own seed stream) too.
    a = Dropout(0.3, seed=4, store_mask=True)(x, training=True).numpy()
    b = Dropout(0.3, seed=4)(x, training=True).numpy()
    np.testing.assert_array_equal(a, b)


def test_stored_mask_is_a_conditional_that_xla_keeps_on_a_cpu():
    """The mask is stored only if XLA keeps the conditional: a condition it could prove true
    would be folded away, and the speed-up lost without any other sign."""
    if not masks_are_stored_here():
        pytest.skip("an accelerator is visible: masks are recomputed there by design")
    x = tf.ones([4, 3, 16, 24])
    step = tf.constant(7, tf.int64)

    def conditionals(store_mask):
        hlo = _keyed_dropout(store_mask).experimental_get_compiler_ir(x, step)(
            stage="optimized_hlo")
        return hlo.count(" conditional(")

    assert conditionals(True) == 1
    assert conditionals(False) == 0


def test_the_stored_masks_condition_is_true_for_every_key():
    keys = tf.constant([0, 1, 2 ** 31, 2 ** 32 - 2, 2 ** 32 - 1], tf.uint32)
    for k in keys:
        assert bool(_always_true(k))
    assert bool(_always_true(keys))
    assert Dropout(0.1, store_mask=True).get_config()["store_mask"] is True
    assert Dropout.from_config(Dropout(0.1, store_mask=True).get_config()).store_mask
