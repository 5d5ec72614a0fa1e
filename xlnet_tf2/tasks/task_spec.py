"""`task.json`: what a fine-tuned model_dir is, so evaluation and export need no flags repeated.

Written by the task runners next to the checkpoints; the SentencePiece model is copied into
the model_dir as `spiece.model` so the directory is self-contained.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import List, Optional

import tensorflow as tf

from xlnet_tf2 import run_dir
from xlnet_tf2.config import XLNetConfig
from xlnet_tf2.config_flags import RunConfigError
from xlnet_tf2.models.multiple_choice_model import MultipleChoiceModel
from xlnet_tf2.models.sequence_classifier import SequenceClassifier
from xlnet_tf2.models.squad_model import SquadModel
from xlnet_tf2.tasks.finetuning import init_backbone, restore_for_inference

TASKS = ("classification", "regression", "race", "squad")
TASK_FILE = "task.json"
SPM_FILE = "spiece.model"


@dataclasses.dataclass(frozen=True)
class TaskSpec:
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
        if self.task == "squad":
            for name in ("doc_stride", "max_query_length", "max_answer_length", "n_best_size"):
                if getattr(self, name) <= 0:
                    raise RunConfigError(f"--{name} must be positive, got {getattr(self, name)}.")
            if self.max_query_length + 4 > self.seq_len:
                raise RunConfigError(f"--max_query_length={self.max_query_length} leaves no room "
                                 f"for the document in --seq_len={self.seq_len}.")

    def replace(self, **changes) -> "TaskSpec":
        return dataclasses.replace(self, **changes)

    def write(self, model_dir: str) -> None:
        tf.io.gfile.makedirs(model_dir)
        with tf.io.gfile.GFile(os.path.join(model_dir, TASK_FILE), "w") as f:
            f.write(json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True) + "\n")

    @classmethod
    def read(cls, model_dir: str) -> "TaskSpec":
        path = os.path.join(model_dir, TASK_FILE)
        if not tf.io.gfile.exists(path):
            raise FileNotFoundError(f"{path} does not exist: --model_dir must be a directory "
                                    "written by run_classifier.py, run_race.py or run_squad.py.")
        with tf.io.gfile.GFile(path) as f:
            values = json.load(f)
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise RunConfigError(f"{path}: unknown key(s) {unknown}.")
        return cls(**values)


def copy_spm_model(spm_model: str, model_dir: str) -> str:
    if not tf.io.gfile.exists(spm_model):
        raise FileNotFoundError(f"--spm_model={spm_model!r} does not exist.")
    target = os.path.join(model_dir, SPM_FILE)
    tf.io.gfile.makedirs(model_dir)
    if os.path.abspath(spm_model) != os.path.abspath(target):
        tf.io.gfile.copy(spm_model, target, overwrite=True)
    return target


def default_seq_len(model_dir: str) -> int:
    """The sequence length a model_dir was trained with: task.json's (fine-tuning), else
    run_config.json's data seq_len (pretraining), else 512."""
    if tf.io.gfile.exists(os.path.join(model_dir, run_dir.TASK_FILE)):
        return TaskSpec.read(model_dir).seq_len
    record_path = os.path.join(model_dir, run_dir.RUN_CONFIG_FILE)
    if tf.io.gfile.exists(record_path):
        with tf.io.gfile.GFile(record_path) as f:
            seq_len = json.load(f).get("derived", {}).get("seq_len")
        if seq_len:
            return int(seq_len)
    return 512


def load_task_model(model_dir: str, task: str, checkpoint: str = "best"):
    """(model, spec, spm_model path) of a fine-tuned model_dir, or for task "features" of any
    directory holding an xlnet_config.json, spiece.model and a backbone checkpoint (converted
    release, pretraining run or fine-tuning run)."""
    # Inference settings: the architecture of the directory, no dropout, no memory, no
    # bi_data (a pretraining run's data layout never carries over).
    run_dir.require_model_dir(model_dir)
    config = XLNetConfig.from_json_file(os.path.join(model_dir, run_dir.ARCH_FILE),
                                        dropout=0.0, dropatt=0.0, mem_len=0)
    spm_model = run_dir.model_spm_file(model_dir)
    if task == "features":
        seq_len = default_seq_len(model_dir)
        spec = TaskSpec(task="classification", seq_len=seq_len)
        model = SequenceClassifier(config, 1)
        model(model.dummy_inputs(seq_len))
        init_backbone(model, model_dir)
        return model, spec, spm_model
    spec = TaskSpec.read(model_dir)
    expected = {"classification": "classification", "regression": "regression",
                "race": "race", "squad": "squad"}[task]
    if spec.task != expected:
        raise RunConfigError(f"--task={task} but {model_dir}/task.json says {spec.task!r}; "
                             f"pass --task={spec.task} (or --task=features).")
    if task in ("classification", "regression"):
        model = SequenceClassifier(
            config, 1 if task == "regression" else len(spec.label_list), spec.summary_type,
            head_dropout=0.0)
    elif task == "squad":
        model = SquadModel(config, spec.n_best_size, spec.n_best_size,
                                       head_dropout=0.0)
    else:
        model = MultipleChoiceModel(config, spec.num_choices, spec.summary_type,
                                                head_dropout=0.0)
    model(model.dummy_inputs(spec.seq_len))
    restore_for_inference(model, model_dir, checkpoint)
    return model, spec, spm_model
