"""The factorization order's ranks (data/objective_sampling.py), drawn offline and online:
block permutations, uniform, a pure function of their key."""

import numpy as np
import tensorflow as tf

from xlnet_tf2.data.objective_sampling import online_ranks, sample_ranks_batch


def test_offline_ranks_are_block_permutations():
    keys = np.arange(4000, dtype=np.uint64)
    ranks = sample_ranks_batch(keys, 16, 4)
    for row in ranks:
        for start in range(0, 16, 4):
            assert sorted(row[start:start + 4]) == list(range(start, start + 4))
    # Uniform: each of the 4 ranks is equally likely at every position (1000 +- 5 sigma).
    for position in range(16):
        counts = np.bincount(ranks[:, position] % 4, minlength=4)
        assert np.all(np.abs(counts - 1000) < 5 * np.sqrt(4000 * 0.25 * 0.75)), counts
    # A pure function of the key: one example at a time gives the same rows.
    np.testing.assert_array_equal(sample_ranks_batch(keys[7:8], 16, 4), ranks[7:8])


def test_online_ranks_are_block_permutations_and_seeded():
    seeds = tf.constant(["0:0:0:0:0:1:2", "0:0:0:0:0:1:3"])
    ranks = online_ranks(seeds, 16, 8).numpy()
    for row in ranks:
        assert sorted(row[:8]) == list(range(8)) and sorted(row[8:]) == list(range(8, 16))
    assert not np.array_equal(ranks[0], ranks[1])
    np.testing.assert_array_equal(ranks, online_ranks(seeds, 16, 8).numpy())
