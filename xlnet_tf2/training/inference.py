"""Running a model over a whole dataset in fixed-size batches, inside the run's distribution
strategy, with a progress line.

Letters (docs/GLOSSARY.md): E rows, G global batch (a multiple of the replicas), B = G / replicas,
W pipelines.

The rows are padded at the end (by repeating row 0) to a multiple of G, so every call has the
same static shapes. Each input pipeline keeps the rows of the replicas it feeds (replica r:
rows [r*B, (r+1)*B) of every batch), the replicas run `fn` on their rows, and the outputs are
gathered back in row order on every worker (`strategy.gather`). With the default strategy this
is a plain loop over batches.
"""

from __future__ import annotations

from typing import Callable, Dict, Optional, Sequence

import numpy as np
import tensorflow as tf

from xlnet_tf2.models.model_inputs import model_inputs
from xlnet_tf2.progress import Progress
from xlnet_tf2.training import distribution


def batched_outputs(fn: Callable[[Dict[str, tf.Tensor]], Dict[str, tf.Tensor]],
                    inputs: Dict[str, np.ndarray], batch_size: int, *,
                    strategy: Optional[tf.distribute.Strategy] = None,
                    label: str = "predicting", unit: str = "examples") -> Dict[str, np.ndarray]:
    """fn(batch) -> {name: [rows, ...]} over all E rows; returns {name: np.ndarray [E, ...]}."""
    strategy = strategy or tf.distribute.get_strategy()
    replicas = strategy.num_replicas_in_sync
    batch = -(-batch_size // replicas) * replicas  # a multiple of the replicas
    n = len(next(iter(inputs.values())))
    padded_n = max(-(-n // batch), 1) * batch
    padded = {k: np.concatenate([v, np.repeat(v[:1], padded_n - n, axis=0)]) if padded_n > n
              else v for k, v in inputs.items()}
    per_replica = batch // replicas

    def dataset_fn(context):
        local = replicas // context.num_input_pipelines
        first = context.input_pipeline_id * local * per_replica
        ds = tf.data.Dataset.from_tensor_slices(padded).batch(batch, drop_remainder=True)
        ds = ds.map(lambda b: {k: tf.reshape(v[first:first + local * per_replica],
                                             [local, per_replica] + v.shape[1:].as_list())
                               for k, v in b.items()})
        options = tf.data.Options()
        options.experimental_distribute.auto_shard_policy = (
            tf.data.experimental.AutoShardPolicy.OFF)
        return ds.flat_map(tf.data.Dataset.from_tensor_slices).with_options(options)

    @tf.function
    def step(features):
        outputs = strategy.run(fn, args=(features,))
        return {k: strategy.gather(v, axis=0) for k, v in outputs.items()}

    collected: Dict[str, list] = {}
    progress = Progress(n, label, unit)
    done = 0
    for features in distribution.distribute_inputs(strategy, dataset_fn):
        for k, v in step(features).items():
            collected.setdefault(k, []).append(v.numpy())
        done = min(done + batch, n)
        progress.update(done)
    progress.done()
    return {k: np.concatenate(v, axis=0)[:n] for k, v in collected.items()}


def predict(model, features: Dict[str, np.ndarray], batch_size: int,
            output_keys: Sequence[str] = ("logits",)) -> Dict[str, np.ndarray]:
    """Runs `model` over all rows in batches of exactly `batch_size` (the last is padded and
    the padding outputs dropped), so every call has the same shapes; inside the current
    distribution strategy (inference.py), with a progress line on long sets."""
    inputs = model_inputs(model, features)  # not the labels

    def outputs_of(batch):
        outputs = model(batch, training=False)
        return {k: outputs[k] for k in output_keys}

    return batched_outputs(outputs_of, inputs, batch_size, label="evaluating")
