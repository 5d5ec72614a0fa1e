"""The inference flags of experiments/extract_features.py: the same --strategy, --tpu,
--tpu_timeout and --precision flags as the training commands (`define_inference_flags`)."""

from __future__ import annotations

import dataclasses

from absl import flags

from xlnet_tf2.config_flags import config_from_flags, define_flags
from xlnet_tf2.training.run_config import DistributionConfig, LoopConfig

FLAGS = flags.FLAGS


def define_inference_flags() -> None:
    """--strategy, --tpu, --tpu_timeout and --precision for a command that only runs a model:
    the same names, choices, defaults and help as the training commands'."""
    define_flags(DistributionConfig)
    precision = {f.name: f for f in dataclasses.fields(LoopConfig)}["precision"]
    flags.DEFINE_enum("precision", precision.default, list(precision.metadata["choices"]),
                      precision.metadata["help"])


def inference_strategy():
    """The strategy of the inference flags, with --precision set as the Keras dtype policy
    (call before building the model, and build it inside `strategy.scope()`)."""
    import keras

    from xlnet_tf2.training.distribution import resolve_strategy

    dist = config_from_flags(DistributionConfig)
    keras.mixed_precision.set_global_policy(FLAGS.precision)
    return resolve_strategy(dist.strategy, dist.tpu, dist.tpu_timeout)
