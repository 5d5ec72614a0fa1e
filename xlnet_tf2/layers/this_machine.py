"""What this machine traces for when a call is given no plan (layers/step_plan.py's
`StepPlan.for_this_machine`): the kind of device TensorFlow sees, and a TPU's generation."""

from __future__ import annotations

import os

import tensorflow as tf


def device() -> str:
    """"tpu" when TensorFlow sees a TPU, "gpu" when it sees a GPU, "cpu" otherwise."""
    if tf.config.list_logical_devices("TPU"):
        return "tpu"
    if tf.config.list_logical_devices("GPU"):
        return "gpu"
    return "cpu"


def tpu_generation() -> str:
    """The TPU generation of this machine as the TPU VM's TPU_ACCELERATOR_TYPE (or
    ACCELERATOR_TYPE) names it ("v4-8" -> "v4", "v5litepod-8" -> "v5e", "v5p-8" -> "v5p",
    "v6e-8" -> "v6e"), "v5e" without it."""
    accelerator = os.environ.get("TPU_ACCELERATOR_TYPE",
                                 os.environ.get("ACCELERATOR_TYPE", "")).lower()
    for prefix, generation in (("v5litepod", "v5e"), ("v5e", "v5e"), ("v5p", "v5p"),
                               ("v6e", "v6e"), ("v4", "v4")):
        if accelerator.startswith(prefix):
            return generation
    return "v5e"
