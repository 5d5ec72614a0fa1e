"""Inverted dropout whose mask comes from a counter-based hash that XLA vectorizes, keyed so that
a training run's masks are a pure function of (seed, step, example), whatever the topology.

Same semantics as `keras.layers.Dropout`: while training, each element is zeroed with
probability `rate` and the kept ones are scaled by 1 / (1 - rate); identity at inference.

Random bits. Element n of a draw with key (k0, k1) gets the 32-bit value
    fmix32(fmix32(n * 0x9E3779B9 + k0 * 0x85EBCA77 + k1) ^ fmix32(k1 ^ fmix32(k0)))
(fmix32 is MurmurHash3's finalizer: an invertible mixing of all 32 bits). The key enters twice,
additively and through a hash, so two different keys never give shifted copies of one stream
(unless their 32-bit hashes collide). The element is kept when the value is >= rate * 2**32.
This is the counter-based construction of Philox and Threefry with a cheaper round function;
tests check the drop rate and the independence of neighbouring elements, calls and examples.

Keys inside the training loop (`dropout_keys(...)`, set by xlnet_tf2/training/trainer.py):
    k0 = hash(seed, the layer's place in the model, the call's place in the traced step)
    k1 = step * examples_per_step + example       for a tensor with a batch dimension: each
                                                  example row draws its own key, n counts
                                                  within the row
    k1 = step                                     for a tensor shared by the batch (the
                                                  relative position embedding)
`example` is the example's place in the global batch in an order that does not depend on the
replicas or micro-batches (pretraining: its stream and direction), so one device, several
replicas and gradient accumulation draw the same mask for the same example, and a run resumed
from a checkpoint (which holds the step) draws exactly the masks of the uninterrupted run,
whatever `steps_per_loop`. k1 is injective in (step, example) up to 2**32 draws. The layer's
place is `salt`, given to every Dropout of a model in a fixed order (`assign_dropout_salts`).
Outside the scope (a user calling `model(x, training=True)`), the key comes from the layer's
Keras `SeedGenerator`, a new key per call.

The index inside the compiled step. n * 0x9E3779B9 is built as a sum over the dimensions,
i_d * (stride_d * 0x9E3779B9) mod 2**32, of small 1-D ranges broadcast-added onto the run-time
key term k0 * 0x85EBCA77 + k1 (`hashed_bits`): the same bits as the formula, but no op has
only constant inputs of the tensor's size. TensorFlow folds such an op into a literal before
XLA sees the step; a flat index was a u32 array of the tensor's size per dropout call (most
of the 187 MB of constants of XLNet-Base's step at batch 16, read from memory at every step;
BENCHMARKS.md). tests/training/test_program_constants.py fails if a large constant returns.

Stored masks (`store_mask=True`, the attention probabilities' dropout). XLA recomputes a
cheap elementwise value wherever it is used rather than storing it, and the dropout mask of the
attention probabilities is used by several fusions of the backward pass, among them the
rel-shift's gradient, which computes every element from a reshaped and padded index: the hash
ran there once more per element, behind index arithmetic that does not vectorize. With
`store_mask` the keep mask leaves a `tf.cond` (XLA does not fuse across control flow), so it is
computed once and read as one byte per element. The condition is always true, but only at run
time (`always_true` of `layers/run_time.py`, on the step-derived key), so that XLA cannot
fold the conditional away.
Storing only this mask, not every dropout's, was the fastest on a CPU (BENCHMARKS.md). Done
only in a step traced for a CPU (`masks_are_stored_here`). At the paper's scale such masks
would be one byte per score: 24 layers x 16 heads x (512 + 85) query rows x 896 keys = 205 MB
per example.

On a GPU XLA stores the mask by its own choice: its softmax kernels (Triton) take no unsigned
integers or shifts, so the hash cannot run inside them, and XLA writes the keep mask as a byte
per score that the forward and backward softmax kernels read. There `store_mask` hands it
the mask bit-packed instead (`_bit_packed`): the heads' bits of one score position in one
int16, 1/6 of the bytes with 12 heads, unpacked in those kernels by a multiply and a compare
(the same values). A TPU recomputes the hash where it is used, and keeps the plain mask.

Why not a TensorFlow generator: with a run-time seed under XLA, tf.random.stateless_uniform
(Philox) and Keras' own dropout were many times slower per value than this hash on a CPU, and
dropout touches about ten million elements per pretraining step of the benchmark model
(BENCHMARKS.md, "Dropout masks").
"""

from __future__ import annotations

import contextlib
import threading
from typing import Optional, Union

import keras
import tensorflow as tf

from xlnet_tf2.layers import run_time

_GOLDEN = 0x9E3779B9
_KEY_MULTIPLIER = 0x85EBCA77
_MASK32 = 0xFFFFFFFF


def _fmix32(h: tf.Tensor) -> tf.Tensor:
    """MurmurHash3's 32-bit finalizer on a uint32 tensor."""
    h = tf.bitwise.bitwise_xor(h, tf.bitwise.right_shift(h, 16))
    h = h * tf.constant(0x85EBCA6B, tf.uint32)
    h = tf.bitwise.bitwise_xor(h, tf.bitwise.right_shift(h, 13))
    h = h * tf.constant(0xC2B2AE35, tf.uint32)
    return tf.bitwise.bitwise_xor(h, tf.bitwise.right_shift(h, 16))


def _fmix32_int(h: int) -> int:
    """fmix32 on a Python int (for keys known when the step is traced)."""
    h &= _MASK32
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _MASK32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _MASK32
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
    h = k0 * tf.constant(_KEY_MULTIPLIER, tf.uint32) + k1       # [] or [rows]
    if rank:
        h = tf.reshape(h, [-1 if keyed else 1] + [1] * (rank - 1))  # [rows or 1, 1, ...]
    # The row-major stride of dimension d (within a row when keyed): a Python int while the
    # sizes after d are, a uint32 tensor from the first size known only at run time on.
    stride: Union[int, tf.Tensor] = 1
    for d in reversed(range(1 if keyed else 0, rank)):
        size = dims[d]
        if not (isinstance(size, int) and size == 1):
            if isinstance(stride, int):
                step = tf.constant(stride * _GOLDEN & _MASK32, tf.uint32)
            else:
                step = stride * _GOLDEN
            term = tf.cast(tf.range(size, dtype=tf.int32), tf.uint32) * step          # [size]
            h = h + tf.reshape(term, [1] * d + [-1] + [1] * (rank - d - 1))
        if isinstance(stride, int) and isinstance(size, int):
            stride = stride * size
        else:
            if isinstance(stride, int):
                stride = tf.constant(stride & _MASK32, tf.uint32)
            stride = stride * tf.cast(size, tf.uint32)
    h = _fmix32(h)  # every dimension got its term (or is 1), or is the key's rows
    if keyed:
        k1 = tf.reshape(k1, [-1] + [1] * (rank - 1))             # [rows, 1, ...]
    return _fmix32(tf.bitwise.bitwise_xor(h, _fmix32(tf.bitwise.bitwise_xor(k1, _fmix32(k0)))))


def hashed_uniform_bits(shape, key: tf.Tensor) -> tf.Tensor:
    """uint32 [shape] pseudo-random bits, a pure function of (element index, key [2] uint32)."""
    return hashed_bits(shape, key[0], key[1])


# ---------------------------------------------------------------------------- the key scope
class _KeyScope:
    """What the keys of the draws of one traced training (micro-)step are made of (the module
    docstring; `Dropout._keys` draws them)."""

    def __init__(self, seed: int, step: tf.Tensor, example_ids: Optional[tf.Tensor],
                 examples_per_step: int):
        self.seed = int(seed) & _MASK32
        step = tf.cast(tf.math.floormod(tf.cast(step, tf.int64), 2 ** 32), tf.uint32)
        self.shared_k1 = step
        self.example_k1 = None
        if example_ids is not None:
            self.example_k1 = (step * tf.constant(examples_per_step & _MASK32, tf.uint32)
                               + tf.cast(example_ids, tf.uint32))          # [b]
        self.calls = {}  # salt -> calls so far in this trace


_local = threading.local()


@contextlib.contextmanager
def dropout_keys(seed: int, step: tf.Tensor, example_ids: Optional[tf.Tensor] = None,
                 examples_per_step: int = 1):
    """While tracing a training step: every Dropout call draws from (seed, its salt, its call
    number in this trace, `step` and, for batch tensors, each row's `example_ids` [b], the
    rows' places among the `examples_per_step` examples of a step)."""
    previous = getattr(_local, "scope", None)
    _local.scope = _KeyScope(seed, step, example_ids, examples_per_step)
    try:
        yield _local.scope
    finally:
        _local.scope = previous


def masks_are_stored_here() -> bool:
    """Whether `store_mask` keeps the mask behind a conditional: only in a step traced for a
    CPU (see the module docstring and layers/run_time.py)."""
    return run_time.kind() == "cpu"


def masks_are_packed_here() -> bool:
    """Whether `store_mask` bit-packs the mask (`_bit_packed`): only in a step traced for a
    GPU, whose compiler stores the mask anyway (module docstring)."""
    return run_time.kind() == "gpu"


def _bit_packed(keep: tf.Tensor) -> tf.Tensor:
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


def assign_dropout_salts(model: keras.layers.Layer) -> int:
    """Numbers every Dropout of `model` (0, 1, ... in the model's fixed layer order), so each
    has its own keys inside `dropout_keys`; returns how many there are."""
    count = 0
    for layer in model._flatten_layers(include_self=True, recursive=True):  # noqa: SLF001
        if isinstance(layer, Dropout):
            layer.salt = count
            count += 1
    return count


@keras.saving.register_keras_serializable(package="xlnet_tf2")
class Dropout(keras.layers.Layer):
    """x [...] -> x with each element zeroed with probability `rate` (training only).

    `store_mask`: on a CPU, compute the keep mask once and store it for the backward pass
    instead of letting XLA recompute it in every fusion that uses it; on a GPU, where XLA
    stores it anyway, store it bit-packed (module docstring). The values are the same either
    way.
    """

    def __init__(self, rate: float, seed=None, store_mask: bool = False, **kwargs):
        super().__init__(**kwargs)
        if not 0.0 <= float(rate) < 1.0:
            raise ValueError(f"Dropout rate must be in [0, 1), got {rate!r}.")
        self.rate = float(rate)
        self.seed = seed
        self.store_mask = bool(store_mask)
        self.salt = 0
        self.seed_generator = keras.random.SeedGenerator(seed) if self.rate > 0 else None
        self._threshold = min(int(round(self.rate * 2.0 ** 32)), 2 ** 32 - 1)
        self.built = True

    def get_config(self):
        config = super().get_config()
        config.update(rate=self.rate, seed=self.seed, store_mask=self.store_mask)
        return config

    def _keys(self, shared: bool, rows: Optional[int]):
        """(k0, k1) of this call's draw: k1 a scalar, or [rows] (one key per row of a tensor
        of `rows` rows)."""
        scope = getattr(_local, "scope", None)
        if scope is not None:
            call = scope.calls.get(self.salt, 0)
            scope.calls[self.salt] = call + 1
            k0 = _fmix32_int(scope.seed ^ _fmix32_int(self.salt * _GOLDEN + call * 0x27D4EB2F + 1))
            k0 = tf.constant(k0, tf.uint32)
            if shared or scope.example_k1 is None:
                return k0, scope.shared_k1
            k1 = scope.example_k1
            examples = k1.shape[0]
            if examples is None or rows is None or rows == examples:
                return k0, k1
            # Several rows per example (multiple choice: the backbone sees [B * C, L]): row r
            # of example e = r // C gets k1[e] * C + r % C.
            if rows % examples:
                raise ValueError(f"Dropout on {rows} rows cannot be keyed by {examples} "
                                 "examples.")
            per = rows // examples
            return k0, tf.reshape(k1[:, None] * tf.constant(per, tf.uint32)
                                  + tf.cast(tf.range(per), tf.uint32)[None, :], [rows])
        # Outside the training loop: the layer's own stream, a new key per call, with the
        # replica id mixed into k0 so replicas differ.
        key = tf.cast(self.seed_generator.next(), tf.uint32)  # [2]
        k0 = key[0]
        context = tf.distribute.get_replica_context()
        if context is not None:
            replica = tf.cast(context.replica_id_in_sync_group, tf.uint32)
            k0 = _fmix32(tf.bitwise.bitwise_xor(k0, _fmix32(replica + 1)))
        return k0, key[1]

    def call(self, inputs, training=None, shared_over_batch: bool = False, row_draws=None):
        """`shared_over_batch`: the tensor has no batch dimension (one mask for all examples);
        otherwise dimension 0 is the batch and every example draws its own mask.

        `row_draws`: sizes (R_1, R_2, ...) that split the second-to-last axis of `inputs` into
        consecutive parts; each part gets the mask a call of its own would draw, in order (the
        keys of calls 1, 2, ...): so two tensors that used to be dropped out one after the other
        can be stacked and dropped out at once, with the same masks."""
        if not training or self.rate == 0.0:
            return inputs
        dynamic = tf.shape(inputs)
        shape = [d if d is not None else dynamic[i] for i, d in enumerate(inputs.shape)]
        parts = [shape]
        if row_draws is not None:
            if len(shape) < 2 or (isinstance(shape[-2], int) and sum(row_draws) != shape[-2]):
                raise ValueError(f"Dropout row_draws {tuple(row_draws)} do not add up to the "
                                 f"second-to-last axis of a tensor of shape {inputs.shape}.")
            parts = [shape[:-2] + [rows, shape[-1]] for rows in row_draws]
        threshold = tf.constant(self._threshold, tf.uint32)
        keeps = []
        for part in parts:
            k0, k1 = self._keys(shared_over_batch, inputs.shape[0])
            keeps.append(hashed_bits(part, k0, k1) >= threshold)
        keep = keeps[0] if len(keeps) == 1 else tf.concat(keeps, axis=-2)
        if self.store_mask and masks_are_stored_here():
            # Through a conditional, so that XLA computes the mask once (module docstring).
            keep = tf.cond(run_time.always_true(k1), lambda: keep, lambda: tf.zeros_like(keep))
        elif self.store_mask and masks_are_packed_here():
            keep = _bit_packed(keep)
        scaled = inputs / tf.cast(1.0 - self.rate, inputs.dtype)
        return tf.where(keep, scaled, tf.zeros_like(inputs))
