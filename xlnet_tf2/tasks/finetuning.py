"""The fine-tuning driver: task model + per-example loss + dataset -> trained, evaluated,
best checkpoint kept.

The loop is the pretraining one (xlnet_tf2/training/trainer.py `Trainer`): the same strategy
handling, step (per-replica gradients of the replica's share of the global-mean loss, summed
across replicas, clipped to a global norm, applied once; loss scaling under mixed_float16),
`steps_per_loop` steps per tf.function call, NaN stop, checkpoint manager with
corrupt-checkpoint fallback and metrics logger (loss, tokens/s, MFU). This module adds the
task's loss (a mean over examples), layer-wise learning-rate decay (layer_decay.py, applied by
the optimizer's per-variable multipliers), `--init_checkpoint` into the backbone, and the
evaluation every `eval_every` steps with best-checkpoint keeping (the loop's callback).

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
from typing import Callable, Optional

import keras
import tensorflow as tf
from absl import logging

from xlnet_tf2.models.saving import restore_weights
from xlnet_tf2.training.layer_decay import layer_lr_multipliers
from xlnet_tf2.training import optimization
from xlnet_tf2.training.flops import pretrain_step_flops
from xlnet_tf2.tasks.finetune_config import FinetuneConfig  # noqa: F401 (re-export)
from xlnet_tf2.training.trainer import RunSettings, Trainer, TrainerConfig


def init_backbone(model: keras.Model, path: str) -> str:
    """Loads backbone weights into `model.transformer` from one of our pretraining checkpoints,
    a converted release directory (xlnet_tf2.load_pretrained layout) or a fine-tuned model_dir.
    Task heads are left as initialized; unmatched checkpoint values (LM bias, optimizer) are
    ignored. Raises if the backbone's weights are not all in the checkpoint."""
    return restore_weights(model.transformer, path, source="--init_checkpoint")


def trainable_variables(model: keras.Model):
    """Every trainable variable but mask_emb, which only feeds the pretraining query stream
    and gets no gradient in fine-tuning."""
    unused = {id(model.transformer.mask_emb)}
    return [v for v in model.trainable_variables if id(v) not in unused]


def create_optimizer(model: keras.Model, cfg: FinetuneConfig) -> keras.optimizers.Optimizer:
    """The fine-tuning AdamW (layer-wise learning rates) for `model`, built; wrapped in a
    LossScaleOptimizer under mixed_float16. Call inside the strategy's scope."""
    opt = cfg.optimizer
    optimizer, _ = optimization.create_optimizer(
        model, learning_rate=opt.learning_rate, warmup_steps=opt.warmup_steps,
        total_steps=cfg.loop.train_steps, weight_decay=opt.weight_decay,
        epsilon=opt.adam_epsilon, bias_correction=opt.adam_bias_correction,
        loss_scaling=cfg.loop.precision == "mixed_float16", variables=trainable_variables(model),
        lr_multipliers=layer_lr_multipliers(model, cfg.layer_decay))
    return optimizer


@dataclasses.dataclass
class FinetuneResult:
    final_step: int
    best: Optional[dict]
    evaluations: list
    last_log: Optional[dict]
    start_step: int = 0
    steps: list = dataclasses.field(default_factory=list)  # one record per step run


class FinetuneRunner:
    """Owns the task model's Trainer, the evaluations and the best checkpoint of one run.

    Args:
      cfg: run settings.
      model_fn: () -> task model with a `transformer` attribute and `dummy_inputs(seq_len)`.
      loss_fn: (outputs, features) -> per-example float32 loss [b].
      dataset_fn: (input_context, start_step) -> tf.data.Dataset of per-replica training
        batches from that step on (repeated, static shapes; batches.global_batches_fn), or
        (input_context) -> batches from the start (then a resumed run re-reads the data from
        its beginning); `features` holds the model inputs and the loss inputs.
      eval_fn: (model) -> dict of metrics (must include cfg.best_metric), or None.
      seq_len: tokens per example (for tokens/s and MFU).
      strategy: a tf.distribute strategy (xlnet_tf2.training.distribution.resolve_strategy).
    """

    def __init__(self, cfg: FinetuneConfig, model_fn: Callable[[], keras.Model],
                 loss_fn: Callable, dataset_fn: Callable, eval_fn: Optional[Callable],
                 seq_len: int, strategy: Optional[tf.distribute.Strategy] = None,
                 tokens_per_example: Optional[int] = None):
        self.cfg = cfg
        self.task_loss_fn = loss_fn
        self.eval_fn = eval_fn
        self.seq_len = seq_len
        self.tokens_per_example = tokens_per_example or seq_len
        self._best: Optional[dict] = None
        self._evaluations: list = []
        strategy = strategy or tf.distribute.get_strategy()

        def build_model():
            model = model_fn()
            model(model.dummy_inputs(seq_len), training=False)
            return model

        if cfg.best_metric is None:
            raise ValueError("FinetuneConfig.best_metric must be set (with_default_metric).")
        self.trainer = Trainer(
            TrainerConfig(loop=cfg.loop, optimizer=cfg.optimizer,
                          callback_steps=cfg.eval_every if eval_fn is not None else None),
            model_fn=build_model, loss_fn=self._loss_sum, count_fn=self._example_count,
            dataset_fn=_with_start_step(dataset_fn), strategy=strategy,
            trainable_fn=trainable_variables,
            lr_multipliers_fn=lambda model: layer_lr_multipliers(model, cfg.layer_decay),
            init_fn=self._load_init_checkpoint,
            callback=self._evaluate if eval_fn is not None else None,
            run_settings=RunSettings(type(cfg), cfg, {"seq_len": seq_len}),
            tokens_per_step=cfg.train_batch_size * self.tokens_per_example,
            flops_per_step=0.0)
        self.strategy = self.trainer.strategy
        self.num_replicas = self.trainer.num_replicas
        self.model = self.trainer.model
        self.optimizer = self.trainer.optimizer
        self.global_step = self.trainer.global_step
        self.trainer.run_files = {"xlnet_config.json": self.model.config.to_json_string()}
        self.trainer.flops_per_step = pretrain_step_flops(
            self.model.config, seq_len=seq_len, mem_len=0, num_predict=0,
            global_batch_size=cfg.train_batch_size * max(1, self.tokens_per_example // seq_len),
            num_replicas=self.num_replicas).train_per_step

    # ------------------------------------------------------------------ hooks of the loop
    def _loss_sum(self, features, state):
        outputs = self.model(features, training=True)
        per_example = tf.cast(self.task_loss_fn(outputs, features), tf.float32)
        return tf.reduce_sum(per_example), state

    @staticmethod
    def _example_count(features):
        first = next(iter(features.values()))
        return tf.cast(tf.shape(first)[0], tf.float32)

    def _load_init_checkpoint(self) -> Optional[str]:
        if not self.cfg.init_checkpoint:
            return None
        return init_backbone(self.model, self.cfg.init_checkpoint)

    # ------------------------------------------------------------------ evaluation
    def _is_better(self, value: float, best: Optional[dict]) -> bool:
        if best is None:
            return True
        return value > best["metric"] if self.cfg.best_mode == "max" else value < best["metric"]

    def _evaluate(self, step: int) -> None:
        """The loop's callback: evaluate, record, keep the best model weights."""
        cfg = self.cfg
        with self.strategy.scope():  # evaluation runs on the run's replicas (inference.py)
            metrics = {k: float(v) for k, v in self.eval_fn(self.model).items()}
        if cfg.best_metric not in metrics:
            raise ValueError(f"--best_metric={cfg.best_metric!r} is not among the evaluation "
                             f"metrics {sorted(metrics)}.")
        record = {"step": step, **metrics}
        self._evaluations.append(record)
        if not self.trainer.is_chief:
            return
        with tf.io.gfile.GFile(os.path.join(cfg.model_dir, "eval_results.jsonl"), "a") as f:
            f.write(json.dumps(record) + "\n")
        logging.info("eval at step %d: %s", step, record)
        print(f"eval step {step}: " + ", ".join(f"{k} {v:.4f}" for k, v in metrics.items()),
              flush=True)
        if self._is_better(metrics[cfg.best_metric], self._best):
            best = {"step": step, "metric": metrics[cfg.best_metric],
                    "metric_name": cfg.best_metric, **metrics}
            best_dir = os.path.join(cfg.model_dir, "best")
            if tf.io.gfile.exists(best_dir):
                tf.io.gfile.rmtree(best_dir)
            best["checkpoint"] = tf.train.Checkpoint(model=self.model).write(
                os.path.join(best_dir, f"ckpt-{step}"))
            with tf.io.gfile.GFile(os.path.join(cfg.model_dir, "best_eval.json"), "w") as f:
                f.write(json.dumps(best, indent=2) + "\n")
            self._best = best

    # ------------------------------------------------------------------ the run
    def restore(self) -> Optional[str]:
        return self.trainer.restore()

    def train(self) -> FinetuneResult:
        cfg = self.cfg
        tf.io.gfile.makedirs(cfg.model_dir)
        best_path = os.path.join(cfg.model_dir, "best_eval.json")
        self._best, self._evaluations = None, []
        if tf.io.gfile.exists(best_path):
            with tf.io.gfile.GFile(best_path) as f:
                self._best = json.load(f)
        result = self.trainer.train()
        return FinetuneResult(result.final_step, self._best, self._evaluations, result.last_log,
                              result.start_step, result.steps)


def _with_start_step(dataset_fn: Callable) -> Callable:
    """dataset_fn(context, start_step), also for a dataset_fn that takes only the context."""
    import inspect

    if len(inspect.signature(dataset_fn).parameters) >= 2:
        return dataset_fn
    return lambda context, start_step: dataset_fn(context)


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
