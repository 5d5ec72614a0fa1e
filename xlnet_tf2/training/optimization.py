"""Which optimizer a run gets: `create_optimizer` builds training/step.py's `XLNetAdamW` (the
update's arithmetic, docs/SEMANTICS.md#optimizer) with its `LinearWarmupLinearDecay` schedule,
and says which Adam it is in one line (`describe_optimizer`).

* **Bias correction by the original's rule** (`get_train_op` of zihangdai/xlnet): with weight
  decay > 0 the original uses its `AdamWeightDecayOptimizer`, which has no bias correction,
  update = m / (sqrt(v) + eps); at weight decay exactly 0 it uses `tf.train.AdamOptimizer`,
  which has: step size lr * sqrt(1 - beta_2^t) / (1 - beta_1^t), update = m / (sqrt(v) + eps).
  `resolve_bias_correction` applies that rule unless a run says otherwise
  (--adam_bias_correction). The difference matters at the start: the uncorrected first update
  is 0.1 / sqrt(0.001) = 3.16 times the corrected one (lr * sign(g)), and with a short
  fine-tuning warmup the two runs part from step 3 on.
* **Exempt from decay**: every LayerNorm gamma/beta, the bias of every dense layer and the LM
  output bias. The relative attention biases r_w, r_r, r_s are parameters of the score, not
  additive output biases, and are decayed (docs/SEMANTICS.md#optimizer). The exemptions are found
  structurally, by layer type and attribute (`decay_exempt_variables`), never by matching names.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence

import keras
import tensorflow as tf

from xlnet_tf2.training.step import LinearWarmupLinearDecay, XLNetAdamW


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
