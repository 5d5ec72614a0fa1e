"""The factorization order, stored as one rank per position.

Glossary: L seq_len, R reuse_len, S perm_size, N rows of a batch.

`rank[i]` is the place of position i in the factorization order. The reused half [0, R) and
the new half [R, L) are permuted separately (XLNET_REFERENCE.md §2) and the halves keep their
natural order: ranks of the reused half are 0..R-1, of the new half R..L-1. Within a half,
positions are permuted inside consecutive blocks of S positions, blocks in natural order.
With S = R (the default and the paper setup) that is one uniform permutation per half, as in
the original. With smaller S the original applies the *same* shuffle to every block; we draw
each block's shuffle independently.

The rank of a position says nothing about whether it is a target; `masks.py` combines the
two. A rank vector is an [L] int array on disk instead of an [L, L] mask.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf


def sample_ranks(seq_len: int, reuse_len: int, perm_size: int,
                 rng: np.random.Generator) -> np.ndarray:
    """Offline sampling: int32 [L], a permutation of 0..L-1 with the block structure above."""
    ranks = np.empty(seq_len, dtype=np.int32)
    for start in range(0, seq_len, perm_size):
        ranks[start:start + perm_size] = start + rng.permutation(perm_size)
    return ranks


def online_ranks(row_seeds: tf.Tensor, seq_len: int, perm_size: int) -> tf.Tensor:
    """In-graph re-sampling of the order: int32 [N, L] from int64 row_seeds [N, 2].

    Each block of S positions gets a stateless pseudorandom bijection of 0..S-1 seeded by
    (row seed, block index), so a row's order depends only on its seed, never on the
    topology or the step at which it is read.
    """
    num_rows = tf.shape(row_seeds)[0]
    num_blocks = seq_len // perm_size
    # [N, L]: offset of a position inside its block, and the block index.
    offset = tf.tile(tf.range(perm_size, dtype=tf.int64)[None, :], [num_rows, num_blocks])
    block = tf.repeat(tf.range(num_blocks, dtype=tf.int64), perm_size)
    block = tf.tile(block[None, :], [num_rows, 1])
    seeds = tf.stack([
        tf.tile(row_seeds[:, 0:1], [1, seq_len]),
        tf.tile(row_seeds[:, 1:2], [1, seq_len]),
        block,
    ], axis=-1)  # [N, L, 3]
    flat = tf.random.experimental.index_shuffle(
        tf.reshape(offset, [-1]), tf.reshape(seeds, [-1, 3]),
        tf.constant(perm_size - 1, tf.int64))
    ranks = tf.reshape(flat, [num_rows, seq_len]) + block * perm_size
    return tf.cast(ranks, tf.int32)
