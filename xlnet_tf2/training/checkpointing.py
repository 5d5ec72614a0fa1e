"""Checkpoints of a training run: model, optimizer, step (= data position) and, in
pretraining, the memory.

* The memory is saved as one [GB, M, D] variable per layer (global batch slot order, replica r
  owning slots r*b .. r*b + b - 1) so a run resumes with exactly the memory it stopped with,
  on any replica count that divides the batch the same way. These variables live on the host,
  outside the strategy: at paper scale they are large (n_layer * GB * M * D values), which is
  the price of not resetting the memory on restart.
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

from xlnet_tf2.conversion.pretrained import restore_weights


class CheckpointRestoreError(RuntimeError):
    """No checkpoint in model_dir could be restored; the message lists what failed."""


class MemoryState(tf.Module):
    """The checkpoint copy of the Transformer-XL memory: `layers[i]` is [GB, M, D].

    It is the Trainer's carried state in pretraining: `distribute` cuts it into per-replica
    values (replica r holds global batch slots r*b .. r*b + b - 1, which are the slots its input
    pipeline feeds), `gather` stores the values the replicas returned.
    """

    def __init__(self, n_layer: int, global_batch: int, mem_len: int, d_model: int, dtype):
        super().__init__(name="memory")
        self.global_batch = global_batch
        with tf.device("/cpu:0"):
            self.layers = [tf.Variable(tf.zeros([global_batch, mem_len, d_model], dtype),
                                       trainable=False, name=f"layer_{i}")
                           for i in range(n_layer)] if mem_len else []

    def distribute(self, strategy: tf.distribute.Strategy):
        """Per-replica memory values cut from the global [GB, M, D] copy ([] without memory)."""
        if not self.layers:
            return []
        b = self.global_batch // strategy.num_replicas_in_sync
        host = [v.read_value() for v in self.layers]

        def per_replica(context):
            start = context.replica_id_in_sync_group * b
            return [tf.identity(m[start:start + b]) for m in host]

        mems = strategy.experimental_distribute_values_from_function(per_replica)
        local = [strategy.experimental_local_results(m) for m in mems]
        if all(len(values) == 1 for values in local):
            # One local replica: strategy.run returns plain tensors, so the loop variable
            # must be plain tensors too (its structure may not change between iterations).
            mems = [values[0] for values in local]
        return mems

    def gather(self, strategy: tf.distribute.Strategy, mems) -> None:
        """Stores per-replica memories into the global copy (replica r -> slots r*b...)."""
        for variable, per_replica in zip(self.layers, mems):
            variable.assign(tf.cast(strategy.gather(per_replica, axis=0), variable.dtype))


class RandomState(tf.Module):
    """The states of the model's Keras `SeedGenerator`s (dropout outside the training loop's
    key scope, see layers/dropout.py), checkpointed so a restored model continues their
    streams. Inside the loop dropout keys come from the seed and the checkpointed step."""

    def __init__(self, model):
        super().__init__(name="random_state")
        self.seed_states = [v.value for v in model.variables
                            if v.path.endswith("seed_generator_state")]


class CheckpointKeeper:
    """tf.train.CheckpointManager plus corrupt-checkpoint fallback and multi-worker saving."""

    def __init__(self, model_dir: str, *, model, optimizer, global_step,
                 extra: Optional[Dict[str, tf.Module]] = None, max_to_keep: int,
                 is_chief: bool = True, worker_id: int = 0):
        """`extra`: further objects saved under their keys (pretraining: {"memory": ...})."""
        self.model_dir = model_dir
        self.random_state = RandomState(model)
        self.checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer,
                                              global_step=global_step,
                                              random_state=self.random_state, **(extra or {}))
        self.global_step = global_step
        self.is_chief = is_chief
        directory = model_dir if is_chief else os.path.join(model_dir, f".worker_{worker_id}_tmp")
        self.manager = tf.train.CheckpointManager(self.checkpoint, directory,
                                                  max_to_keep=max_to_keep, checkpoint_name="ckpt")
        # Restoring reads the chief's checkpoints on every worker.
        self.reader = (self.manager if is_chief else
                       tf.train.CheckpointManager(self.checkpoint, model_dir, max_to_keep=None,
                                                  checkpoint_name="ckpt"))

    def latest_path(self) -> Optional[str]:
        return self.reader.latest_checkpoint

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
        candidates: List[str] = list(reversed(self.reader.checkpoints))
        failures = []
        for path in candidates:
            try:
                self.checkpoint.restore(path).assert_existing_objects_matched()
                if failures:
                    logging.warning("Fell back to checkpoint %s after: %s", path, "; ".join(failures))
                return path
            except (ValueError, AssertionError) as e:
                if not _is_corruption(e):
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


def _is_corruption(error: Exception) -> bool:
    """A ValueError/AssertionError from reading damaged files (vs. a model mismatch)."""
    text = str(error).lower()
    return any(word in text for word in ("corrupt", "truncat", "data loss", "checksum",
                                         "read less bytes", "unable to open", "not found"))


def load_model_weights(model, path: str) -> None:
    """Initializes `model` from a checkpoint holding it under the key `model` (one of ours, or
    a converted release); the optimizer and memory of that checkpoint are ignored."""
    resolved = restore_weights(model, path, source="--init_checkpoint")
    logging.info("Initialized the model from %s", resolved)
