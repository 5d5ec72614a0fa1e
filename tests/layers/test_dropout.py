"""The hashed dropout layer: Keras dropout semantics, independent masks, XLA-ready."""

import numpy as np
import tensorflow as tf

from xlnet_tf2.layers import Dropout
from xlnet_tf2.layers.dropout import hashed_uniform_bits


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
