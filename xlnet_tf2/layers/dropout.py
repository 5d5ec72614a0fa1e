"""Inverted dropout whose mask comes from a counter-based hash that XLA vectorizes
(layers/kernels/dropout_masks.py), keyed so that a training run's masks are a pure function of
(seed, step, example), whatever the topology.

Same semantics as `keras.layers.Dropout`: while training, each element is zeroed with
probability `rate` and the kept ones are scaled by 1 / (1 - rate); identity at inference.

Keys inside the training loop (`DropoutKeys`, built by the trainer for each traced step and
handed down in the step's plan, layers/step_plan.py):
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
Without keys (a user calling `model(x, training=True)`), the key comes from the layer's Keras
`SeedGenerator`, a new key per call.

Why not a TensorFlow generator: with a run-time seed under XLA, tf.random.stateless_uniform
(Philox) and Keras' own dropout were many times slower per value than this hash on a CPU
(BENCHMARKS.md, "Dropout masks").
"""

from __future__ import annotations

from typing import Optional

import keras
import tensorflow as tf

from xlnet_tf2.layers import run_time
from xlnet_tf2.layers.kernels import dropout_masks
from xlnet_tf2.layers.kernels.dropout_masks import GOLDEN, MASK32, fmix32, fmix32_int
from xlnet_tf2.layers.step_plan import StepPlan, plan_or_default


class DropoutKeys:
    """What the keys of the draws of one traced training (micro-)step are made of (the module
    docstring; `Dropout._keys` draws them): every Dropout call draws from (seed, its salt, its
    call number in this trace, `step` and, for batch tensors, each row's `example_ids` [b], the
    rows' places among the `examples_per_step` examples of a step). Built once per trace: it
    counts the calls of each Dropout in that trace."""

    def __init__(self, seed: int, step: tf.Tensor, example_ids: Optional[tf.Tensor] = None,
                 examples_per_step: int = 1):
        self.seed = int(seed) & MASK32
        step = tf.cast(tf.math.floormod(tf.cast(step, tf.int64), 2 ** 32), tf.uint32)
        self.shared_k1 = step
        self.example_k1 = None
        if example_ids is not None:
            self.example_k1 = (step * tf.constant(examples_per_step & MASK32, tf.uint32)
                               + tf.cast(example_ids, tf.uint32))          # [b]
        self.calls = {}  # salt -> calls so far in this trace


def keyed_plan(seed: int, step: tf.Tensor, example_ids: Optional[tf.Tensor] = None,
               examples_per_step: int = 1, plan: Optional[StepPlan] = None) -> StepPlan:
    """`plan` (default: this machine's) with the dropout keys of one traced training step."""
    plan = plan_or_default(plan)
    return plan.with_dropout_keys(DropoutKeys(seed, step, example_ids, examples_per_step))


def assign_dropout_salts(model: keras.layers.Layer) -> int:
    """Numbers every Dropout of `model` (0, 1, ... in the model's fixed layer order), so each
    has its own keys in a plan's `DropoutKeys`; returns how many there are."""
    count = 0
    for layer in model._flatten_layers(include_self=True, recursive=True):  # noqa: SLF001
        if isinstance(layer, Dropout):
            layer.salt = count
            count += 1
    return count


@keras.saving.register_keras_serializable(package="xlnet_tf2")
class Dropout(keras.layers.Layer):
    """x [...] -> x with each element zeroed with probability `rate` (training only).

    `store_mask`: hand the keep mask to the compiler in the form the plan's device reads best
    (stored once on a CPU, bit-packed on a GPU: layers/kernels/dropout_masks.py). The values
    are the same either way.
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

    def _keys(self, shared: bool, rows: Optional[int], plan: Optional[StepPlan]):
        """(k0, k1) of this call's draw: k1 a scalar, or [rows] (one key per row of a tensor
        of `rows` rows)."""
        scope = None if plan is None else plan.dropout_keys
        if scope is not None:
            call = scope.calls.get(self.salt, 0)
            scope.calls[self.salt] = call + 1
            k0 = fmix32_int(scope.seed ^ fmix32_int(self.salt * GOLDEN + call * 0x27D4EB2F + 1))
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
            k0 = fmix32(tf.bitwise.bitwise_xor(k0, fmix32(replica + 1)))
        return k0, key[1]

    def call(self, inputs, training=None, shared_over_batch: bool = False, row_draws=None,
             plan: Optional[StepPlan] = None):
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
        draws = [(part,) + self._keys(shared_over_batch, inputs.shape[0], plan)
                 for part in parts]
        if not self.store_mask:
            return _recomputed_dropout(inputs, draws, threshold, self.rate)
        keep = _keep_mask(draws, threshold)
        k1 = draws[-1][2]
        # The form the plan's device reads the mask in (kernels/dropout_masks.py).
        plan = plan_or_default(plan)
        if plan.stores_dropout_masks:
            keep = dropout_masks.stored(keep, k1)
        elif plan.packs_dropout_masks:
            keep = dropout_masks.bit_packed(keep)
        scaled = inputs / tf.cast(1.0 - self.rate, inputs.dtype)
        return tf.where(keep, scaled, tf.zeros_like(inputs))


def _keep_mask(draws, threshold: tf.Tensor) -> tf.Tensor:
    """The keep mask of `draws` [(part shape, k0, k1), ...], the parts stacked on the
    second-to-last axis."""
    keeps = [dropout_masks.hashed_bits(part, k0, k1) >= threshold for part, k0, k1 in draws]
    return keeps[0] if len(keeps) == 1 else tf.concat(keeps, axis=-2)


def _recomputed_dropout(inputs: tf.Tensor, draws, threshold: tf.Tensor, rate: float):
    """inputs with the mask of `draws` applied, whose backward hashes the same bits again
    where it uses them instead of keeping the forward's mask. Its keys get a zero that only
    the run knows (layers/run_time.py) added: XLA would otherwise merge the two identical
    hashes into one mask, written by the forward and read back by the backward. The values
    and the gradient are bit for bit those of tf.where(keep, inputs / (1 - rate), 0)."""
    scale = tf.cast(1.0 - rate, inputs.dtype)

    @tf.custom_gradient
    def dropped(x):
        keep = _keep_mask(draws, threshold)

        def grad(dy):
            again = [(part, k0, k1 + tf.cast(run_time.int_zero(k1), tf.uint32))
                     for part, k0, k1 in draws]
            return tf.where(_keep_mask(again, threshold), dy / scale, tf.zeros_like(dy))

        return tf.where(keep, x / scale, tf.zeros_like(x)), grad

    return dropped(inputs)
