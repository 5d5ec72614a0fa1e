"""The Estimator-free pretraining loop: examples -> permutation-LM loss -> AdamW, under
tf.distribute, with the Transformer-XL memory carried per replica for the whole run.

Dimension glossary: GB global batch, b per-replica batch (GB / replicas), L seq_len,
P num_predict, M mem_len, D d_model, V vocabulary.

How one run goes:
  1. Under the strategy's scope: the model, the optimizer (optimization.py), the step counter.
  2. Restore the newest readable checkpoint in model_dir (a corrupt one is reported and the one
     before it used), else `init_checkpoint`, else fresh weights.
  3. The memory comes back from its checkpoint variables ([GB, M, D] per layer) and is cut into
     per-replica values: replica r holds global batch slots r*b .. r*b + b - 1, which are the
     slots its input pipeline feeds (the pipeline is deterministic in the step, so the data
     position is the step counter).
  4. Loops of at most `steps_per_loop` steps run inside one tf.function; each step goes through
     `strategy.run`. The memory is a loop variable of that function and its return value, so it
     continues across steps and across loops (never reset).
  5. Every `log_steps`: TensorBoard scalars and a console line; every `save_steps` and at the end:
     a checkpoint with the memory gathered back to [GB, M, D]. A NaN/inf loss stops the run
     before anything is saved, so the last checkpoint stays good.

The loss is the token-weighted mean over all replicas: sum of per-target cross-entropy over
real targets (target_mask) divided by the global number of real targets (an all-reduce), so
each replica's gradient is its share of the global mean and their sum is the global gradient.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from typing import Callable, Dict, List, Optional

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from xlnet_tf2.config import XLNetConfig
from xlnet_tf2.models import XLNetLMHeadModel
from xlnet_tf2.training import checkpointing, distribution
from xlnet_tf2.training.flops import device_peak_flops, measure_matmul_peak, pretrain_step_flops
from xlnet_tf2.training.metrics_logger import MetricsLogger
from xlnet_tf2.training.optimization import create_optimizer
from xlnet_tf2.training.run_config import PretrainConfig

# Features the model consumes; the rest of a batch is loss inputs or bookkeeping.
MODEL_FEATURES = ("input_ids", "segment_ids", "perm_mask", "target_mapping")
LOSS_FEATURES = ("target", "target_mask")
# Bookkeeping ids of each example (which stream slot, which chunk of it, which direction and
# pass), recorded per step when `record_steps` is on, to audit what was consumed.
EXAMPLE_ID_FEATURES = ("stream_id", "chunk_index", "direction", "pass_id")

# dataset_fn(input_context, start_step) -> tf.data.Dataset of per-replica batches.
DatasetFn = Callable[[tf.distribute.InputContext, int], tf.data.Dataset]


class TrainingDivergedError(RuntimeError):
    """The loss became NaN or infinite; the message names the step and the last good checkpoint."""


class DataExhaustedError(RuntimeError):
    """The input pipeline ran out before --train_steps."""


@dataclasses.dataclass(frozen=True)
class DataShape:
    """The static example shape the loop is compiled for (from the data manifest)."""

    seq_len: int
    reuse_len: int
    num_predict: int
    bi_data: bool


@dataclasses.dataclass
class TrainResult:
    start_step: int
    final_step: int
    steps: List[dict]  # one dict per step run in this call: step, loss, grad_norm, lr, ...
    restored_from: Optional[str]


def set_precision(precision: str) -> None:
    keras.mixed_precision.set_global_policy(precision)


class Pretrainer:
    """Owns the model, optimizer, memory and checkpoints of one pretraining run."""

    def __init__(self, config: PretrainConfig, model_config: XLNetConfig, data_shape: DataShape,
                 dataset_fn: DatasetFn, strategy: Optional[tf.distribute.Strategy] = None):
        self.config = config
        self.data_shape = data_shape
        self.strategy = strategy or tf.distribute.get_strategy()
        self.num_replicas = self.strategy.num_replicas_in_sync
        if config.train_batch_size % self.num_replicas:
            raise ValueError(f"--train_batch_size={config.train_batch_size} must be divisible by "
                             f"the number of replicas ({self.num_replicas}).")
        self.replica_batch = config.train_batch_size // self.num_replicas
        if data_shape.bi_data and self.replica_batch % 2:
            raise ValueError(
                f"bi_data needs an even per-replica batch (a forward and a backward half on every "
                f"replica), but --train_batch_size={config.train_batch_size} over "
                f"{self.num_replicas} replicas gives {self.replica_batch}.")
        overrides = dict(mem_len=config.mem_len, reuse_len=data_shape.reuse_len,
                         bi_data=data_shape.bi_data)
        for name in ("dropout", "dropatt"):
            if getattr(config, name) is not None:
                overrides[name] = getattr(config, name)
        self.model_config = model_config.replace(**overrides)
        self.dataset_fn = dataset_fn
        self.is_chief = distribution.is_chief(self.strategy)
        self.loss_scaling = config.precision == "mixed_float16"

        set_precision(config.precision)
        keras.utils.set_random_seed(config.seed)
        with self.strategy.scope():
            self.model = XLNetLMHeadModel(self.model_config)
            self.model.build()
            self.optimizer, self.schedule = create_optimizer(
                self.model, learning_rate=config.learning_rate, warmup_steps=config.warmup_steps,
                total_steps=config.train_steps, weight_decay=config.weight_decay,
                epsilon=config.adam_epsilon, bias_correction=config.adam_bias_correction,
                loss_scaling=self.loss_scaling)
            self.global_step = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step",
                                           aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
        self.memory_dtype = tf.as_dtype(self.model.compute_dtype)
        # The memory's checkpoint copy lives on the host, outside the strategy: [GB, M, D] per layer.
        self.memory_state = checkpointing.MemoryState(
            self.model_config.n_layer, config.train_batch_size, self.model_config.mem_len,
            self.model_config.d_model, self.memory_dtype)
        self.checkpoints = checkpointing.CheckpointKeeper(
            config.model_dir, model=self.model, optimizer=self.optimizer,
            global_step=self.global_step, memory=self.memory_state,
            max_to_keep=config.keep_checkpoints, is_chief=self.is_chief,
            worker_id=distribution.worker_id(self.strategy))
        self._trainable = self.model.trainable_variables
        self._compute_grads = tf.function(self._forward_backward, jit_compile=config.jit_compile,
                                          reduce_retracing=True)
        self._loop = tf.function(self._train_loop)
        self.step_flops = pretrain_step_flops(
            self.model_config, seq_len=data_shape.seq_len, mem_len=self.model_config.mem_len,
            num_predict=data_shape.num_predict, global_batch_size=config.train_batch_size,
            num_replicas=self.num_replicas)

    # ------------------------------------------------------------------ memory placement
    def distribute_memory(self):
        """Per-replica memory values cut from the global [GB, M, D] checkpoint copy."""
        if self.model_config.mem_len == 0:
            return []
        b = self.replica_batch
        host = [v.read_value() for v in self.memory_state.layers]

        def per_replica(context):
            start = context.replica_id_in_sync_group * b
            return [tf.identity(m[start:start + b]) for m in host]

        mems = self.strategy.experimental_distribute_values_from_function(per_replica)
        local = [self.strategy.experimental_local_results(m) for m in mems]
        if all(len(values) == 1 for values in local):
            # One local replica: strategy.run returns plain tensors, so the loop variable
            # must be plain tensors too (its structure may not change between iterations).
            mems = [values[0] for values in local]
        return mems

    def gather_memory(self, mems) -> None:
        """Stores per-replica memories into the checkpoint copy (replica r -> slots r*b...)."""
        if self.model_config.mem_len == 0:
            return
        for variable, per_replica in zip(self.memory_state.layers, mems):
            variable.assign(tf.cast(self.strategy.gather(per_replica, axis=0), variable.dtype))

    # ------------------------------------------------------------------ the step
    def _forward_backward(self, features, mems, global_count):
        """One replica's loss and gradients; pure computation (XLA-compilable, static shapes).

        Returns (grads, new_mems, ce_sum) where ce_sum is this replica's summed cross-entropy
        over real targets and the gradients are of ce_sum / global_count (scaled by the loss
        scale under mixed_float16).
        """
        inputs = {k: features[k] for k in MODEL_FEATURES}
        if self.model_config.mem_len:
            inputs["mems"] = list(mems)
        with tf.GradientTape() as tape:
            outputs = self.model(inputs, training=True)
            logits = outputs["logits"]  # float32 [b, P, V]
            ce = tf.nn.sparse_softmax_cross_entropy_with_logits(
                labels=tf.cast(features["target"], tf.int32), logits=logits)  # [b, P]
            ce_sum = tf.reduce_sum(ce * tf.cast(features["target_mask"], tf.float32))
            loss = ce_sum / global_count
            if self.loss_scaling:
                loss = self.optimizer.scale_loss(loss)
        grads = tape.gradient(loss, self._trainable)
        return grads, list(outputs["new_mems"]), ce_sum

    def _static_features(self, features):
        """Pins the per-replica batch shapes: some strategies' iterators (multi-worker) hand
        out batches with an unknown batch dimension, and XLA/TPU need static shapes."""
        b, L, P = self.replica_batch, self.data_shape.seq_len, self.data_shape.num_predict
        shapes = {"input_ids": [b, L], "segment_ids": [b, L], "perm_mask": [b, L, L],
                  "target_mapping": [b, P, L], "target": [b, P], "target_mask": [b, P]}
        return {k: tf.ensure_shape(v, shapes[k]) for k, v in features.items()}

    def _replica_step(self, features, mems):
        features = self._static_features(features)
        context = tf.distribute.get_replica_context()
        local_count = tf.reduce_sum(tf.cast(features["target_mask"], tf.float32))
        global_count = tf.maximum(
            context.all_reduce(tf.distribute.ReduceOp.SUM, local_count), 1.0)
        grads, new_mems, ce_sum = self._compute_grads(features, mems, global_count)
        # The global gradient: every replica's share of the global mean, summed.
        grads = context.all_reduce(tf.distribute.ReduceOp.SUM, grads)
        scaled_norm = tf.linalg.global_norm(grads)
        # Under mixed_float16 the gradients carry the loss scale: clip them at the scaled
        # threshold and report the unscaled norm. Overflowed steps (inf norm) are skipped by
        # the LossScaleOptimizer, which then lowers the scale.
        scale = (tf.cast(self.optimizer.dynamic_scale, tf.float32) if self.loss_scaling
                 else tf.constant(1.0, tf.float32))
        grads, _ = tf.clip_by_global_norm(grads, self.config.clip_norm * scale,
                                          use_norm=scaled_norm)
        self.optimizer.apply(grads, self._trainable)
        return new_mems, ce_sum / global_count, scaled_norm / scale

    def _train_loop(self, iterator, mems, num_steps):
        """`num_steps` steps in one graph; returns (mems, per-step stats)."""
        losses = tf.TensorArray(tf.float32, size=num_steps)
        norms = tf.TensorArray(tf.float32, size=num_steps)
        rates = tf.TensorArray(tf.float32, size=num_steps)
        id_keys = [k for k in EXAMPLE_ID_FEATURES
                   if self.config.record_steps and k in iterator.element_spec]
        ids = tf.TensorArray(tf.int32, size=num_steps)  # [steps, len(id_keys), GB]
        for i in tf.range(num_steps):
            features = next(iterator)
            rates = rates.write(i, tf.cast(self.schedule(self.optimizer.iterations), tf.float32))
            step_features = {k: features[k] for k in MODEL_FEATURES + LOSS_FEATURES}
            mems, loss_share, grad_norm = self.strategy.run(self._replica_step,
                                                            args=(step_features, mems))
            losses = losses.write(i, self.strategy.reduce(tf.distribute.ReduceOp.SUM,
                                                          loss_share, axis=None))
            norms = norms.write(i, self.strategy.reduce(tf.distribute.ReduceOp.MEAN,
                                                        grad_norm, axis=None))
            if id_keys:
                ids = ids.write(i, tf.stack([tf.cast(self.strategy.gather(features[k], axis=0),
                                                     tf.int32) for k in id_keys]))
            self.global_step.assign_add(1)
        stats = dict(loss=losses.stack(), grad_norm=norms.stack(), learning_rate=rates.stack())
        if id_keys:
            stacked = ids.stack()
            stats.update({k: stacked[:, j] for j, k in enumerate(id_keys)})
        return mems, stats

    # ------------------------------------------------------------------ the run
    def restore(self) -> Optional[str]:
        """Newest readable checkpoint of model_dir, else init_checkpoint; returns what was used."""
        path = self.checkpoints.restore_latest()
        if path is None and self.config.init_checkpoint:
            checkpointing.load_model_weights(self.model, self.config.init_checkpoint)
            path = self.config.init_checkpoint
        return path

    def _peak_flops(self) -> float:
        if self.config.peak_tflops:
            return self.config.peak_tflops * 1e12 * self.num_replicas
        peak = device_peak_flops(self.config.precision)
        if peak is None:  # CPU or an unknown device: measured matmul throughput
            peak = measure_matmul_peak()
            logging.info("MFU denominator: measured dense matmul peak %.1f GFLOP/s per device",
                         peak / 1e9)
        return peak * self.num_replicas

    def train(self) -> TrainResult:
        cfg = self.config
        restored = self.restore()
        start_step = int(self.global_step.numpy())
        if restored:
            logging.info("Resuming from %s at step %d", restored, start_step)
        tf.io.gfile.makedirs(cfg.model_dir)
        if self.is_chief:
            self.model_config.to_json_file(os.path.join(cfg.model_dir, "xlnet_config.json"))
            with tf.io.gfile.GFile(os.path.join(cfg.model_dir, "run_config.json"), "w") as f:
                f.write(cfg.to_json_string())
        if start_step >= cfg.train_steps:
            logging.info("model_dir already holds step %d >= --train_steps=%d; nothing to do.",
                         start_step, cfg.train_steps)
            return TrainResult(start_step, start_step, [], restored)

        dataset = self.strategy.distribute_datasets_from_function(
            lambda context: self.dataset_fn(context, start_step))
        iterator = iter(dataset)
        mems = self.distribute_memory()
        logger = MetricsLogger(cfg.model_dir, enabled=self.is_chief, total_steps=cfg.train_steps,
                               tokens_per_step=cfg.train_batch_size * self.data_shape.seq_len,
                               flops_per_step=self.step_flops.train_per_step,
                               peak_flops=self._peak_flops())
        step_log = (tf.io.gfile.GFile(os.path.join(cfg.model_dir, "steps.jsonl"), "a")
                    if cfg.record_steps and self.is_chief else None)
        history: List[dict] = []
        step = start_step
        try:
            while step < cfg.train_steps:
                num_steps = self._next_loop_length(step)
                t0 = time.perf_counter()
                try:
                    mems, stats = self._loop(iterator, mems, tf.constant(num_steps, tf.int32))
                    stats = {k: v.numpy() for k, v in stats.items()}
                except tf.errors.OutOfRangeError as e:
                    raise DataExhaustedError(
                        f"The input data ran out at step {step} of --train_steps={cfg.train_steps}. "
                        "Prepare more data or passes (data_prep/create_tfrecords.py --num_passes) "
                        "or lower --train_steps.") from e
                elapsed = time.perf_counter() - t0
                records = self._step_records(step, stats)
                bad = [r for r in records if not np.isfinite(r["loss"])]
                if bad:
                    raise TrainingDivergedError(
                        f"The training loss became {bad[0]['loss']} at step {bad[0]['step']}. "
                        f"Training stopped without saving; the last good checkpoint in "
                        f"{cfg.model_dir} is {self.checkpoints.latest_path() or 'none'}. Lower "
                        "--learning_rate, raise --warmup_steps, check --clip_norm or use "
                        "--precision=float32 / mixed_bfloat16.")
                history.extend(records)
                step += num_steps
                if step_log is not None:
                    for r in records:
                        step_log.write(json.dumps(r) + "\n")
                    step_log.flush()
                logger.record_loop(step, records, elapsed, compiled=(len(history) == num_steps))
                if step % cfg.log_steps == 0 or step == cfg.train_steps:
                    logger.write(step)
                if step % cfg.save_steps == 0 or step == cfg.train_steps:
                    self.gather_memory(mems)
                    self.checkpoints.save(step)
        finally:
            if step_log is not None:
                step_log.close()
            logger.close()
        return TrainResult(start_step, step, history, restored)

    def _next_loop_length(self, step: int) -> int:
        """Loops end exactly at log, save and final steps."""
        cfg = self.config
        boundaries = [cfg.train_steps]
        for every in (cfg.log_steps, cfg.save_steps):
            boundaries.append((step // every + 1) * every)
        return min(cfg.steps_per_loop, min(boundaries) - step)

    @staticmethod
    def _step_records(first_step: int, stats: Dict[str, np.ndarray]) -> List[dict]:
        records = []
        for i in range(len(stats["loss"])):
            r = {"step": first_step + i + 1, "loss": float(stats["loss"][i]),
                 "grad_norm": float(stats["grad_norm"][i]),
                 "learning_rate": float(stats["learning_rate"][i])}
            for k in EXAMPLE_ID_FEATURES:
                if k in stats:
                    r[k] = stats[k][i].tolist()
            records.append(r)
        return records
