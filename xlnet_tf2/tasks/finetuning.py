"""Fine-tuning as a Task: a task model, a per-example loss, training batches and an evaluation;
the loop is the pretraining one (xlnet_tf2/training/trainer.py). What the task gives the loop
and the model_dir it writes: `FinetuneTask`; the commands: docs/FINETUNING.md.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import os
from typing import Callable, Dict, Optional, Tuple

import keras
import tensorflow as tf
from absl import logging

from xlnet_tf2 import fileio, run_dir, task_registry
from xlnet_tf2.config import XLNetConfig
from xlnet_tf2.config_flags import RunConfigError
from xlnet_tf2.models import pretrained
from xlnet_tf2.models.model_inputs import model_inputs
from xlnet_tf2.tasks.finetune_config import FinetuneConfig
from xlnet_tf2.tasks.finetuned_model import load_task_model
from xlnet_tf2.tasks.head_spec import HeadSpec
from xlnet_tf2.training.metrics_logger import pretrain_step_flops
from xlnet_tf2.training.layer_decay import layer_lr_multipliers
from xlnet_tf2.training.task import RunSettings, Task
from xlnet_tf2.training import distribution
from xlnet_tf2.training.trainer import TrainResult, run_task
from xlnet_tf2.tokenizers.sentencepiece_tokenizer import SentencePieceTokenizer

EVAL_RESULTS_FILE = "eval_results.jsonl"


def init_backbone(model: keras.Model, path: str) -> str:
    """Loads backbone weights into `model.transformer` from --init_checkpoint `path`: whatever
    `from_pretrained` takes (a pretraining run, a converted release, a fine-tuned model_dir's
    backbone at its best checkpoint, a HuggingFace directory or hub id, a release name, an
    original release), read by the one loader (models/pretrained.py's read_weights), or one
    of our checkpoint prefixes. The task head is left as initialized; values the backbone
    does not have (LM bias, optimizer) are ignored. Returns what was read."""
    return pretrained.read_weights(model.transformer, path)


# The fine-tuning run's settings of the backbone: this run's dropout, no memory, no bi_data
# (whatever the pretraining run used).
def _runtime(config: FinetuneConfig) -> dict:
    return dict(dropout=config.model.dropout, dropatt=config.model.dropatt, mem_len=0,
                reuse_len=0, bi_data=False)


def backbone_config(config: FinetuneConfig) -> XLNetConfig:
    """The backbone's XLNetConfig: the architecture of --model_config, default
    --init_checkpoint's (whatever the loader takes: models/pretrained.py's architecture), with
    fine-tuning's run-time settings. A missing --init_checkpoint fails here, before any data
    is read."""
    if config.init_checkpoint:
        pretrained.model_directory(config.init_checkpoint, source="--init_checkpoint")
    if config.model_config or not config.init_checkpoint:
        return XLNetConfig.resolve(run_dir.architecture_file(config.model_config),
                                   **_runtime(config))
    return pretrained.architecture(config.init_checkpoint, **_runtime(config))


def spm_model_of(config: FinetuneConfig) -> str:
    """--spm_model, default the spiece.model of --init_checkpoint's model directory (where the
    loader reads it: models/pretrained.py's model_directory)."""
    directory = None
    if config.init_checkpoint and not config.spm_model:
        directory = pretrained.model_directory(config.init_checkpoint,
                                               source="--init_checkpoint").directory
    return run_dir.spm_model_file(config.spm_model, directory)


def backbone_tokenizer(spm_model: str, lower: bool,
                       xlnet_config: XLNetConfig) -> SentencePieceTokenizer:
    """The tokenizer of --spm_model, refused in one line when it has more pieces than the
    backbone's embedding has rows (n_token)."""
    tokenizer = SentencePieceTokenizer.from_file(spm_model, lower=lower)
    if tokenizer.vocab_size > xlnet_config.n_token:
        raise RunConfigError(f"--spm_model has {tokenizer.vocab_size} pieces but the "
                             f"model's n_token is {xlnet_config.n_token}.")
    return tokenizer


@dataclasses.dataclass
class FinetuneResult:
    final_step: int
    best: Optional[dict]
    evaluations: list
    last_log: Optional[dict]
    start_step: int = 0
    steps: list = dataclasses.field(default_factory=list)  # one record per step run

    def summary(self) -> str:
        """What the fine-tuning commands print at the end."""
        return json.dumps({"final_step": self.final_step, "best": self.best}, indent=2)


@dataclasses.dataclass
class EvaluationResult:
    """What evaluation without training (--nodo_train) gives: the metrics of --model_dir's
    trained model (its `checkpoint`) on the evaluation data."""
    model_dir: str
    checkpoint: str
    kind: str
    metrics: Dict[str, float]

    def summary(self) -> str:
        """What the fine-tuning commands print."""
        return json.dumps(dataclasses.asdict(self), indent=2)


class FinetuneTask(Task):
    """One fine-tuning run.

        task = FinetuneTask(config, model_fn=..., loss_fn=..., dataset_fn=..., eval_fn=...,
                            seq_len=128)
        result = task.result(Trainer(task, strategy=strategy).train())   # + the best evaluation

    ClassificationTask, SquadTask, RaceTask and TokenClassificationTask (classification.py,
    squad.py, race.py, token_classification.py) build these pieces from their configuration
    trees (finetune_config.py, token_classification_config.py) and say how they evaluate
    (`evaluation`); their commands run them with `run_finetuning(ClassificationTask, config)`:
    `run_task` (training/trainer.py), or with --nodo_train `evaluate_trained`. What this
    class gives the loop: the loss as a mean over the global batch's examples (`loss_count` =
    examples), layer-wise learning-rate decay (training/layer_decay.py, applied by the
    optimizer's per-variable multipliers), `--init_checkpoint` loaded into the backbone,
    mask_emb left out of training (it only feeds pretraining's query stream), and every
    `eval_every` steps the evaluation with best-checkpoint keeping.

    model_dir layout:
      ckpt-N.*            latest training checkpoints (model, optimizer, step) for resuming
      best/ckpt-N         the model weights of the best evaluation so far (a checkpoint
                          directory with its `checkpoint` state file, swapped in whole)
      best_eval.json      {"step", "metric", metrics..., "checkpoint": "best/ckpt-N"} of that
                          evaluation (the path relative to model_dir: the run is relocatable)
      eval_results.jsonl  every evaluation
      xlnet_config.json   the backbone's architecture; task.json (what the task is, for
      spiece.model        export); the SentencePiece model; run_config.json (the settings)

    Args:
      config: run settings (FinetuneConfig or a task's subclass of it).
      model_fn: () -> task model with a `transformer` attribute and `dummy_inputs(seq_len)`.
      loss_fn: (outputs, features) -> per-example float32 loss [B] (tasks/losses.py).
      dataset_fn: (input_context, start_step) -> tf.data.Dataset of per-replica training
        batches from that step on (repeated, static shapes; data/finetune_batches.py), or
        (input_context) -> batches from the start (then a resumed run re-reads the data from
        its beginning); `features` holds the model inputs and the loss inputs.
      eval_fn: (model) -> dict of metrics (must include the best metric), or None.
      seq_len: tokens per example (for tokens/s and MFU).
      tokens_per_example: tokens per example when one example holds several sequences (RACE).
      spec: what the task is (task.json, for evaluation and export), written into model_dir.
      spm_model: the SentencePiece model, copied into model_dir.
    """

    def __init__(self, config: FinetuneConfig, *, model_fn: Callable[[], keras.Model],
                 loss_fn: Callable, dataset_fn: Callable, eval_fn: Optional[Callable],
                 seq_len: int, tokens_per_example: Optional[int] = None,
                 spec: Optional[HeadSpec] = None, spm_model: Optional[str] = None):
        config = config.with_default_metric(config.default_metric) if config.default_metric \
            else config
        if config.best_metric is None:
            raise ValueError("FinetuneConfig.best_metric must be set (with_default_metric).")
        self.config = config
        self.model_fn, self.loss_fn, self.eval_fn = model_fn, loss_fn, eval_fn
        self.dataset_fn = _with_start_step(dataset_fn)
        self.seq_len = seq_len
        self.tokens_per_example = tokens_per_example or seq_len
        self.spec, self.spm_model = spec, spm_model
        self.eval_every = config.eval_every if eval_fn is not None else None
        read_best(config.model_dir)  # a damaged record stops the run before anything is written
        self.best: Optional[dict] = None
        self.evaluations: list = []
        self._model_config: Optional[XLNetConfig] = None

    # What names the evaluation data of the task's configuration (for messages).
    EVALUATION_DATA = "an evaluation file"

    @classmethod
    def kinds(cls) -> Tuple[str, ...]:
        """The kinds of model this task trains: the declared tasks naming it
        (task_registry.py's `finetune_task`)."""
        path = f"{cls.__module__}.{cls.__qualname__}"
        return tuple(d.name for d in task_registry.declared_tasks() if d.finetune_task == path)

    @classmethod
    def evaluation(cls, config: FinetuneConfig, spec: HeadSpec, tokenizer
                   ) -> Optional[Callable[[keras.Model], Dict[str, float]]]:
        """(model) -> the metrics of `config`'s evaluation data, read and laid out as `spec`
        (task.json) says with `tokenizer`; None when the configuration names no evaluation
        data. A task's training evaluates with it (eval_fn), and so does evaluation without
        training (`evaluate_trained`), on the model task.json describes."""
        raise NotImplementedError(f"{cls.__name__} does not say how it evaluates.")

    # ------------------------------------------------------------------ what to build
    def build_model(self) -> keras.Model:
        model = self.model_fn()
        model(model.dummy_inputs(self.seq_len), training=False)
        self._model_config = model.config
        return model

    def build_inputs(self, input_context, start_step: int) -> tf.data.Dataset:
        return self.dataset_fn(input_context, start_step)

    def initialize(self, model) -> Optional[str]:
        if not self.config.init_checkpoint:
            return None
        return init_backbone(model, self.config.init_checkpoint)

    def trainable_variables(self, model):
        """Every trainable variable but mask_emb, which only feeds the pretraining query
        stream and gets no gradient in fine-tuning."""
        unused = {id(model.transformer.mask_emb)}
        return [v for v in model.trainable_variables if id(v) not in unused]

    def lr_multipliers(self, model):
        return layer_lr_multipliers(model, self.config.layer_decay)

    # ------------------------------------------------------------------ the step
    def loss_count(self, features):
        first = next(iter(features.values()))
        return tf.cast(tf.shape(first)[0], tf.float32)

    def loss(self, model, features, state, training: bool = True, plan=None):
        outputs = model(model_inputs(model, features), training=training, plan=plan)
        per_example = tf.cast(self.loss_fn(outputs, features), tf.float32)
        return tf.reduce_sum(per_example), state

    # ------------------------------------------------------------------ around the loop
    def run_files(self, model):
        return {run_dir.ARCH_FILE: model.config.to_json_string()}

    def run_settings(self) -> RunSettings:
        return RunSettings(type(self.config), self.config, {"seq_len": self.seq_len})

    def on_train_begin(self, trainer) -> None:
        model_dir = self.config.model_dir
        if trainer.is_chief:
            if self.spec is not None:
                self.spec.write(model_dir)
            if self.spm_model:
                run_dir.copy_spm_model(self.spm_model, model_dir)
        self.best, self.evaluations = read_best(model_dir), []
        if trainer.is_chief and self.best is not None:
            self.best = relocatable_best(model_dir, self.best)

    def tokens_per_step(self, global_batch: int) -> int:
        return global_batch * self.tokens_per_example

    def flops_per_step(self, global_batch: int, num_replicas: int) -> float:
        sequences = global_batch * max(1, self.tokens_per_example // self.seq_len)
        return pretrain_step_flops(self._model_config, seq_len=self.seq_len, num_predict=0,
                                   global_batch_size=sequences,
                                   num_replicas=num_replicas).train_per_step

    # ------------------------------------------------------------------ evaluation
    def _is_better(self, value: float) -> bool:
        if self.best is None:
            return True
        if self.config.best_mode == "max":
            return value > self.best["metric"]
        return value < self.best["metric"]

    def evaluate(self, trainer, step: int) -> dict:
        """Evaluate, record, keep the best model weights."""
        cfg = self.config
        with trainer.strategy.scope():  # evaluation runs on the run's replicas (inference.py)
            metrics = {k: float(v) for k, v in self.eval_fn(trainer.model).items()}
        if cfg.best_metric not in metrics:
            raise ValueError(f"--best_metric={cfg.best_metric!r} is not among the evaluation "
                             f"metrics {sorted(metrics)}.")
        record = {"step": step, **metrics}
        self.evaluations.append(record)
        if not trainer.is_chief:
            return record
        fileio.append_line(os.path.join(cfg.model_dir, EVAL_RESULTS_FILE), json.dumps(record))
        logging.info("eval at step %d: %s", step, record)
        print(f"eval step {step}: " + ", ".join(f"{k} {v:.4f}" for k, v in metrics.items()),
              flush=True)
        if self._is_better(metrics[cfg.best_metric]):
            best = {"step": step, "metric": metrics[cfg.best_metric],
                    "metric_name": cfg.best_metric, **metrics,
                    "checkpoint": f"{run_dir.BEST_DIR}/ckpt-{step}"}
            save_best(trainer.model, cfg.model_dir, step)
            fileio.write_json_atomically(os.path.join(cfg.model_dir, run_dir.BEST_EVAL_FILE), best)
            self.best = best
        return record

    # ------------------------------------------------------------------ the run
    def result(self, trained: TrainResult) -> FinetuneResult:
        return FinetuneResult(trained.final_step, self.best, self.evaluations,
                              trained.last_log, trained.start_step, trained.steps)


def run_finetuning(task_class, config: FinetuneConfig):
    """What every fine-tuning command runs (xlnet-classify, xlnet-race, xlnet-squad,
    xlnet-tag): training (`run_task`) or, with --nodo_train, the evaluation of --model_dir's
    trained model (`evaluate_trained`). Returns a result whose summary() the command prints."""
    if config.do_train:
        return run_task(task_class, config)
    return evaluate_trained(task_class, config)


def evaluate_trained(task_class, config: FinetuneConfig) -> EvaluationResult:
    """--nodo_train: the trained model in --model_dir (its --checkpoint, best or latest)
    evaluated on the configuration's evaluation data with `task_class.evaluation`, laid out as
    its task.json says and tokenized by its spiece.model (--spm_model, --seq_len and the other
    layout flags are not read); the model_dir is only read."""
    distribution.apply_determinism(config.loop)  # before TensorFlow's runtime starts
    model, spec, spm_model = load_task_model(config.model_dir, None, config.checkpoint)
    kinds = task_class.kinds()
    if spec.kind not in kinds:
        raise RunConfigError(f"{config.model_dir}/task.json says {spec.kind!r}; this command "
                             f"evaluates {' or '.join(kinds)} models (xlnet-export serves any).")
    tokenizer = SentencePieceTokenizer.from_file(spm_model, lower=spec.lower)
    evaluate = task_class.evaluation(config, spec, tokenizer)
    if evaluate is None:
        raise RunConfigError(f"--nodo_train evaluates a trained model and needs evaluation "
                             f"data: give {task_class.EVALUATION_DATA}.")
    metrics = {k: float(v) for k, v in evaluate(model).items()}
    return EvaluationResult(config.model_dir, config.checkpoint, spec.kind, metrics)


def read_best(model_dir: str) -> Optional[dict]:
    """best_eval.json of a run (None if there is none); a damaged one raises ModelFilesError
    naming it."""
    path = os.path.join(model_dir, run_dir.BEST_EVAL_FILE)
    if not fileio.exists(path):
        return None
    fix = "Restore it, or delete it and best/ to keep the best from the next evaluation on."
    best = fileio.read_json_object(path, run_dir.ModelFilesError, "the best evaluation so far",
                                   fix)
    if not isinstance(best.get("metric"), (int, float)) or not isinstance(best.get("step"), int):
        raise run_dir.ModelFilesError(f"{path} holds no numeric \"metric\" and \"step\". {fix}")
    return best


def relocatable_best(model_dir: str, best: dict) -> dict:
    """`best` naming its checkpoint relative to model_dir, and best/ with its state file: what
    older versions wrote (an absolute path, no state file) is rewritten in place."""
    prefix = run_dir.best_checkpoint(model_dir)
    if prefix is None:
        return best
    relative = run_dir.relative_to(model_dir, prefix)
    best_dir = os.path.join(model_dir, run_dir.BEST_DIR)
    if not fileio.exists(os.path.join(best_dir, run_dir.CHECKPOINT_STATE)):
        run_dir.write_checkpoint_state(best_dir, [os.path.basename(prefix)])
    if best.get("checkpoint") != relative:
        best = {**best, "checkpoint": relative}
        fileio.write_json_atomically(os.path.join(model_dir, run_dir.BEST_EVAL_FILE), best)
    return best


def save_best(model: keras.Model, model_dir: str, step: int) -> str:
    """Writes MODEL_DIR/best/ckpt-STEP (the model's weights) as a checkpoint directory: the
    files first, then its `checkpoint` state file (relative name), then the older best's
    files are deleted, so a kill at any moment leaves a best/ whose state file names complete
    files. Returns the prefix."""
    best_dir = os.path.join(model_dir, run_dir.BEST_DIR)
    try:
        manager = tf.train.CheckpointManager(tf.train.Checkpoint(model=model), best_dir,
                                             max_to_keep=1, checkpoint_name="ckpt")
        path = manager.save(checkpoint_number=step)
    except tf.errors.OpError as e:
        raise fileio.output_error(e) or e
    # Files of older bests the state file did not list (a run killed before its update).
    for stale in run_dir.checkpoint_prefixes(best_dir):
        if stale != path:
            for name in fileio.glob(stale + ".*"):
                fileio.remove(name)
    return path


def _with_start_step(dataset_fn: Callable) -> Callable:
    """dataset_fn(context, start_step), also for a dataset_fn that takes only the context."""
    if len(inspect.signature(dataset_fn).parameters) >= 2:
        return dataset_fn
    return lambda context, start_step: dataset_fn(context)
