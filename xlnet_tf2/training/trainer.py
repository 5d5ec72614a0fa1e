"""The one training loop of the project: pretraining (pretrainer.py) and fine-tuning
(xlnet_tf2/tasks/finetuning.py) are this loop with a loss and a few hooks.

How one run goes:
  1. Under the strategy's scope: the model (`model_fn`), the AdamW and its schedule
     (optimization.py), the step counter.
  2. Check run_config.json of a model_dir with checkpoints (a changed setting the checkpoints
     depend on is an error naming the flag), then restore the newest readable checkpoint (a
     corrupt one is reported and the one before it used), else `init_fn()` (e.g.
     --init_checkpoint), else fresh weights.
  3. An optional carried state (pretraining's Transformer-XL memory) comes back from its
     per-host files and is cut into per-replica values (`carried_state.distribute`).
  4. Loops of at most `steps_per_loop` steps run inside one tf.function; each step goes through
     `strategy.run`. The carried state is a loop variable of that function and its return
     value, so it continues across steps and loops.
  5. After each loop: a NaN/inf loss stops the run before anything is saved (the last
     checkpoint stays good); every `log_steps` TensorBoard scalars and a console line (loss,
     tokens/s, MFU); every `callback_steps` the callback (fine-tuning's evaluation and
     best-checkpoint keeping); every `save_steps` and at the end the carried state (each host
     its own replicas' share) and then the checkpoint. Loops end exactly at those steps.

The step (one replica's share, `_replica_step`):
  count    = all-reduced sum of `count_fn(features)` (real targets, or examples), at least 1
  loss     = loss_fn(features, state)[0] / count    -- this replica's share of the global mean
  gradient = d loss / d variables, summed over `grad_accum_steps` micro-batches (consecutive
             row slices of the replica batch and of its carried state) and over replicas,
             clipped to `clip_norm` (global norm), applied once by the optimizer.
  dropout  = masks keyed by (seed, step, each row's place in the global batch): the same on
             any topology and across restarts (layers/dropout.py).
So each replica's gradient is its share of the global token- (or example-) weighted mean and
their sum is the gradient of that mean, whatever the replica count. Under mixed_float16 the
loss is scaled by the LossScaleOptimizer's dynamic scale before differentiation.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from typing import Any, Callable, Dict, List, Optional, Sequence

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from xlnet_tf2.config_flags import RunConfigError
from xlnet_tf2.data.integrity import translate_input_error
from xlnet_tf2.layers.dropout import assign_dropout_salts, dropout_keys
from xlnet_tf2.training import checkpointing, determinism, distribution, run_record
from xlnet_tf2.training.device_peak import device_peak_flops, measure_matmul_peak
from xlnet_tf2.training.metrics_logger import MetricsLogger
from xlnet_tf2.training.optimization import create_optimizer
from xlnet_tf2.training.run_config import PRECISIONS, LoopConfig, OptimizerConfig  # noqa: F401

# dataset_fn(input_context, start_step) -> tf.data.Dataset of per-replica batches.
DatasetFn = Callable[[tf.distribute.InputContext, int], tf.data.Dataset]
# loss_fn(features, state) -> (float32 loss summed over this replica's batch, new state).
LossFn = Callable[[Dict[str, tf.Tensor], Any], Any]
# count_fn(features) -> float32 scalar: what the loss sum is a sum over (targets, examples).
CountFn = Callable[[Dict[str, tf.Tensor]], tf.Tensor]


class TrainingDivergedError(RuntimeError, FloatingPointError):
    """The loss became NaN or infinite; the message names the step and the last good checkpoint.
    (A FloatingPointError too: fine-tuning raised that before the loops were unified.)"""


class DataExhaustedError(RuntimeError):
    """The input pipeline ran out before --train_steps."""


@dataclasses.dataclass(frozen=True)
class TrainerConfig:
    """The loop and optimizer settings every run has (PretrainConfig and FinetuneConfig hold
    them as their `loop` and `optimizer` sections; see run_config.py for each setting)."""

    loop: LoopConfig
    optimizer: OptimizerConfig
    callback_steps: Optional[int] = None  # None: no callback

    def __post_init__(self):
        if self.callback_steps is not None and self.callback_steps <= 0:
            raise ValueError(f"callback_steps must be positive, got {self.callback_steps}.")


@dataclasses.dataclass(frozen=True)
class RunSettings:
    """A run's configuration tree and derived values (data shape, architecture) for
    run_config.json and the resume check; `derived_sources` names where a derived value comes
    from (e.g. "seq_len": "the data manifest") for error messages."""

    config_cls: type
    config: Any
    derived: Dict[str, Any]
    derived_sources: Optional[Dict[str, str]] = None


@dataclasses.dataclass
class TrainResult:
    start_step: int
    final_step: int
    steps: List[dict]  # one dict per step run in this call: step, loss, grad_norm, lr, ...
    restored_from: Optional[str]
    last_log: Optional[dict] = None  # the scalars of the last console line


class Trainer:
    """Owns the strategy, model, optimizer, step counter, checkpoints and the loop of one run.

    Args:
      config: loop and optimizer settings.
      model_fn: () -> built keras model; called under the strategy's scope after the precision
        policy and the seed are set.
      loss_fn: per replica, under the gradient tape: (features, state) -> (loss_sum, new_state),
        loss_sum a float32 scalar summed over the replica's batch (the state is [] without
        `carried_state`).
      count_fn: per replica: features -> float32 number of terms in loss_sum.
      dataset_fn: (input_context, start_step) -> per-replica batches; deterministic in the
        step if the data position is to survive a restart.
      strategy: a tf.distribute strategy (distribution.resolve_strategy); default: current.
      trainable_fn: model -> the variables to train (default: all trainable ones).
      lr_multipliers_fn: model -> {id(variable): learning-rate multiplier} (layer decay).
      carried_state_fn: model -> the carried state (memory_state.MemoryState): its
        `distribute(strategy)` gives the per-replica values handed to loss_fn, `gather(strategy,
        values)` stores the values loss_fn returned, and `save(model_dir, step)`,
        `restore(model_dir, step)`, `prune(model_dir, keep_steps)` keep it beside the
        checkpoints, each host its own share.
      feature_keys: the batch features handed to the replica step (default: all).
      replica_features: per replica, before count_fn and loss_fn: features -> features
        (e.g. pinning static shapes).
      record_features: batch features gathered over replicas into every step's record.
      init_fn: () -> path of the weights it loaded, or None; used when model_dir holds no
        checkpoint.
      callback: (step) -> None, every `callback_steps` and at the end, before that step's
        checkpoint is saved.
      run_files: {file name: text} the chief writes into model_dir at the start.
      run_settings: the run's configuration tree for run_config.json and the resume check.
      example_ids_fn: per replica and micro-batch: features -> int32 [rows], each row's place
        in the global batch in an order independent of the topology (keys its dropout masks);
        default replica * b + row.
      tokens_per_step, flops_per_step: for tokens/s and MFU.
      exhausted_hint: appended to the error when the data runs out before train_steps.
    """

    # (first_step, last_step) -> (path, record, step) of the corrupt input record behind a
    # DataLossError, or None; set by jobs that know their files (pretrain_job.py).
    input_error_locator: Optional[Callable[[int, int], Optional[tuple]]] = None

    def __init__(self, config: TrainerConfig, *, model_fn: Callable[[], keras.Model],
                 loss_fn: LossFn, count_fn: CountFn, dataset_fn: DatasetFn,
                 strategy: Optional[tf.distribute.Strategy] = None,
                 trainable_fn: Optional[Callable[[keras.Model], List[tf.Variable]]] = None,
                 lr_multipliers_fn: Optional[Callable[[keras.Model], Dict[int, float]]] = None,
                 carried_state_fn: Optional[Callable[[keras.Model], tf.Module]] = None,
                 feature_keys: Optional[Sequence[str]] = None,
                 replica_features: Optional[Callable[[dict], dict]] = None,
                 record_features: Sequence[str] = (),
                 init_fn: Optional[Callable[[], Optional[str]]] = None,
                 callback: Optional[Callable[[int], None]] = None,
                 run_files: Optional[Dict[str, str]] = None,
                 run_settings: Optional["RunSettings"] = None,
                 example_ids_fn: Optional[Callable[[dict], tf.Tensor]] = None,
                 tokens_per_step: int = 0, flops_per_step: float = 0.0,
                 exhausted_hint: str = ""):
        self.trainer_config = config
        self.loop_config, self.optimizer_config = config.loop, config.optimizer
        loop = config.loop
        self.strategy = strategy or tf.distribute.get_strategy()
        self.num_replicas = self.strategy.num_replicas_in_sync
        if loop.train_batch_size % (self.num_replicas * loop.grad_accum_steps):
            raise RunConfigError(
                f"--train_batch_size={loop.train_batch_size} must be divisible by the number "
                f"of replicas ({self.num_replicas}) times --grad_accum_steps="
                f"{loop.grad_accum_steps}.")
        self.replica_batch = loop.train_batch_size // self.num_replicas
        self.micro_batches = loop.grad_accum_steps
        self.micro_batch = self.replica_batch // self.micro_batches
        self.loss_fn, self.count_fn, self.dataset_fn = loss_fn, count_fn, dataset_fn
        self.feature_keys = tuple(feature_keys) if feature_keys is not None else None
        self.replica_features = replica_features
        self.record_features = tuple(record_features)
        self.init_fn, self.callback = init_fn, callback
        self.run_files = dict(run_files or {})
        self.run_settings = run_settings
        self.example_ids_fn = example_ids_fn
        self.tokens_per_step, self.flops_per_step = tokens_per_step, flops_per_step
        self.exhausted_hint = exhausted_hint
        self.is_chief = distribution.is_chief(self.strategy)
        self.loss_scaling = loop.precision == "mixed_float16"
        self.attempt: Optional[int] = None
        self._changed_settings: list = []
        self._resumed = False

        if loop.deterministic:
            determinism.enable()
        keras.mixed_precision.set_global_policy(loop.precision)
        keras.utils.set_random_seed(loop.seed)
        opt = config.optimizer
        with self.strategy.scope():
            self.model = model_fn()
            self.num_dropout_layers = assign_dropout_salts(self.model)
            self._trainable = list(trainable_fn(self.model) if trainable_fn
                                   else self.model.trainable_variables)
            self.optimizer, self.schedule = create_optimizer(
                self.model, learning_rate=opt.learning_rate,
                warmup_steps=opt.warmup_steps, total_steps=loop.train_steps,
                weight_decay=opt.weight_decay, epsilon=opt.adam_epsilon,
                bias_correction=opt.adam_bias_correction, loss_scaling=self.loss_scaling,
                variables=self._trainable,
                lr_multipliers=lr_multipliers_fn(self.model) if lr_multipliers_fn else None)
            self.global_step = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step",
                                           aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
        # Host-side (outside the strategy): e.g. the memory, [GB, M, D] per layer.
        self.carried_state = carried_state_fn(self.model) if carried_state_fn else None
        self.checkpoints = checkpointing.CheckpointKeeper(
            loop.model_dir, model=self.model, optimizer=self.optimizer,
            global_step=self.global_step, max_to_keep=loop.keep_checkpoints,
            is_chief=self.is_chief, worker_id=distribution.worker_id(self.strategy))
        self._compute_grads = tf.function(self._forward_backward, jit_compile=loop.jit_compile,
                                          reduce_retracing=True)
        self._loop = tf.function(self._train_loop)

    # ------------------------------------------------------------------ the step
    def _forward_backward(self, features, state, global_count, step, example_ids):
        """One replica's gradients for one (micro-)batch; pure computation (XLA-compilable
        with static shapes). The dropout masks are keyed by the run's seed, the step and each
        row's place in the global batch, `example_ids` int32 [rows] (layers/dropout.py).

        Returns (grads, new_state, loss_sum); the gradients are of loss_sum / global_count
        (times the loss scale under mixed_float16).
        """
        with dropout_keys(self.loop_config.seed, step, example_ids,
                          self.loop_config.train_batch_size):
            with tf.GradientTape() as tape:
                loss_sum, new_state = self.loss_fn(features, state)
                loss = loss_sum / global_count
                if self.loss_scaling:
                    loss = self.optimizer.scale_loss(loss)
        grads = tape.gradient(loss, self._trainable)
        return grads, new_state, loss_sum

    def _example_ids(self, features, replica, micro):
        """int32 [mb]: the rows' places in the global batch (the stage's `example_ids_fn`,
        else replica * b + micro * mb + row)."""
        if self.example_ids_fn is not None:
            return self.example_ids_fn(features)
        return (tf.cast(replica, tf.int32) * self.replica_batch + micro * self.micro_batch
                + tf.range(self.micro_batch, dtype=tf.int32))

    def _accumulated_gradients(self, features, state, global_count, step, replica):
        """Gradients summed over `micro_batches` consecutive slices of the replica batch.

        Micro-batch i holds rows [i * mb, (i + 1) * mb) of every feature and of the carried
        state (whose rows follow the batch rows), so each row's state continues its own
        stream; the input pipeline lays the rows out so that each slice is a well-formed
        batch (e.g. forward and backward halves with bi_data). The sum of the slices'
        gradients of loss_sum / global_count is the gradient of the whole batch.
        """
        mb, num = self.micro_batch, self.micro_batches

        def rows(tensor, i):
            return tf.reshape(tensor, [num, mb] + tensor.shape[1:].as_list())[i]

        zero_grads = [tf.zeros(v.shape, v.dtype) for v in self._trainable]
        state_parts = [tf.TensorArray(s.dtype, size=num, element_shape=[mb] + s.shape[1:].as_list())
                       for s in state]

        def body(i, grads, loss_sum, parts):
            micro_features = {k: rows(v, i) for k, v in features.items()}
            micro_state = [rows(s, i) for s in state]
            g, new_state, l_sum = self._compute_grads(
                micro_features, micro_state, global_count, step,
                self._example_ids(micro_features, replica, i))
            grads = [a if b is None else a + tf.convert_to_tensor(b) for a, b in zip(grads, g)]
            parts = [p.write(i, s) for p, s in zip(parts, new_state)]
            return i + 1, grads, loss_sum + l_sum, parts

        _, grads, loss_sum, parts = tf.while_loop(
            lambda i, *_: i < num, body,
            (tf.constant(0), zero_grads, tf.constant(0.0, tf.float32), state_parts))
        new_state = [tf.reshape(p.stack(), [num * mb] + p.element_shape[1:].as_list())
                     for p in parts]
        return grads, new_state, loss_sum

    def _replica_step(self, features, state, step):
        if self.replica_features is not None:
            features = self.replica_features(features)
        context = tf.distribute.get_replica_context()
        replica = context.replica_id_in_sync_group
        local_count = tf.cast(self.count_fn(features), tf.float32)
        global_count = tf.maximum(
            context.all_reduce(tf.distribute.ReduceOp.SUM, local_count), 1.0)
        if self.micro_batches == 1:
            grads, new_state, loss_sum = self._compute_grads(
                features, state, global_count, step, self._example_ids(features, replica, 0))
        else:
            grads, new_state, loss_sum = self._accumulated_gradients(
                features, state, global_count, step, replica)
        # The global gradient: every replica's share of the global mean, summed.
        grads = context.all_reduce(tf.distribute.ReduceOp.SUM, grads)
        scaled_norm = tf.linalg.global_norm(grads)
        # Under mixed_float16 the gradients carry the loss scale: clip them at the scaled
        # threshold and report the unscaled norm. Overflowed steps (inf norm) are skipped by
        # the LossScaleOptimizer, which then lowers the scale.
        scale = (tf.cast(self.optimizer.dynamic_scale, tf.float32) if self.loss_scaling
                 else tf.constant(1.0, tf.float32))
        grads, _ = tf.clip_by_global_norm(grads, self.optimizer_config.clip_norm * scale,
                                          use_norm=scaled_norm)
        self.optimizer.apply(grads, self._trainable)
        return new_state, loss_sum / global_count, scaled_norm / scale

    def _train_loop(self, iterator, state, num_steps):
        """`num_steps` steps in one graph; returns (state, per-step stats)."""
        losses = tf.TensorArray(tf.float32, size=num_steps)
        norms = tf.TensorArray(tf.float32, size=num_steps)
        rates = tf.TensorArray(tf.float32, size=num_steps)
        record_keys = [k for k in self.record_features if k in iterator.element_spec]
        records = tf.TensorArray(tf.int32, size=num_steps)  # [steps, len(record_keys), GB]
        for i in tf.range(num_steps):
            features = next(iterator)
            rates = rates.write(i, tf.cast(self.schedule(self.optimizer.iterations), tf.float32))
            step_features = (features if self.feature_keys is None
                             else {k: features[k] for k in self.feature_keys})
            step = self.global_step.read_value()  # the step being trained, 0-based
            state, loss_share, grad_norm = self.strategy.run(
                self._replica_step, args=(step_features, state, step))
            losses = losses.write(i, self.strategy.reduce(tf.distribute.ReduceOp.SUM,
                                                          loss_share, axis=None))
            norms = norms.write(i, self.strategy.reduce(tf.distribute.ReduceOp.MEAN,
                                                        grad_norm, axis=None))
            if record_keys:
                records = records.write(i, tf.stack(
                    [tf.cast(self.strategy.gather(features[k], axis=0), tf.int32)
                     for k in record_keys]))
            self.global_step.assign_add(1)
        stats = dict(loss=losses.stack(), grad_norm=norms.stack(), learning_rate=rates.stack())
        if record_keys:
            stacked = records.stack()
            stats.update({k: stacked[:, j] for j, k in enumerate(record_keys)})
        return state, stats

    # ------------------------------------------------------------------ carried state
    def distribute_state(self):
        """Per-replica values of the carried state ([] without one)."""
        if self.carried_state is None:
            return []
        return self.carried_state.distribute(self.strategy)

    def gather_state(self, state) -> None:
        """Stores the per-replica values into the carried state's checkpoint variables."""
        if self.carried_state is not None:
            self.carried_state.gather(self.strategy, state)

    # ------------------------------------------------------------------ the run
    def restore(self) -> Optional[str]:
        """Newest readable checkpoint of model_dir, else `init_fn()`; returns what was used.

        A model_dir with checkpoints is first checked against its run_config.json: a changed
        setting the checkpoints depend on raises RunConfigError naming the flag."""
        self._changed_settings = []
        if self.checkpoints.latest_path() and self.run_settings is not None:
            rs = self.run_settings
            self._changed_settings = run_record.check_resume(
                rs.config_cls, rs.config, rs.derived, self.loop_config.model_dir,
                rs.derived_sources)
        path = self.checkpoints.restore_latest()
        self._resumed = path is not None
        if path is not None and self.carried_state is not None:
            step = int(self.global_step.numpy())
            if not self.carried_state.restore(self.loop_config.model_dir, step):
                logging.warning("Checkpoint %s has no saved memory (an older format): the memory "
                                "starts from zero.", path)
                print(f"[checkpoint] note: {path} has no saved memory; it starts from zero.",
                      flush=True)
        if path is None and self.init_fn is not None:
            path = self.init_fn()
        return path

    def save_checkpoint(self, step: int, state) -> str:
        """The carried state (each host its own share) first, then the main checkpoint: a main
        checkpoint on disk always has its state. Old state files are pruned after."""
        model_dir = self.loop_config.model_dir
        if self.carried_state is not None:
            self.gather_state(state)
            self.carried_state.save(model_dir, step)
        path = self.checkpoints.save(step)
        if self.carried_state is not None:
            self.carried_state.prune(model_dir, self.checkpoints.saved_steps() + [step])
        return path

    def _write_run_files(self, resumed: bool) -> None:
        """The chief's files in model_dir: the stage's run_files and, for a run that is not a
        resume, run_config.json (a resumed run keeps the one it was started with)."""
        model_dir = self.loop_config.model_dir
        for name, text in self.run_files.items():
            with tf.io.gfile.GFile(os.path.join(model_dir, name), "w") as f:
                f.write(text)
        record_path = os.path.join(model_dir, run_record.RUN_CONFIG_FILE)
        if self.run_settings is not None and (not resumed or not tf.io.gfile.exists(record_path)):
            run_record.write_run_config(model_dir, self.run_settings.config,
                                        self.run_settings.derived)

    def _peak_flops(self) -> float:
        cfg = self.loop_config
        if cfg.peak_tflops:
            return cfg.peak_tflops * 1e12 * self.num_replicas
        # Data-sheet peak of a known accelerator, or the CPU's derived peak (device_peak.py).
        peak = device_peak_flops(cfg.precision)
        if peak is None:  # an accelerator missing from the table: measured matmul throughput
            peak = measure_matmul_peak()
            logging.info("MFU denominator: measured dense matmul peak %.1f GFLOP/s per device",
                         peak / 1e9)
        else:
            logging.info("MFU denominator: peak %.1f GFLOP/s per device", peak / 1e9)
        return peak * self.num_replicas

    def train(self) -> TrainResult:
        cfg = self.loop_config
        if self.is_chief:
            run_record.clean_stale_files(cfg.model_dir)
        restored = self.restore()
        start_step = int(self.global_step.numpy())
        resumed = self._resumed
        if restored:
            logging.info("Resuming from %s at step %d", restored, start_step)
        tf.io.gfile.makedirs(cfg.model_dir)
        if self.is_chief:
            self._write_run_files(resumed)
            self.attempt = run_record.start_attempt(
                cfg.model_dir, start_step=start_step, restored_from=restored,
                changed=self._changed_settings)
            run_record.prune_steps_log(cfg.model_dir, start_step)
        if start_step >= cfg.train_steps:
            logging.info("model_dir already holds step %d >= --train_steps=%d; nothing to do.",
                         start_step, cfg.train_steps)
            return TrainResult(start_step, start_step, [], restored)

        # Measure the peak before the input pipeline starts: its prefetch threads would
        # otherwise share the cores with the measurement and inflate the MFU.
        peak_flops = self._peak_flops()
        dataset = self.strategy.distribute_datasets_from_function(
            lambda context: self.dataset_fn(context, start_step))
        iterator = iter(dataset)
        state = self.distribute_state()
        logger = MetricsLogger(cfg.model_dir, enabled=self.is_chief, total_steps=cfg.train_steps,
                               tokens_per_step=self.tokens_per_step,
                               flops_per_step=self.flops_per_step, peak_flops=peak_flops)
        step_log = (tf.io.gfile.GFile(os.path.join(cfg.model_dir, run_record.STEPS_FILE), "a")
                    if cfg.record_steps and self.is_chief else None)
        history: List[dict] = []
        last_log = None
        step = start_step
        try:
            while step < cfg.train_steps:
                num_steps = self._next_loop_length(step)
                t0 = time.perf_counter()
                try:
                    state, stats = self._loop(iterator, state, tf.constant(num_steps, tf.int32))
                    stats = {k: v.numpy() for k, v in stats.items()}
                except tf.errors.OutOfRangeError as e:
                    raise DataExhaustedError(
                        f"The input data ran out at step {step} of "
                        f"--train_steps={cfg.train_steps}. {self.exhausted_hint}") from e
                except (tf.errors.DataLossError, tf.errors.InvalidArgumentError) as e:
                    # A corrupted or misplaced input record: one error naming file and step.
                    translated = translate_input_error(e, step + 1, step + num_steps,
                                                       self.input_error_locator)
                    if translated is None:
                        raise
                    raise translated from e
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
                        step_log.write(json.dumps({**r, "attempt": self.attempt}) + "\n")
                    step_log.flush()
                logger.record_loop(step, records, elapsed, compiled=(len(history) == num_steps))
                final = step == cfg.train_steps
                if step % cfg.log_steps == 0 or final:
                    last_log = logger.write(step)
                callback_steps = self.trainer_config.callback_steps
                if self.callback is not None and (
                        (callback_steps and step % callback_steps == 0) or final):
                    self.callback(step)
                if step % cfg.save_steps == 0 or final:
                    self.save_checkpoint(step, state)
        finally:
            if step_log is not None:
                step_log.close()
            logger.close()
        return TrainResult(start_step, step, history, restored, last_log)

    def _next_loop_length(self, step: int) -> int:
        """Loops end exactly at log, callback, save and final steps."""
        cfg = self.loop_config
        boundaries = [cfg.train_steps]
        for every in (cfg.log_steps, cfg.save_steps, self.trainer_config.callback_steps):
            if every:
                boundaries.append((step // every + 1) * every)
        return min(cfg.steps_per_loop, min(boundaries) - step)

    def _step_records(self, first_step: int, stats: Dict[str, np.ndarray]) -> List[dict]:
        records = []
        for i in range(len(stats["loss"])):
            r = {"step": first_step + i + 1, "loss": float(stats["loss"][i]),
                 "grad_norm": float(stats["grad_norm"][i]),
                 "learning_rate": float(stats["learning_rate"][i])}
            for k in self.record_features:
                if k in stats:
                    r[k] = stats[k][i].tolist()
            records.append(r)
        return records
