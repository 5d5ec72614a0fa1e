"""Pretraining: the permutation-LM loss and the Transformer-XL memory on top of the generic
training loop (trainer.py), which does the steps, loops, strategy, clipping, optimizer,
checkpoints and logging.

Dimension glossary: GB global batch, b per-replica batch (GB / replicas), L seq_len,
P num_predict, M mem_len, D d_model, V vocabulary.

What this file adds to the loop:
  * the model (XLNetLMHeadModel): the architecture of --model_config with the run-time
    settings of this run (mem_len, dropout, clamp from the flags; reuse_len and bi_data from
    the data's manifest);
  * the loss: the token-weighted mean over all replicas, i.e. the sum of per-target
    cross-entropy over real targets (target_mask) divided by the global number of real targets
    (the loop all-reduces `target_mask`'s sum), so each replica's gradient is its share of the
    global mean and their sum is the global gradient;
  * the memory as the loop's carried state: a loop variable of every loop, saved for every
    checkpoint by each host for its own replicas' rows (memory_state.MemoryState, rows tagged
    with their slot, so it restores exactly on any topology); the pipeline is deterministic
    in the step, so the data position is the step counter;
  * the dense two-stream masks built on the device inside the step: batches carry the
    compact features (data/masks.py COMPACT_FEATURES: ranks [L] and target positions [P] per
    example) and `_lm_loss` expands them with masks.dense_features inside the (XLA-compiled)
    forward/backward function, for training and held-out evaluation alike;
  * gradient accumulation: with --grad_accum_steps N the pipeline lays every replica batch
    out as N micro-batches that are each a well-formed batch (a virtual replica, see
    data/pretrain_dataset.py), the loop's memory rows follow the batch rows, so micro-batch k
    of step t + 1 continues the text micro-batch k held at step t;
  * static per-replica shapes, the per-step record of which examples were consumed
    (`record_steps`), and the FLOP count for MFU.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Optional

import keras
import tensorflow as tf

from xlnet_tf2.config import XLNetConfig
from xlnet_tf2.models import XLNetLMHeadModel
from xlnet_tf2.data.masks import COMPACT_FEATURES, dense_features
from xlnet_tf2.data.pretrain_dataset import slot_assignment
from xlnet_tf2.training import checkpointing, distribution
from xlnet_tf2.training.memory_state import MemoryState, local_replica_ids, log_size
from xlnet_tf2.tasks.pretraining_eval import HeldOutEvaluator
from xlnet_tf2.training.flops import pretrain_step_flops
from xlnet_tf2.training.run_config import PretrainConfig, RunConfigError
from xlnet_tf2.training.trainer import (DataExhaustedError, RunSettings,  # noqa: F401
                                        Trainer, TrainerConfig, TrainingDivergedError,
                                        TrainResult)

# Features the model consumes and the loss inputs, both built on the device from the batch's
# compact features (COMPACT_FEATURES) by masks.dense_features.
MODEL_FEATURES = ("input_ids", "segment_ids", "perm_mask", "target_mapping")
LOSS_FEATURES = ("target", "target_mask")
# Which stream and direction each row reads: its place in the global batch, independent of
# the replicas (keys its dropout masks, see layers/dropout.py).
SLOT_FEATURES = ("stream_id", "direction", "chunk_index")
# Bookkeeping ids of each example (which stream slot, which chunk of it, which direction and
# pass), recorded per step when `record_steps` is on, to audit what was consumed.
EXAMPLE_ID_FEATURES = ("stream_id", "chunk_index", "direction", "pass_id")

# dataset_fn(input_context, start_step) -> tf.data.Dataset of per-replica batches.
DatasetFn = Callable[[tf.distribute.InputContext, int], tf.data.Dataset]


@dataclasses.dataclass(frozen=True)
class DataShape:
    """The static example shape the loop is compiled for (from the data manifest)."""

    seq_len: int
    reuse_len: int
    num_predict: int
    bi_data: bool


def eval_batch_size(config: PretrainConfig) -> int:
    """--eval_batch_size, or the training batch size when it is 0."""
    return config.evaluation.eval_batch_size or config.loop.train_batch_size


def reset_memory(mems, chunk_index):
    """Zeroes the memory of rows that start a stream (chunk 0): at a block boundary of the data
    schedule a slot moves to another stream, whose text does not follow what the memory holds.
    Zero memory is what every stream starts from (as in the original).

    mems: n_layer x [b, M, D]; chunk_index: int32 [b]."""
    keep = tf.cast(chunk_index > 0, mems[0].dtype)[:, None, None]  # [b, 1, 1]
    return [m * keep for m in mems]


def set_precision(precision: str) -> None:
    keras.mixed_precision.set_global_policy(precision)


class Pretrainer(Trainer):
    """The Trainer of one pretraining run: LM model and loss, memory, data position.

    Args:
      config: the run's settings.
      model_config: the architecture (its run-time fields are ignored: they come from
        `config.model` and, for reuse_len and bi_data, from the data).
      data_shape: the prepared data's example shape.
      dataset_fn: (input_context, start_step) -> per-replica batches.
      strategy: the tf.distribute strategy (default: the current one).
      eval_dataset_fn: (input_context) -> per-replica held-out batches of
        `config.evaluation.eval_batch_size` (None: no held-out evaluation).
    """

    def __init__(self, config: PretrainConfig, model_config: XLNetConfig, data_shape: DataShape,
                 dataset_fn: DatasetFn, strategy: Optional[tf.distribute.Strategy] = None,
                 eval_dataset_fn: Optional[Callable] = None):
        self.config = config
        self.data_shape = data_shape
        loop = config.loop
        strategy = strategy or tf.distribute.get_strategy()
        num_replicas = strategy.num_replicas_in_sync
        if loop.train_batch_size % (num_replicas * loop.grad_accum_steps):
            raise RunConfigError(
                f"--train_batch_size={loop.train_batch_size} must be divisible by the number of "
                f"replicas ({num_replicas}) times --grad_accum_steps={loop.grad_accum_steps}.")
        micro_batch = loop.train_batch_size // num_replicas // loop.grad_accum_steps
        if data_shape.bi_data and micro_batch % 2:
            raise RunConfigError(
                f"bi_data needs an even batch on every replica and micro-batch (a forward and a "
                f"backward half), but --train_batch_size={loop.train_batch_size} over "
                f"{num_replicas} replicas and --grad_accum_steps={loop.grad_accum_steps} gives "
                f"{micro_batch}.")
        runtime = config.model.runtime(reuse_len=data_shape.reuse_len, bi_data=data_shape.bi_data)
        self.model_config = XLNetConfig.from_architecture(model_config.architecture(), **runtime)
        self.step_flops = pretrain_step_flops(
            self.model_config, seq_len=data_shape.seq_len, mem_len=self.model_config.mem_len,
            num_predict=data_shape.num_predict, global_batch_size=loop.train_batch_size,
            num_replicas=num_replicas)
        derived = {"seq_len": data_shape.seq_len, "reuse_len": data_shape.reuse_len,
                   "num_predict": data_shape.num_predict, "bi_data": data_shape.bi_data,
                   **self.model_config.architecture()}
        sources = {k: "the data's record_info.json" for k in
                   ("seq_len", "reuse_len", "num_predict", "bi_data")}
        sources.update({k: "--model_config" for k in self.model_config.architecture()})
        evaluation = config.evaluation
        self.eval_global_batch = eval_batch_size(config)
        if eval_dataset_fn is not None and self.eval_global_batch % num_replicas:
            raise RunConfigError(f"--eval_batch_size={self.eval_global_batch} must be "
                                 f"divisible by the number of replicas ({num_replicas}).")
        eval_every = evaluation.eval_steps if eval_dataset_fn is not None else 0
        super().__init__(
            TrainerConfig(loop=loop, optimizer=config.optimizer,
                          callback_steps=eval_every or None),
            model_fn=self._build_model, loss_fn=self._lm_loss, count_fn=self._target_count,
            dataset_fn=dataset_fn, strategy=strategy, carried_state_fn=self._memory_state,
            feature_keys=COMPACT_FEATURES + SLOT_FEATURES,
            replica_features=self._static_features, example_ids_fn=self._slot_example_ids,
            record_features=EXAMPLE_ID_FEATURES if loop.record_steps else (),
            init_fn=self._load_init_checkpoint,
            callback=(lambda step: self.evaluate(step)) if eval_every else None,
            run_files={"xlnet_config.json": self.model_config.to_json_string()},
            run_settings=RunSettings(type(config), config, derived, sources),
            tokens_per_step=loop.train_batch_size * data_shape.seq_len,
            flops_per_step=self.step_flops.train_per_step,
            exhausted_hint="Prepare more data or passes (data_prep/create_tfrecords.py "
                           "--num_passes) or lower --train_steps.")
        self.memory_state = self.carried_state
        self.evaluator = None
        if eval_dataset_fn is not None:
            self.evaluator = HeldOutEvaluator(
                self.strategy, eval_dataset_fn, self._eval_loss, self._eval_initial_memory,
                evaluation.eval_batches, loop.model_dir, self.is_chief)

    # ------------------------------------------------------------------ hooks of the loop
    def _build_model(self) -> keras.Model:
        model = XLNetLMHeadModel(self.model_config)
        model.build()
        return model

    def _memory_state(self, model: keras.Model) -> MemoryState:
        """This worker's share of the memory: [local rows, M, D] per layer, on the host, each
        row tagged with its slot (memory_state.py)."""
        worker = distribution.worker_id(self.strategy)
        replica_ids = local_replica_ids(self.strategy, worker,
                                        distribution.num_workers(self.strategy))
        slots = [slot for r in replica_ids for slot in self.row_slots(r)]
        state = MemoryState(self.model_config.n_layer, self.model_config.mem_len,
                            self.model_config.d_model, tf.as_dtype(model.compute_dtype),
                            replica_ids, self.replica_batch, slots, worker)
        log_size(state)
        return state

    def row_slots(self, replica: int):
        """The slot (direction * F + stream within the step's group) of each row of a replica
        batch, as the input pipeline lays the rows out (data/pretrain_dataset.py; with
        --grad_accum_steps N every micro-batch of b / N rows is a virtual replica)."""
        b, bi_data = self.replica_batch, self.data_shape.bi_data
        streams = self.config.loop.train_batch_size // (2 if bi_data else 1)
        slots = []
        for row in range(b):
            stream, direction = slot_assignment(replica, row, b, bi_data, self.micro_batches)
            slots.append(direction * streams + stream)
        return slots

    def _load_init_checkpoint(self) -> Optional[str]:
        if not self.config.init_checkpoint:
            return None
        checkpointing.load_model_weights(self.model, self.config.init_checkpoint)
        return self.config.init_checkpoint

    def _static_features(self, features, b: Optional[int] = None):
        """Pins the per-replica batch shapes (b rows, default the training replica batch):
        some strategies' iterators (multi-worker) hand out batches with an unknown batch
        dimension, and XLA/TPU need static shapes."""
        b = b or self.replica_batch
        L, P = self.data_shape.seq_len, self.data_shape.num_predict
        shapes = {"input_ids": [b, L], "segment_ids": [b, L], "perm_rank": [b, L],
                  "target_positions": [b, P], "stream_id": [b], "direction": [b],
                  "chunk_index": [b]}
        return {k: tf.ensure_shape(v, shapes[k]) for k, v in features.items()}

    def _slot_example_ids(self, features):
        """int32 [rows]: direction * F + stream within the step's group (F streams per step),
        the same for an example on any number of replicas or micro-batches. Stream ids are
        unique across directories by multiples of num_streams, a multiple of F."""
        streams = self.config.loop.train_batch_size // (2 if self.data_shape.bi_data else 1)
        return (tf.cast(features["direction"], tf.int32) * streams
                + tf.math.floormod(tf.cast(features["stream_id"], tf.int32), streams))

    @staticmethod
    def _target_count(features):
        """float32: the real targets of a batch of compact features (positions >= 0)."""
        return tf.reduce_sum(tf.cast(features["target_positions"] >= 0, tf.float32))

    def model_features(self, features):
        """The dense model and loss inputs of a batch of compact features, built where this
        runs (on the device inside the step): masks.dense_features at this run's reuse_len."""
        return dense_features(features, self.data_shape.reuse_len)

    def _lm_loss(self, features, mems, training: bool = True):
        """(summed cross-entropy over this replica's real targets, new memory); `features`
        are compact, the dense masks are built here (inside the compiled step)."""
        chunk_index = features["chunk_index"]
        features = self.model_features(features)
        inputs = {k: features[k] for k in MODEL_FEATURES}
        if self.model_config.mem_len:
            inputs["mems"] = reset_memory(list(mems), chunk_index)
        outputs = self.model(inputs, training=training)
        logits = outputs["logits"]  # float32 [b, P, V]
        ce = tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=tf.cast(features["target"], tf.int32), logits=logits)  # [b, P]
        ce_sum = tf.reduce_sum(ce * tf.cast(features["target_mask"], tf.float32))
        return ce_sum, list(outputs["new_mems"])

    # ------------------------------------------------------------------ held-out evaluation
    def _eval_replica_batch(self) -> int:
        return self.eval_global_batch // self.num_replicas

    def _eval_loss(self, features, mems):
        """Per replica, no dropout: (new memory, summed cross-entropy, target count)."""
        features = self._static_features(
            {k: features[k] for k in COMPACT_FEATURES + ("chunk_index",)},
            self._eval_replica_batch())
        ce_sum, new_mems = self._lm_loss(features, mems, training=False)
        return new_mems, ce_sum, self._target_count(features)

    def _eval_initial_memory(self):
        c = self.model_config
        return [tf.zeros([self._eval_replica_batch(), c.mem_len, c.d_model],
                         self.model.compute_dtype) for _ in range(c.n_layer)] if c.mem_len else []

    def evaluate(self, step: Optional[int] = None) -> dict:
        """Held-out loss and perplexity of the current weights (pretrain_eval.py)."""
        if self.evaluator is None:
            raise RunConfigError("No held-out data: prepare it with data_prep/create_tfrecords.py "
                                 "--eval_fraction (or --eval_input), or pass --eval_data_dir.")
        return self.evaluator.evaluate(int(self.global_step.numpy()) if step is None else step)

    # ------------------------------------------------------------------ memory placement
    def distribute_memory(self):
        """Per-replica memory values cut from the global [GB, M, D] checkpoint copy."""
        return self.distribute_state()

    def gather_memory(self, mems) -> None:
        """Stores per-replica memories into the checkpoint copy (replica r -> slots r*b...)."""
        self.gather_state(mems)
