"""Transformer-XL's memory: creating it (training, evaluation, generation) and carrying it
across steps, loops and restarts as host variables saved per worker (`MemoryState`). What the
training step does with it lives with the step: the model computes each layer's next memory
from the layer's input (models/xlnet_model.py `next_memory`), and the pretraining loss zeroes
the rows that start a stream (tasks/objective.py `reset_at_stream_start`).

Letters (docs/GLOSSARY.md): B rows per replica, M mem_len, D d_model, R reuse_len, L seq_len.
Memories are batch-major, n_layer x [B, M, D]. In training and evaluation M is the model's
`XLNetConfig.mem_len` (docs/SEMANTICS.md#memory); generation's memory is a buffer sized from
the prompt and the new tokens (`prompt_memory`'s `memory_len`), whatever mem_len says. A
"slot" is a training row's place in the data schedule (`MemoryState`, data/batch_layout.py),
nothing of generation's buffer.
"""

from __future__ import annotations

import os
import re
from typing import List, Optional, Sequence

import numpy as np
import tensorflow as tf
from absl import logging

from xlnet_tf2 import fileio
from xlnet_tf2.config import XLNetConfig

MEMORY_DIR = "memory"
_SLOTS_KEY = "slots/.ATTRIBUTES/VARIABLE_VALUE"


# ---------------------------------------------------------------------------- the tensors
def initial_memory(config: XLNetConfig, batch_size: int, dtype) -> List[tf.Tensor]:
    """Zero memories [B, M, D] per layer, as the original starts from; [] without memory
    (mem_len 0: what the model returns as `new_mems`, so it can be fed back)."""
    if not config.mem_len:
        return []
    return [tf.zeros([batch_size, config.mem_len, config.d_model], dtype)
            for _ in range(config.n_layer)]


# ---------------------------------------------------------------------------- generation
def prompt_memory(hidden_states: Sequence[tf.Tensor], attention_mask: tf.Tensor,
                  memory_len: int):
    """Generation's memory after the prompt: a right-aligned buffer of `memory_len` entries per
    layer holding each layer's input of the prompt but its last token, and its mask.

    hidden_states: n_layer x [B, P + 1, D], the layers' inputs of [prompt, dummy];
    attention_mask: [B, P], 1 = real prompt token. Returns (n_layer x [B, memory_len, D],
    int32 [B, memory_len]: 1 = a real entry, 0 = an empty entry or prompt padding)."""
    p_len = attention_mask.shape[1]
    batch = _rows(hidden_states[0])
    empty = memory_len - (p_len - 1)
    memory = [tf.concat([tf.zeros([batch, empty, h.shape[-1]], h.dtype), h[:, :p_len - 1]], 1)
              for h in hidden_states]
    memory_mask = tf.concat([tf.zeros([batch, empty], tf.int32),
                             tf.cast(attention_mask[:, :p_len - 1], tf.int32)], 1)
    return memory, memory_mask


def push_memory(memory: Sequence[tf.Tensor], memory_mask: tf.Tensor,
                hidden_states: Sequence[tf.Tensor]):
    """One generation step's memory: the first position of `hidden_states` (n_layer x
    [B, 3, D], the token settled in this step) joins each layer's buffer, the oldest entry
    leaves. Returns (memory, memory_mask) of the same shapes as given."""
    batch = _rows(memory_mask)
    memory = [tf.concat([m[:, 1:], h[:, :1]], 1) for m, h in zip(memory, hidden_states)]
    memory_mask = tf.concat([memory_mask[:, 1:], tf.ones([batch, 1], tf.int32)], 1)
    return memory, memory_mask


def _rows(x: tf.Tensor):
    """The static number of rows when known (loop variables must keep their shapes)."""
    return x.shape[0] if x.shape[0] is not None else tf.shape(x)[0]


# ---------------------------------------------------------------------------- carried state
class MemoryStateError(RuntimeError):
    """The saved memory of a checkpoint is missing or incomplete."""


class MemoryState(tf.Module):
    """The training loop's carried state: the host copy of this worker's replicas' memory,
    `layers[i]` [local rows, M, D], its per-replica values and its files.

    During training the memory lives on the devices, each replica's n_layer x [B, M, D] a loop
    variable of the training loop (`distribute` cuts the host copy into them, `gather` stores
    them back). For a checkpoint each host saves only the rows of its own replicas into
    model_dir/memory/worker-WWW/ckpt-STEP; nothing is gathered across hosts (its size at any
    scale: benchmarks/tools/scale_costs.py). Every row is saved with its *slot*
    (data/batch_layout.py: direction * S + stream within the step's group), the identity of
    the text it continues, so `restore` reads each local row from whichever host file holds
    its slot, and a run resumes with exactly its memory on any number of replicas, hosts or
    accumulation micro-batches with the same global batch (docs/GLOSSARY.md#data-schedule-words).
    The trainer saves a step's memory before the step's main checkpoint, so a main checkpoint
    on disk always has its memory. With TPUStrategy the single client process drives every
    host and writes one file holding all rows.

    Args:
      config: the model's configuration: n_layer, mem_len (M) and d_model (D) give the shapes.
      dtype: the memory's type (the model's compute dtype).
      replica_ids: the global ids of the replicas this worker feeds, in local order.
      rows_per_replica: B.
      slots: for every local row (replica-major), its slot.
      worker: this worker's index (its file name).
    """

    def __init__(self, config: XLNetConfig, dtype, replica_ids: Sequence[int],
                 rows_per_replica: int, slots: Sequence[int], worker: int = 0):
        super().__init__(name="memory")
        self.config = config
        self.replica_ids = list(replica_ids)
        self.rows_per_replica = rows_per_replica
        self.worker = worker
        rows = len(self.replica_ids) * rows_per_replica
        if len(slots) != rows:
            raise ValueError(f"{len(slots)} slots for {rows} local rows")
        self.slots = np.asarray(slots, np.int32)
        with tf.device("/cpu:0"):
            self.slot_variable = tf.Variable(self.slots, trainable=False, name="slots")
            self.layers = [tf.Variable(zeros, trainable=False, name=f"layer_{i}")
                           for i, zeros in enumerate(initial_memory(config, rows, dtype))]

    @classmethod
    def for_worker(cls, config: XLNetConfig, dtype, layout, strategy: tf.distribute.Strategy,
                   worker: int, num_workers: int) -> "MemoryState":
        """This worker's share of a run's memory: the rows of the replicas it feeds under
        `strategy`, each tagged with its slot in `layout` (a data/batch_layout.py
        BatchLayout); its size is logged."""
        replica_ids = local_replica_ids(strategy, worker, num_workers)
        slots = [slot for r in replica_ids for slot in layout.slots(r)]
        state = cls(config, tf.as_dtype(dtype), replica_ids, layout.replica_batch, slots, worker)
        logging.info("Memory state of this worker: %d rows, %.1f MB per checkpoint",
                     len(state.slots), state.bytes / 1e6)
        return state

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

    def restore(self, model_dir: str, step: int, checkpoint: Optional[str] = None) -> bool:
        """Fills the memory of every local row from the files of `step`; False if the step
        has no memory files (a checkpoint written before they existed: the memory then starts
        from zero, which is logged and printed naming `checkpoint`)."""
        if not self.layers:
            return True
        pattern = os.path.join(model_dir, MEMORY_DIR, "worker-*", f"ckpt-{step}.index")
        prefixes = sorted(p[:-len(".index")] for p in tf.io.gfile.glob(pattern))
        if not prefixes:
            name = checkpoint or f"step {step} of {model_dir}"
            logging.warning("Checkpoint %s has no saved memory (an older format): the memory "
                            "starts from zero.", name)
            print(f"[checkpoint] note: {name} has no saved memory; it starts from zero.",
                  flush=True)
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
                fileio.remove_path(os.path.join(directory, name))
                removed.append(name)
        return removed


def _layer_key(i: int) -> str:
    return f"layers/{i}/.ATTRIBUTES/VARIABLE_VALUE"


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
