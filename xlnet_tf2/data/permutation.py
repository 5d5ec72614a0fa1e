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


def online_ranks(row_keys: tf.Tensor, seq_len: int, perm_size: int) -> tf.Tensor:
    """In-graph re-sampling of the order: int32 [N, L] from string row_keys [N].

    Every position gets a pseudorandom 62-bit key, the fingerprint of (row key, position);
    sorting the keys inside each block of S positions gives a uniformly random permutation
    that depends only on the row key, never on the topology or when the row is read.
    """
    positions = tf.strings.as_string(tf.range(seq_len))                       # [L]
    num_rows = tf.shape(row_keys)[0]
    keys = tf.strings.join([tf.tile(row_keys[:, None], [1, seq_len]),
                            tf.tile(positions[None, :], [num_rows, 1])], ":")  # [N, L]
    keys = tf.strings.to_hash_bucket_fast(keys, 2**62)                          # [N, L]
    keys = tf.reshape(keys, [-1, seq_len // perm_size, perm_size])             # [N, L/S, S]
    ranks = tf.argsort(tf.argsort(keys, axis=-1, stable=True), axis=-1, stable=True)
    block_start = tf.range(0, seq_len, perm_size)[None, :, None]               # [1, L/S, 1]
    return tf.reshape(ranks + block_start, [-1, seq_len])
