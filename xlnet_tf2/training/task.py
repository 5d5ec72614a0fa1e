"""The Task protocol: what one kind of run is, as the training loop sees it.

A task is a single-replica view of a training procedure (TF Model Garden's `base_task.Task`):
which model, which inputs, which loss, what to do around the loop. `Trainer` (trainer.py) runs
it; the commands call trainer.py's `run_task(SomeTask, config)`. Each method's docstring says
when the Trainer calls it; docs/ARCHITECTURE.md#the-task-protocol gives the whole protocol.
In the docstrings `model` is the built model, `features` one replica's batch and `state` the
task's carried state per replica ([] without one).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Optional, Sequence, Tuple

import keras
import tensorflow as tf

from xlnet_tf2.data.batch_layout import BatchLayout
from xlnet_tf2.layers.step_plan import StepPlan


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
    """Base class of every task: the defaults of the protocol.

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
        """Builds the model, under the strategy's scope, after the precision policy and the
        seed are set."""
        raise NotImplementedError

    def build_inputs(self, input_context: Optional[tf.distribute.InputContext],
                     start_step: int) -> tf.data.Dataset:
        """Per-replica batches from `start_step` on: a function of the step, so a resumed run
        continues exactly (`distribute_datasets_from_function`)."""
        raise NotImplementedError

    def initialize(self, model: keras.Model) -> Optional[str]:
        """Called when model_dir holds no checkpoint (e.g. loads --init_checkpoint); returns
        what it loaded, or None."""
        return None

    def trainable_variables(self, model: keras.Model) -> List[tf.Variable]:
        """The variables the optimizer updates."""
        return list(model.trainable_variables)

    def lr_multipliers(self, model: keras.Model) -> Optional[Dict[int, float]]:
        """Per-variable learning-rate factors keyed by variable id (layer-wise decay), or None."""
        return None

    def carried_state(self, model: keras.Model, layout, strategy: tf.distribute.Strategy):
        """A state carried across steps and saved with the checkpoints (pretraining's memory,
        models/memory.py), or None."""
        return None

    # ------------------------------------------------------------------ the step
    def replica_features(self, features: Dict[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
        """Per replica, first in the step: e.g. pins static shapes."""
        return features

    def loss_count(self, features: Dict[str, tf.Tensor]) -> tf.Tensor:
        """Per replica: float32, the number of terms the loss sums (targets, examples)."""
        raise NotImplementedError

    def loss(self, model: keras.Model, features: Dict[str, tf.Tensor], state: Sequence,
             training: bool = True, plan: Optional[StepPlan] = None):
        """Per replica, under the tape: (float32 loss summed over the batch, new state).
        `plan`: how the step is traced (layers/step_plan.py: device, attention implementation,
        dropout keys), to hand to the model's call: `model(inputs, training=..., plan=plan)`."""
        raise NotImplementedError

    def example_ids(self, features: Dict[str, tf.Tensor]) -> Optional[tf.Tensor]:
        """Per replica and micro-batch: int32 [rows], each row's place in the global batch
        independent of the topology (keys its dropout masks), or None."""
        return None

    # ------------------------------------------------------------------ around the loop
    def run_files(self, model: keras.Model) -> Dict[str, str]:
        """Files for model_dir, {name: text}, written by the chief at the start."""
        return {}

    def run_settings(self) -> Optional[RunSettings]:
        """What run_config.json records and a resumed run compares, or None."""
        return None

    def on_train_begin(self, trainer) -> None:
        """Once, by every worker, after restore and before the first step (run files: the chief
        only)."""
        pass

    def evaluate(self, trainer, step: int) -> Optional[dict]:
        """Every `eval_every` steps and at the end, before that step's checkpoint is saved;
        returns the metrics or None."""
        return None

    def result(self, trained):
        """What running this task returns (`run_task`), from the Trainer's TrainResult; it has
        a `summary()`, the line the commands print."""
        raise NotImplementedError

    def tokens_per_step(self, global_batch: int) -> int:
        """Tokens one step trains on, for the throughput log (0: not logged)."""
        return 0

    def flops_per_step(self, global_batch: int, num_replicas: int) -> float:
        """FLOPs of one training step, for MFU (0: not logged)."""
        return 0.0

    def locate_input_error(self, first_step: int, last_step: int) -> Optional[tuple]:
        """(path, record, step) of the corrupt input record behind a DataLossError of steps
        [first_step, last_step], or None when the task cannot tell."""
        return None
