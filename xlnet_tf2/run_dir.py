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

Every directory is relocatable: no file inside names the directory by an absolute path (the
`checkpoint` state files and best_eval.json hold paths relative to their directory), so a
run copied or moved anywhere reads its own files, never those of the place it came from.
"""

from __future__ import annotations

import hashlib
import os
import re
from typing import Optional

from xlnet_tf2 import fileio, task_registry

ARCH_FILE = "xlnet_config.json"
SPM_FILE = "spiece.model"
# The checkpoint prefix of a saved or converted model directory (models/saving.py).
SAVED_CHECKPOINT_PREFIX = "model.ckpt"
TASK_FILE = "task.json"
RUN_CONFIG_FILE = "run_config.json"
# What a fine-tuned directory's task.json may say it is, its `kind` (tasks/head_spec.py,
# models/saving.py, conversion's --kind): the declared tasks (task_registry.py).
TASKS = task_registry.names()
# A fine-tuning run's best evaluation: BEST_DIR/ckpt-N (a checkpoint directory with its own
# `checkpoint` state file) and BEST_EVAL_FILE, whose "checkpoint" is "best/ckpt-N".
BEST_DIR = "best"
BEST_EVAL_FILE = "best_eval.json"
CHECKPOINT_STATE = "checkpoint"


class RunDirError(FileNotFoundError):
    """A model directory lacks what the command needs; the message names the file and flag."""


class ModelFilesError(ValueError):
    """A file of a model directory is damaged (cut short, overwritten) or does not fit the
    model being loaded; the message names the file and what to do."""


def relative_to(directory: str, path: Optional[str]) -> Optional[str]:
    """`path` relative to `directory` when it lies inside it (what a run directory stores
    about its own files), else `path` unchanged."""
    if not path or fileio.is_remote(path) != fileio.is_remote(directory):
        return path
    if fileio.is_remote(path):
        prefix = directory.rstrip("/") + "/"
        return path[len(prefix):] if path.startswith(prefix) else path
    relative = os.path.relpath(os.path.abspath(path), os.path.abspath(directory))
    return path if relative.startswith("..") else relative


def inside(directory: str, stored: str) -> str:
    """A path a run directory stores about its own files, resolved inside `directory`.

    A relative path is joined to `directory`. An absolute one (written by older versions)
    is read by its part below the directory's own files (e.g. "best/ckpt-5"), inside
    `directory`: a copied or moved directory never reads the files of the place it came
    from."""
    if not (os.path.isabs(stored) or fileio.is_remote(stored)):
        return os.path.join(directory, stored)
    parts = stored.rstrip("/").split("/")
    tail = parts[-2:] if len(parts) >= 2 and parts[-2] == BEST_DIR else parts[-1:]
    return os.path.join(directory, *tail)


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
    finds its files through here). The prefix is looked for inside `directory` whatever the
    state file says (`inside`): an absolute path there names the place the directory was
    written in, not where it is now."""
    state = os.path.join(directory, CHECKPOINT_STATE)
    if not fileio.exists(state):
        return None
    try:
        with fileio.open_file(state) as f:
            found = re.search(r'^model_checkpoint_path:\s*"(.*)"', f.read(), flags=re.M)
    except UnicodeDecodeError:  # a damaged state file: as if there were none
        return None
    if not found:
        return None
    prefix = inside(directory, found.group(1))
    return prefix if fileio.exists(prefix + ".index") else None



def write_checkpoint_state(directory: str, names: list) -> None:
    """Writes DIR/checkpoint, the state file TensorFlow's CheckpointManager keeps, naming the
    checkpoints `names` (prefixes relative to `directory`, oldest first; the last is the
    newest) by relative name, atomically."""
    text = f'model_checkpoint_path: "{names[-1]}"\n' + "".join(
        f'all_model_checkpoint_paths: "{name}"\n' for name in names)
    fileio.write_atomically(os.path.join(directory, CHECKPOINT_STATE), text.encode())

def checkpoint_step(prefix: str, name: str = "ckpt") -> Optional[int]:
    """N of a checkpoint prefix .../<name>-N, or None when `prefix` is not one."""
    base = os.path.basename(prefix)
    step = base[len(name) + 1:]
    return int(step) if base.startswith(f"{name}-") and step.isdigit() else None


def checkpoint_prefixes(directory: str, name: str = "ckpt") -> list:
    """Prefixes DIR/<name>-N of the complete checkpoints in `directory` (their .index exists),
    newest step first; read from the directory, whatever its state file says."""
    steps = []
    for path in fileio.glob(os.path.join(directory, f"{name}-*.index")):
        step = checkpoint_step(path[:-len(".index")], name)
        if step is not None:
            steps.append(step)
    return [os.path.join(directory, f"{name}-{step}") for step in sorted(steps, reverse=True)]


def best_checkpoint(model_dir: str) -> Optional[str]:
    """The checkpoint prefix of a fine-tuning run's best evaluation (MODEL_DIR/best/ckpt-N),
    or None if the run has none (no evaluation ran).

    best/'s state file says which; without one (older runs) best_eval.json's "checkpoint",
    read inside model_dir (`inside`). Raises ModelFilesError when best_eval.json names a
    checkpoint whose files are not there."""
    best_dir = os.path.join(model_dir, BEST_DIR)
    found = latest_checkpoint(best_dir)
    if found:
        return found
    record_path = os.path.join(model_dir, BEST_EVAL_FILE)
    if not fileio.exists(record_path):
        in_dir = checkpoint_prefixes(best_dir) if fileio.isdir(best_dir) else []
        return in_dir[0] if in_dir else None
    record = fileio.read_json_object(record_path, ModelFilesError, "the best evaluation",
                                     "Export with --checkpoint=latest, or restore the file.")
    stored = record.get("checkpoint")
    if not isinstance(stored, str) or not stored:
        stored = f"{BEST_DIR}/ckpt-{record.get('step')}"
    prefix = inside(model_dir, stored)
    if not fileio.exists(prefix + ".index"):
        raise ModelFilesError(
            f"{prefix}.index does not exist: {record_path} names the checkpoint of the best "
            f"evaluation, but {best_dir} does not hold it (deleted, or the directory was "
            "copied without it). Copy the run again whole, or use the latest training "
            "checkpoint (--checkpoint=latest).")
    return prefix


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


def architecture_file(model_config: Optional[str]) -> str:
    """--model_config, required when there is no --init_checkpoint to take the architecture
    from (models/pretrained.py's architecture reads that one)."""
    if model_config:
        return model_config
    raise RunDirError("--model_config is required without --init_checkpoint (a preset name "
                      "such as base or large, or the path of an xlnet_config.json).")


def spm_model_file(spm_model: Optional[str], model_directory: Optional[str]) -> str:
    """--spm_model, else the spiece.model of `model_directory` (--init_checkpoint's model
    directory, as the loader resolves it)."""
    if spm_model:
        if not fileio.exists(spm_model):
            raise RunDirError(f"--spm_model={spm_model!r} does not exist.")
        return spm_model
    found = find_file(model_directory, SPM_FILE)
    if found:
        return found
    if model_directory:
        raise RunDirError(
            f"--spm_model is not set and {model_directory} (--init_checkpoint's model) has no "
            f"{SPM_FILE}; pass --spm_model (the SentencePiece model the backbone was pretrained "
            "with).")
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
