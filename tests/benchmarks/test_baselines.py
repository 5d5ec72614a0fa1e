"""The unigram baselines the main job compares its losses with, against hand computation."""

import math

import numpy as np
import pytest
import tensorflow as tf

from benchmarks.tools.baselines import unigram_baselines


def _batches(targets, masks):
    return tf.data.Dataset.from_tensor_slices(
        {"target": np.asarray(targets, np.int32), "target_mask": np.asarray(masks, np.float32)}
    ).batch(1)


def test_train_entropy_and_smoothed_held_out_cross_entropy():
    # Training targets: token 1 three times, token 2 once (a padded slot of token 3 ignored).
    train = _batches([[1, 1, 2], [1, 3, 3]], [[1, 1, 1], [1, 0, 0]])
    # Held-out targets: tokens 1 and 4 (4 never seen in training).
    held_out = _batches([[1, 4]], [[1, 1]])
    out = unigram_baselines(train, held_out, vocab_size=5, max_batches=10)
    p1, p2 = 3 / 4, 1 / 4
    assert out["train_entropy"] == pytest.approx(-(p1 * math.log(p1) + p2 * math.log(p2)))
    assert out["train_targets"] == 4 and out["heldout_targets"] == 2
    # Add-one smoothing over 5 tokens: (count + 1) / (4 + 5).
    expected = -(math.log(4 / 9) + math.log(1 / 9)) / 2
    assert out["heldout_cross_entropy"] == pytest.approx(expected)
    assert out["heldout_perplexity"] == pytest.approx(math.exp(expected))
