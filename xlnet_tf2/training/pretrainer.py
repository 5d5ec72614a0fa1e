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
  * the memory as the loop's carried state: it comes back from its checkpoint variables
    ([GB, M, D] per layer, checkpointing.MemoryState) cut into per-replica values (replica r
    holds global batch slots r*b .. r*b + b - 1, which are the slots its input pipeline feeds;
    the pipeline is deterministic in the step, so the data position is the step counter), is
    a loop variable of every loop (never reset), and is gathered back for every checkpoint;
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
from xlnet_tf2.training import checkpointing
from xlnet_tf2.training.flops import pretrain_step_flops
from xlnet_tf2.training.run_config import PretrainConfig, RunConfigError
from xlnet_tf2.training.trainer import (DataExhaustedError, RunSettings,  # noqa: F401
                                        Trainer, TrainerConfig, TrainingDivergedError,
                                        TrainResult)

# Features the model consumes; the rest of a batch is loss inputs or bookkeeping.
MODEL_FEATURES = ("input_ids", "segment_ids", "perm_mask", "target_mapping")
LOSS_FEATURES = ("target", "target_mask")
# Which stream and direction each row reads: its place in the global batch, independent of
# the replicas (keys its dropout masks, see layers/dropout.py).
SLOT_FEATURES = ("stream_id", "direction")
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
    """

    def __init__(self, config: PretrainConfig, model_config: XLNetConfig, data_shape: DataShape,
                 dataset_fn: DatasetFn, strategy: Optional[tf.distribute.Strategy] = None):
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
        super().__init__(
            TrainerConfig(loop=loop, optimizer=config.optimizer),
            model_fn=self._build_model, loss_fn=self._lm_loss, count_fn=self._target_count,
            dataset_fn=dataset_fn, strategy=strategy, carried_state_fn=self._memory_state,
            feature_keys=MODEL_FEATURES + LOSS_FEATURES + SLOT_FEATURES,
            replica_features=self._static_features, example_ids_fn=self._slot_example_ids,
            record_features=EXAMPLE_ID_FEATURES if loop.record_steps else (),
            init_fn=self._load_init_checkpoint,
            run_files={"xlnet_config.json": self.model_config.to_json_string()},
            run_settings=RunSettings(type(config), config, derived, sources),
            tokens_per_step=loop.train_batch_size * data_shape.seq_len,
            flops_per_step=self.step_flops.train_per_step,
            exhausted_hint="Prepare more data or passes (data_prep/create_tfrecords.py "
                           "--num_passes) or lower --train_steps.")
        self.memory_state = self.carried_state

    # ------------------------------------------------------------------ hooks of the loop
    def _build_model(self) -> keras.Model:
        model = XLNetLMHeadModel(self.model_config)
        model.build()
        return model

    def _memory_state(self, model: keras.Model) -> checkpointing.MemoryState:
        """The memory's checkpoint copy: [GB, M, D] per layer, on the host."""
        return checkpointing.MemoryState(
            self.model_config.n_layer, self.config.loop.train_batch_size, self.model_config.mem_len,
            self.model_config.d_model, tf.as_dtype(model.compute_dtype))

    def _load_init_checkpoint(self) -> Optional[str]:
        if not self.config.init_checkpoint:
            return None
        checkpointing.load_model_weights(self.model, self.config.init_checkpoint)
        return self.config.init_checkpoint

    def _static_features(self, features):
        """Pins the per-replica batch shapes: some strategies' iterators (multi-worker) hand
        out batches with an unknown batch dimension, and XLA/TPU need static shapes."""
        b, L, P = self.replica_batch, self.data_shape.seq_len, self.data_shape.num_predict
        shapes = {"input_ids": [b, L], "segment_ids": [b, L], "perm_mask": [b, L, L],
                  "target_mapping": [b, P, L], "target": [b, P], "target_mask": [b, P],
                  "stream_id": [b], "direction": [b]}
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
        return tf.reduce_sum(tf.cast(features["target_mask"], tf.float32))

    def _lm_loss(self, features, mems):
        """(summed cross-entropy over this replica's real targets, new memory)."""
        inputs = {k: features[k] for k in MODEL_FEATURES}
        if self.model_config.mem_len:
            inputs["mems"] = list(mems)
        outputs = self.model(inputs, training=True)
        logits = outputs["logits"]  # float32 [b, P, V]
        ce = tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=tf.cast(features["target"], tf.int32), logits=logits)  # [b, P]
        ce_sum = tf.reduce_sum(ce * tf.cast(features["target_mask"], tf.float32))
        return ce_sum, list(outputs["new_mems"])

    # ------------------------------------------------------------------ memory placement
    def distribute_memory(self):
        """Per-replica memory values cut from the global [GB, M, D] checkpoint copy."""
        return self.distribute_state()

    def gather_memory(self, mems) -> None:
        """Stores per-replica memories into the checkpoint copy (replica r -> slots r*b...)."""
        self.gather_state(mems)
