"""The one training loop of the project: `Trainer(task)` runs any Task (task.py): pretraining
and every fine-tuning task (xlnet_tf2/tasks/) are tasks; the loop knows nothing of any one.
How every command runs its task: `run_task`; how one run goes: `Trainer.train`; what one step
computes: step.py's `TrainingStep`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from typing import Dict, List, Optional

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from xlnet_tf2 import fileio, run_dir
from xlnet_tf2.config_flags import RunConfigError
from xlnet_tf2.data.integrity import translate_input_error
from xlnet_tf2.layers.dropout import assign_dropout_salts
from xlnet_tf2.layers.step_plan import StepPlan
from xlnet_tf2.layers.kernels.attention_choice import (IMPLEMENTATION_DEVICE,
                                                       raised_while_tracing,
                                                       refusal_before_tracing)
from xlnet_tf2.training import checkpointing, distribution, preemption, run_record
from xlnet_tf2.training.device_peak import device_peak_flops, measure_matmul_peak
from xlnet_tf2.training.metrics_logger import MetricsLogger
from xlnet_tf2.training.optimization import (create_optimizer, describe_optimizer,
                                             warmup_warning)
from xlnet_tf2.training.run_config import LoopConfig
from xlnet_tf2.training.step import TrainingStep
from xlnet_tf2.training.task import RunSettings, Task  # noqa: F401 (RunSettings: re-export)


class TrainingDivergedError(RuntimeError, FloatingPointError):
    """The loss became NaN or infinite; the message names the step and the last good checkpoint.
    A FloatingPointError too, for callers that catch that."""


class DataExhaustedError(RuntimeError):
    """The input pipeline ran out before --train_steps."""


def run_task(task_class, config):
    """How every command runs its task: trains `task_class(config)` (resuming from its
    model_dir's checkpoints) on the strategy of `config.distribution` and returns
    `task.result(...)`, whose `summary()` is what the commands print.

        result = run_task(ClassificationTask, config)     # config: the command's tree

    In order: deterministic execution when --deterministic (before anything starts
    TensorFlow's runtime: reading TFDS or caching features runs ops), the strategy (before any
    other op: multi-worker and TPU strategies need a fresh runtime), the task built under the
    strategy's scope (so its set-up sees the strategy, e.g. which worker writes the feature
    cache), the Trainer's run, and the task's result (`Task.result`)."""
    distribution.apply_determinism(config.loop)
    where = config.distribution  # run_config.py's DistributionConfig
    strategy = distribution.resolve_strategy(where.strategy, where.tpu, where.tpu_timeout)
    with strategy.scope():
        task = task_class(config)
    return task.result(Trainer(task, strategy=strategy).train())


@dataclasses.dataclass
class TrainResult:
    start_step: int
    final_step: int
    steps: List[dict]  # one dict per step run in this call: step, loss, grad_norm, lr, ...
    restored_from: Optional[str]
    last_log: Optional[dict] = None  # the scalars of the last console line
    evaluations: List[dict] = dataclasses.field(default_factory=list)  # task.evaluate results
    # One dict per loop run: first_step, steps, seconds (the loop's tf.function call, results
    # on the host) and started (its time.perf_counter() at the start), for benchmarks.
    loops: List[dict] = dataclasses.field(default_factory=list)


class Trainer:
    """Owns the strategy, model, optimizer, step counter, checkpoints and the loop of one run
    of `task` (see task.py for what the loop asks of it).

    Args:
      task: the Task to run.
      loop_config: the loop settings (default: `task.config.loop`).
      strategy: a tf.distribute strategy (distribution.resolve_strategy); default: current.
      device: the device the step is traced for ("cpu", "gpu", "tpu"); default: this
        machine's. Another one traces that device's program here (tests, tools).

    The step (`self.step`, step.py's `TrainingStep`) is traced with `self.plan`
    (layers/step_plan.py): the device and the loop's --attention_implementation, with each
    trace's dropout keys added where the step is traced. `first_step(device)` traces it for
    another device.
    """

    def __init__(self, task: Task, loop_config: Optional[LoopConfig] = None,
                 strategy: Optional[tf.distribute.Strategy] = None,
                 device: Optional[str] = None):
        self.task = task
        loop = self.loop_config = loop_config or task.config.loop
        if fileio.exists(loop.model_dir) and not fileio.isdir(loop.model_dir):
            raise RunConfigError(f"--model_dir={loop.model_dir!r} is a file; pass a directory "
                                 "(new, or one holding this run's checkpoints).")
        self.optimizer_config = task.config.optimizer
        self.strategy = strategy or tf.distribute.get_strategy()
        self.num_replicas = self.strategy.num_replicas_in_sync
        self.layout = task.batch_layout(self.num_replicas)
        self.is_chief = distribution.is_chief(self.strategy)
        settings = dict(attention=loop.attention_implementation,
                        position_scores=loop.position_scores)
        self.plan = (StepPlan.for_this_machine(**settings) if device is None
                     else StepPlan(device=device, **settings))
        self.on_tpu = isinstance(self.strategy, tf.distribute.TPUStrategy)
        distribution.check_jit_compile(loop.jit_compile, self.strategy)
        self.loss_scaling = loop.precision == "mixed_float16"
        self.attempt: Optional[int] = None
        self._changed_settings: list = []
        self._resumed = False

        distribution.apply_determinism(loop)
        keras.mixed_precision.set_global_policy(loop.precision)
        keras.utils.set_random_seed(loop.seed)
        opt = self.optimizer_config
        with self.strategy.scope():
            self.model = task.build_model()
            self.num_dropout_layers = assign_dropout_salts(self.model)
            self._trainable = list(task.trainable_variables(self.model))
            self.optimizer, self.schedule = create_optimizer(
                self.model, learning_rate=opt.learning_rate,
                warmup_steps=opt.warmup_steps, total_steps=loop.train_steps,
                weight_decay=opt.weight_decay, epsilon=opt.adam_epsilon,
                bias_correction=opt.adam_bias_correction, loss_scaling=self.loss_scaling,
                variables=self._trainable, lr_multipliers=task.lr_multipliers(self.model))
            self.global_step = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step",
                                           aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA)
        if self.is_chief:
            line = describe_optimizer(opt.adam_bias_correction, opt.weight_decay)
            logging.info(line)
            print(line, flush=True)
            warning = warmup_warning(opt.learning_rate, opt.warmup_steps, loop.train_steps)
            if warning:  # printed as the optimizer line is (stdout; absl's log at INFO)
                logging.info(warning)
                print(warning, flush=True)
        # Host-side (outside the strategy): e.g. the memory, [G, M, D] per layer.
        self.carried_state = task.carried_state(self.model, self.layout, self.strategy)
        self.checkpoints = checkpointing.CheckpointKeeper(
            loop.model_dir, model=self.model, optimizer=self.optimizer,
            global_step=self.global_step, max_to_keep=loop.keep_checkpoints,
            is_chief=self.is_chief, worker_id=distribution.worker_id(self.strategy))
        # SIGTERM and termination notices: a flag the loop reads before each step.
        self.preemption = preemption.PreemptionWatcher(self.strategy)
        # Why the whole step is compiled with one replica: outside XLA, clipping and the AdamW
        # update are a dozen unfused TensorFlow ops per variable, each writing a fresh tensor
        # the size of the variable, a share of the step worth removing
        # (BENCHMARKS.md#figures-behind-choices-in-the-code). With several replicas the update
        # stays outside XLA as before: the cross-replica sum and the optimizer's distributed
        # update (merge_call) have not been checked under jit_compile. A TPU compiles
        # everything anyway.
        self.whole_step_compiled = loop.jit_compile and self.num_replicas == 1 and not self.on_tpu
        self.step = TrainingStep(
            task, self.model, self.optimizer, self._trainable, self.layout, self.plan,
            seed=loop.seed, global_batch=loop.train_batch_size, clip_norm=opt.clip_norm,
            num_replicas=self.num_replicas, on_tpu=self.on_tpu, loss_scaling=self.loss_scaling,
            whole_step_compiled=self.whole_step_compiled, jit_compile=loop.jit_compile)
        self._step_fn = (tf.function(self.step.replica_step, jit_compile=True,
                                     reduce_retracing=True)
                         if self.whole_step_compiled else self.step.replica_step)
        self._loop = tf.function(self._train_loop)

    # ------------------------------------------------------------------ the loop
    def _train_loop(self, iterator, state, num_steps):
        """`num_steps` steps in one graph, fewer if a stop is requested (preemption.py);
        returns (state, per-step stats of the steps run, plus "stopped": bool [])."""
        # Sized as they are written: a stopped loop returns only the steps it ran.
        losses = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
        norms = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
        rates = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
        record_keys = [k for k in self.task.record_features if k in iterator.element_spec]
        # [steps, len(record_keys), G]; the element shape given, so that a loop stopped before
        # its first step stacks an empty array (other topologies leave G unknown).
        records = tf.TensorArray(tf.int32, size=0, dynamic_size=True, element_shape=[
            len(record_keys), self.loop_config.train_batch_size])
        stopped = tf.constant(False)
        for i in tf.range(num_steps):
            # Before each step: a SIGTERM or termination notice that came during the previous
            # one (the watcher's flag, preemption.py) ends the loop here, on every worker at the
            # same step: with several workers the flag is summed over all of them first, a
            # collective every worker calls at this point.
            told = self.preemption.flag.read_value()
            if self.preemption.collective:
                told = self.strategy.reduce(tf.distribute.ReduceOp.SUM, self.strategy.run(
                    tf.cast, args=(told, tf.float32)), axis=None)
            if told > 0:
                stopped = tf.constant(True)
                break
            features = next(iterator)
            rates = rates.write(i, tf.cast(self.schedule(self.optimizer.iterations), tf.float32))
            step = self.global_step.read_value()  # the step being trained, 0-based
            state, loss_share, grad_norm = self.strategy.run(
                self._step_fn, args=(self._step_features(features), state, step))
            losses = losses.write(i, self.strategy.reduce(tf.distribute.ReduceOp.SUM,
                                                          loss_share, axis=None))
            norms = norms.write(i, self.strategy.reduce(tf.distribute.ReduceOp.MEAN,
                                                        grad_norm, axis=None))
            if record_keys:
                records = records.write(i, tf.stack(
                    [tf.cast(self.strategy.gather(features[k], axis=0), tf.int32)
                     for k in record_keys]))
            self.global_step.assign_add(1)
        stats = dict(loss=losses.stack(), grad_norm=norms.stack(), learning_rate=rates.stack(),
                     stopped=stopped)
        if record_keys:
            stacked = records.stack()
            stats.update({k: stacked[:, j] for j, k in enumerate(record_keys)})
        return state, stats

    def _step_features(self, features):
        """The batch features the replica step takes (the task's `step_features`)."""
        keys = self.task.step_features
        return features if keys is None else {k: features[k] for k in keys}

    def first_step(self, device: Optional[str] = None, tpu_generation: Optional[str] = None):
        """The compiled step and its arguments for the first batch `train` would run from the
        current global step: `(step_fn, (features, state, step))`. `step_fn(*args)` runs that
        step (forward, backward, clipping, the optimizer's update of the variables) and
        returns (new state, loss, gradient norm). For tools that take the step's XLA program
        elsewhere (tools/step_export.py); needs `whole_step_compiled` (jit_compile, one
        replica, not a TPU), where the step is one XLA computation. The optimizer is built
        first, so that its slots are variables outside the step, as after `train`'s first
        trace.

        `device` ("cpu", "gpu" or "tpu"): a step function of its own, traced with the plan of
        that device (the program that device would run, whatever this machine is; on a TPU of
        `tpu_generation`, when given); None: the Trainer's own compiled step."""
        if not self.whole_step_compiled:
            raise RunConfigError(
                "The step is one XLA computation only with --jit_compile and one replica "
                f"(here jit_compile={self.loop_config.jit_compile}, {self.num_replicas} "
                "replica(s)); run on one device with --jit_compile.")
        if not self.optimizer.built:
            self.optimizer.build(self._trainable)
        start_step = int(self.global_step.numpy())
        dataset = distribution.distribute_inputs(
            self.strategy, lambda context: self.task.build_inputs(context, start_step))
        features = next(iter(dataset))
        step_fn = self._step_fn
        if device is not None:
            step_fn = tf.function(self.step.on(device, tpu_generation).replica_step,
                                  jit_compile=True, reduce_retracing=True)
        return step_fn, (self._step_features(features), self.distribute_state(),
                         self.global_step.read_value())

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
        rs = self.task.run_settings()
        if self.checkpoints.latest_path() and rs is not None:
            self._changed_settings = run_record.check_resume(
                rs.config_cls, rs.config, rs.derived, self.loop_config.model_dir,
                rs.derived_sources)
        path = self.checkpoints.restore_latest()
        self._resumed = path is not None
        if path is not None and self.carried_state is not None:
            self.carried_state.restore(self.loop_config.model_dir,
                                       int(self.global_step.numpy()), path)
        if path is None:
            path = self.task.initialize(self.model)
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
        """The chief's files in model_dir: the task's run_files and, for a run that is not a
        resume, run_config.json (a resumed run keeps the one it was started with)."""
        model_dir = self.loop_config.model_dir
        for name, text in self.task.run_files(self.model).items():
            fileio.write_atomically(os.path.join(model_dir, name), text.encode())
        record_path = os.path.join(model_dir, run_record.RUN_CONFIG_FILE)
        rs = self.task.run_settings()
        if rs is not None and (not resumed or not tf.io.gfile.exists(record_path)):
            run_record.write_run_config(model_dir, rs.config, rs.derived)

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
        """Trains to --train_steps, resuming from model_dir's checkpoints. A SIGTERM or a
        termination notice meanwhile ends the run after the step in flight with a checkpoint
        of that step and raises preemption.TrainingPreempted naming it.

        How one run goes:
          1. Under the strategy's scope: the model (`task.build_model()`), the optimizer and its
             schedule (optimization.py, from the task's optimizer settings), the step counter.
             The global batch is split over the replicas and accumulation micro-batches by the
             task's `BatchLayout` (data/batch_layout.py: the one home of the divisibility
             rules).
          2. Check run_config.json of a model_dir with checkpoints (a changed setting the
             checkpoints depend on is an error naming the flag), then restore the newest
             readable checkpoint (a corrupt one is reported and the one before it used), else
             `task.initialize(model)` (e.g. --init_checkpoint), else fresh weights.
          3. An optional carried state (`task.carried_state`: pretraining's Transformer-XL
             memory) comes back from its per-host files and is cut into per-replica values.
          4. Loops of at most `steps_per_loop` steps run inside one tf.function; each step goes
             through `strategy.run`. The carried state is a loop variable of that function and
             its return value, so it continues across steps and loops. With --jit_compile and
             one replica the whole replica step (forward, backward, clipping, optimizer update)
             is one XLA computation; with several replicas the forward/backward pass is, and the
             all-reduce and the update run outside it.
          5. After each loop: a NaN/inf loss stops the run before anything is saved (the last
             checkpoint stays good); every `log_steps` TensorBoard scalars and a console line
             (loss, tokens/s, MFU); every `task.eval_every` steps `task.evaluate` (held-out
             loss, or fine-tuning's evaluation and best-checkpoint keeping); every `save_steps`
             and at the end the carried state (each host its own replicas' share) and then the
             checkpoint. Loops end exactly at those steps.
          6. A SIGTERM or a termination notice while `train` runs (preemption.py) ends the loop
             in flight after its current step, on every worker at the same step; the checkpoint
             of that step is written (unless it has one) and `train` raises TrainingPreempted
             (exit status 75 from the commands).
        """
        with self.preemption:
            return self._train()

    def _train(self) -> TrainResult:
        cfg = self.loop_config
        needs = IMPLEMENTATION_DEVICE.get(self.plan.attention)
        if needs is not None and self.plan.device != needs:
            raise RunConfigError(
                f"--attention_implementation={self.plan.attention} runs only in a step traced "
                f"for a {needs.upper()}, and this machine's step is traced for a "
                f"{self.plan.device.upper()}; use --attention_implementation=auto (or "
                "reference).")
        refused = refusal_before_tracing(
            self.plan, jit_compile=cfg.jit_compile,
            dtype=tf.as_dtype(keras.mixed_precision.global_policy().compute_dtype))
        if refused is not None:
            raise RunConfigError(refused)
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
            # Relative to model_dir when it is one of the run's own checkpoints (relocatable).
            self.attempt = run_record.start_attempt(
                cfg.model_dir, start_step=start_step,
                restored_from=run_dir.relative_to(cfg.model_dir, restored) if resumed
                else restored,
                changed=self._changed_settings)
            run_record.prune_steps_log(cfg.model_dir, start_step)
        self.task.on_train_begin(self)
        if start_step >= cfg.train_steps:
            logging.info("model_dir already holds step %d >= --train_steps=%d; nothing to do.",
                         start_step, cfg.train_steps)
            return TrainResult(start_step, start_step, [], restored)

        # Measure the peak before the input pipeline starts: its prefetch threads would
        # otherwise share the cores with the measurement and inflate the MFU.
        peak_flops = self._peak_flops()
        dataset = distribution.distribute_inputs(
            self.strategy, lambda context: self.task.build_inputs(context, start_step))
        iterator = iter(dataset)
        state = self.distribute_state()
        logger = MetricsLogger(cfg.model_dir, enabled=self.is_chief, total_steps=cfg.train_steps,
                               tokens_per_step=self.task.tokens_per_step(cfg.train_batch_size),
                               flops_per_step=self.task.flops_per_step(cfg.train_batch_size,
                                                                       self.num_replicas),
                               peak_flops=peak_flops)
        step_log = (fileio.open_file(os.path.join(cfg.model_dir, run_record.STEPS_FILE), "a")
                    if cfg.record_steps and self.is_chief else None)
        history: List[dict] = []
        evaluations: List[dict] = []
        loops: List[dict] = []
        last_log = None
        step = start_step
        saved_step = start_step if resumed else None  # the step of the newest checkpoint
        try:
            while step < cfg.train_steps:
                num_steps = self._next_loop_length(step)
                t0 = time.perf_counter()
                try:
                    state, stats = self._loop(iterator, state, tf.constant(num_steps, tf.int32))
                    stats = {k: v.numpy() for k, v in stats.items()}
                    stopped = bool(stats.pop("stopped"))
                except tf.errors.OutOfRangeError as e:
                    raise DataExhaustedError(
                        f"The input data ran out at step {step} of "
                        f"--train_steps={cfg.train_steps}. {self.task.exhausted_hint}") from e
                except (tf.errors.DataLossError, tf.errors.InvalidArgumentError) as e:
                    # A corrupted or misplaced input record: one error naming file and step.
                    translated = translate_input_error(e, step + 1, step + num_steps,
                                                       self.task.locate_input_error)
                    if translated is None:
                        raise
                    raise translated from e
                except Exception as e:  # noqa: BLE001 - only the attention's own error is taken
                    # A forced implementation that cannot run (layers/xlnet_block.py: what the
                    # trace alone learns, such as kernels that fail on this GPU) raises while
                    # the first loop traces the step, inside AutoGraph's own error.
                    refused = raised_while_tracing(e)
                    if refused is None or step != start_step:
                        raise
                    raise RunConfigError(str(refused)) from e
                elapsed = time.perf_counter() - t0
                records = self._step_records(step, stats)
                loops.append({"first_step": step + 1, "steps": len(records), "seconds": elapsed,
                              "started": t0})
                bad = [r for r in records if not np.isfinite(r["loss"])]
                if bad:
                    raise TrainingDivergedError(
                        f"The training loss became {bad[0]['loss']} at step {bad[0]['step']}. "
                        f"Training stopped without saving; the last good checkpoint in "
                        f"{cfg.model_dir} is {self.checkpoints.latest_path() or 'none'}. Lower "
                        "--learning_rate, raise --warmup_steps, check --clip_norm or use "
                        "--precision=float32 / mixed_bfloat16.")
                history.extend(records)
                step += len(records)
                if step_log is not None:
                    for r in records:
                        step_log.write(json.dumps({**r, "attempt": self.attempt}) + "\n")
                    step_log.flush()
                if stopped:
                    raise self._preempted(step, state, saved_step)
                logger.record_loop(step, records, elapsed, compiled=(len(history) == num_steps))
                final = step == cfg.train_steps
                if step % cfg.log_steps == 0 or final:
                    last_log = logger.write(step)
                eval_every = self.task.eval_every
                if eval_every and (step % eval_every == 0 or final):
                    evaluations.append(self.task.evaluate(self, step))
                if step % cfg.save_steps == 0 or final:
                    self.save_checkpoint(step, state)
                    saved_step = step
        finally:
            if step_log is not None:
                step_log.close()
            logger.close()
        return TrainResult(start_step, step, history, restored, last_log, evaluations, loops)

    def _preempted(self, step: int, state, saved_step: Optional[int]
                   ) -> preemption.TrainingPreempted:
        """After a loop a stop request ended: the checkpoint of `step` (written now unless it
        exists; none when nothing was trained) and the error that ends the run."""
        saved = step != saved_step and step > 0
        if saved:
            self.save_checkpoint(step, state)
        # The chief's checkpoint, the one every worker resumes from (the others save into a
        # scratch directory they delete: checkpointing.py).
        path = (os.path.join(self.loop_config.model_dir, f"ckpt-{step}")
                if saved or saved_step == step else None)
        message = preemption.stop_message(self.preemption.reason, step,
                                          self.loop_config.train_steps, path, saved)
        logging.info(message)  # the commands print it as their last line (cli.py)
        return preemption.TrainingPreempted(message, step, path)

    def _next_loop_length(self, step: int) -> int:
        """Loops end exactly at log, callback, save and final steps."""
        cfg = self.loop_config
        boundaries = [cfg.train_steps]
        for every in (cfg.log_steps, cfg.save_steps, self.task.eval_every):
            if every:
                boundaries.append((step // every + 1) * every)
        return min(cfg.steps_per_loop, min(boundaries) - step)

    def _step_records(self, first_step: int, stats: Dict[str, np.ndarray]) -> List[dict]:
        records = []
        for i in range(len(stats["loss"])):
            r = {"step": first_step + i + 1, "loss": float(stats["loss"][i]),
                 "grad_norm": float(stats["grad_norm"][i]),
                 "learning_rate": float(stats["learning_rate"][i])}
            for k in self.task.record_features:
                if k in stats:
                    r[k] = stats[k][i].tolist()
            records.append(r)
        return records
