"""`HeadSpec`, a fine-tuned model's `task.json`: which head it has (the `task`, its summary,
labels, beam) and how its inputs are laid out (sequence length, layout, lowercasing, SQuAD's
windows), so evaluation and export need no flags repeated.

Written by the fine-tuning tasks next to the checkpoints; the SentencePiece model is copied
into the model_dir as `spiece.model` so the directory is self-contained.
"""

from __future__ import annotations

import dataclasses
import os
from typing import List, Optional

import tensorflow as tf

from xlnet_tf2 import fileio, run_dir
from xlnet_tf2.config_flags import RunConfigError
from xlnet_tf2.tasks.finetune_config import check_squad_windows

TASKS = run_dir.TASKS
TASK_FILE = run_dir.TASK_FILE


# The type of every field (what task.json may hold for it).
_TYPES = {"task": str, "seq_len": int, "summary_type": str, "layout": str, "label_list": (list, tuple),
          "paired": bool, "lower": bool, "num_choices": int, "max_qa_length": int,
          "version_2_with_negative": bool, "doc_stride": int, "max_query_length": int,
          "max_answer_length": int, "n_best_size": int, "null_score_threshold": (int, float)}


@dataclasses.dataclass(frozen=True)
class HeadSpec:
    """task.json, checked (unknown keys, types, ranges raise RunConfigError naming them)."""

    task: str
    seq_len: int
    summary_type: str = "last"
    layout: str = "cls_last"
    label_list: Optional[List[str]] = None
    paired: bool = False            # classification/regression: a second text input
    lower: bool = False
    num_choices: int = 4            # race
    max_qa_length: int = 128        # race: question+option keeps its LAST tokens
    # squad (see xlnet_tf2/tasks/squad_data.py and squad.py)
    version_2_with_negative: bool = False
    doc_stride: int = 128           # tokens between the starts of consecutive windows
    max_query_length: int = 64      # the question keeps its FIRST tokens
    max_answer_length: int = 64     # longest answer span, in tokens
    n_best_size: int = 5            # beam: top-n starts x top-n ends
    null_score_threshold: float = 0.0  # SQuAD 2.0: answer-class logit above it -> no answer

    def __post_init__(self):
        if self.task not in TASKS:
            raise RunConfigError(f"task must be one of {TASKS}, got {self.task!r}.")
        for field in dataclasses.fields(self):
            value, kind = getattr(self, field.name), _TYPES.get(field.name)
            if kind is not None and value is not None and (
                    not isinstance(value, kind) or (kind is int and isinstance(value, bool))):
                raise RunConfigError(f"{field.name} must be "
                                     f"{getattr(kind, '__name__', 'a number or a list')}, got "
                                     f"{value!r}.")
        for name in ("seq_len", "num_choices", "max_qa_length"):
            if getattr(self, name) <= 0:
                raise RunConfigError(f"{name} must be positive, got {getattr(self, name)}.")
        if self.label_list is not None and not all(isinstance(x, str) for x in self.label_list):
            raise RunConfigError(f"label_list must hold label names, got {self.label_list!r}.")
        if self.task == "classification" and self.label_list is not None and \
                len(self.label_list) < 2:
            raise RunConfigError(f"a classification model needs a label_list of at least 2 "
                                 f"labels, got {self.label_list!r}.")
        if self.task == "squad":
            check_squad_windows(self)

    def replace(self, **changes) -> "HeadSpec":
        return dataclasses.replace(self, **changes)

    def write(self, model_dir: str) -> None:
        fileio.makedirs(model_dir)
        fileio.write_json_atomically(os.path.join(model_dir, TASK_FILE), dataclasses.asdict(self))

    @classmethod
    def read(cls, model_dir: str) -> "HeadSpec":
        path = os.path.join(model_dir, TASK_FILE)
        if not tf.io.gfile.exists(path):
            raise FileNotFoundError(f"{path} does not exist: --model_dir must be a directory "
                                    "written by run_classifier.py, run_race.py or run_squad.py.")
        values = fileio.read_json_object(path, RunConfigError, "what the fine-tuned model is",
                                         "Restore it from the run that wrote the directory.")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise RunConfigError(f"{path}: unknown key(s) {unknown}.")
        try:
            return cls(**values)
        except RunConfigError as e:
            raise RunConfigError(f"{path}: {e} Restore it from the run that wrote the "
                                 "directory.") from None
        except TypeError as e:  # a required key (task, seq_len) is missing
            raise RunConfigError(f"{path}: {e}.") from None
