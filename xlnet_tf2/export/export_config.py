"""The settings of the commands that run a finished model, as config trees
(xlnet_tf2/config_flags.py): their flags, help and checks are written here once.

    ExportConfig    experiments/export_saved_model.py
    ExtractConfig   experiments/extract_features.py
      distribution  DistributionConfig   --strategy, --tpu, --tpu_timeout (as in training)
      precision     the training loop's --precision

Importing this module does not import TensorFlow (`--help` stays fast).
"""

from __future__ import annotations

import dataclasses
from typing import Optional

from xlnet_tf2 import task_registry
from xlnet_tf2.config_flags import (RunConfigError, check_declared, check_non_negative,
                                    check_positive, section, setting, setting_like)
from xlnet_tf2.training.run_config import DistributionConfig, LoopConfig

# What xlnet-export computes: a declared task's head (task_registry.py), or "features" of the
# backbone.
EXPORT_KINDS = task_registry.names() + ("features",)
FEATURE_FORMATS = (".npz", ".jsonl")
MIN_SEQ_LEN = 3  # a text's features need one token besides <sep> and <cls>


def check_feature_seq_len(config) -> None:
    """--seq_len, when given, leaves room for a token beside <sep> and <cls>."""
    check_positive(config, "seq_len")
    if config.seq_len is not None and config.seq_len < MIN_SEQ_LEN:
        raise RunConfigError(f"--seq_len={config.seq_len} leaves no room for a token beside "
                             f"<sep> and <cls>; it must be at least {MIN_SEQ_LEN}.")


@dataclasses.dataclass(frozen=True)
class ExportConfig:
    """Which model directory to export as a SavedModel for TF Serving, and where to."""

    model_dir: str = setting(
        None, "A directory written by a fine-tuning command ("
        f"{', '.join(sorted({d.command for d in task_registry.declared_tasks()}))}) or by "
        "xlnet-convert --kind, or for --kind=features any model directory (pretraining run, "
        "fine-tuning run or converted release).", required=True)
    kind: Optional[str] = setting(
        None, "What the exported model computes. Default: the model_dir's kind (its "
        "task.json). Given, a fine-tuned model's kind must be task.json's (it is only "
        "checked), or features exports the backbone's features of any model directory. "
        "(Formerly --task.)", choices=EXPORT_KINDS, old_names=("task",))
    export_dir: str = setting(
        None, "Base directory; the SavedModel goes to EXPORT_DIR/<version>/.", required=True)
    version: Optional[int] = setting(
        None, "Version sub-directory (default: one more than the largest existing).")
    checkpoint: str = setting(
        "best", "Export the best-evaluation weights (best/) or the latest training checkpoint.",
        choices=("best", "latest"))
    seq_len: Optional[int] = setting(
        None, "For --kind=features only: tokens per input (default: the model_dir's task.json "
        "seq_len, else the pretraining data's seq_len from run_config.json, else 512).")

    def __post_init__(self):
        check_declared(self)
        check_non_negative(self, "version")
        check_feature_seq_len(self)
        if self.seq_len is not None and self.kind != "features":
            raise RunConfigError("--seq_len is for --kind=features only; a fine-tuned model's "
                                 "export takes the seq_len it was fine-tuned with (its "
                                 "task.json).")


@dataclasses.dataclass(frozen=True)
class ExtractConfig:
    """Which model computes features of which text file, where they go, and on what devices."""

    model_dir: str = setting(
        None, "Directory with xlnet_config.json, spiece.model and a backbone checkpoint "
        "(converted release, pretraining or fine-tuning run).", required=True)
    input_file: str = setting(
        None, "UTF-8 text file, one text per line (empty lines are kept and encoded as "
        "`<sep> <cls>`).", required=True)
    output_file: str = setting(
        None, "Where the features go: a .npz or a .jsonl file (the format follows the "
        "extension).", required=True)
    seq_len: Optional[int] = setting(
        None, "Tokens per text, <sep> and <cls> included (default: the model_dir's task.json "
        "seq_len, else 512).")
    batch_size: int = setting(
        16, "Texts per forward pass (the last batch is padded so every pass has the same "
        "shape).")
    precision: str = setting_like(LoopConfig, "precision")
    distribution: DistributionConfig = section(DistributionConfig)

    def __post_init__(self):
        check_declared(self)
        if not self.output_file.endswith(FEATURE_FORMATS):
            raise RunConfigError(f"--output_file={self.output_file!r} must end in .npz or "
                                 ".jsonl.")
        check_positive(self, "batch_size")
        check_feature_seq_len(self)
