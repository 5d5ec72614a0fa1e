"""The dropout masks' bits: a counter-based hash that XLA vectorizes, and the forms a keep mask
is handed to the compiler in (stored once, bit-packed).

Random bits. Element n of a draw with key (k0, k1) gets the 32-bit value
    fmix32(fmix32(n * 0x9E3779B9 + k0 * 0x85EBCA77 + k1) ^ fmix32(k1 ^ fmix32(k0)))
(fmix32 is MurmurHash3's finalizer: an invertible mixing of all 32 bits). The key enters twice,
additively and through a hash, so two different keys never give shifted copies of one stream
(unless their 32-bit hashes collide). The element is kept when the value is >= rate * 2**32.
This is the counter-based construction of Philox and Threefry with a cheaper round function.

Inside a compiled step no op may have only constant inputs of a tensor's size: TensorFlow folds
such an op (a flat index, say) into a literal that the program reads from memory at every step.
`hashed_bits` therefore builds n * GOLDEN from small per-dimension ranges added onto the run-time
key term (tests/training/test_program_constants.py keeps large constants out).

Stored masks (`stored`, CPU): XLA recomputes a cheap elementwise value in every fusion that
uses it; the attention probabilities' mask is used by several fusions of the backward pass, so
it leaves a `tf.cond` (XLA does not fuse across control flow) and is computed once. The
condition is always true, but only at run time (layers/run_time.py's `always_true`), so XLA
cannot fold it away.

Bit-packed masks (`bit_packed`, GPU): XLA GPU stores such a mask by its own choice, a byte per
score, since its softmax kernels cannot run the hash; bit-packed, the heads' bits of one score
position share one integer, unpacked by a multiply and a compare (the same values).
"""

from __future__ import annotations

from typing import Union

import tensorflow as tf

from xlnet_tf2.layers import run_time

GOLDEN = 0x9E3779B9
KEY_MULTIPLIER = 0x85EBCA77
MASK32 = 0xFFFFFFFF


def fmix32(h: tf.Tensor) -> tf.Tensor:
    """MurmurHash3's 32-bit finalizer on a uint32 tensor."""
    h = tf.bitwise.bitwise_xor(h, tf.bitwise.right_shift(h, 16))
    h = h * tf.constant(0x85EBCA6B, tf.uint32)
    h = tf.bitwise.bitwise_xor(h, tf.bitwise.right_shift(h, 13))
    h = h * tf.constant(0xC2B2AE35, tf.uint32)
    return tf.bitwise.bitwise_xor(h, tf.bitwise.right_shift(h, 16))


def fmix32_int(h: int) -> int:
    """fmix32 on a Python int (for keys known when the step is traced)."""
    h &= MASK32
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & MASK32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & MASK32
    return h ^ (h >> 16)


def hashed_bits(shape, k0: tf.Tensor, k1: tf.Tensor) -> tf.Tensor:
    """uint32 [shape] pseudo-random bits. `k0` is a uint32 scalar; `k1` a uint32 scalar, or a
    uint32 [shape[0]] vector giving every row its own key (n then counts within the row).
    `shape`: a list (ints, or int32 scalars for sizes known only at run time), a TensorShape
    or an int32 [rank] tensor.

    The hash input n * GOLDEN + k0 * KEY_MULTIPLIER + k1 (n the row-major index of an element)
    is built with n * GOLDEN = sum_d i_d * (stride_d * GOLDEN) mod 2**32: a sum of small
    per-dimension ranges, each broadcast-added onto the key term, which holds the step (or the
    layer's seed stream) and so is known only at run time. No op has only constant inputs of a
    large shape: TensorFlow folds such an op (a flat index) into a literal of the tensor's size
    in the compiled program, read from memory at every step; this way XLA computes the index
    in the fusion that hashes it. The sum equals the flat index formula bit for bit (tests).
    """
    # The sizes: Python ints where known when the step is traced, int32 scalars otherwise.
    if isinstance(shape, (list, tuple, tf.TensorShape)):
        if any(d is None for d in shape):
            raise ValueError(f"Dropout got a shape with unknown sizes {shape}: give int32 "
                             "scalars (tf.shape(x)[i]) for them.")
        dims = [d if tf.is_tensor(d) else int(d) for d in shape]
    elif tf.get_static_value(shape) is not None:
        dims = [int(d) for d in tf.get_static_value(shape)]
    else:
        rank = shape.shape[0]
        if rank is None:
            raise ValueError("Dropout needs inputs of a known rank.")
        dims = [shape[i] for i in range(rank)]
    rank = len(dims)
    keyed = k1.shape.rank == 1
    h = k0 * tf.constant(KEY_MULTIPLIER, tf.uint32) + k1       # [] or [rows]
    if rank:
        h = tf.reshape(h, [-1 if keyed else 1] + [1] * (rank - 1))  # [rows or 1, 1, ...]
    # The row-major stride of dimension d (within a row when keyed): a Python int while the
    # sizes after d are, a uint32 tensor from the first size known only at run time on.
    stride: Union[int, tf.Tensor] = 1
    for d in reversed(range(1 if keyed else 0, rank)):
        size = dims[d]
        if not (isinstance(size, int) and size == 1):
            if isinstance(stride, int):
                step = tf.constant(stride * GOLDEN & MASK32, tf.uint32)
            else:
                step = stride * GOLDEN
            term = tf.cast(tf.range(size, dtype=tf.int32), tf.uint32) * step          # [size]
            h = h + tf.reshape(term, [1] * d + [-1] + [1] * (rank - d - 1))
        if isinstance(stride, int) and isinstance(size, int):
            stride = stride * size
        else:
            if isinstance(stride, int):
                stride = tf.constant(stride & MASK32, tf.uint32)
            stride = stride * tf.cast(size, tf.uint32)
    h = fmix32(h)  # every dimension got its term (or is 1), or is the key's rows
    if keyed:
        k1 = tf.reshape(k1, [-1] + [1] * (rank - 1))             # [rows, 1, ...]
    return fmix32(tf.bitwise.bitwise_xor(h, fmix32(tf.bitwise.bitwise_xor(k1, fmix32(k0)))))


def hashed_uniform_bits(shape, key: tf.Tensor) -> tf.Tensor:
    """uint32 [shape] pseudo-random bits, a pure function of (element index, key [2] uint32)."""
    return hashed_bits(shape, key[0], key[1])


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


def stored(keep: tf.Tensor, key: tf.Tensor) -> tf.Tensor:
    """`keep` through a conditional that is true only at run time (`key`: a run-time integer
    tensor), so that XLA computes the mask once and reads it where it is used."""
    return tf.cond(run_time.always_true(key), lambda: keep, lambda: tf.zeros_like(keep))
