"""The fine-tuning driver: task model + per-example loss + dataset -> trained, evaluated,
best checkpoint kept.

It is built from the pretraining library's parts (xlnet_tf2/training): the strategy
resolution, the AdamW and its warmup/linear-decay schedule and weight-decay exemptions, the
metrics logger (loss, tokens/s, MFU), and the pretraining checkpoint layout for
`--init_checkpoint`. The step is the same shape as the pretraining step: per-replica
gradients of the replica's share of the global-mean loss, summed across replicas, clipped to a
global norm, applied once. (Pretrainer is specialised to the LM loss and the memory; when
xlnet_tf2/training grows a generic `train(model, loss_fn, dataset_fn, ...)`, this module
should shrink to a call of it.)

model_dir layout:
  ckpt-N.*            latest training checkpoints (model, optimizer, step) for resuming
  best/ckpt-*         the model weights of the best evaluation so far
  best_eval.json      {"step", "metric", metrics...} of that evaluation
  eval_results.jsonl  every evaluation
  xlnet_config.json   the backbone config; task.json (written by the task runner)
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from typing import Callable, Dict, Optional

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from xlnet_tf2.finetuning.layer_decay import LayerwiseAdamW, layer_lr_multipliers
from xlnet_tf2.training.flops import measure_matmul_peak, device_peak_flops, pretrain_step_flops
from xlnet_tf2.training.metrics_logger import MetricsLogger
from xlnet_tf2.training.optimization import LinearWarmupLinearDecay, decay_exempt_variables

PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16")


@dataclasses.dataclass(frozen=True)
class FinetuneConfig:
    """Settings of one fine-tuning run (see experiments/run_classifier.py for each flag)."""

    model_dir: str
    train_steps: int
    train_batch_size: int = 32
    learning_rate: float = 2e-5
    warmup_steps: int = 0
    weight_decay: float = 0.0
    adam_epsilon: float = 1e-6
    clip_norm: float = 1.0
    layer_decay: float = 1.0
    eval_every: int = 1000
    log_steps: int = 100
    keep_checkpoints: int = 1
    precision: str = "float32"
    jit_compile: bool = False
    seed: int = 0
    init_checkpoint: Optional[str] = None
    best_metric: str = "accuracy"
    best_mode: str = "max"

    def __post_init__(self):
        for name in ("train_steps", "train_batch_size", "eval_every", "log_steps",
                     "keep_checkpoints"):
            if getattr(self, name) <= 0:
                raise ValueError(f"--{name} must be positive, got {getattr(self, name)}.")
        if self.precision not in PRECISIONS:
            raise ValueError(f"--precision must be one of {PRECISIONS}, got {self.precision!r}.")
        if self.best_mode not in ("max", "min"):
            raise ValueError(f"best_mode must be 'max' or 'min', got {self.best_mode!r}.")


def init_backbone(model: keras.Model, path: str) -> str:
    """Loads backbone weights into `model.transformer` from one of our pretraining checkpoints,
    a converted release directory (xlnet_tf2.load_pretrained layout) or a fine-tuned model_dir.
    Task heads are left as initialized; unmatched checkpoint values (LM bias, optimizer) are
    ignored. Raises if the backbone's weights are not all in the checkpoint."""
    resolved = tf.train.latest_checkpoint(path) if tf.io.gfile.isdir(path) else path
    if not resolved or not tf.io.gfile.exists(resolved + ".index"):
        raise FileNotFoundError(f"--init_checkpoint={path!r} names no checkpoint (expected a "
                                "prefix such as .../ckpt-1000 or a directory holding one).")
    status = tf.train.Checkpoint(model=tf.train.Checkpoint(transformer=model.transformer)).read(resolved)
    try:
        status.assert_existing_objects_matched()
    except AssertionError as e:
        raise ValueError(f"--init_checkpoint={path!r} does not hold this backbone's weights "
                         f"(same model config?): {e}") from None
    status.expect_partial()
    return resolved


def create_optimizer(model: keras.Model, cfg: FinetuneConfig) -> LayerwiseAdamW:
    schedule = LinearWarmupLinearDecay(cfg.learning_rate, cfg.warmup_steps, cfg.train_steps)
    optimizer = LayerwiseAdamW(learning_rate=schedule, epsilon=cfg.adam_epsilon,
                               weight_decay=cfg.weight_decay)
    optimizer.exclude_from_weight_decay(var_list=decay_exempt_variables(model))
    optimizer.set_lr_multipliers(layer_lr_multipliers(model, cfg.layer_decay))
    optimizer.build([v for v in model.trainable_variables
                     if v is not model.transformer.mask_emb])
    return optimizer


@dataclasses.dataclass
class FinetuneResult:
    final_step: int
    best: Optional[dict]
    evaluations: list
    last_log: Optional[dict]


class FinetuneRunner:
    """Owns the task model, optimizer and checkpoints of one fine-tuning run.

    Args:
      cfg: run settings.
      model_fn: () -> task model with a `transformer` attribute and `dummy_inputs(seq_len)`.
      loss_fn: (outputs, features) -> per-example float32 loss [b].
      dataset_fn: (input_context) -> tf.data.Dataset of per-replica training batches (repeated,
        static shapes); `features` holds the model inputs and the loss inputs.
      eval_fn: (model) -> dict of metrics (must include cfg.best_metric), or None.
      seq_len: tokens per example (for tokens/s and MFU).
      strategy: a tf.distribute strategy (xlnet_tf2.training.distribution.resolve_strategy).
    """

    def __init__(self, cfg: FinetuneConfig, model_fn: Callable[[], keras.Model],
                 loss_fn: Callable, dataset_fn: Callable, eval_fn: Optional[Callable],
                 seq_len: int, strategy: Optional[tf.distribute.Strategy] = None,
                 tokens_per_example: Optional[int] = None):
        self.cfg = cfg
        self.loss_fn = loss_fn
        self.dataset_fn = dataset_fn
        self.eval_fn = eval_fn
        self.seq_len = seq_len
        self.tokens_per_example = tokens_per_example or seq_len
        self.strategy = strategy or tf.distribute.get_strategy()
        self.num_replicas = self.strategy.num_replicas_in_sync
        if cfg.train_batch_size % self.num_replicas:
            raise ValueError(f"--train_batch_size={cfg.train_batch_size} must be divisible by "
                             f"the number of replicas ({self.num_replicas}).")
        keras.mixed_precision.set_global_policy(cfg.precision)
        keras.utils.set_random_seed(cfg.seed)
        self.loss_scaling = cfg.precision == "mixed_float16"
        with self.strategy.scope():
            self.model = model_fn()
            self.model(self.model.dummy_inputs(seq_len), training=False)
            optimizer = create_optimizer(self.model, cfg)
            self.schedule = optimizer._learning_rate  # the LinearWarmupLinearDecay instance
            if self.loss_scaling:
                optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
                optimizer.build([v for v in self.model.trainable_variables
                                 if v is not self.model.transformer.mask_emb])
            self.optimizer = optimizer
            self.global_step = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step",
                                           aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
        # mask_emb only feeds the pretraining query stream; it gets no gradient here.
        unused = {id(self.model.transformer.mask_emb)}
        self._trainable = [v for v in self.model.trainable_variables if id(v) not in unused]
        self.checkpoint = tf.train.Checkpoint(model=self.model, optimizer=self.optimizer,
                                              global_step=self.global_step)
        self.manager = tf.train.CheckpointManager(self.checkpoint, cfg.model_dir,
                                                  max_to_keep=cfg.keep_checkpoints)
        self._grads = tf.function(self._forward_backward, jit_compile=cfg.jit_compile,
                                  reduce_retracing=True)
        self._step = tf.function(self._distributed_step)

    # ------------------------------------------------------------------ the step
    def _forward_backward(self, features, global_count):
        with tf.GradientTape() as tape:
            outputs = self.model(features, training=True)
            per_example = tf.cast(self.loss_fn(outputs, features), tf.float32)
            loss_sum = tf.reduce_sum(per_example)
            loss = loss_sum / global_count
            if self.loss_scaling:
                loss = self.optimizer.scale_loss(loss)
        return tape.gradient(loss, self._trainable), loss_sum

    def _replica_step(self, features):
        context = tf.distribute.get_replica_context()
        first = next(iter(features.values()))
        local_count = tf.cast(tf.shape(first)[0], tf.float32)
        global_count = context.all_reduce(tf.distribute.ReduceOp.SUM, local_count)
        grads, loss_sum = self._grads(features, global_count)
        grads = context.all_reduce(tf.distribute.ReduceOp.SUM, grads)
        scale = (tf.cast(self.optimizer.dynamic_scale, tf.float32) if self.loss_scaling
                 else tf.constant(1.0, tf.float32))
        norm = tf.linalg.global_norm(grads)
        grads, _ = tf.clip_by_global_norm(grads, self.cfg.clip_norm * scale, use_norm=norm)
        self.optimizer.apply(grads, self._trainable)
        return loss_sum / global_count, norm / scale

    def _distributed_step(self, iterator):
        features = next(iterator)
        rate = tf.cast(self.schedule(self.optimizer.iterations), tf.float32)
        loss, norm = self.strategy.run(self._replica_step, args=(features,))
        self.global_step.assign_add(1)
        return (self.strategy.reduce(tf.distribute.ReduceOp.SUM, loss, axis=None),
                self.strategy.reduce(tf.distribute.ReduceOp.MEAN, norm, axis=None), rate)

    # ------------------------------------------------------------------ evaluation
    def _is_better(self, value: float, best: Optional[dict]) -> bool:
        if best is None:
            return True
        return value > best["metric"] if self.cfg.best_mode == "max" else value < best["metric"]

    def _evaluate(self, step: int, best: Optional[dict]) -> (dict, Optional[dict]):
        cfg = self.cfg
        metrics = {k: float(v) for k, v in self.eval_fn(self.model).items()}
        if cfg.best_metric not in metrics:
            raise ValueError(f"--best_metric={cfg.best_metric!r} is not among the evaluation "
                             f"metrics {sorted(metrics)}.")
        record = {"step": step, **metrics}
        with tf.io.gfile.GFile(os.path.join(cfg.model_dir, "eval_results.jsonl"), "a") as f:
            f.write(json.dumps(record) + "\n")
        logging.info("eval at step %d: %s", step, record)
        print(f"eval step {step}: " + ", ".join(f"{k} {v:.4f}" for k, v in metrics.items()),
              flush=True)
        if self._is_better(metrics[cfg.best_metric], best):
            best = {"step": step, "metric": metrics[cfg.best_metric],
                    "metric_name": cfg.best_metric, **metrics}
            best_dir = os.path.join(cfg.model_dir, "best")
            if tf.io.gfile.exists(best_dir):
                tf.io.gfile.rmtree(best_dir)
            best["checkpoint"] = tf.train.Checkpoint(model=self.model).write(
                os.path.join(best_dir, f"ckpt-{step}"))
            with tf.io.gfile.GFile(os.path.join(cfg.model_dir, "best_eval.json"), "w") as f:
                f.write(json.dumps(best, indent=2) + "\n")
        return record, best

    # ------------------------------------------------------------------ the run
    def restore(self) -> Optional[str]:
        if self.manager.latest_checkpoint:
            self.checkpoint.read(self.manager.latest_checkpoint).assert_consumed()
            return self.manager.latest_checkpoint
        if self.cfg.init_checkpoint:
            return init_backbone(self.model, self.cfg.init_checkpoint)
        return None

    def _peak_flops(self) -> float:
        peak = device_peak_flops(self.cfg.precision)
        return (peak or measure_matmul_peak()) * self.num_replicas

    def train(self) -> FinetuneResult:
        cfg = self.cfg
        tf.io.gfile.makedirs(cfg.model_dir)
        restored = self.restore()
        step = int(self.global_step.numpy())
        if restored:
            logging.info("Starting from %s at step %d", restored, step)
        self.model.config.to_json_file(os.path.join(cfg.model_dir, "xlnet_config.json"))
        best_path = os.path.join(cfg.model_dir, "best_eval.json")
        best = None
        if tf.io.gfile.exists(best_path):
            with tf.io.gfile.GFile(best_path) as f:
                best = json.load(f)
        flops = pretrain_step_flops(self.model.config, seq_len=self.seq_len, mem_len=0,
                                    num_predict=0, global_batch_size=cfg.train_batch_size *
                                    max(1, self.tokens_per_example // self.seq_len),
                                    num_replicas=self.num_replicas)
        logger = MetricsLogger(cfg.model_dir, enabled=True, total_steps=cfg.train_steps,
                               tokens_per_step=cfg.train_batch_size * self.tokens_per_example,
                               flops_per_step=flops.train_per_step, peak_flops=self._peak_flops())
        dataset = self.strategy.distribute_datasets_from_function(self.dataset_fn)
        iterator = iter(dataset)
        evaluations, last_log, first = [], None, True
        try:
            while step < cfg.train_steps:
                t0 = time.perf_counter()
                loss, norm, rate = self._step(iterator)
                loss = float(loss)
                elapsed = time.perf_counter() - t0
                step += 1
                if not np.isfinite(loss):
                    raise FloatingPointError(
                        f"The fine-tuning loss became {loss} at step {step}; lower "
                        "--learning_rate or raise --warmup_steps.")
                logger.record_loop(step, [{"step": step, "loss": loss, "grad_norm": float(norm),
                                           "learning_rate": float(rate)}], elapsed, compiled=first)
                first = False
                if step % cfg.log_steps == 0 or step == cfg.train_steps:
                    last_log = logger.write(step)
                if self.eval_fn is not None and (step % cfg.eval_every == 0
                                                 or step == cfg.train_steps):
                    record, best = self._evaluate(step, best)
                    evaluations.append(record)
                if step % cfg.eval_every == 0 or step == cfg.train_steps:
                    self.manager.save(checkpoint_number=step)
        finally:
            logger.close()
        return FinetuneResult(step, best, evaluations, last_log)


def restore_for_inference(model: keras.Model, model_dir: str, which: str = "best") -> str:
    """Loads a fine-tuned model's weights: `best` (best/ckpt-*, falling back to the latest
    training checkpoint when no evaluation ran) or `latest`."""
    path = None
    if which == "best":
        path = tf.train.latest_checkpoint(os.path.join(model_dir, "best")) or \
            _best_from_json(model_dir)
    if path is None:
        path = tf.train.latest_checkpoint(model_dir)
    if path is None:
        raise FileNotFoundError(f"--model_dir={model_dir!r} holds no checkpoint; train first.")
    status = tf.train.Checkpoint(model=model).read(path)
    status.assert_existing_objects_matched().expect_partial()
    return path


def _best_from_json(model_dir: str) -> Optional[str]:
    path = os.path.join(model_dir, "best_eval.json")
    if not tf.io.gfile.exists(path):
        return None
    with tf.io.gfile.GFile(path) as f:
        return json.load(f).get("checkpoint")
