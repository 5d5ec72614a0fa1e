"""The pretraining loss (tasks/objective.py) against a hand computation in numpy."""

import numpy as np
import tensorflow as tf

from xlnet_tf2.tasks import objective


def test_loss_is_masked_cross_entropy_over_the_target_count():
    # B=2 examples, P=3 slots, V=4 words; the last slot of each row is empty (-1 / mask 0).
    logits = np.array([[[2.0, 0.5, -1.0, 0.0], [0.1, 0.2, 0.3, 0.4], [9.0, -9.0, 9.0, 0.0]],
                       [[-1.0, 3.0, 0.0, 1.0], [0.0, 0.0, 0.0, 0.0], [5.0, 5.0, 5.0, 5.0]]],
                      np.float32)
    target = np.array([[0, 3, 1], [1, 2, 0]], np.int32)
    positions = np.array([[4, 7, -1], [0, 2, -1]], np.int32)
    mask = (positions >= 0).astype(np.float32)

    # By hand: -log softmax(logits)[target], summed where mask is 1.
    log_softmax = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    picked = np.take_along_axis(log_softmax, target[..., None], -1)[..., 0]
    expected_sum = float(-(picked * mask).sum())
    # Row 1, slot 1 is uniform over 4 words: its term alone is log 4.
    np.testing.assert_allclose(-picked[1, 1], np.log(4.0), rtol=1e-6)

    ce_sum = objective.target_cross_entropy(tf.constant(logits), tf.constant(target),
                                            tf.constant(mask))
    count = objective.target_count(tf.constant(positions))
    assert float(count) == 4.0
    np.testing.assert_allclose(float(ce_sum), expected_sum, rtol=1e-6)
    np.testing.assert_allclose(float(ce_sum) / float(count), expected_sum / 4.0, rtol=1e-6)
    # The empty slots' logits do not count, whatever they hold.
    logits[:, 2] = 100.0 * np.arange(4)
    again = objective.target_cross_entropy(tf.constant(logits), tf.constant(target),
                                           tf.constant(mask))
    np.testing.assert_allclose(float(again), expected_sum, rtol=1e-6)
