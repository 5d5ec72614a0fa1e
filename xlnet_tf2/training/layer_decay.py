"""Layer-wise learning-rate decay, attached to the layers structurally.

Every variable's multiplier comes from the layer that owns it, found by walking the task
model: the backbone's blocks carry `layer_index` (XLNetBlock), the remaining backbone
variables (word embedding, mask_emb, shared relative biases) sit below block 0, and everything
outside the backbone (the head) is on top. Nothing matches variable names.

  head                     1
  block i (0 = lowest)     decay ** (n_layer - 1 - i)     (the original's exponents)
  embeddings & co.         decay ** n_layer               (the original left them at 1)

The multiplier scales the learning rate of that variable's Adam update: the multipliers go to
the one optimizer of the project, `XLNetAdamW.set_lr_multipliers` (training/step.py). The
original multiplied the clipped gradient instead, which Adam's normalization almost entirely
cancels (docs/SEMANTICS.md#optimizer). Decoupled weight decay is applied by Keras with the base
rate.
"""

from __future__ import annotations

from typing import Dict

import keras


def layer_lr_multipliers(model: keras.Model, decay: float) -> Dict[int, float]:
    """{id(variable): multiplier} for every trainable variable of a task model with a
    `transformer` backbone (see the module doc)."""
    if not 0.0 < decay <= 1.0:
        raise ValueError(f"--layer_decay must be in (0, 1], got {decay}.")
    backbone = model.transformer
    n_layer = len(backbone.blocks)
    multipliers = {id(v): 1.0 for v in model.trainable_variables}
    for v in backbone.trainable_variables:
        multipliers[id(v)] = decay ** n_layer
    for block in backbone.blocks:
        for v in block.trainable_variables:
            multipliers[id(v)] = decay ** (n_layer - 1 - block.layer_index)
    return multipliers
