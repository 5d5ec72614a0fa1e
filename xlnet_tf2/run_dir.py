"""What a model directory holds, and finding a backbone's architecture and tokenizer from it.

Every directory this project writes is self-contained:

  pretraining model_dir   ckpt-N.* (model, optimizer, step, memory), xlnet_config.json (the
                          architecture alone), spiece.model, run_config.json, attempts.jsonl
  fine-tuning model_dir   ckpt-N.*, best/, xlnet_config.json, spiece.model, task.json,
                          run_config.json
  converted release       model.ckpt.*, xlnet_config.json, spiece.model

so fine-tuning (`--init_checkpoint=DIR`), feature extraction and export (`--model_dir=DIR`)
find the architecture and the tokenizer there, with no other flag. A checkpoint prefix
(DIR/ckpt-1000) stands for its directory.
"""

from __future__ import annotations

import hashlib
import os
import re
from typing import Optional

from xlnet_tf2 import fileio

ARCH_FILE = "xlnet_config.json"
SPM_FILE = "spiece.model"
# The checkpoint prefix of a saved or converted model directory (models/saving.py).
SAVED_CHECKPOINT_PREFIX = "model.ckpt"
TASK_FILE = "task.json"
RUN_CONFIG_FILE = "run_config.json"
# What a fine-tuned directory's task.json may say it is (tasks/task_spec.py, models/saving.py,
# conversion's --task).
TASKS = ("classification", "regression", "race", "squad")


class RunDirError(FileNotFoundError):
    """A model directory lacks what the command needs; the message names the file and flag."""


def directory_of(path: str) -> str:
    """The directory of a checkpoint directory or prefix."""
    if fileio.isdir(path):
        return path
    return os.path.dirname(path) or "."


def find_file(path: Optional[str], name: str) -> Optional[str]:
    """DIR/name for the directory of `path` (a directory or checkpoint prefix), if it exists."""
    if not path:
        return None
    candidate = os.path.join(directory_of(path), name)
    return candidate if fileio.exists(candidate) else None


def latest_checkpoint(directory: str) -> Optional[str]:
    """The checkpoint prefix DIR/checkpoint names, if its .index exists: what
    tf.train.latest_checkpoint returns, read without importing TensorFlow (the Python tokenizer
    finds its files through here)."""
    state = os.path.join(directory, "checkpoint")
    if not fileio.exists(state):
        return None
    with fileio.open_file(state) as f:
        found = re.search(r'^model_checkpoint_path:\s*"(.*)"', f.read(), flags=re.M)
    if not found:
        return None
    prefix = found.group(1)
    if not (os.path.isabs(prefix) or fileio.is_remote(prefix)):
        prefix = os.path.join(directory, prefix)
    return prefix if fileio.exists(prefix + ".index") else None


def require_model_dir(model_dir: str, flag: str = "--model_dir") -> str:
    """Checks that `model_dir` exists and holds a model; returns it."""
    if not model_dir:
        raise RunDirError(f"{flag} is required.")
    if not fileio.isdir(model_dir):
        raise RunDirError(f"{flag}={model_dir!r} does not exist or is not a directory; pass a "
                          "pretraining or fine-tuning --model_dir or a converted release "
                          "directory.")
    if not fileio.exists(os.path.join(model_dir, ARCH_FILE)):
        raise RunDirError(f"{flag}={model_dir!r} holds no {ARCH_FILE}: it is not a directory "
                          "written by this project's pretraining, fine-tuning or conversion.")
    return model_dir


def architecture_file(model_config: Optional[str], init_checkpoint: Optional[str]) -> str:
    """--model_config, else the xlnet_config.json beside --init_checkpoint."""
    if model_config:
        return model_config
    found = find_file(init_checkpoint, ARCH_FILE)
    if found:
        return found
    if init_checkpoint:
        raise RunDirError(
            f"--model_config is not set and {directory_of(init_checkpoint)} has no {ARCH_FILE}; "
            "pass --model_config (a preset name or an xlnet_config.json).")
    raise RunDirError("--model_config is required without --init_checkpoint (a preset name "
                      "such as base or large, or the path of an xlnet_config.json).")


def spm_model_file(spm_model: Optional[str], init_checkpoint: Optional[str]) -> str:
    """--spm_model, else the spiece.model beside --init_checkpoint."""
    if spm_model:
        if not fileio.exists(spm_model):
            raise RunDirError(f"--spm_model={spm_model!r} does not exist.")
        return spm_model
    found = find_file(init_checkpoint, SPM_FILE)
    if found:
        return found
    if init_checkpoint:
        raise RunDirError(
            f"--spm_model is not set and {directory_of(init_checkpoint)} has no {SPM_FILE}; "
            "pass --spm_model (the SentencePiece model the backbone was pretrained with).")
    raise RunDirError("--spm_model is required without --init_checkpoint (the SentencePiece "
                      "model the backbone was pretrained with).")


def model_spm_file(model_dir: str) -> str:
    """DIR/spiece.model of a model directory, or an error saying how to get one there."""
    path = os.path.join(model_dir, SPM_FILE)
    if not fileio.exists(path):
        raise RunDirError(
            f"{path} does not exist: the directory has no SentencePiece model. Pretraining, "
            "fine-tuning and conversion (with --spm_model) put it there; copy the model the "
            "backbone was trained with to that path.")
    return path


def file_sha256(path: str) -> str:
    """sha256 hex digest of a local or remote file."""
    digest = hashlib.sha256()
    with fileio.open_file(path, "rb") as f:
        digest.update(f.read())
    return digest.hexdigest()


def copy_spm_model(spm_model: str, model_dir: str) -> str:
    """Copies the SentencePiece model to MODEL_DIR/spiece.model (atomically: a temporary name,
    then a rename), unless an identical one is there; returns the target path."""
    if not fileio.exists(spm_model):
        raise RunDirError(f"--spm_model={spm_model!r} does not exist.")
    target = os.path.join(model_dir, SPM_FILE)
    fileio.makedirs(model_dir)
    if fileio.exists(target) and file_sha256(target) == file_sha256(spm_model):
        return target
    fileio.copy_atomically(spm_model, target)
    return target
