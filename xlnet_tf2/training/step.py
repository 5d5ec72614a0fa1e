"""One training step's math, one replica's share: the features in; the loss, its gradients,
the clipping and the AdamW update out (`TrainingStep`). The loop around it is
training/trainer.py's; the optimizer's settings (weight-decay exemptions, the bias-correction
rule) are optimization.py's.

  count    = all-reduced sum of `task.loss_count(features)` (real targets, or examples), >= 1
  loss     = task.loss(model, features, state)[0] / count: this replica's share of the mean
  gradient = d loss / d variables, summed over `grad_accum_steps` micro-batches (consecutive
             row slices of the replica batch and of its carried state) and over replicas,
             clipped to `clip_norm` (global norm), applied once by `XLNetAdamW`
  dropout  = masks keyed by (seed, step, each row's place in the global batch): the same on
             any topology and across restarts (layers/dropout.py)

So the replicas' gradients sum to the gradient of the global token- (or example-) weighted
mean, whatever the replica count. Under mixed_float16 the loss is scaled by the
LossScaleOptimizer's dynamic scale before differentiation. The AdamW's semantics:
docs/SEMANTICS.md#optimizer. On an accelerator with one replica, not under TPUStrategy
(`grouped`), the norm and the update are traced in a form XLA fuses into a few kernels, over
concatenations of the gradients (`global_norm`, `XLNetAdamW._grouped_update_step`); the
variables stay one per weight.
"""

from __future__ import annotations

import copy
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import keras
import numpy as np
import tensorflow as tf

from xlnet_tf2.layers.step_plan import StepPlan, keyed_plan
from xlnet_tf2.training.task import Task


class TrainingStep:
    """One replica's share of a training step of `task`, traced with `plan` (`on(device)`: for
    another device). `optimizer`: an `XLNetAdamW`, alone or in a LossScaleOptimizer
    (`loss_scaling`); `layout`: data/batch_layout.py's BatchLayout (B, micro_batches, m);
    `whole_step_compiled`: the caller compiles the whole step, else the gradients are a
    function of their own (`jit_compile`)."""

    def __init__(self, task: Task, model: keras.Model, optimizer, variables: Sequence,
                 layout, plan: StepPlan, *, seed: int, global_batch: int, clip_norm: float,
                 num_replicas: int, on_tpu: bool, loss_scaling: bool,
                 whole_step_compiled: bool, jit_compile: bool):
        self.task, self.model, self.optimizer = task, model, optimizer
        self.variables = list(variables)
        self.plan = plan
        self.seed, self.global_batch, self.clip_norm = seed, global_batch, clip_norm
        self.num_replicas, self.on_tpu, self.loss_scaling = num_replicas, on_tpu, loss_scaling
        self.replica_batch = layout.replica_batch
        self.micro_batches, self.micro_batch = layout.micro_batches, layout.micro_batch
        # The gradients are a function of their own only when the step is not compiled as a
        # whole. Inside the compiled step a nested jit-compiled tf.function is a trap: for some
        # models (the fine-tuning classifier; not the pretraining model) TensorFlow folded the
        # inner call's variable reads and the step number into literals, so every step
        # compiled a new program (tests/training/test_program_constants.py; the cost:
        # BENCHMARKS.md). Called directly, the backward pass is part of the step.
        self._gradients = (self.gradients if whole_step_compiled else
                           tf.function(self.gradients, jit_compile=jit_compile,
                                       reduce_retracing=True))

    def on(self, device: str, tpu_generation: Optional[str] = None) -> "TrainingStep":
        """This step traced for `device` ("cpu", "gpu", "tpu"; a TPU of `tpu_generation` when
        given): the program that device runs, whatever this machine is."""
        other = copy.copy(self)
        other.plan = self.plan.on(device, tpu_generation)
        return other

    # Not converted by AutoGraph (here or in what it calls): the step has no Python control
    # flow on tensors (the micro-batches are an explicit tf.while_loop), and converting what
    # it calls (33 functions in a tiny pretraining run) cost 1.7 CPU-s at every process start.
    @tf.autograph.experimental.do_not_convert
    def replica_step(self, features, state, step):
        """Step `step` (int64, from 0) on this replica's `features` and carried `state` ([]
        without one): (new state, loss_sum / global count, the unscaled gradient norm)."""
        plan = self.plan
        features = self.task.replica_features(features)
        context = tf.distribute.get_replica_context()
        replica = context.replica_id_in_sync_group
        local_count = tf.cast(self.task.loss_count(features), tf.float32)
        global_count = tf.maximum(self._sum_over_replicas(context, local_count), 1.0)
        if self.micro_batches == 1:
            grads, new_state, loss_sum = self._gradients(
                features, state, global_count, step, self._example_ids(features, replica, 0), plan)
        else:
            grads, new_state, loss_sum = self._accumulated_gradients(
                features, state, global_count, step, replica, plan)
        # The global gradient: every replica's share of the global mean, summed.
        grads = self._sum_over_replicas(context, grads)
        # The accelerator's fused form of the norm and the update: one replica, not under
        # TPUStrategy (module docstring).
        grouped = plan.grouped_optimizer and self.num_replicas == 1 and not self.on_tpu
        scaled_norm = global_norm(grads, grouped)
        # Under mixed_float16 the gradients carry the loss scale: clip them at the scaled
        # threshold and report the unscaled norm. Overflowed steps (inf norm) are skipped by
        # the LossScaleOptimizer, which then lowers the scale.
        scale = (tf.cast(self.optimizer.dynamic_scale, tf.float32) if self.loss_scaling
                 else tf.constant(1.0, tf.float32))
        grads, _ = tf.clip_by_global_norm(grads, self.clip_norm * scale, use_norm=scaled_norm)
        apply_gradients(self.optimizer, grads, self.variables, grouped)
        return new_state, loss_sum / global_count, scaled_norm / scale

    @tf.autograph.experimental.do_not_convert  # as replica_step
    def gradients(self, features, state, global_count, step, example_ids, plan):
        """(grads of loss_sum / global_count (times the loss scale under mixed_float16),
        new_state, loss_sum) of one (micro-)batch; the dropout keys (the run's seed, the step,
        `example_ids` int32 [rows], the rows' places in the global batch) join the plan here."""
        plan = keyed_plan(self.seed, step, example_ids, self.global_batch, plan=plan)
        with tf.GradientTape() as tape:
            loss_sum, new_state = self.task.loss(self.model, features, state, training=True,
                                                 plan=plan)
            loss = loss_sum / global_count
            if self.loss_scaling:
                loss = self.optimizer.scale_loss(loss)
        grads = tape.gradient(loss, self.variables)
        return grads, new_state, loss_sum

    def _example_ids(self, features, replica, micro):
        """int32 [m]: the task's `example_ids`, else replica * B + micro * m + row."""
        ids = self.task.example_ids(features)
        if ids is not None:
            return ids
        return (tf.cast(replica, tf.int32) * self.replica_batch + micro * self.micro_batch
                + tf.range(self.micro_batch, dtype=tf.int32))

    def _accumulated_gradients(self, features, state, global_count, step, replica, plan):
        """Gradients summed over `micro_batches` slices, i holding rows [i * m, (i + 1) * m) of
        every feature and of the carried state (the input pipeline makes each a batch)."""
        mb, num = self.micro_batch, self.micro_batches

        def rows(tensor, i):
            return tf.reshape(tensor, [num, mb] + tensor.shape[1:].as_list())[i]

        zero_grads = [tf.zeros(v.shape, v.dtype) for v in self.variables]
        state_parts = [tf.TensorArray(s.dtype, size=num, element_shape=[mb] + s.shape[1:].as_list())
                       for s in state]

        def body(i, grads, loss_sum, parts):
            micro_features = {k: rows(v, i) for k, v in features.items()}
            micro_state = [rows(s, i) for s in state]
            g, new_state, l_sum = self._gradients(
                micro_features, micro_state, global_count, step,
                self._example_ids(micro_features, replica, i), plan)
            grads = [a if b is None else a + tf.convert_to_tensor(b) for a, b in zip(grads, g)]
            parts = [p.write(i, s) for p, s in zip(parts, new_state)]
            return i + 1, grads, loss_sum + l_sum, parts

        _, grads, loss_sum, parts = tf.while_loop(lambda i, *_: i < num, body, (
            tf.constant(0), zero_grads, tf.constant(0.0, tf.float32), state_parts))
        new_state = [tf.reshape(p.stack(), [num * mb] + p.element_shape[1:].as_list())
                     for p in parts]
        return grads, new_state, loss_sum

    def _sum_over_replicas(self, context, value):
        """The sum of `value` over the replicas; with one replica the value itself (no
        merge_call, so the whole step can be compiled)."""
        if self.num_replicas == 1:
            return value
        return context.all_reduce(tf.distribute.ReduceOp.SUM, value)


# ---------------------------------------------------------------------------- the AdamW update
# The accelerator form's groups (`update_groups`). XLA GPU caps one fused kernel's operands
# plus outputs (64, or 96): a group's update has seven per variable (gradient, weight, m, v in;
# weight, m, v out), so 8 variables fit either cap; a norm kernel reads one gradient per
# operand. Grouped only: rank <= 2 (the [D, N, H] projections' and seg_embed's gradients leave
# their einsums in another layout, which XLA fuses into a per-variable update but must write
# out before a grouped one) and <= GROUPED_MAX_ELEMENTS (a large update is long next to a
# kernel launch: XLA does not fuse those anyway).
UPDATE_GROUP_SIZE = 8
NORM_GROUP_SIZE = 48
GROUPED_MAX_ELEMENTS = 1 << 20


def global_norm(tensors: Sequence[Optional[tf.Tensor]], grouped: bool = False) -> tf.Tensor:
    """float32 scalar, `tf.linalg.global_norm` of `tensors` (None skipped, IndexedSlices by
    their values); `grouped` (an accelerator's): over concatenations of up to NORM_GROUP_SIZE
    flattened tensors, one fused reduction each (the same up to the additions' order)."""
    tensors = [t.values if isinstance(t, tf.IndexedSlices) else t
               for t in tensors if t is not None]
    if not grouped:
        return tf.cast(tf.linalg.global_norm(tensors), tf.float32)
    if not tensors:
        return tf.constant(0.0, tf.float32)
    with tf.name_scope("global_norm"):
        flat = [tf.reshape(tf.cast(t, tf.float32), [-1]) for t in tensors]
        sums = [tf.reduce_sum(tf.square(tf.concat(flat[i:i + NORM_GROUP_SIZE], 0)))
                for i in range(0, len(flat), NORM_GROUP_SIZE)]
        return tf.sqrt(tf.add_n(sums))


def update_groups(variables: Sequence) -> Iterator[List[int]]:
    """Indices into `variables`: groups of up to UPDATE_GROUP_SIZE variables of one dtype and
    number of elements, each of rank <= 2 and at most GROUPED_MAX_ELEMENTS elements (in order
    of first appearance), then every other variable alone."""
    by_kind: Dict[Tuple[str, int], List[int]] = {}
    alone = []
    for i, v in enumerate(variables):
        size = int(np.prod(v.shape, dtype=np.int64))
        if len(v.shape) <= 2 and size <= GROUPED_MAX_ELEMENTS:
            by_kind.setdefault((tf.as_dtype(v.dtype).name, size), []).append(i)
        else:
            alone.append([i])
    for indices in by_kind.values():
        for start in range(0, len(indices), UPDATE_GROUP_SIZE):
            yield indices[start:start + UPDATE_GROUP_SIZE]
    yield from alone


@keras.saving.register_keras_serializable(package="xlnet_tf2")
class LinearWarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
    """lr(step) = peak * step / warmup for step < warmup, then linear from peak at
    `warmup_steps` to `end_learning_rate` at `total_steps`, constant after; `step`: the
    optimizer's `iterations` (applied updates, from 0)."""

    def __init__(self, peak_learning_rate: float, warmup_steps: int, total_steps: int,
                 end_learning_rate: float = 0.0):
        if warmup_steps < 0 or total_steps <= 0:
            raise ValueError(f"warmup_steps must be >= 0 and total_steps > 0, got "
                             f"{warmup_steps} and {total_steps}.")
        self.peak_learning_rate = float(peak_learning_rate)
        self.warmup_steps = int(warmup_steps)
        self.total_steps = int(total_steps)
        self.end_learning_rate = float(end_learning_rate)

    def __call__(self, step):
        step = tf.cast(step, tf.float32)
        peak = tf.constant(self.peak_learning_rate, tf.float32)
        end = tf.constant(self.end_learning_rate, tf.float32)
        warmup = tf.constant(float(self.warmup_steps), tf.float32)
        warm = peak * step / tf.maximum(warmup, 1.0)
        decay_span = tf.maximum(float(self.total_steps - self.warmup_steps), 1.0)
        progress = tf.clip_by_value((step - warmup) / decay_span, 0.0, 1.0)
        decayed = peak + (end - peak) * progress
        return tf.where(step < warmup, warm, decayed)

    def get_config(self):
        return dict(peak_learning_rate=self.peak_learning_rate, warmup_steps=self.warmup_steps,
                    total_steps=self.total_steps, end_learning_rate=self.end_learning_rate)


@keras.saving.register_keras_serializable(package="xlnet_tf2")
class XLNetAdamW(keras.optimizers.Optimizer):
    """Adam with decoupled weight decay, bias correction optional (module docstring). Before
    building: `exclude_from_weight_decay(var_list=...)` (optimization.py) and, for per-variable
    learning rates, `set_lr_multipliers({id(variable): multiplier})` (default 1)."""

    def __init__(self, learning_rate=1e-3, beta_1=0.9, beta_2=0.999, epsilon=1e-6,
                 weight_decay=0.0, bias_correction=False, name="xlnet_adamw", **kwargs):
        super().__init__(learning_rate=learning_rate, name=name,
                         weight_decay=weight_decay if weight_decay else None, **kwargs)
        self.beta_1, self.beta_2, self.epsilon = beta_1, beta_2, epsilon
        self.bias_correction = bool(bias_correction)
        self._multiplier_by_id: Dict[int, float] = {}
        self._multipliers: List[float] = []
        self._grouped = False  # the form of the `apply_gradients` call under way

    def set_lr_multipliers(self, multipliers: Dict[int, float]) -> None:
        """{id(variable): multiplier} of the learning rate; must precede `build`."""
        if self.built:
            raise RuntimeError("set_lr_multipliers must be called before the optimizer is built.")
        self._multiplier_by_id = dict(multipliers)

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        self._momentums = []
        self._velocities = []
        for var in var_list:
            self._momentums.append(self.add_variable_from_reference(var, "momentum"))
            self._velocities.append(self.add_variable_from_reference(var, "velocity"))
        self._multipliers = [self._multiplier_by_id.get(id(v), 1.0) for v in var_list]

    def update_step(self, gradient, variable, learning_rate):
        first, second = self._gradient_terms(tf.cast(gradient, variable.dtype))
        self._update_from_terms(first, second, variable, learning_rate)

    def _gradient_terms(self, gradient):
        """(g * (1 - beta_1), g^2 * (1 - beta_2)): what the gradient adds to m and v."""
        beta_1 = tf.cast(self.beta_1, gradient.dtype)
        beta_2 = tf.cast(self.beta_2, gradient.dtype)
        return gradient * (1.0 - beta_1), tf.square(gradient) * (1.0 - beta_2)

    def _update_from_terms(self, first, second, variable, learning_rate):
        """Moments and weight of one variable, given the gradient's terms (`_gradient_terms`)."""
        index = self._get_variable_index(variable)
        multiplier = self._multipliers[index]
        if multiplier != 1.0:
            learning_rate = tf.convert_to_tensor(learning_rate)
            learning_rate = learning_rate * tf.cast(multiplier, learning_rate.dtype)
        m = self._momentums[index]
        v = self._velocities[index]
        dtype = variable.dtype
        lr = tf.cast(learning_rate, dtype)
        beta_1 = tf.cast(self.beta_1, dtype)
        beta_2 = tf.cast(self.beta_2, dtype)
        self.assign(m, m * beta_1 + first)
        self.assign(v, v * beta_2 + second)
        if self.bias_correction:
            # tf.train.AdamOptimizer's (and Keras Adam's) form: the correction goes into the
            # step size, epsilon is added to the uncorrected sqrt(v).
            t = tf.cast(self.iterations + 1, dtype)
            lr = lr * tf.sqrt(1.0 - tf.pow(beta_2, t)) / (1.0 - tf.pow(beta_1, t))
        self.assign_sub(variable, lr * m / (tf.sqrt(v) + tf.cast(self.epsilon, dtype)))

    def _apply_weight_decay(self, variables):
        # Keras' TensorFlow backend reads the learning rate for each decayed variable: the
        # schedule's operations again for each in the traced step. Here once, the same value.
        def decay_all(distribution, variables):
            lr = self.learning_rate
            for var in (v.value if isinstance(v, keras.Variable) else v for v in variables):
                if self._use_weight_decay(var):
                    distribution.extended.update(var, lambda v: v.assign_sub(
                        v * tf.cast(self.weight_decay, v.dtype) * tf.cast(lr, v.dtype)),
                        group=False)

        if self.weight_decay is not None:
            tf.__internal__.distribute.interim.maybe_merge_call(
                decay_all, self._distribution_strategy, variables)

    def _backend_update_step(self, grads, trainable_variables, learning_rate):
        # The form `apply_gradients` was asked for (module docstring).
        if self._grouped:
            self._grouped_update_step(grads, trainable_variables, learning_rate)
        else:  # Keras' per-variable updates, through the strategy's merge_call
            super()._backend_update_step(grads, trainable_variables, learning_rate)

    def _grouped_update_step(self, grads, trainable_variables, learning_rate):
        """Per group of `update_groups`, the moments' gradient terms on the concatenated
        gradients, each variable's update reading its slice (per element `update_step`'s
        operations): updates sharing the group's gradients as operands, which XLA GPU fuses
        into one kernel. The terms come after the concatenation: XLA folds a slice of a bare
        concatenation back to its operand, undoing the grouping."""
        variables = [v.value if isinstance(v, keras.Variable) else v
                     for v in trainable_variables]
        grads = [tf.convert_to_tensor(g) for g in grads]
        for group in update_groups(variables):
            if len(group) == 1:
                self.update_step(grads[group[0]], variables[group[0]], learning_rate)
                continue
            dtype = variables[group[0]].dtype
            size = int(np.prod(variables[group[0]].shape, dtype=np.int64))
            flat = tf.concat([tf.reshape(tf.cast(grads[i], dtype), [-1]) for i in group], 0)
            first, second = self._gradient_terms(flat)
            for k, i in enumerate(group):
                shape = variables[i].shape
                self._update_from_terms(tf.reshape(first[k * size:(k + 1) * size], shape),
                                        tf.reshape(second[k * size:(k + 1) * size], shape),
                                        variables[i], learning_rate)

    def _all_reduce_sum_gradients(self, grads_and_vars):
        # The training step has already summed the gradients over replicas (and clipped the
        # summed gradient to its global norm); Keras' TF backend would sum them again here.
        return list(grads_and_vars)

    def get_config(self):
        config = super().get_config()
        config.update(beta_1=self.beta_1, beta_2=self.beta_2, epsilon=self.epsilon,
                      bias_correction=self.bias_correction)
        return config


def apply_gradients(optimizer, grads, variables, grouped: bool) -> None:
    """`optimizer.apply(grads, variables)`, in the grouped form when `grouped`: Keras' `apply`
    takes no such argument, so the AdamW holds the form for this call only."""
    adamw = getattr(optimizer, "inner_optimizer", optimizer)
    adamw._grouped = bool(grouped)  # noqa: SLF001
    try:
        optimizer.apply(grads, variables)
    finally:
        adamw._grouped = False  # noqa: SLF001

