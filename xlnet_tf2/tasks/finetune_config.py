"""The typed configuration tree of a fine-tuning run; the shared fine-tuning flags
(run_classifier.py, run_squad.py, run_race.py) are derived from it.

    FinetuneConfig
      init_checkpoint, model_config, spm_model, seq_len, eval_batch_size, eval_every,
      best_metric, layer_decay, head_dropout, lower
      loop          FinetuneLoopConfig       pretraining's LoopConfig, fine-tuning defaults
      optimizer     FinetuneOptimizerConfig  pretraining's OptimizerConfig, fine-tuning defaults
      model         DropoutConfig            the backbone's dropout
      distribution  DistributionConfig

Fine-tuning never inherits pretraining's run-time settings: the backbone is built from the
architecture in `--model_config` (default: the init checkpoint's xlnet_config.json) with no
memory, no bi_data and this run's dropout.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

from xlnet_tf2 import config_flags
from xlnet_tf2.config_flags import RunConfigError, section, setting
from xlnet_tf2.training.run_config import (DistributionConfig, DropoutConfig, LoopConfig,
                                           OptimizerConfig, with_defaults)

FinetuneLoopConfig = with_defaults(
    LoopConfig, "FinetuneLoopConfig", train_steps=1000, train_batch_size=32, steps_per_loop=1,
    save_steps=500, keep_checkpoints=1, log_steps=50)
FinetuneOptimizerConfig = with_defaults(
    OptimizerConfig, "FinetuneOptimizerConfig", learning_rate=2e-5, warmup_steps=0,
    weight_decay=0.0)

LOWER_IS_BETTER = ("mse", "loss")


@dataclasses.dataclass(frozen=True)
class FinetuneConfig:
    """Settings of one fine-tuning run (classification, regression, SQuAD, RACE)."""

    init_checkpoint: Optional[str] = setting(
        None, "Backbone weights to start from: a pretraining --model_dir, a converted release "
        "directory, or a checkpoint prefix. Its directory also supplies the defaults of "
        "--model_config (xlnet_config.json) and --spm_model (spiece.model). Unset: random "
        "initialization (then --model_config and --spm_model are required).")
    model_config: Optional[str] = setting(
        None, "The backbone architecture: a preset name (base, large, tiny) or the path of an "
        "xlnet_config.json (original or ours; only its architecture keys are used). Default: "
        "the xlnet_config.json beside --init_checkpoint.")
    spm_model: Optional[str] = setting(
        None, "The SentencePiece model (spiece.model) the backbone was pretrained with; it is "
        "copied into --model_dir. Default: the spiece.model beside --init_checkpoint.",
        resume="free")
    seq_len: int = setting(
        128, "Tokens per example, special tokens included; longer inputs are truncated from "
        "the end of the longer text.")
    eval_batch_size: int = setting(
        32, "Evaluation batch size (every batch is padded to this size so shapes stay "
        "static).", resume="free")
    eval_every: int = setting(
        500, "Evaluate (and keep the best checkpoint) every this many steps, and at the end.",
        resume="free")
    best_metric: Optional[str] = setting(
        None, "The evaluation metric that picks the best checkpoint (default: the task's, "
        "accuracy for classification and RACE, pearson for regression, f1 for SQuAD); lower is "
        "better for mse and loss.", resume="warn")
    layer_decay: float = setting(
        1.0, "Layer-wise learning-rate decay: block i of n learns at lr * decay**(n-1-i), the "
        "embeddings at lr * decay**n, the head at lr (e.g. 0.75 for SQuAD with XLNet-large).",
        resume="warn")
    head_dropout: float = setting(
        0.1, "Dropout rate in the task head.", resume="warn")
    lower: bool = setting(False, "Lowercase text (only for uncased models).")
    feature_cache_dir: Optional[str] = setting(
        None, "Where tokenized features are cached as TFRecords, so the same data is tokenized "
        "once across runs and workers (default: $XLNET_TF2_CACHE or "
        "~/.cache/xlnet_tf2/features); 'off' disables the cache.", resume="free")
    loop: LoopConfig = section(FinetuneLoopConfig)
    optimizer: OptimizerConfig = section(FinetuneOptimizerConfig)
    model: DropoutConfig = section(DropoutConfig)
    distribution: DistributionConfig = section(DistributionConfig)

    def __post_init__(self):
        for name in ("seq_len", "eval_batch_size", "eval_every"):
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                raise RunConfigError(f"--{name} must be a positive integer, got {value!r}.")
        if not 0.0 < self.layer_decay <= 1.0:
            raise RunConfigError(f"--layer_decay must be in (0, 1], got {self.layer_decay}.")
        if not 0.0 <= self.head_dropout < 1.0:
            raise RunConfigError(f"--head_dropout must be in [0, 1), got {self.head_dropout}.")

    @classmethod
    def flat(cls, **values) -> "FinetuneConfig":
        """Built from flat setting names (as the flags): FinetuneConfig.flat(model_dir=...)."""
        return config_flags.from_flat(cls, values)

    def with_default_metric(self, metric: str) -> "FinetuneConfig":
        return self if self.best_metric else dataclasses.replace(self, best_metric=metric)

    # Short names for the settings the task runners read.
    @property
    def model_dir(self) -> str:
        return self.loop.model_dir

    @property
    def train_batch_size(self) -> int:
        return self.loop.train_batch_size

    @property
    def seed(self) -> int:
        return self.loop.seed

    @property
    def best_mode(self) -> str:
        return "min" if (self.best_metric or "") in LOWER_IS_BETTER else "max"
