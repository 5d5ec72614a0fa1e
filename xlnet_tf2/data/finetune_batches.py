"""Fine-tuning training batches that depend on the step alone: exact resume, same batches on
any topology.

Letters (docs/GLOSSARY.md): E examples, G global batch, Rp replicas in sync, W input pipelines
(hosts), B = G / Rp.

The global order of examples is epoch after epoch of a shuffle of all E examples, epoch e
a stateless random permutation of (--seed, e); step t trains on positions [t*G, (t+1)*G) of
that order. Every input pipeline computes the same global batch and keeps the rows of the
replicas it feeds (replica r gets rows [r*B, (r+1)*B), the order in which
`distribute_datasets_from_function` hands a pipeline's batches to its replicas). So:
  * a run resumed at step t reads exactly what the uninterrupted run read from step t on
    (the pipeline starts at the epoch holding step t and skips into it);
  * one device, several replicas and several hosts train on the same global batches, and each
    row's place in the global batch (which keys its dropout mask) is the same;
  * the cost is that every pipeline reads the whole global batch of examples it mostly drops,
    negligible for fine-tuning data held in memory.
"""

from __future__ import annotations

from typing import Callable, Dict

import numpy as np
import tensorflow as tf

from xlnet_tf2.config_flags import RunConfigError

_EPOCH_SEED_MIX = 1_000_003


def global_batches_fn(features: Dict[str, np.ndarray], global_batch_size: int, seed: int
                      ) -> Callable[[tf.distribute.InputContext, int], tf.data.Dataset]:
    """(input_context, start_step) -> this pipeline's per-replica batches (static shapes)."""
    n = len(next(iter(features.values())))
    if n < global_batch_size:
        raise RunConfigError(f"--train_batch_size={global_batch_size} is larger than the "
                             f"{n} training examples.")

    def dataset_fn(context: tf.distribute.InputContext, start_step: int = 0) -> tf.data.Dataset:
        replicas = context.num_replicas_in_sync if context else 1
        pipelines = context.num_input_pipelines if context else 1
        pipeline = context.input_pipeline_id if context else 0
        if global_batch_size % replicas:
            raise RunConfigError(f"--train_batch_size={global_batch_size} must be divisible by "
                                 f"the number of replicas ({replicas}).")
        b = global_batch_size // replicas
        local = replicas // pipelines
        first = pipeline * local * b  # this pipeline's rows of every global batch
        position = start_step * global_batch_size
        first_epoch, skip = divmod(position, n)

        def epoch_order(epoch):
            # A stateless permutation of the E examples, a pure function of (seed, epoch).
            keys = tf.random.stateless_uniform([n], seed=tf.stack(
                [tf.constant(seed, tf.int64), epoch * _EPOCH_SEED_MIX + 1]))
            return tf.data.Dataset.from_tensor_slices(tf.argsort(keys, stable=True))

        indices = (tf.data.Dataset.range(first_epoch, 2 ** 62).flat_map(epoch_order)
                   .skip(skip).batch(global_batch_size, drop_remainder=True))
        table = {k: tf.constant(v) for k, v in features.items()}

        def to_replica_batches(batch_indices):
            mine = tf.reshape(batch_indices[first:first + local * b], [local, b])
            return {k: tf.gather(v, mine) for k, v in table.items()}  # [local, B, ...]

        dataset = indices.map(to_replica_batches)
        dataset = dataset.flat_map(tf.data.Dataset.from_tensor_slices)
        options = tf.data.Options()
        options.deterministic = True
        options.experimental_distribute.auto_shard_policy = (
            tf.data.experimental.AutoShardPolicy.OFF)  # the rows are split above
        return dataset.with_options(options).prefetch(2)

    return dataset_fn
