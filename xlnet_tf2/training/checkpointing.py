"""Checkpoints of a training run: model, optimizer, step (= data position), random state.

* Pretraining's memory is saved beside them, per host (models/memory.py), before the main
  checkpoint of the same step is written.
* The data position is the step counter: the input pipeline is deterministic in the step.
* Restoring tries the newest checkpoint first; one that cannot be read (truncated, corrupt,
  missing shards) is reported and the one before it is used.
* Under MultiWorkerMirroredStrategy every worker saves (saving is collective); only the
  chief writes into model_dir, the others into a scratch directory they delete.
"""

from __future__ import annotations

import os
from typing import Dict, List, Optional

import tensorflow as tf
from absl import logging

from xlnet_tf2 import run_dir
from xlnet_tf2.models import pretrained
from xlnet_tf2.models.saving import checkpoint_damage


class CheckpointRestoreError(RuntimeError):
    """No checkpoint in model_dir could be restored; the message lists what failed."""


class CheckpointKeeper:
    """tf.train.CheckpointManager plus corrupt-checkpoint fallback and multi-worker saving."""

    def __init__(self, model_dir: str, *, model, optimizer, global_step,
                 extra: Optional[Dict[str, tf.Module]] = None, max_to_keep: int,
                 is_chief: bool = True, worker_id: int = 0):
        """`extra`: further objects saved under their keys."""
        self.model_dir = model_dir
        # The states of the model's Keras `SeedGenerator`s (dropout outside the training loop's
        # key scope, see layers/dropout.py), so a restored model continues their streams.
        # Inside the loop dropout keys come from the seed and the checkpointed step.
        self.random_state = tf.Module(name="random_state")
        self.random_state.seed_states = [v.value for v in model.variables
                                         if v.path.endswith("seed_generator_state")]
        self.checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer,
                                              global_step=global_step,
                                              random_state=self.random_state, **(extra or {}))
        self.global_step = global_step
        self.is_chief = is_chief
        directory = model_dir if is_chief else os.path.join(model_dir, f".worker_{worker_id}_tmp")
        if is_chief:
            repair_state_file(model_dir)
        self.manager = tf.train.CheckpointManager(self.checkpoint, directory,
                                                  max_to_keep=max_to_keep, checkpoint_name="ckpt")
        # Restoring reads the chief's checkpoints on every worker.
        self.reader = (self.manager if is_chief else
                       tf.train.CheckpointManager(self.checkpoint, model_dir, max_to_keep=None,
                                                  checkpoint_name="ckpt"))

    def latest_path(self) -> Optional[str]:
        candidates = self._candidates()
        return candidates[0] if candidates else None

    def _candidates(self) -> List[str]:
        """Checkpoint prefixes, newest first: the ones the state file lists, and any newer
        complete one it does not list yet (a run killed between writing ckpt-N.index, which
        is written last, and updating the `checkpoint` state file still resumes from N)."""
        listed = {}  # step -> prefix, the state file's name first
        # The directory is read on every worker.
        for prefix in (list(self.reader.checkpoints)
                       + run_dir.checkpoint_prefixes(self.model_dir)):
            step = run_dir.checkpoint_step(prefix)
            if step is not None:
                listed.setdefault(step, prefix)
        return [listed[step] for step in sorted(listed, reverse=True)]

    def saved_steps(self) -> List[int]:
        """Steps of the checkpoints in model_dir (read from the directory, on every worker)."""
        return sorted(run_dir.checkpoint_step(p)
                      for p in run_dir.checkpoint_prefixes(self.model_dir))

    def save(self, step: int) -> str:
        path = self.manager.save(checkpoint_number=step)
        if not self.is_chief:
            tf.io.gfile.rmtree(self.manager.directory)
        else:
            logging.info("Saved checkpoint %s", path)
        return path

    def restore_latest(self) -> Optional[str]:
        """Restores the newest readable checkpoint; returns its path or None if there is none.

        A checkpoint that cannot be read (truncated, corrupt, missing shards) is reported and
        the one before it tried. One that reads but does not fit this run's model (another
        architecture, batch or memory length) is an error at once: older checkpoints of the
        same run would not fit either, and nothing is broken."""
        candidates = self._candidates()
        failures = []
        for path in candidates:
            try:
                self.checkpoint.restore(path).assert_existing_objects_matched()
                if failures:
                    logging.warning("Fell back to checkpoint %s after: %s", path, "; ".join(failures))
                return path
            except (ValueError, AssertionError) as e:
                if not checkpoint_damage(e):
                    raise CheckpointRestoreError(
                        f"Checkpoint {path} does not fit this run's model: "
                        f"{str(e).splitlines()[0][:300]}. The run in {self.model_dir} was "
                        "trained with other settings (see its run_config.json and "
                        "xlnet_config.json): resume with those, or start a new --model_dir.") \
                        from None
                failures.append(self._unreadable(path, e))
            except Exception as e:  # noqa: BLE001 - corrupt files raise many error types
                failures.append(self._unreadable(path, e))
        if failures:
            raise CheckpointRestoreError(
                f"No checkpoint in {self.model_dir} could be read: {'; '.join(failures)}. "
                "The files are damaged (e.g. cut short by a full disk or a copy): restore them "
                "from a backup, or point --model_dir at a new directory.")
        return None

    @staticmethod
    def _unreadable(path: str, error: Exception) -> str:
        message = f"checkpoint {path} is unreadable ({type(error).__name__}: {str(error)[:200]})"
        logging.error("%s; trying the previous one.", message)
        print(f"[checkpoint] WARNING: {message}; trying the previous one.", flush=True)
        return message


def repair_state_file(model_dir: str) -> bool:
    """Rewrites the `checkpoint` state file (relative names, oldest first) from the checkpoint
    files in `model_dir` when it cannot be parsed (overwritten, cut short) or does not name
    the newest complete checkpoint (a run killed between writing ckpt-N.index, which is
    written last, and updating it); returns whether it did. The files are what counts: the
    state file only lists them, and every reader (export, fine-tuning's --init_checkpoint)
    then finds the newest."""
    path = os.path.join(model_dir, run_dir.CHECKPOINT_STATE)
    prefixes = list(reversed(run_dir.checkpoint_prefixes(model_dir)))
    if not prefixes:
        return False
    names = [os.path.basename(p) for p in prefixes]
    try:
        state = tf.train.get_checkpoint_state(model_dir)
        named = os.path.basename(state.model_checkpoint_path) if state else None
        if named == names[-1]:
            return False
        reason = (f"it names {named}, but {names[-1]} is complete" if named else
                  "it names no checkpoint")
    except Exception as e:  # noqa: BLE001 - a damaged text proto raises parse or decode errors
        reason = f"it is damaged ({type(e).__name__}: {' '.join(str(e).split())[:120]})"
    run_dir.write_checkpoint_state(model_dir, names)
    message = f"{path}: {reason}; rewrote it from the checkpoint files ({', '.join(names)})."
    logging.warning(message)
    print(f"[checkpoint] note: {message}", flush=True)
    return True


def load_model_weights(model, path: str) -> str:
    """Initializes `model` (built) from --init_checkpoint `path`: whatever
    `from_pretrained` takes, read by the one loader (models/pretrained.py's read_weights);
    the optimizer and memory of one of our training checkpoints are ignored. Returns what was
    read."""
    resolved = pretrained.read_weights(model, path)
    logging.info("Initialized the model from %s", resolved)
    return resolved
