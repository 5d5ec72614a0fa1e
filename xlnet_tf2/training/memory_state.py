"""The Transformer-XL memory as the pretraining loop's carried state, saved per host.

Letters (docs/GLOSSARY.md): G global batch, Rp replicas in sync, W workers (hosts), B = G / Rp
rows per replica, M mem_len, D d_model, S streams read per step (G, or G / 2 with bi_data).

During training the memory lives on the devices: each replica's [B, M, D] per layer is a loop
variable of the training loop. For a checkpoint each host saves only the rows of its own
replicas, [W-local rows, M, D] per layer, into model_dir/memory/worker-WWW/ckpt-STEP; nothing is
gathered across hosts. At the paper's scale (XLNet-Large: 24 layers, G 8192, M 384, D 1024,
float32) the whole memory is 309 GB; with 64 hosts each saves and holds 4.8 GB (the numbers
for any configuration: benchmarks/tools/scale_costs.py).

Every row is saved with its *slot*: direction * S + (stream within the step's group), the
identity of the text it continues, which does not depend on the topology. Restoring reads, for
each local row, the saved row of the same slot from whichever host file holds it (normally the
host's own file), so a run resumes with exactly its memory on any number of replicas, hosts or
accumulation micro-batches with the same global batch (slot, group, stream:
docs/GLOSSARY.md#data-schedule-words).

The memory files of a step are written before the step's main checkpoint (model, optimizer,
step): a main checkpoint on disk always has its memory. With TPUStrategy the single client
process drives every host and writes one file holding all rows.
"""

from __future__ import annotations

import os
import re
from typing import List, Sequence

import numpy as np
import tensorflow as tf
from absl import logging

MEMORY_DIR = "memory"
_SLOTS_KEY = "slots/.ATTRIBUTES/VARIABLE_VALUE"


def _layer_key(i: int) -> str:
    return f"layers/{i}/.ATTRIBUTES/VARIABLE_VALUE"


class MemoryStateError(RuntimeError):
    """The saved memory of a checkpoint is missing or incomplete."""


class MemoryState(tf.Module):
    """The host copy of this worker's replicas' memory: `layers[i]` is [local rows, M, D].

    Args:
      n_layer, mem_len, d_model, dtype: the memory's shape and type.
      replica_ids: the global ids of the replicas this worker feeds, in local order.
      rows_per_replica: B.
      slots: for every local row (replica-major), its slot (see the module docstring).
      worker: this worker's index (its file name).
    """

    def __init__(self, n_layer: int, mem_len: int, d_model: int, dtype,
                 replica_ids: Sequence[int], rows_per_replica: int, slots: Sequence[int],
                 worker: int = 0):
        super().__init__(name="memory")
        self.replica_ids = list(replica_ids)
        self.rows_per_replica = rows_per_replica
        self.worker = worker
        rows = len(self.replica_ids) * rows_per_replica
        if len(slots) != rows:
            raise ValueError(f"{len(slots)} slots for {rows} local rows")
        self.slots = np.asarray(slots, np.int32)
        with tf.device("/cpu:0"):
            self.slot_variable = tf.Variable(self.slots, trainable=False, name="slots")
            self.layers = [tf.Variable(tf.zeros([rows, mem_len, d_model], dtype),
                                       trainable=False, name=f"layer_{i}")
                           for i in range(n_layer)] if mem_len else []

    @property
    def bytes(self) -> int:
        return sum(int(np.prod(v.shape)) * v.dtype.size for v in self.layers)

    # ------------------------------------------------------------------ device <-> host
    def distribute(self, strategy: tf.distribute.Strategy):
        """Per-replica memory values ([] without memory)."""
        if not self.layers:
            return []
        b = self.rows_per_replica
        host = [v.read_value() for v in self.layers]
        local_index = {r: k for k, r in enumerate(self.replica_ids)}

        def per_replica(context):
            k = local_index[context.replica_id_in_sync_group]
            return [tf.identity(m[k * b:(k + 1) * b]) for m in host]

        mems = strategy.experimental_distribute_values_from_function(per_replica)
        local = [strategy.experimental_local_results(m) for m in mems]
        if all(len(values) == 1 for values in local):
            # One local replica: strategy.run returns plain tensors, so the loop variable
            # must be plain tensors too (its structure may not change between iterations).
            mems = [values[0] for values in local]
        return mems

    def gather(self, strategy: tf.distribute.Strategy, mems) -> None:
        """Stores this worker's replicas' values (no communication between hosts)."""
        for variable, per_replica in zip(self.layers, mems):
            values = strategy.experimental_local_results(per_replica)
            variable.assign(tf.cast(tf.concat(list(values), axis=0), variable.dtype))

    # ------------------------------------------------------------------ files
    @staticmethod
    def directory(model_dir: str, worker: int) -> str:
        return os.path.join(model_dir, MEMORY_DIR, f"worker-{worker:03d}")

    def save(self, model_dir: str, step: int) -> None:
        if not self.layers:
            return
        prefix = os.path.join(self.directory(model_dir, self.worker), f"ckpt-{step}")
        tf.io.gfile.makedirs(os.path.dirname(prefix))
        tf.train.Checkpoint(slots=self.slot_variable, layers=self.layers).write(prefix)

    def restore(self, model_dir: str, step: int) -> bool:
        """Fills the memory of every local row from the files of `step`; False if the step
        has no memory files (a checkpoint written before they existed)."""
        if not self.layers:
            return True
        pattern = os.path.join(model_dir, MEMORY_DIR, "worker-*", f"ckpt-{step}.index")
        prefixes = sorted(p[:-len(".index")] for p in tf.io.gfile.glob(pattern))
        if not prefixes:
            return False
        own = os.path.join(self.directory(model_dir, self.worker), f"ckpt-{step}")
        prefixes.sort(key=lambda p: p != own)  # normally everything is in the own file
        wanted = {int(s): i for i, s in enumerate(self.slots)}
        values = [np.zeros(v.shape, v.dtype.as_numpy_dtype) for v in self.layers]
        found = set()
        for prefix in prefixes:
            try:
                reader = tf.train.load_checkpoint(prefix)
                saved = reader.get_tensor(_SLOTS_KEY)
                stored_layers = [reader.get_tensor(_layer_key(i)) for i in range(len(values))]
            except (tf.errors.OpError, ValueError, IndexError) as e:
                raise MemoryStateError(
                    f"The memory file {prefix} (of checkpoint step {step}) is damaged "
                    f"({type(e).__name__}: {' '.join(str(e).split())[:200]}). Restore it from a "
                    "backup, or delete its files to resume with the memory starting from "
                    "zero.") from None
            rows = [(j, wanted[int(s)]) for j, s in enumerate(saved)
                    if int(s) in wanted and int(s) not in found]
            if not rows:
                continue
            source = np.asarray([j for j, _ in rows])
            target = np.asarray([i for _, i in rows])
            for i, value in enumerate(values):
                stored = stored_layers[i]
                if stored.shape[1:] != value.shape[1:]:
                    raise MemoryStateError(
                        f"{prefix} holds memory of shape {stored.shape[1:]} per row, this run "
                        f"needs {value.shape[1:]} (another --mem_len or model width).")
                value[target] = stored[source]
            found.update(int(saved[j]) for j, _ in rows)
            if len(found) == len(wanted):
                break
        missing = sorted(set(wanted) - found)
        if missing:
            raise MemoryStateError(
                f"The memory saved with checkpoint step {step} in {model_dir}/{MEMORY_DIR} lacks "
                f"{len(missing)} of this worker's {len(wanted)} slots (first: {missing[0]}); "
                "were the memory files of some hosts deleted, or the global batch changed?")
        for variable, value in zip(self.layers, values):
            variable.assign(value)
        return True

    def prune(self, model_dir: str, keep_steps: Sequence[int]) -> List[str]:
        """Deletes this worker's memory files of steps not in `keep_steps`, and the
        `ckpt-STEP_temp*` directories a save killed half-way leaves behind (any step: this
        worker's saves are finished when it prunes)."""
        directory = self.directory(model_dir, self.worker)
        if not tf.io.gfile.isdir(directory):
            return []
        keep = {int(s) for s in keep_steps}
        removed = []
        for name in tf.io.gfile.listdir(directory):
            name = name.rstrip("/")
            match = re.match(r"ckpt-(\d+)([._])", name)
            if not match:
                continue
            stale = name.startswith(f"ckpt-{match.group(1)}_temp")
            if stale or int(match.group(1)) not in keep:
                path = os.path.join(directory, name)
                if tf.io.gfile.isdir(path):
                    tf.io.gfile.rmtree(path)
                else:
                    tf.io.gfile.remove(path)
                removed.append(name)
        return removed


def local_replica_ids(strategy: tf.distribute.Strategy, worker: int, num_workers: int
                      ) -> List[int]:
    """Global ids of the replicas this worker feeds: MultiWorkerMirrored places
    num_replicas / num_workers consecutive replicas on each worker; single-client strategies
    (one device, mirrored, TPU) feed all of them."""
    replicas = strategy.num_replicas_in_sync
    if num_workers <= 1:
        return list(range(replicas))
    per_worker = replicas // num_workers
    return list(range(worker * per_worker, (worker + 1) * per_worker))


def log_size(state: MemoryState) -> None:
    logging.info("Memory state of this worker: %d rows, %.1f MB per checkpoint", len(state.slots),
                 state.bytes / 1e6)
