"""Learning-rate schedule and the AdamW variant used for pretraining (docs/SEMANTICS.md#optimizer).

Which AdamW this is, deliberately:

* Adam moments with beta_1 = 0.9, beta_2 = 0.999 and `epsilon` added to sqrt(v) (not to v).
* **Bias correction by the original's rule** (`get_train_op` of zihangdai/xlnet): with weight
  decay > 0 the original uses its `AdamWeightDecayOptimizer`, which has no bias correction,
  update = m / (sqrt(v) + eps); at weight decay exactly 0 it uses `tf.train.AdamOptimizer`,
  which has: step size lr * sqrt(1 - beta_2^t) / (1 - beta_1^t), update = m / (sqrt(v) + eps)
  (Keras' Adam/AdamW compute the same). `resolve_bias_correction` applies that rule unless a
  run says otherwise (--adam_bias_correction). The difference matters at the start: the
  uncorrected first update is 0.1 / sqrt(0.001) = 3.16 times the corrected one (lr * sign(g)),
  and with a short fine-tuning warmup the two runs part from step 3 on.
* **Decoupled weight decay** scaled by the learning rate: var <- var - lr * wd * var, applied to
  the value before the Adam step. The original adds wd * var to the Adam update before
  multiplying by lr, which is the same arithmetic.
* **Exempt from decay**: every LayerNorm gamma/beta, the bias of every dense layer and the LM
  output bias. The relative attention biases r_w, r_r, r_s are parameters of the score, not
  additive output biases, and are decayed (docs/SEMANTICS.md#optimizer). The exemptions are found
  structurally, by layer type and attribute (`decay_exempt_variables`), never by matching names.
* **Per-variable learning-rate multipliers** (optional): the Adam update of a variable uses
  lr(step) * multiplier(variable); fine-tuning's layer-wise decay sets them from the layer
  structure (xlnet_tf2/training/layer_decay.py). Decoupled weight decay keeps the base rate.
  The original multiplied the clipped gradient instead, which Adam's normalization almost
  entirely cancels (docs/SEMANTICS.md#optimizer).
* Gradients reach `apply` already summed over replicas and clipped to a global norm by the
  training step (`trainer.py`, with `global_norm` of this module), so this optimizer does not
  all-reduce them again.

On an accelerator with one replica (the step's plan, layers/step_plan.py, passed by the trainer
as `grouped`), the same arithmetic is traced in a
form XLA fuses into a few kernels instead of one or two per variable: the global norm sums the
squares of a few concatenations of the gradients, and the update computes the gradient's terms
of the moments on one concatenation per group of equal-sized variables, which each variable's
update then reads a slice of (`XLNetAdamW._grouped_update_step`). The variables (weights and the
m, v slots checkpoints hold) stay one per weight. A CPU traces the per-variable form.
"""

from __future__ import annotations

from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import keras
import numpy as np
import tensorflow as tf

# The accelerator form's groups (see the module docstring and `update_groups`). Why these
# sizes: XLA GPU caps the operands plus outputs of one fused kernel (64, or 96 in newer
# versions); a group's update kernel has seven per variable (gradient, weight, m, v in; weight,
# m, v out) plus a few scalars, so 8 variables fit either cap, and a norm kernel reads one
# gradient per operand. Only variables of rank <= 2 and at most GROUPED_MAX_ELEMENTS elements
# are grouped: the gradients of the attention's [D, N, H] projections and seg_embed leave their
# einsums in another layout (or as partial sums), which XLA fuses into a per-variable update
# but must write out before a grouped one; and a large variable's update is long next to a
# kernel launch, so XLA does not fuse those into one kernel anyway.
UPDATE_GROUP_SIZE = 8
NORM_GROUP_SIZE = 48
GROUPED_MAX_ELEMENTS = 1 << 20


def global_norm(tensors: Sequence[Optional[tf.Tensor]], grouped: bool = False) -> tf.Tensor:
    """float32 scalar: sqrt of the sum of squares of every element of `tensors` (None entries
    skipped, `tf.IndexedSlices` by their values), as `tf.linalg.global_norm`.

    Without `grouped` (a CPU's step) it is `tf.linalg.global_norm` itself (one reduction per
    tensor); with it (an accelerator's) the sum of the squares of concatenations of up to
    NORM_GROUP_SIZE flattened tensors, which XLA fuses into one reduction each: the same value
    up to the order of the float32 additions."""
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
    """lr(step) = peak * step / warmup for step < warmup, then a linear decay from peak at
    `warmup_steps` to `end_learning_rate` at `total_steps` (constant afterwards).

    `step` counts applied updates (the optimizer's `iterations`), starting at 0.
    """

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
    """Adam with decoupled weight decay, optionally without bias correction (see module doc).

    Call `exclude_from_weight_decay(var_list=decay_exempt_variables(model))` and, for
    per-variable learning rates, `set_lr_multipliers({id(variable): multiplier})` before
    building; variables without a multiplier learn at the base rate.
    """

    def __init__(self, learning_rate=1e-3, beta_1=0.9, beta_2=0.999, epsilon=1e-6,
                 weight_decay=0.0, bias_correction=False, name="xlnet_adamw", **kwargs):
        super().__init__(learning_rate=learning_rate, name=name,
                         weight_decay=weight_decay if weight_decay else None, **kwargs)
        self.beta_1 = beta_1
        self.beta_2 = beta_2
        self.epsilon = epsilon
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

    def _backend_update_step(self, grads, trainable_variables, learning_rate):
        # The form `apply_gradients` was asked for (module docstring).
        if self._grouped:
            self._grouped_update_step(grads, trainable_variables, learning_rate)
        else:  # Keras' per-variable updates, through the strategy's merge_call
            super()._backend_update_step(grads, trainable_variables, learning_rate)

    def _grouped_update_step(self, grads, trainable_variables, learning_rate):
        """The accelerator's form of the update, one replica: for each group of
        `update_groups`, the gradient's terms of the moments are computed on the concatenated
        gradients, and each variable's update reads its slice.
        Each element sees the same operations as in `update_step`, so the values are the same.

        Why: every variable's update then has all the group's gradients among its operands,
        and XLA GPU fuses updates that share operands (sibling multi-output fusion) into one
        kernel per group, each variable still read and written in place in its own buffers.
        Per-variable updates share only scalars and stay one kernel each. The terms must be
        computed after the concatenation: XLA folds a slice of a bare concatenation back to
        the operand, which undoes the grouping."""
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


def decay_exempt_variables(model: keras.Model) -> List[tf.Variable]:
    """Variables exempt from weight decay, found by layer type (see module doc).

    Every variable of a `LayerNormalization`, the `bias` of every `Dense` and the LM head's
    `lm_bias` attribute; walking the layer tree by type means a renamed variable cannot
    silently change group.
    """
    exempt = []
    for layer in model._flatten_layers(include_self=True, recursive=True):
        if isinstance(layer, keras.layers.LayerNormalization):
            exempt.extend(layer.weights)
        elif isinstance(layer, keras.layers.Dense) and layer.bias is not None:
            exempt.append(layer.bias)
        lm_bias = getattr(layer, "lm_bias", None)
        if isinstance(lm_bias, keras.Variable):
            exempt.append(lm_bias)
    unique, seen = [], set()
    for v in exempt:
        if id(v) not in seen:
            seen.add(id(v))
            unique.append(v)
    return unique


def resolve_bias_correction(bias_correction: Optional[bool], weight_decay: float) -> bool:
    """Adam's bias correction: as given, else the original's rule (on exactly when the weight
    decay is 0; see the module docstring)."""
    return weight_decay == 0 if bias_correction is None else bool(bias_correction)


def describe_optimizer(bias_correction: Optional[bool], weight_decay: float) -> str:
    """One line saying which Adam a run uses and why (logged once at the start of a run)."""
    on = resolve_bias_correction(bias_correction, weight_decay)
    if bias_correction is None:
        why = (f"--weight_decay={weight_decay:g} is 0: the original's tf.train.AdamOptimizer" if on
               else f"--weight_decay={weight_decay:g} > 0: the original's "
                    "AdamWeightDecayOptimizer")
    else:
        why = f"--adam_bias_correction={str(on).lower()}"
    return (f"optimizer: Adam with decoupled weight decay {weight_decay:g}, bias correction "
            f"{'on' if on else 'off'} ({why})")


def warmup_warning(learning_rate: float, warmup_steps: int, train_steps: int) -> Optional[str]:
    """A warning line when the warmup does not end before the run: the learning rate then
    only rises and never reaches --learning_rate (a 300-step fine-tuning run under the
    paper's 1000 warmup steps ends at 30% of it, and a small model may learn nothing); None
    when the warmup ends in time."""
    if warmup_steps < train_steps:
        return None
    last = learning_rate * (train_steps - 1) / warmup_steps  # the last update's rate
    return (f"warning: --warmup_steps={warmup_steps} is not below --train_steps={train_steps}: "
            f"the learning rate only rises, to {last:.3g} at the last step, and never reaches "
            f"--learning_rate={learning_rate:g}; about a tenth of --train_steps is a usual "
            "warmup for a short run.")


def apply_gradients(optimizer, grads, variables, grouped: bool) -> None:
    """`optimizer.apply(grads, variables)` (an XLNetAdamW, alone or inside Keras'
    LossScaleOptimizer), its update in the accelerator's grouped form when `grouped` (the
    trainer's choice from the step's plan: an accelerator, one replica). Keras' `apply` takes no
    such argument: the AdamW holds the form for the length of this call only."""
    adamw = getattr(optimizer, "inner_optimizer", optimizer)
    adamw._grouped = bool(grouped)  # noqa: SLF001
    try:
        optimizer.apply(grads, variables)
    finally:
        adamw._grouped = False  # noqa: SLF001


def create_optimizer(model: keras.Model, *, learning_rate: float, warmup_steps: int,
                     total_steps: int, weight_decay: float, epsilon: float,
                     bias_correction: Optional[bool] = None, loss_scaling: bool = False,
                     variables: Optional[Sequence[tf.Variable]] = None,
                     lr_multipliers: Optional[Dict[int, float]] = None):
    """(optimizer, schedule): the AdamW for `model`, built on `variables` (default: all its
    trainable variables), and its learning-rate schedule (a function of the applied-update
    count). `lr_multipliers`: {id(variable): multiplier} (see XLNetAdamW). `bias_correction`
    None follows the original's rule (`resolve_bias_correction`).

    Must be called inside the distribution strategy's scope. With `loss_scaling`
    (mixed_float16) the AdamW is wrapped in Keras' dynamic `LossScaleOptimizer`, which skips
    steps whose gradients overflow.
    """
    variables = list(model.trainable_variables if variables is None else variables)
    schedule = LinearWarmupLinearDecay(learning_rate, warmup_steps, total_steps)
    optimizer = XLNetAdamW(learning_rate=schedule, epsilon=epsilon, weight_decay=weight_decay,
                           bias_correction=resolve_bias_correction(bias_correction,
                                                                   weight_decay))
    optimizer.exclude_from_weight_decay(var_list=decay_exempt_variables(model))
    if lr_multipliers:
        optimizer.set_lr_multipliers(lr_multipliers)
    optimizer.build(variables)
    if loss_scaling:
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
        optimizer.build(variables)
    return optimizer, schedule
