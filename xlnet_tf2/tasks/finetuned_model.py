"""A trained model_dir read back for inference: its task model with the weights to use.

Used by evaluation without training (run_squad.py --nodo_train), feature extraction and
export; every model_dir this project writes is self-contained (run_dir.py), so the directory
alone says what to build: task.json (fine-tuning), run_config.json (pretraining's seq_len),
xlnet_config.json, spiece.model and the checkpoints.
"""

from __future__ import annotations

import dataclasses
import os

import tensorflow as tf

from xlnet_tf2 import fileio, run_dir
from xlnet_tf2.config import XLNetConfig
from xlnet_tf2.config_flags import RunConfigError
from xlnet_tf2.models.directories import build_task_model
from xlnet_tf2.models.saving import restore_task_weights, restore_weights
from xlnet_tf2.models.xlnet_classifier import SequenceClassifier
from xlnet_tf2.tasks.head_spec import HeadSpec
from xlnet_tf2.tokenizers.sentencepiece_tokenizer import SentencePieceTokenizer


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


def load_task_model(model_dir: str, task: str, checkpoint: str = "best"):
    """(model, spec, spm_model path) of a fine-tuned model_dir (its `checkpoint`: "best" or
    "latest", read only from inside model_dir by saving.restore_task_weights), or for task "features" of any
    directory holding an xlnet_config.json, spiece.model and a backbone checkpoint (converted
    release, pretraining run or fine-tuning run)."""
    # Inference settings: the architecture of the directory, no dropout, no memory, no
    # bi_data (a pretraining run's data layout never carries over).
    run_dir.require_model_dir(model_dir)
    config = XLNetConfig.from_json_file(os.path.join(model_dir, run_dir.ARCH_FILE),
                                        dropout=0.0, dropatt=0.0, mem_len=0)
    spm_model = run_dir.model_spm_file(model_dir)
    SentencePieceTokenizer.from_file(spm_model)  # a damaged one: one line naming it, now
    if task == "features":
        seq_len = default_seq_len(model_dir)
        spec = HeadSpec(task="classification", seq_len=seq_len)
        model = SequenceClassifier(config, 1)
        model(model.dummy_inputs(seq_len))
        restore_weights(model.transformer, model_dir, source="--model_dir")
        return model, spec, spm_model
    spec = HeadSpec.read(model_dir)
    if spec.task != task:
        raise RunConfigError(f"--task={task} but {model_dir}/task.json says {spec.task!r}; "
                             f"pass --task={spec.task} (or --task=features).")
    model = build_task_model(config, dataclasses.asdict(spec), head_dropout=0.0)
    restore_task_weights(model, model_dir, checkpoint)
    return model, spec, spm_model

