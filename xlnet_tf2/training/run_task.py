"""How every command runs its task: one call from the configuration tree to the result.

    result = run_task(ClassificationTask, config)     # config: the command's tree
    print(result.summary())

In order: deterministic execution when --deterministic (before anything starts TensorFlow's
runtime: reading TFDS or caching features runs ops), the strategy of --strategy / --tpu
(before any other op: multi-worker and TPU strategies need a fresh runtime), the task built
from the configuration under the strategy's scope (so its set-up sees the strategy, e.g. which
worker writes the feature cache), the Trainer's run, and the task's result (`Task.result`).
"""

from __future__ import annotations

from xlnet_tf2.training import determinism
from xlnet_tf2.training.distribution import strategy_of
from xlnet_tf2.training.trainer import Trainer


def run_task(task_class, config):
    """Trains `task_class(config)` (resuming from its model_dir's checkpoints) on the
    strategy of `config.distribution`; returns `task.result(...)`, whose `summary()` is what
    the commands print."""
    determinism.apply(config.loop)
    strategy = strategy_of(config.distribution)
    with strategy.scope():
        task = task_class(config)
    return task.result(Trainer(task, strategy=strategy).train())
