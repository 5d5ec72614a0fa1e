"""The Task protocol: what one kind of run is, as the training loop sees it.

A task is a single-replica view of a training procedure (the idea of TF Model Garden's
`base_task.Task`): it owns its run configuration and answers a few questions -- which model,
which inputs, which loss, what to do around the loop -- and the `Trainer` (trainer.py) runs
it: strategy, optimizer, steps, loops, clipping, checkpoints, logs, evaluation cadence. The
loop is never edited for a new task; a new task is one new file in xlnet_tf2/tasks/.

    task = SomeTask(config)                       # config.loop: LoopConfig,
    result = Trainer(task).train()                # config.optimizer: OptimizerConfig

(the commands: `run_task(SomeTask, config)`, training/run_task.py, which also picks the
strategy and returns `task.result(...)`).

What the Trainer calls, and when (`model` is the built model, `features` one replica's batch,
`state` the task's carried state per replica, [] without one):

  batch_layout(num_replicas)               the split of the global batch (data/batch_layout.py)
  build_model()                            under the strategy's scope, after the precision
                                           policy and the seed are set
  initialize(model)                        when model_dir holds no checkpoint (e.g. load
                                           --init_checkpoint); returns what it loaded or None
  build_inputs(input_context, start_step)  per-replica batches from `start_step` on; a
                                           function of the step, so a resumed run continues
                                           exactly (`distribute_datasets_from_function`)
  replica_features(features)               per replica, first: e.g. pin static shapes
  loss_count(features)                     per replica: float32 number of terms the loss sums
  loss(model, features, state, training)   per replica, under the tape: (float32 loss summed
                                           over the batch, new state)
  example_ids(features)                    per replica and micro-batch: int32 [rows], each
                                           row's place in the global batch independent of the
                                           topology (keys its dropout masks), or None
  carried_state(model, layout, strategy)   a state carried across steps and saved with the
                                           checkpoints (pretraining's memory), or None
  on_train_begin(trainer)                  once, by every worker, after restore and before the
                                           first step (write run files: the chief only)
  evaluate(trainer, step)                  every `eval_every` steps and at the end, before
                                           that step's checkpoint is saved
  result(trained)                          after the run (run_task): what it returns, with a
                                           `summary()` the commands print

and reads: `config` (its `loop` and `optimizer` sections), `step_features` (the batch
features handed to the replica step; None = all), `record_features` (features gathered into
every step's record with --record_steps), `eval_every`, `exhausted_hint`,
`trainable_variables(model)`, `lr_multipliers(model)`, `run_files(model)`, `run_settings()`,
`tokens_per_step(global_batch)`, `flops_per_step(global_batch, num_replicas)` and
`locate_input_error(first_step, last_step)`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Optional, Sequence, Tuple

import keras
import tensorflow as tf

from xlnet_tf2.data.batch_layout import BatchLayout


@dataclasses.dataclass(frozen=True)
class RunSettings:
    """A run's configuration tree and derived values (data shape, architecture) for
    run_config.json and the resume check; `derived_sources` names where a derived value comes
    from (e.g. "seq_len": "the data manifest") for error messages."""

    config_cls: type
    config: Any
    derived: Dict[str, Any]
    derived_sources: Optional[Dict[str, str]] = None


class Task:
    """Base class of every task: the defaults of the protocol (see the module docstring).

    Subclasses must implement `build_model`, `build_inputs`, `loss_count` and `loss`, and set
    `config` (a run configuration tree with `loop` and `optimizer` sections).
    """

    config: Any
    # Batch features handed to the replica step (None: all of them).
    step_features: Optional[Tuple[str, ...]] = None
    # Batch features gathered over replicas into every step's record (--record_steps): one
    # int per example, [B] per replica and [G] gathered.
    record_features: Tuple[str, ...] = ()
    # Evaluate every this many steps and at the end (None: never).
    eval_every: Optional[int] = None
    # Appended to the error when the data runs out before --train_steps.
    exhausted_hint: str = ""

    # ------------------------------------------------------------------ what to build
    def batch_layout(self, num_replicas: int) -> BatchLayout:
        """How the global batch splits over replicas and micro-batches (raises
        BatchLayoutError naming the flags when it does not)."""
        loop = self.config.loop
        return BatchLayout(loop.train_batch_size, num_replicas, loop.grad_accum_steps)

    def build_model(self) -> keras.Model:
        raise NotImplementedError

    def build_inputs(self, input_context: Optional[tf.distribute.InputContext],
                     start_step: int) -> tf.data.Dataset:
        raise NotImplementedError

    def initialize(self, model: keras.Model) -> Optional[str]:
        return None

    def trainable_variables(self, model: keras.Model) -> List[tf.Variable]:
        return list(model.trainable_variables)

    def lr_multipliers(self, model: keras.Model) -> Optional[Dict[int, float]]:
        return None

    def carried_state(self, model: keras.Model, layout, strategy: tf.distribute.Strategy):
        return None

    # ------------------------------------------------------------------ the step
    def replica_features(self, features: Dict[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
        return features

    def loss_count(self, features: Dict[str, tf.Tensor]) -> tf.Tensor:
        raise NotImplementedError

    def loss(self, model: keras.Model, features: Dict[str, tf.Tensor], state: Sequence,
             training: bool = True):
        raise NotImplementedError

    def example_ids(self, features: Dict[str, tf.Tensor]) -> Optional[tf.Tensor]:
        return None

    # ------------------------------------------------------------------ around the loop
    def run_files(self, model: keras.Model) -> Dict[str, str]:
        return {}

    def run_settings(self) -> Optional[RunSettings]:
        return None

    def on_train_begin(self, trainer) -> None:
        pass

    def evaluate(self, trainer, step: int) -> Optional[dict]:
        return None

    def result(self, trained):
        """What running this task returns (run_task.py), from the Trainer's TrainResult; it has
        a `summary()`, the line the commands print."""
        raise NotImplementedError

    def tokens_per_step(self, global_batch: int) -> int:
        return 0

    def flops_per_step(self, global_batch: int, num_replicas: int) -> float:
        return 0.0

    def locate_input_error(self, first_step: int, last_step: int) -> Optional[tuple]:
        """(path, record, step) of the corrupt input record behind a DataLossError of steps
        [first_step, last_step], or None when the task cannot tell."""
        return None
