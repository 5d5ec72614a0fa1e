"""absl flags shared by the fine-tuning commands (experiments/run_classifier.py, run_squad.py,
run_race.py): derived once from `FinetuneConfig` (xlnet_tf2/tasks/finetune_config.py), so their
names, help and defaults agree with the library's. Inference commands
(experiments/extract_features.py) take the same --strategy, --tpu, --tpu_timeout and
--precision flags (`define_inference_flags`)."""

from __future__ import annotations

import dataclasses
import json

from absl import flags

from xlnet_tf2.config_flags import config_from_flags, define_flags
from xlnet_tf2.tasks.finetune_config import FinetuneConfig
from xlnet_tf2.training.run_config import DistributionConfig, LoopConfig

FLAGS = flags.FLAGS


def define_common_flags() -> None:
    """Defines every FinetuneConfig setting as a flag of the calling command."""
    define_flags(FinetuneConfig)


def finetune_config(default_metric: str) -> FinetuneConfig:
    """The run's FinetuneConfig from the parsed flags (`default_metric` unless --best_metric)."""
    return config_from_flags(FinetuneConfig).with_default_metric(default_metric)


def strategy_from_flags(cfg: FinetuneConfig):
    from xlnet_tf2.training.distribution import resolve_strategy

    dist = cfg.distribution
    return resolve_strategy(dist.strategy, dist.tpu, dist.tpu_timeout)


def model_config(cfg: FinetuneConfig):
    """The backbone's XLNetConfig: the architecture of --model_config (default: the
    xlnet_config.json beside --init_checkpoint) with fine-tuning's run-time settings (this
    run's dropout; no memory, no bi_data, whatever the pretraining run used)."""
    from xlnet_tf2.config import XLNetConfig
    from xlnet_tf2.run_dir import architecture_file

    source = architecture_file(cfg.model_config, cfg.init_checkpoint)
    return XLNetConfig.resolve(source, dropout=cfg.model.dropout, dropatt=cfg.model.dropatt,
                               mem_len=0, reuse_len=0, bi_data=False)


def spm_model(cfg: FinetuneConfig) -> str:
    """--spm_model, default the spiece.model beside --init_checkpoint."""
    from xlnet_tf2.run_dir import spm_model_file

    return spm_model_file(cfg.spm_model, cfg.init_checkpoint)


def report(result) -> None:
    print(json.dumps({"final_step": result.final_step, "best": result.best}, indent=2), flush=True)


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
