"""Pretraining as a Task: the LM model, the permutation-LM loss and the task's part of the step
(tasks/objective.py's `PretrainStep`, which `PretrainTask` extends) and the Transformer-XL
memory as the carried state (models/memory.py); the generic loop (training/trainer.py) does
the steps, strategy, optimizer, checkpoints and logs.

    result = run_task(PretrainTask, config)       # the command (training/trainer.py)

The data decides the example shape and the vocabulary (`PretrainData`, read once from every
manifest), so data and training cannot disagree. What the task gives the loop, piece by piece:
docs/PRETRAINING.md#what-the-loop-does. Letters (docs/GLOSSARY.md): G global batch, B rows per
replica, L seq_len, P num_predict, M mem_len, D d_model, V vocabulary.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from typing import Optional, Sequence

import keras
import tensorflow as tf

from xlnet_tf2 import run_dir
from xlnet_tf2.config import PRESETS, XLNetConfig
from xlnet_tf2.config_flags import RunConfigError
from xlnet_tf2.data.batch_layout import BatchLayout
from xlnet_tf2.data.manifest import ManifestError
from xlnet_tf2.data.pretrain_dataset import DataShape, PretrainData
from xlnet_tf2.models import XLNetLMHeadModel, memory
from xlnet_tf2.models.memory import MemoryState
from xlnet_tf2.tasks import objective
from xlnet_tf2.tasks.objective import PretrainStep
from xlnet_tf2.tasks.pretraining_config import PretrainConfig
from xlnet_tf2.tokenizers.sentencepiece_tokenizer import SentencePieceTokenizer
from xlnet_tf2.tasks.pretraining_eval import HeldOutEvaluator, default_eval_dirs
from xlnet_tf2.training import checkpointing, distribution
from xlnet_tf2.training.metrics_logger import pretrain_step_flops
from xlnet_tf2.training.task import RunSettings
from xlnet_tf2.training.trainer import Trainer, TrainResult

# Bookkeeping ids of each example (which stream slot, which chunk of it, which direction and
# pass), recorded per step when `record_steps` is on, to audit what was consumed.
EXAMPLE_ID_FEATURES = ("stream_id", "chunk_index", "direction", "pass_id")

__all__ = ["DataShape", "PretrainResult", "PretrainTask", "build_trainer"]


class PretrainTask(PretrainStep):
    """One pretraining run: LM model and loss, memory, data position, held-out loss.

    Args:
      config: the run's settings.
      data: the training data: a `PretrainData` (prepared directories), or any object with its
        `shape`, `vocab_size`, `validate(layout)`, `dataset(global_batch_size, input_context=,
        start_step=, online_permutation=, seed=, micro_batches=)` and
        `corrupt_record_locator(global_batch_size)` (e.g. benchmarks/tools/synthetic_data.py).
        None (a command's run): every manifest of --data_dir read once, and with them the
        architecture, held-out data and SentencePiece model resolved and checked.
      architecture: the model architecture (its run-time fields are ignored: they come from
        `config.model` and, for reuse_len and bi_data, from the data).
      eval_data: held-out data of the same shape (None: no held-out evaluation).
      spm_model: the SentencePiece model the data was encoded with, copied into model_dir.
    """

    def __init__(self, config: PretrainConfig, *, data=None,
                 architecture: Optional[XLNetConfig] = None, eval_data=None,
                 spm_model: Optional[str] = None):
        if data is None:
            data = read_data_dirs("--data_dir", config.data_dirs)
            architecture = resolve_model_config(config.model_config, data.vocab_size)
            eval_data = held_out_data(config, data)
            spm_model = resolve_spm_model(config.spm_model, data)
        self.config = config
        self.data = data
        self.eval_data = eval_data
        self.spm_model = spm_model
        shape: DataShape = data.shape
        runtime = config.model.runtime(reuse_len=shape.reuse_len, bi_data=shape.bi_data)
        loop = config.loop
        super().__init__(XLNetConfig.from_architecture(architecture.architecture(), **runtime),
                         shape, config.factorization_order, loop.train_batch_size)
        self.step_features = objective.COMPACT_FEATURES + objective.SLOT_FEATURES
        self.record_features = EXAMPLE_ID_FEATURES if loop.record_steps else ()
        self.eval_every = config.evaluation.eval_steps if eval_data is not None else None
        self.exhausted_hint = ("Prepare more data or passes (data_prep/create_tfrecords.py "
                               "--num_passes) or lower --train_steps.")
        self.evaluator: Optional[HeldOutEvaluator] = None
        self._model: Optional[keras.Model] = None
        self._eval_replica_batch = 0
        self._corrupt_record_locator = None

    # ------------------------------------------------------------------ what to build
    def batch_layout(self, num_replicas: int) -> BatchLayout:
        loop = self.config.loop
        layout = BatchLayout(loop.train_batch_size, num_replicas, loop.grad_accum_steps,
                             self.data_shape.bi_data)
        self.data.validate(layout)  # a layout the data cannot serve fails before any step
        if self.eval_data is not None:
            self.eval_data.validate(BatchLayout(self.config.eval_batch_size, num_replicas,
                                                1, self.data_shape.bi_data))
            self._eval_replica_batch = self.config.eval_batch_size // num_replicas
        self._replica_batch = layout.replica_batch
        return layout

    def build_model(self) -> keras.Model:
        model = XLNetLMHeadModel(self.xlnet_config)
        model.build()
        self._model = model
        return model

    def build_inputs(self, input_context, start_step: int) -> tf.data.Dataset:
        loop = self.config.loop
        return self.data.dataset(loop.train_batch_size, input_context=input_context,
                                 start_step=start_step,
                                 online_permutation=self.config.online_permutation,
                                 seed=loop.seed, micro_batches=loop.grad_accum_steps)

    def initialize(self, model: keras.Model) -> Optional[str]:
        if not self.config.init_checkpoint:
            return None
        checkpointing.load_model_weights(model, self.config.init_checkpoint)
        return self.config.init_checkpoint

    def carried_state(self, model: keras.Model, layout: BatchLayout,
                      strategy: tf.distribute.Strategy) -> MemoryState:
        """This worker's share of the memory (models/memory.py's MemoryState)."""
        return MemoryState.for_worker(self.xlnet_config, model.compute_dtype, layout, strategy,
                                      distribution.worker_id(strategy),
                                      distribution.num_workers(strategy))

    # ------------------------------------------------------------------ around the loop
    def run_files(self, model):
        return {run_dir.ARCH_FILE: self.xlnet_config.to_json_string()}

    def run_settings(self) -> RunSettings:
        shape = self.data_shape
        derived = {"seq_len": shape.seq_len, "reuse_len": shape.reuse_len,
                   "num_predict": shape.num_predict, "bi_data": shape.bi_data,
                   **self.xlnet_config.architecture()}
        sources = {k: "the data's record_info.json" for k in
                   ("seq_len", "reuse_len", "num_predict", "bi_data")}
        sources.update({k: "--model_config" for k in self.xlnet_config.architecture()})
        return RunSettings(type(self.config), self.config, derived, sources)

    def on_train_begin(self, trainer) -> None:
        if trainer.is_chief and self.spm_model:
            run_dir.copy_spm_model(self.spm_model, self.config.model_dir)

    def tokens_per_step(self, global_batch: int) -> int:
        return global_batch * self.data_shape.seq_len

    def flops_per_step(self, global_batch: int, num_replicas: int) -> float:
        shape = self.data_shape
        return pretrain_step_flops(
            self.xlnet_config, seq_len=shape.seq_len,
            num_predict=shape.num_predict, global_batch_size=global_batch,
            num_replicas=num_replicas).train_per_step

    def locate_input_error(self, first_step: int, last_step: int):
        """A corrupted record (DataLossError) is reported naming its file and step."""
        if self._corrupt_record_locator is None:
            self._corrupt_record_locator = self.data.corrupt_record_locator(
                self.config.loop.train_batch_size)
        if self._corrupt_record_locator is None:
            return None
        return self._corrupt_record_locator(first_step, last_step)

    # ------------------------------------------------------------------ held-out evaluation
    @tf.autograph.experimental.do_not_convert  # as the training step (training/step.py)
    def _eval_loss(self, features, mems):
        """Per replica, no dropout: (new memory, summed cross-entropy, target count)."""
        features = self.replica_features(
            {k: features[k] for k in objective.COMPACT_FEATURES + ("chunk_index",)},
            self._eval_replica_batch)
        ce_sum, new_mems = self.loss(self._model, features, mems, training=False)
        return new_mems, ce_sum, self.loss_count(features)

    def _eval_inputs(self, input_context):
        return self.eval_data.dataset(self.config.eval_batch_size, input_context=input_context)

    def result(self, trained: TrainResult) -> "PretrainResult":
        return PretrainResult(**vars(trained), model_dir=self.config.model_dir)

    def evaluate(self, trainer, step: int) -> dict:
        """Held-out loss and perplexity of the current weights (pretraining_eval.py)."""
        if self.eval_data is None:
            raise RunConfigError("No held-out data: prepare it with data_prep/create_tfrecords.py "
                                 "--eval_fraction (or --eval_input), or pass --eval_data_dir.")
        if self.evaluator is None:
            zero_memory = functools.partial(memory.initial_memory, self.xlnet_config,
                                            self._eval_replica_batch, self._model.compute_dtype)
            self.evaluator = HeldOutEvaluator(
                trainer.strategy, self._eval_inputs, self._eval_loss, zero_memory,
                self.config.evaluation.eval_batches, self.config.model_dir, trainer.is_chief)
        return self.evaluator.evaluate(step)


# ---------------------------------------------------------------------------- from a config
def resolve_model_config(name_or_path: str, vocab_size: int) -> XLNetConfig:
    """A preset takes the data's vocabulary size; a JSON file must already agree with it."""
    if name_or_path in PRESETS:
        return XLNetConfig.preset(name_or_path, n_token=vocab_size)
    config = XLNetConfig.resolve(name_or_path)
    if config.n_token != vocab_size:
        raise RunConfigError(
            f"--model_config={name_or_path!r} has n_token={config.n_token} but the data in "
            f"--data_dir was encoded with a {vocab_size}-piece vocabulary; fix n_token or use "
            "data encoded with the model's SentencePiece model.")
    return config


def resolve_spm_model(spm_model: Optional[str], data: PretrainData) -> str:
    """The SentencePiece model the data was encoded with: `spm_model` if given, else
    DATA_DIR/spiece.model, else the path the manifest records; checked against the
    manifest's sha256 so a run directory never ships a tokenizer that does not match its data.
    """
    first_dir, expected = data.data_dirs[0], data.spm_sha256
    if spm_model:
        candidates = [spm_model]
    else:
        recorded = data.manifests[0].get("spm_model") or ""
        candidates = [os.path.join(first_dir, run_dir.SPM_FILE)]
        if recorded:
            candidates += [recorded, os.path.join(first_dir, recorded)]
    for path in candidates:
        if not tf.io.gfile.exists(path):
            continue
        found = run_dir.file_sha256(path)
        if found == expected:
            pieces = SentencePieceTokenizer.from_file(path).vocab_size
            if pieces != data.vocab_size:
                raise ManifestError(
                    f"{os.path.join(first_dir, 'record_info.json')} says vocab_size "
                    f"{data.vocab_size} but the SentencePiece model it records ({path}) has "
                    f"{pieces} pieces: the manifest is damaged. Re-run "
                    "data_prep/create_tfrecords.py, or copy the directory again whole.")
            return path
        if spm_model:
            raise RunConfigError(
                f"--spm_model={spm_model!r} is not the SentencePiece model {first_dir} was "
                f"encoded with (sha256 {found[:12]}..., the manifest records "
                f"{expected[:12]}...). Pass the model given to data_prep/create_tfrecords.py.")
    raise RunConfigError(
        f"Cannot find the SentencePiece model {first_dir} was encoded with (looked at "
        f"{', '.join(candidates)}; the manifest's sha256 is {expected[:12]}...). Pass it with "
        "--spm_model: it is copied into --model_dir so fine-tuning and export can use it.")


def read_data_dirs(flag: str, data_dirs: Sequence[str]) -> PretrainData:
    """PretrainData of directories given by `flag`, which must exist."""
    for d in data_dirs:
        if not tf.io.gfile.isdir(d):
            raise RunConfigError(f"{flag}={d!r} is not a directory; pass directories written "
                                 "by data_prep/create_tfrecords.py.")
    return PretrainData.read(data_dirs)


def held_out_data(config: PretrainConfig, data: PretrainData) -> Optional[PretrainData]:
    """--eval_data_dir, else DATA_DIR/eval of every --data_dir that has one; None without
    --eval_steps. Checked against the training data's shape and vocabulary."""
    if not config.evaluation.eval_steps:
        return None
    dirs = list(config.evaluation.eval_data_dir or ()) or default_eval_dirs(config.data_dirs)
    if not dirs:
        raise RunConfigError(
            f"--eval_steps={config.evaluation.eval_steps} needs held-out data, but no --data_dir "
            "has an eval/ directory: prepare the data with data_prep/create_tfrecords.py "
            "--eval_fraction=0.01 (or --eval_input), or pass --eval_data_dir.")
    eval_data = read_data_dirs("--eval_data_dir", dirs)
    shape = data.shape
    eval_data.check(seq_len=shape.seq_len, reuse_len=shape.reuse_len,
                    num_predict=shape.num_predict, bi_data=shape.bi_data,
                    vocab_size=data.vocab_size)
    return eval_data


def build_trainer(config: PretrainConfig,
                  strategy: Optional[tf.distribute.Strategy] = None) -> Trainer:
    """The Trainer of a run configuration's task (what run_task trains, for callers that pick
    the strategy themselves)."""
    return Trainer(PretrainTask(config), strategy=strategy)


@dataclasses.dataclass
class PretrainResult(TrainResult):
    """A pretraining run's TrainResult and its model_dir."""
    model_dir: str = ""

    def summary(self) -> str:
        """What xlnet-pretrain prints at the end."""
        last = self.steps[-1]["loss"] if self.steps else float("nan")
        return (f"Finished at step {self.final_step} (started at {self.start_step}); "
                f"last loss {last:.4f}; model_dir {self.model_dir}")
