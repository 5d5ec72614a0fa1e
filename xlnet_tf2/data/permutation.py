"""The factorization order, stored as one rank per position.

Letters (docs/GLOSSARY.md): L seq_len, R reuse_len, B rows of a batch; `perm_size` has no letter.

`rank[i]` is the place of position i in the factorization order. The reused half [0, R) and
the new half [R, L) are permuted separately (docs/SEMANTICS.md#factorization-order) and the
halves keep their natural order: ranks of the reused half are 0..R-1, of the new half R..L-1.
Within a half, positions are permuted inside consecutive blocks of perm_size positions, blocks
in natural order. With perm_size = R (the default and the paper setup) that is one uniform
permutation per half, as in the original. With a smaller perm_size the original applies the
*same* shuffle to every block; we draw each block's shuffle independently.

The rank of a position says nothing about whether it is a target; `masks.py` combines the
two. A rank vector is an [L] int array on disk instead of an [L, L] mask.
"""

from __future__ import annotations

import numpy as np

from xlnet_tf2.data import hashrand

# Factorization orders of pretraining (--factorization_order): "permutation" is XLNet's
# (the stored or online ranks, non-targets visible to all); "left_to_right" is the identity
# order with every position ranked, i.e. a plain left-to-right (causal) language model
# predicting the same targets: the objective the permutation one generalizes. masks.py applies
# them; they are named here, not there, so flag definitions need no TensorFlow (fast --help).
FACTORIZATION_ORDERS = ("permutation", "left_to_right")


def sample_ranks_batch(keys: np.ndarray, seq_len: int, perm_size: int) -> np.ndarray:
    """Offline sampling for C examples: int32 [C, L], each row a permutation of 0..L-1 with
    the block structure above (blocks of perm_size positions never straddle the reused part's
    end R: perm_size divides R).

    Position i of example c gets the 64-bit key `hashrand.bits(keys[c], TAG_PERM, i)`; the
    stable argsort of the keys inside each block of perm_size positions is a uniformly random
    permutation of the block (a pure function of the example key).
    """
    keys = np.asarray(keys, np.uint64)
    draws = hashrand.bits(keys, hashrand.TAG_PERM, np.arange(seq_len))       # [C, L]
    blocks = draws.reshape(keys.shape[0], seq_len // perm_size, perm_size)
    # Ties between 64-bit keys have probability ~ perm_size^2 / 2^65; the sort is deterministic
    # anyway.
    ranks = np.argsort(blocks, axis=-1).astype(np.int32)
    ranks += np.arange(0, seq_len, perm_size, dtype=np.int32)[None, :, None]
    return ranks.reshape(keys.shape[0], seq_len)


def online_ranks(row_keys, seq_len: int, perm_size: int):
    """In-graph re-sampling of the order: int32 [B, L] from string row_keys [B].

    Every position gets a pseudorandom 62-bit key, the fingerprint of (row key, position);
    sorting the keys inside each block of perm_size positions gives a uniformly random permutation
    that depends only on the row key, never on the topology or when the row is read.
    """
    import tensorflow as tf  # in the input pipeline only; data prep imports no TF

    positions = tf.strings.as_string(tf.range(seq_len))                       # [L]
    num_rows = tf.shape(row_keys)[0]
    keys = tf.strings.join([tf.tile(row_keys[:, None], [1, seq_len]),
                            tf.tile(positions[None, :], [num_rows, 1])], ":")  # [B, L]
    keys = tf.strings.to_hash_bucket_fast(keys, 2**62)                          # [B, L]
    keys = tf.reshape(keys, [-1, seq_len // perm_size, perm_size])  # [B, L/perm_size, perm_size]
    ranks = tf.argsort(tf.argsort(keys, axis=-1, stable=True), axis=-1, stable=True)
    block_start = tf.range(0, seq_len, perm_size)[None, :, None]               # [1, L/perm_size, 1]
    return tf.reshape(ranks + block_start, [-1, seq_len])
