"""A trained model_dir read back for inference: its task model with the weights to use, or
for features its backbone.

Called by `tasks/finetuning.py` (evaluation without training: every fine-tuning command's
--nodo_train), `export/feature_files.py` (feature extraction) and `export/saved_model.py`
(export). Every model_dir this project writes is self-contained (run_dir.py), so the
directory alone says what to build: task.json (fine-tuning), run_config.json (pretraining's
seq_len), xlnet_config.json, spiece.model and the checkpoints.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Optional

import tensorflow as tf

from xlnet_tf2 import fileio, run_dir
from xlnet_tf2.config_flags import RunConfigError
from xlnet_tf2.models.head_model import HeadModel
from xlnet_tf2.models.xlnet_model import XLNetModel
from xlnet_tf2.tasks.head_spec import HeadSpec
from xlnet_tf2.tokenizers.sentencepiece_tokenizer import SentencePieceTokenizer

# Inference settings: the architecture of the directory, no dropout, no memory (a
# pretraining run's data layout, bi_data, never carries over: it is not in
# xlnet_config.json).
INFERENCE = {"dropout": 0.0, "dropatt": 0.0, "mem_len": 0}


def default_seq_len(model_dir: str) -> int:
    """The sequence length a model_dir was trained with: task.json's (fine-tuning), else
    run_config.json's data seq_len (pretraining), else 512."""
    if tf.io.gfile.exists(os.path.join(model_dir, run_dir.TASK_FILE)):
        return HeadSpec.read(model_dir).seq_len
    record_path = os.path.join(model_dir, run_dir.RUN_CONFIG_FILE)
    if tf.io.gfile.exists(record_path):
        record = fileio.read_json_object(record_path, run_dir.ModelFilesError,
                                         "the settings of the run",
                                         "Restore it from the run, or pass --seq_len.")
        seq_len = (record.get("derived") or {}).get("seq_len")
        if isinstance(seq_len, int) and seq_len > 0:
            return seq_len
    return 512


@dataclasses.dataclass(frozen=True)
class FeatureSpec:
    """How the `features` of a model directory's backbone lay out their inputs
    (export/feature_extraction.py): tokens per text, the layout, lowercasing."""

    seq_len: int
    layout: str = "cls_last"  # export/feature_extraction.py's LAYOUT
    lower: bool = False

    def replace(self, **changes) -> "FeatureSpec":
        return dataclasses.replace(self, **changes)


def load_task_model(model_dir: str, kind: Optional[str] = None, checkpoint: str = "best"):
    """(model, spec, spm_model path) of a trained model_dir for inference (no dropout, no
    memory), through the one loader (models/pretrained.py's `load`), its `checkpoint`
    ("best" or "latest") read only from inside model_dir:
      - None or a declared task's name (`kind`): its task model (HeadModel.from_pretrained,
        the class task.json's kind declares) and its HeadSpec (task.json, whose kind a given
        `kind` must be: a mismatch, or no task.json, is one RunConfigError line);
      - "features": the backbone (XLNetModel.from_pretrained) of any directory holding an
        xlnet_config.json, spiece.model and a checkpoint (converted release, pretraining run,
        fine-tuning run: its head left out), and its FeatureSpec (seq_len:
        default_seq_len)."""
    run_dir.require_model_dir(model_dir)
    spm_model = run_dir.model_spm_file(model_dir)
    SentencePieceTokenizer.from_file(spm_model)  # a damaged one: one line naming it, now
    if kind == "features":
        backbone = XLNetModel.from_pretrained(model_dir, which=checkpoint, **INFERENCE)
        return backbone, FeatureSpec(default_seq_len(model_dir)), spm_model
    task_file = os.path.join(model_dir, run_dir.TASK_FILE)
    if not tf.io.gfile.exists(task_file):
        raise RunConfigError(f"{task_file} does not exist: the directory holds no fine-tuned "
                             "model (a fine-tuning run writes it); export its backbone's "
                             "features with --kind=features.")
    spec = HeadSpec.read(model_dir)
    if kind is not None and spec.kind != kind:
        raise RunConfigError(f"--kind={kind} but {model_dir}/task.json says {spec.kind!r}; "
                             "leave --kind out (or pass --kind=features).")
    model = HeadModel.from_pretrained(model_dir, which=checkpoint, head_dropout=0.0,
                                      **INFERENCE)
    return model, spec, spm_model
