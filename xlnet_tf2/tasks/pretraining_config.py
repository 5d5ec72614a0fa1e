"""The typed configuration tree of a pretraining run; run_pretrain.py's flags are derived
from it.

    PretrainConfig
      data_dir, model_config, init_checkpoint, spm_model, online_permutation
      loop          LoopConfig          steps, batch, accumulation, checkpoints, logging, precision
      optimizer     OptimizerConfig     AdamW and its schedule, clipping
      model         PretrainModelConfig the model's run-time settings (dropout, memory, clamp)
      evaluation    PretrainEvalConfig  held-out loss every --eval_steps
      distribution  DistributionConfig  strategy and TPU

The shared sections are xlnet_tf2/training/run_config.py's. `reuse_len` and `bi_data` are not
settings: they are properties of the prepared data, read from its manifest.
"""

from __future__ import annotations

import dataclasses
from typing import Optional, Tuple

from xlnet_tf2 import config_flags
from xlnet_tf2.config_flags import (RunConfigError, check_declared, check_non_negative,
                                    check_positive, section, setting)
from xlnet_tf2.data.objective_sampling import FACTORIZATION_ORDERS
from xlnet_tf2.training.run_config import (DistributionConfig, DropoutConfig, LoopConfig,
                                           OptimizerConfig)


@dataclasses.dataclass(frozen=True)
class PretrainModelConfig(DropoutConfig):
    """The model's run-time settings in pretraining. `reuse_len` and `bi_data` are not here:
    they are properties of the prepared data, read from its manifest."""

    mem_len: int = setting(
        384, "Number of Transformer-XL memory positions per layer carried from one step of a "
        "stream to the next (the paper uses 384 with seq_len 512); 0 disables memory.")
    clamp_len: int = setting(
        -1, "Clamp relative distances to [-clamp_len, clamp_len]; -1 disables clamping (the "
        "paper's setting).")
    initializer_range: float = setting(
        0.02, "Standard deviation of the normal initializer of fresh weights.", resume="free")

    def __post_init__(self):
        super().__post_init__()
        check_non_negative(self, "mem_len")
        if not isinstance(self.clamp_len, int) or self.clamp_len < -1:
            raise RunConfigError(f"--clamp_len must be -1 or >= 0, got {self.clamp_len!r}.")
        if not self.initializer_range > 0:
            raise RunConfigError(f"--initializer_range must be positive, got "
                                 f"{self.initializer_range}.")

    def runtime(self, *, reuse_len: int, bi_data: bool) -> dict:
        """The XLNetConfig run-time fields of pretraining."""
        return dict(dropout=self.dropout, dropatt=self.dropatt, mem_len=self.mem_len,
                    reuse_len=reuse_len, bi_data=bi_data, clamp_len=self.clamp_len,
                    attn_type="bi", same_length=False,
                    initializer_range=self.initializer_range)


@dataclasses.dataclass(frozen=True)
class PretrainEvalConfig:
    """Held-out evaluation during pretraining."""

    eval_data_dir: Tuple[str, ...] = setting(
        (), "Prepared directories of held-out text (data_prep/create_tfrecords.py "
        "--eval_fraction or --eval_input writes DATA_DIR/eval); default: the eval/ directory "
        "beside each --data_dir when it exists.", resume="free")
    eval_steps: int = setting(
        0, "Evaluate the held-out loss and perplexity every this many training steps and at "
        "the end (0: never).", resume="free")
    eval_batches: int = setting(
        20, "Batches per held-out evaluation (memory carried across them, from zero).",
        resume="free")
    eval_batch_size: int = setting(
        0, "Global batch size of held-out evaluation (0: the training batch size).",
        resume="free")

    def __post_init__(self):
        check_declared(self)
        check_non_negative(self, "eval_steps", "eval_batch_size")
        check_positive(self, "eval_batches")


@dataclasses.dataclass(frozen=True)
class PretrainConfig:
    """Settings of one pretraining run."""

    data_dir: Tuple[str, ...] = setting(
        (), "One or more comma-separated directories written by data_prep/create_tfrecords.py "
        "(local paths or gs://); their record_info.json manifests fix seq_len, reuse_len, "
        "num_predict, bi_data and the vocabulary.", required=True, resume="warn")
    model_config: str = setting(
        "base", "The model architecture: a preset name (base, large, tiny), whose vocabulary "
        "size is taken from the data, or the path of an xlnet_config.json file, whose n_token "
        "must match the data. Only its architecture keys are used.")
    init_checkpoint: Optional[str] = setting(
        None, "The weights to start from when --model_dir holds no checkpoint yet: whatever "
        "from_pretrained takes (a pretraining run, a converted release, a HuggingFace "
        "directory or hub id, a release name such as xlnet-base-cased, an original release "
        "directory) or a checkpoint prefix (DIR/ckpt-1000); its architecture must be "
        "--model_config's, and its optimizer state is ignored.", resume="free")
    spm_model: Optional[str] = setting(
        None, "The SentencePiece model the data was encoded with, copied into --model_dir so "
        "fine-tuning and export need nothing else. Default: the one the data manifest names "
        "(checked against the manifest's sha256).", resume="free")
    online_permutation: bool = setting(
        False, "Draw a new factorization order for every example in every pass over the data "
        "(in the input pipeline, deterministic from --seed and the step, exact on resume) "
        "instead of the order stored by data preparation.", resume="warn")
    factorization_order: str = setting(
        "permutation", "The pretraining objective: 'permutation' (XLNet: each example's targets "
        "are predicted in a sampled factorization order, from every non-target on both sides) "
        "or 'left_to_right' (the identity order with every position ranked: a plain "
        "Transformer-XL language model predicting the same targets from the positions before "
        "them and the memory only, so it needs --mem_len > 0; "
        "docs/SEMANTICS.md#factorization-order). Same data, model and step.",
        choices=FACTORIZATION_ORDERS)
    loop: LoopConfig = section(LoopConfig)
    optimizer: OptimizerConfig = section(OptimizerConfig)
    model: PretrainModelConfig = section(PretrainModelConfig)
    evaluation: PretrainEvalConfig = section(PretrainEvalConfig)
    distribution: DistributionConfig = section(DistributionConfig)

    def __post_init__(self):
        check_declared(self)
        if self.factorization_order == "left_to_right" and self.model.mem_len == 0:
            # Position 0 has no position before it: a target there would see no key at all,
            # and a softmax over nothing but blocked keys spreads evenly over all of them
            # (the future included). The memory columns give it something to see.
            raise RunConfigError("--factorization_order=left_to_right needs --mem_len > 0: "
                                 "a target at position 0 sees only the memory.")

    @classmethod
    def flat(cls, **values) -> "PretrainConfig":
        """Built from flat setting names (as the flags): PretrainConfig.flat(model_dir=...)."""
        return config_flags.from_flat(cls, values)

    # Short names for the settings everything reads.
    @property
    def data_dirs(self) -> Tuple[str, ...]:
        return tuple(self.data_dir)

    @property
    def model_dir(self) -> str:
        return self.loop.model_dir

    @property
    def eval_batch_size(self) -> int:
        """--eval_batch_size, or the training batch size when it is 0."""
        return self.evaluation.eval_batch_size or self.loop.train_batch_size
