"""The settings of experiments/convert_checkpoint.py as a config tree (xlnet_tf2/config_flags.py):
its flags, help and checks are written here once. Importing this module does not import
TensorFlow."""

from __future__ import annotations

import dataclasses
from typing import Optional

from xlnet_tf2.config_flags import check_declared, setting

SOURCES = ("original", "huggingface")


@dataclasses.dataclass(frozen=True)
class ConvertConfig:
    """Which released checkpoint to convert, and where the xlnet-tf2 directory goes."""

    source: str = setting(
        None, "Where the checkpoint comes from: 'original' for the zihangdai/xlnet TF1 "
        "release, 'huggingface' for a transformers save_pretrained directory.",
        choices=SOURCES, required=True)
    checkpoint: str = setting(
        None, "For --source=original, the TF1 checkpoint prefix (e.g. .../xlnet_model.ckpt, "
        "without .index). For --source=huggingface, the save_pretrained directory.",
        required=True)
    config: Optional[str] = setting(
        None, "For --source=original, the xlnet_config.json of the release. Defaults to "
        "xlnet_config.json beside the checkpoint. Ignored for HuggingFace.")
    spm_model: Optional[str] = setting(
        None, "Optional SentencePiece model (spiece.model) to copy into the output directory.")
    output_dir: str = setting(
        None, "Directory to write the converted checkpoint into.", required=True)

    def __post_init__(self):
        check_declared(self)
