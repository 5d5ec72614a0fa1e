"""Held-out evaluation during pretraining: loss and perplexity on documents never trained on.

Letters (docs/GLOSSARY.md): G the evaluation's global batch, B = G / replicas per replica,
M mem_len, D d_model.

Every `--eval_steps` training steps (and at the end) the current weights read the first
`--eval_batches` batches of the held-out directories (prepared by data_prep/create_tfrecords.py
with --eval_fraction or --eval_input: DATA_DIR/eval), always the same batches so evaluations
are comparable. The memory runs as in training (zero at the start of the evaluation and where a
slot starts a new stream, carried from batch to batch otherwise); there is no dropout. The
result, the mean cross-entropy over the held-out targets in nats and its exponential, goes to
the console, TensorBoard (MODEL_DIR/eval: eval/loss, eval/perplexity) and
MODEL_DIR/eval_results.jsonl.
"""

from __future__ import annotations

import json
import math
import os
from typing import Callable, List, Sequence

import tensorflow as tf
from absl import logging

from xlnet_tf2 import fileio
from xlnet_tf2.data.manifest import MANIFEST_NAME
from xlnet_tf2.training import distribution
from xlnet_tf2.training.metrics_logger import summary_writer, write_scalar

EVAL_RESULTS_FILE = "eval_results.jsonl"


class HeldOutEvaluator:
    """Runs held-out evaluations of a pretraining model.

    Args:
      strategy: the run's strategy.
      dataset_fn: (input_context) -> per-replica eval batches (the pretraining format).
      loss_fn: per replica: (features, mems) -> (summed cross-entropy, target count, new mems),
        with the model called with training=False.
      initial_memory: per replica: () -> n_layer x [B, M, D] zeros ([] without memory).
      num_batches: batches per evaluation (`--eval_batches`).
      model_dir: where eval_results.jsonl and the TensorBoard events go.
      is_chief: only the chief writes.
    """

    def __init__(self, strategy: tf.distribute.Strategy, dataset_fn: Callable,
                 loss_fn: Callable, initial_memory: Callable[[], List[tf.Tensor]],
                 num_batches: int, model_dir: str, is_chief: bool):
        self.strategy = strategy
        self.dataset_fn = dataset_fn
        self.loss_fn = loss_fn
        self.initial_memory = initial_memory
        self.num_batches = num_batches
        self.model_dir = model_dir
        self.is_chief = is_chief
        self.writer = summary_writer(model_dir, "eval", is_chief)
        self._loop = tf.function(self._eval_loop)

    def _eval_loop(self, iterator):
        mems = self.strategy.run(self.initial_memory)
        ce_total = tf.constant(0.0, tf.float32)
        count_total = tf.constant(0.0, tf.float32)
        for _ in tf.range(self.num_batches):
            features = next(iterator)
            mems, ce, count = self.strategy.run(self.loss_fn, args=(features, mems))
            ce_total += self.strategy.reduce(tf.distribute.ReduceOp.SUM, ce, axis=None)
            count_total += self.strategy.reduce(tf.distribute.ReduceOp.SUM, count, axis=None)
        return ce_total, count_total

    def evaluate(self, step: int) -> dict:
        """Evaluates the current weights; returns {"step", "loss", "perplexity", "targets"}."""
        dataset = distribution.distribute_inputs(self.strategy, self.dataset_fn)
        try:
            ce, count = self._loop(iter(dataset))
        except tf.errors.OutOfRangeError:
            raise RuntimeError(
                f"The held-out data holds fewer than --eval_batches={self.num_batches} batches; "
                "lower --eval_batches or --eval_batch_size, or hold out more text.") from None
        ce, count = float(ce.numpy()), float(count.numpy())
        loss = ce / max(count, 1.0)
        result = {"step": step, "loss": loss, "perplexity": math.exp(min(loss, 700.0)),
                  "targets": int(count)}
        if self.is_chief:
            print(f"eval   {step:>7d} | held-out loss {loss:.4f} | perplexity "
                  f"{result['perplexity']:.2f} | {int(count):,} targets", flush=True)
            fileio.append_line(os.path.join(self.model_dir, EVAL_RESULTS_FILE), json.dumps(result))
            with self.writer.as_default(step=step):
                write_scalar("eval/loss", loss, step)
                write_scalar("eval/perplexity", result["perplexity"], step)
            self.writer.flush()
        logging.info("held-out evaluation at step %d: %s", step, result)
        return result


def default_eval_dirs(data_dirs: Sequence[str]) -> List[str]:
    """DATA_DIR/eval for every training directory that has a prepared eval split (its
    manifest is read, once, by the caller)."""
    return [os.path.join(d, "eval") for d in data_dirs
            if tf.io.gfile.exists(os.path.join(d, "eval", MANIFEST_NAME))]
