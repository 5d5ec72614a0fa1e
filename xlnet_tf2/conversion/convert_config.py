"""The settings of experiments/convert_checkpoint.py as a config tree (xlnet_tf2/config_flags.py):
its flags, help and checks are written here once. Importing this module does not import
TensorFlow."""

from __future__ import annotations

import dataclasses
from typing import Optional, Tuple

from xlnet_tf2 import task_registry
from xlnet_tf2.config_flags import RunConfigError, check_declared, check_positive, setting

SOURCES = ("original", "huggingface", "xlnet_tf2")
TARGETS = ("xlnet_tf2", "huggingface")
HEAD_KINDS = task_registry.names()
# task.json's seq_len when none is given, per task: each declaration's default_seq_len (the
# original's max_seq_length of its runner: run_classifier.py, run_squad.py, run_race.py).
DEFAULT_SEQ_LEN = {d.name: d.default_seq_len for d in task_registry.declared_tasks()}


@dataclasses.dataclass(frozen=True)
class ConvertConfig:
    """Which checkpoint to convert, in which direction, and (for a fine-tuned one) its head."""

    source: str = setting(
        None, "Where the checkpoint comes from: 'original' for the zihangdai/xlnet TF1 "
        "release (or a checkpoint its run_*.py fine-tuned), 'huggingface' for a transformers "
        "save_pretrained directory, 'xlnet_tf2' for one of this project's directories (only "
        "with --target=huggingface).", choices=SOURCES, required=True)
    target: str = setting(
        "xlnet_tf2", "The format to write: this project's ('xlnet_tf2') or HuggingFace's "
        "config.json + model.safetensors ('huggingface').", choices=TARGETS)
    checkpoint: str = setting(
        None, "For --source=original, the TF1 checkpoint prefix (e.g. .../xlnet_model.ckpt, "
        "without .index). For --source=huggingface or xlnet_tf2, the directory.",
        required=True)
    config: Optional[str] = setting(
        None, "For --source=original, the xlnet_config.json of the release. Defaults to "
        "xlnet_config.json beside the checkpoint. Ignored otherwise.")
    spm_model: Optional[str] = setting(
        None, "Optional SentencePiece model (spiece.model) to copy into the output directory "
        "(for --source=xlnet_tf2 the directory's own spiece.model is the default).")
    output_dir: str = setting(
        None, "Directory to write the converted checkpoint into: a new or empty one (or any "
        "but a training run's or prepared data's with --overwrite). It is written whole, "
        "under a temporary name first, so a failed conversion leaves it as it was.",
        required=True)
    overwrite: bool = setting(
        False, "Replace a non-empty --output_dir (an earlier conversion) when the conversion "
        "succeeds. A directory holding a training run or prepared data is never replaced.")
    kind: Optional[str] = setting(
        None, "Convert a fine-tuned checkpoint with its head, a model of this kind (a "
        "fine-tuning task's name), into a task directory (task.json + checkpoint). Without it "
        "only the backbone converts and head tensors are reported as unused. Not for "
        "--source=xlnet_tf2, whose task.json says the kind. (Formerly --task.)",
        choices=HEAD_KINDS, old_names=("task",))
    seq_len: Optional[int] = setting(
        None, "With --kind: the sequence length the head was fine-tuned with (written to "
        "task.json). Default: the task's declared default ("
        f"{', '.join(f'{task} {n}' for task, n in DEFAULT_SEQ_LEN.items())}).")
    label_list: Optional[Tuple[str, ...]] = setting(
        None, "With --kind=classification: the label names in id order, e.g. "
        "negative,positive. Default: the HuggingFace config's id2label, else 0,1,...")
    summary_type: Optional[str] = setting(
        None, "With --kind and --source=original: the --summary_type the checkpoint was "
        "fine-tuned with (default last, the original's). HuggingFace configs say their own. "
        "Only last and first compute the same here; mean and attn are refused.",
        choices=("last", "first", "mean", "attn"))
    cls_scope: Optional[str] = setting(
        None, "With --kind=classification or regression and --source=original: the <scope> "
        "of the head's model/classification_<scope>/logit variables (the original's "
        "--cls_scope or task name). Default: the only one in the checkpoint.")
    paired: bool = setting(
        False, "With --kind=classification or regression: the inputs are text pairs (written "
        "to task.json for serving).")
    num_choices: int = setting(
        4, "With --kind=race: the number of answer options per question (4 in RACE).")

    def __post_init__(self):
        check_declared(self)
        check_positive(self, "seq_len", "num_choices")
        if self.seq_len is not None and self.seq_len < 3:
            raise RunConfigError(f"--seq_len={self.seq_len} leaves no room for a token beside "
                                 "<sep> and <cls>; it must be at least 3.")
        if self.source == "xlnet_tf2" and self.target != "huggingface":
            raise RunConfigError("--source=xlnet_tf2 converts to --target=huggingface only.")
        if self.kind and self.source == "xlnet_tf2":
            raise RunConfigError("--kind is read from the directory's task.json for "
                                 "--source=xlnet_tf2; do not pass it.")
        if not self.kind:
            for name in ("seq_len", "label_list", "summary_type", "cls_scope"):
                if getattr(self, name) is not None:
                    raise RunConfigError(f"--{name} describes a head: it needs --kind.")
