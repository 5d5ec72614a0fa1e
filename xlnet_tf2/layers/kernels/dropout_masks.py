"""The GPU's form of a stored dropout keep mask (layers/dropout.py's `Dropout` with
`store_mask`, where the plan `packs_dropout_masks`): XLA GPU stores such a mask by its own
choice, a byte per score, since its softmax kernels cannot run the hash; bit-packed, the heads'
bits of one score position share one integer, unpacked by a multiply and a compare (the same
values).
"""

from __future__ import annotations

import tensorflow as tf


def bit_packed(keep: tf.Tensor) -> tf.Tensor:
    """`keep` (bool [B, N, ...], N <= 31) as it is once stored with the N elements of axis 1
    as the bits of one integer (int16 for N <= 15, else int32) and read back: the same values.
    A compiler that keeps the mask for several fusions (the probabilities' forward and
    backward) then stores [B, 1, ...] words, 2/N or 4/N of a byte mask, and each reader gets
    element n back with a multiply and a compare (the word times 2**(bits - 1 - n), wrapping,
    has bit n as its sign): an elementwise read that fuses where a byte mask is read."""
    n = keep.shape[1] if keep.shape.rank and keep.shape.rank > 1 else None
    if n is None or n > 31:
        return keep
    dtype, bits = (tf.int16, 16) if n <= 15 else (tf.int32, 32)
    along = [1, n] + [1] * (keep.shape.rank - 2)
    weights = tf.reshape(tf.constant([1 << i for i in range(n)], dtype), along)
    packed = tf.reduce_sum(tf.cast(keep, dtype) * weights, axis=1, keepdims=True)
    to_sign = [(1 << (bits - 1 - i)) - (1 << bits if i == 0 else 0) for i in range(n)]
    return packed * tf.reshape(tf.constant(to_sign, dtype), along) < 0
