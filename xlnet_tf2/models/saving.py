"""Our own model format on disk: writing a model directory and reading it back into a model,
and the one notion of a damaged checkpoint (`checkpoint_damage`).

A saved (or converted) directory holds:
  model.ckpt.index / model.ckpt.data-*   a native TF2 checkpoint of XLNetLMHeadModel
  xlnet_config.json                      the model config (our keys, a superset of the original's)
  spiece.model                           the SentencePiece model, when one was given

A task directory (a fine-tuning model_dir, or a fine-tuned checkpoint converted with its head)
holds a task model instead:
  ckpt-N.* + checkpoint                  `tf.train.Checkpoint(model=task_model)`; a fine-tuning
                                         run also keeps best/ckpt-N.*, read first
  xlnet_config.json, spiece.model        as above
  task.json                              which head and how its inputs are laid out: `kind`,
                                         `seq_len`, `summary_type`, `label_list`,
                                         `num_choices`, `n_best_size`, ... (the fine-tuning
                                         runners' HeadSpec, xlnet_tf2/tasks/head_spec.py, which
                                         reads the same file)

Nothing here builds a model or knows a model class: the caller gives the model (its `kind`
says which it is); models/pretrained.py decides what a directory holds and builds it.
"""

from __future__ import annotations

import os
import uuid
from typing import Optional

import tensorflow as tf

from xlnet_tf2 import fileio, run_dir, task_registry

CHECKPOINT_PREFIX = run_dir.SAVED_CHECKPOINT_PREFIX
CONFIG_NAME = run_dir.ARCH_FILE
SPM_NAME = run_dir.SPM_FILE


def checkpoint_for(model) -> tf.train.Checkpoint:
    """The object graph every xlnet-tf2 checkpoint uses: `model` -> the LM head model, whose
    `transformer` is the backbone. A bare backbone is nested the same way, so a backbone can
    be restored from an LM checkpoint (the LM bias is then simply not read)."""
    if model.kind == "backbone":
        return tf.train.Checkpoint(model=tf.train.Checkpoint(transformer=model))
    return tf.train.Checkpoint(model=model)


def save_pretrained(model, output_dir: str, spm_model: Optional[str] = None) -> str:
    """Writes `model` (an XLNetLMHeadModel) as a converted directory; returns the prefix."""
    tf.io.gfile.makedirs(output_dir)
    prefix = checkpoint_for(model).write(os.path.join(output_dir, CHECKPOINT_PREFIX))
    model.config.to_json_file(os.path.join(output_dir, CONFIG_NAME))
    if spm_model:
        if not tf.io.gfile.exists(spm_model):
            raise FileNotFoundError(f"--spm_model {spm_model!r} does not exist.")
        fileio.copy_atomically(spm_model, os.path.join(output_dir, SPM_NAME))
    return prefix


def restore_weights(model, checkpoint_path: str, source: str = "checkpoint") -> str:
    """Restores `model` (XLNetLMHeadModel or XLNetModel) from a checkpoint prefix or a
    directory: one of our training runs (its latest checkpoint) or a converted release.

    Every variable of `model` must be found, else ModelFilesError; values the model does not
    have (optimizer slots, memory, the LM bias for a backbone, task heads) are ignored.
    `source` names the path in error messages (e.g. "--init_checkpoint"). Returns the prefix
    read.
    """
    if not model.built:
        model.build()
    resolved = checkpoint_path
    if tf.io.gfile.isdir(checkpoint_path):
        resolved = (run_dir.latest_checkpoint(checkpoint_path)
                    or next(iter(run_dir.checkpoint_prefixes(checkpoint_path)), None)
                    or os.path.join(checkpoint_path, CHECKPOINT_PREFIX))
    if not tf.io.gfile.exists(resolved + ".index"):
        raise FileNotFoundError(
            f"{source}={checkpoint_path!r} names no checkpoint (expected a prefix such as "
            f".../ckpt-1000, or a directory holding one; {resolved}.index does not exist).")
    read_checkpoint(checkpoint_for(model), resolved,
                    f"{source}={checkpoint_path!r} (checkpoint {resolved})",
                    "is the model config the same?")
    return resolved


# What reading damaged checkpoint files raises, by words of the message (vs. a checkpoint
# that reads but holds other shapes or names: "incompatible tensor", "not bound to
# checkpointed values").
_DAMAGE = ("corrupt", "truncat", "data loss", "checksum", "read less bytes", "unable to open",
           "unable to read", "sstable", "bad magic", "failed to read", "out of range", "crc",
           "unexpected", "no such file")


def checkpoint_damage(error: BaseException) -> bool:
    """Whether `error`, raised by reading a checkpoint, means its files are damaged (cut short,
    overwritten, a file missing) rather than holding another model's values: the one notion
    every reader of checkpoints uses (a training run falls back to an older checkpoint on
    damage, training/checkpointing.py; loading says "damaged" or "another model")."""
    if isinstance(error, (IndexError, tf.errors.DataLossError, tf.errors.OutOfRangeError,
                          tf.errors.NotFoundError)):
        return True
    text = str(error).lower()
    return any(word in text for word in _DAMAGE)


def read_checkpoint(checkpoint: tf.train.Checkpoint, prefix: str, what: str,
                    mismatch_hint: str) -> None:
    """`checkpoint.read(prefix)` with every object of `checkpoint` found (extra values in the
    files are ignored). Damaged files and a checkpoint of another model raise ModelFilesError
    naming `what` and the files, in one line (no tensor values)."""
    try:
        status = checkpoint.read(prefix)
        status.assert_existing_objects_matched()
    except (AssertionError, ValueError, IndexError, tf.errors.OpError) as e:
        reason = " ".join(str(e).split())
        if len(reason) > 300:
            reason = reason[:300] + " ..."
        if checkpoint_damage(e):
            raise run_dir.ModelFilesError(
                f"{what} is damaged: {prefix}.index / {prefix}.data-* cannot be read "
                f"({type(e).__name__}: {reason}). Copy it again from a good source, or use "
                "another checkpoint.") from None
        raise run_dir.ModelFilesError(
            f"{what} does not hold this model's weights ({mismatch_hint}): {reason}") from None
    status.expect_partial()


def save_task_directory(model, output_dir: str, settings: dict,
                        spm_model: Optional[str] = None) -> str:
    """Writes a task directory (module docstring) for `model`; `settings` is task.json (at
    least `kind` and `seq_len`). The files are written under a staging name and moved in
    last, so a failure leaves an existing directory as it was. Returns the checkpoint prefix."""
    if settings.get("kind") != model.kind:
        raise ValueError(f"settings say kind {settings.get('kind')!r} but the model is a "
                         f"{model.kind} model.")
    if not settings.get("seq_len"):
        raise ValueError("task.json settings need seq_len (the sequence length of the inputs).")
    if spm_model and not tf.io.gfile.exists(spm_model):
        raise FileNotFoundError(f"--spm_model {spm_model!r} does not exist.")
    staging = os.path.join(output_dir, f".staging-{uuid.uuid4().hex[:8]}")
    tf.io.gfile.makedirs(staging)
    try:
        manager = tf.train.CheckpointManager(tf.train.Checkpoint(model=model), staging,
                                             max_to_keep=1, checkpoint_name="ckpt")
        prefix = manager.save(checkpoint_number=0)
        model.config.to_json_file(os.path.join(staging, CONFIG_NAME))
        fileio.write_json_atomically(os.path.join(staging, run_dir.TASK_FILE), settings)
        if spm_model:
            fileio.copy_atomically(spm_model, os.path.join(staging, SPM_NAME))
    except BaseException:
        fileio.rmtree(staging)
        raise
    fileio.publish_directory(staging, output_dir, last=("checkpoint",))
    return os.path.join(output_dir, os.path.basename(prefix))


def read_task_settings(directory: str) -> dict:
    """task.json of a task directory, as a dict, under today's key names (a file written
    before a key was renamed reads the same: task_registry.current_settings)."""
    path = os.path.join(directory, run_dir.TASK_FILE)
    if not tf.io.gfile.exists(path):
        raise FileNotFoundError(f"{path} does not exist: {directory} is not a task directory "
                                "(a fine-tuning model_dir or a converted fine-tuned checkpoint).")
    values = fileio.read_json_object(path, run_dir.ModelFilesError, "what the task model is",
                                     "Restore it from the run or conversion that wrote it.")
    try:
        return task_registry.current_settings(values, path)
    except ValueError as e:
        raise run_dir.ModelFilesError(f"{e} Restore it from the run or conversion that wrote "
                                      "it.") from None


def task_checkpoint(directory: str, which: str = "best") -> str:
    """The checkpoint prefix of a task directory: the best evaluation's (best/ckpt-N,
    run_dir.best_checkpoint) unless `which` is "latest" or no evaluation ran, else the latest
    checkpoint. Only files inside `directory` are ever named."""
    path = run_dir.best_checkpoint(directory) if which == "best" else None
    path = path or run_dir.latest_checkpoint(directory) or next(
        iter(run_dir.checkpoint_prefixes(directory)), None)
    if path is None:
        raise run_dir.RunDirError(f"{directory} holds no checkpoint (ckpt-N.index with its "
                                  "data files); train first, or pass the directory that holds "
                                  "the run.")
    return path


def restore_task_weights(model, directory: str, which: str = "best") -> str:
    """Reads a task directory's checkpoint (task_checkpoint) into `model`, a task model of
    the same task and architecture; returns the prefix read."""
    path = task_checkpoint(directory, which)
    read_checkpoint(tf.train.Checkpoint(model=model), path, f"checkpoint {path}",
                    f"is {directory}/task.json's kind and architecture the same as the "
                    f"{model.kind} model's?")
    return path
