"""Inverted dropout (as `keras.layers.Dropout`: while training each element is zeroed with
probability `rate`, the kept ones scaled by 1 / (1 - rate); identity at inference) whose mask
is a counter-based hash that XLA vectorizes, keyed so that a run's masks are a pure function of
(seed, step, example), whatever the topology.

Keys in a training step (the plan's `DropoutKeys`, layers/step_plan.py): k0 = hash(seed, the
layer's `salt` (`assign_dropout_salts`: the model's layer order), the call's draw number in the
traced step (`Dropout._draw_number`)); k1 = step * examples_per_step + example for a tensor
with a batch dimension (each row its own key, n counting within the row), k1 = step for one
shared by the batch (the position embedding). `example` is the example's place in the global
batch in an order independent of replicas and micro-batches (pretraining: its stream and
direction), so any topology, and a resumed run, draw the uninterrupted run's masks. Without
keys (a user's `model(x, training=True)`) the layer's SeedGenerator gives a new key per call.

Element n of a draw gets fmix32(fmix32(n * 0x9E3779B9 + k0 * 0x85EBCA77 + k1) ^
fmix32(k1 ^ fmix32(k0))) (MurmurHash3's finalizer; the key enters added and hashed, so two keys
never give shifted copies of one stream), kept when >= rate * 2**32: Philox's counter-based
construction with a cheaper round (TensorFlow's generators under XLA with a run-time seed were
many times slower per value on a CPU: BENCHMARKS.md, "Dropout masks").

The backward hashes its bits again (`_recomputed_dropout`): no hidden dropout's mask is written
and read back. A `store_mask` Dropout (the attention probabilities', read by several backward
fusions) hands its mask over as `stored` on a CPU (behind a `tf.cond` true only at run time,
which XLA does not fuse across: computed once) or bit-packed on a GPU (kernels/dropout_masks.py).
"""

from __future__ import annotations

import functools
from typing import Optional, Union

import keras
import tensorflow as tf

from xlnet_tf2.layers.kernels.dropout_masks import bit_packed
from xlnet_tf2.layers.step_plan import (DropoutKeys, StepPlan, always_true, int_zero,
                                        plan_or_default)

GOLDEN = 0x9E3779B9
KEY_MULTIPLIER = 0x85EBCA77
MASK32 = 0xFFFFFFFF


def assign_dropout_salts(model: keras.layers.Layer) -> int:
    """Numbers every Dropout of `model` in its fixed layer order (its `salt`); returns how
    many."""
    count = 0
    for layer in model._flatten_layers(include_self=True, recursive=True):  # noqa: SLF001
        if isinstance(layer, Dropout):
            layer.salt = count
            count += 1
    return count


@keras.saving.register_keras_serializable(package="xlnet_tf2")
class Dropout(keras.layers.Layer):
    """x [...] -> x with each element zeroed with probability `rate` (training only);
    `store_mask`: the keep mask in its device's form (module docstring), the same values."""

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
        self._drawing_from: Optional[DropoutKeys] = None  # the keys last drawn from
        self._draws = 0  # and the draws made from them
        self.built = True

    def get_config(self):
        config = super().get_config()
        config.update(rate=self.rate, seed=self.seed, store_mask=self.store_mask)
        return config

    def _draw_number(self, keys: DropoutKeys) -> int:
        """This call's place among the layer's draws from `keys` (made once per traced step:
        new keys start a new count); a trace's draws are its Python calls in order (each
        row part of `row_draws` one)."""
        if self._drawing_from is not keys:
            self._drawing_from, self._draws = keys, 0
        self._draws += 1
        return self._draws - 1

    def _keys(self, shared: bool, rows: Optional[int], plan: Optional[StepPlan]):
        """(k0, k1) of this call's draw: k1 a scalar, or [rows] (one key per row of a tensor
        of `rows` rows)."""
        keys = None if plan is None else plan.dropout_keys
        if keys is not None:
            call = self._draw_number(keys)
            k0 = fmix32_int(keys.seed ^ fmix32_int(self.salt * GOLDEN + call * 0x27D4EB2F + 1))
            k0 = tf.constant(k0, tf.uint32)
            if shared or keys.example_k1 is None:
                return k0, keys.shared_k1
            k1 = keys.example_k1
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
            k0 = fmix32(tf.bitwise.bitwise_xor(k0, fmix32(replica + 1)))
        return k0, key[1]

    def call(self, inputs, training=None, shared_over_batch: bool = False, row_draws=None,
             plan: Optional[StepPlan] = None):
        """`shared_over_batch`: no batch dimension (one mask for all examples); else dimension
        0 is the batch. `row_draws` (R_1, R_2, ...): consecutive parts of the second-to-last
        axis, each with the mask a call of its own would draw, in order (two stacked tensors
        dropped out at once, with the masks of one call each)."""
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
        draws = [(part,) + self._keys(shared_over_batch, inputs.shape[0], plan)
                 for part in parts]
        if not self.store_mask:
            return _recomputed_dropout(inputs, draws, threshold, self.rate)
        keep = _keep_mask(draws, threshold)
        k1 = draws[-1][2]
        # The form the plan's device reads the mask in (module docstring).
        plan = plan_or_default(plan)
        if plan.stores_dropout_masks:
            keep = stored(keep, k1)
        elif plan.packs_dropout_masks:
            keep = bit_packed(keep)
        scaled = inputs / tf.cast(1.0 - self.rate, inputs.dtype)
        return tf.where(keep, scaled, tf.zeros_like(inputs))


def _keep_mask(draws, threshold: tf.Tensor) -> tf.Tensor:
    """The keep mask of `draws` [(part shape, k0, k1), ...], the parts stacked on the
    second-to-last axis."""
    keeps = [hashed_bits(part, k0, k1) >= threshold for part, k0, k1 in draws]
    return keeps[0] if len(keeps) == 1 else tf.concat(keeps, axis=-2)


def _recomputed_dropout(inputs: tf.Tensor, draws, threshold: tf.Tensor, rate: float):
    """inputs with the mask of `draws` applied; its backward hashes the bits again, with a
    zero only the run knows (step_plan.py's `int_zero`) added to the keys: XLA would otherwise
    merge the two hashes into one mask, written by the forward and read by the backward. Bit
    for bit tf.where(keep, inputs / (1 - rate), 0) and its gradient."""
    scale = tf.cast(1.0 - rate, inputs.dtype)

    @tf.custom_gradient
    def dropped(x):
        keep = _keep_mask(draws, threshold)

        def grad(dy):
            again = [(part, k0, k1 + tf.cast(int_zero(k1), tf.uint32))
                     for part, k0, k1 in draws]
            return tf.where(_keep_mask(again, threshold), dy / scale, tf.zeros_like(dy))

        return tf.where(keep, x / scale, tf.zeros_like(x)), grad

    return dropped(inputs)


# ---------------------------------------------------------------------------- the bits
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
    """uint32 [shape] pseudo-random bits; `k0` a uint32 scalar, `k1` one or uint32 [shape[0]]
    (each row its own key, n counting within the row); `shape` a list (ints, or int32 scalars
    for sizes known at run time only), a TensorShape or an int32 [rank] tensor. Traced with all
    sizes known: a call of the hash traced once per sizes, not its 60-80 operations again
    (BENCHMARKS.md, "The step's trace"; an XLA or TensorFlow graph inlines the call)."""
    k1 = tf.convert_to_tensor(k1, tf.uint32)
    sizes = tuple(shape) if isinstance(shape, (list, tuple, tf.TensorShape)) else (None,)
    if (tf.inside_function() and all(isinstance(d, int) for d in sizes)
            and k1.shape in ([], sizes[:1])):
        return _traced_hash(sizes, k1.shape.rank)(tf.convert_to_tensor(k0, tf.uint32), k1)
    return _hash_operations(shape, k0, k1)


@functools.lru_cache(maxsize=None)  # a ConcreteFunction of k0 and k1 per (sizes, k1's rank)
def _traced_hash(sizes: tuple, k1_rank: int):
    with tf.init_scope():  # apart from the trace that asks first: none of its devices or scopes
        traced = tf.function(lambda k0, k1: _hash_operations(list(sizes), k0, k1),
                             autograph=False)
        return traced.get_concrete_function(tf.TensorSpec([], tf.uint32),
                                            tf.TensorSpec(sizes[:k1_rank], tf.uint32))


def _hash_operations(shape, k0: tf.Tensor, k1: tf.Tensor) -> tf.Tensor:
    """`hashed_bits` as operations of the graph being built, or eager ones.

    n * GOLDEN (n the row-major index) is sum_d i_d * (stride_d * GOLDEN) mod 2**32, small
    ranges broadcast-added onto the run-time key term: a flat index, an op of constant inputs
    only, would be folded into a literal of the tensor's size read at every step
    (tests/training/test_program_constants.py). Bit for bit the flat formula (tests)."""
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


# ---------------------------------------------------------------------------- the CPU's form
def stored(keep: tf.Tensor, key: tf.Tensor) -> tf.Tensor:
    """`keep` through a conditional true only at run time (`key`: a run-time integer tensor):
    XLA computes the mask once and reads it where it is used (CPU)."""
    return tf.cond(always_true(key), lambda: keep, lambda: tf.zeros_like(keep))
