"""Context-free baselines for pretraining losses: what a model that knows only token frequencies
reaches, so a loss well below them shows the model uses context.

* training: the unigram entropy of the training targets (the best context-free predictor of
  the data it is measured on);
* held-out: the cross-entropy of the held-out targets under the unigram distribution of the
  training targets (add-one smoothed over the vocabulary), i.e. the held-out loss of a model
  that learned token frequencies from the training data and nothing else.
"""

from __future__ import annotations

import math
from typing import Dict, Sequence

import numpy as np
import tensorflow as tf

from xlnet_tf2.data import manifest as manifest_lib
from xlnet_tf2.data.pretrain_dataset import build_pretrain_dataset


def target_counts(dataset: tf.data.Dataset, vocab_size: int, max_batches: int) -> np.ndarray:
    """float64 [V]: how often each token is a real target in the first `max_batches` batches
    (elements with `target` and `target_mask`, or `input_ids` and `target_positions`)."""
    counts = np.zeros([vocab_size], np.float64)
    for batch in dataset.take(max_batches):
        if "target" in batch:
            target = batch["target"].numpy().ravel()
            mask = batch["target_mask"].numpy().ravel() > 0
        else:  # compact records: the targets are the tokens at target_positions (-1: none)
            positions = batch["target_positions"].numpy()
            ids = batch["input_ids"].numpy()
            mask = (positions >= 0).ravel()
            target = np.take_along_axis(ids, np.maximum(positions, 0), axis=1).ravel()
        np.add.at(counts, target[mask], 1.0)
    return counts


def unigram_baselines(train: tf.data.Dataset, held_out: tf.data.Dataset, vocab_size: int,
                      max_batches: int) -> Dict[str, float]:
    """{"train_entropy", "heldout_cross_entropy", ...} in nats (see the module docstring)."""
    train_counts = target_counts(train, vocab_size, max_batches)
    p = train_counts[train_counts > 0] / train_counts.sum()
    entropy = float(-(p * np.log(p)).sum())
    smoothed = (train_counts + 1.0) / (train_counts.sum() + vocab_size)
    eval_counts = target_counts(held_out, vocab_size, max_batches)
    cross = float(-(eval_counts * np.log(smoothed)).sum() / max(eval_counts.sum(), 1.0))
    return {"train_entropy": entropy, "train_targets": int(train_counts.sum()),
            "heldout_cross_entropy": cross, "heldout_targets": int(eval_counts.sum()),
            "heldout_perplexity": math.exp(cross)}


def _stream_dataset(data_dirs: Sequence[str], global_batch_size: int) -> tf.data.Dataset:
    """The training batches of prepared directories, laid out as the first one's manifest."""
    manifest = manifest_lib.read_manifest(data_dirs[0])
    params = manifest["params"]
    return build_pretrain_dataset(
        list(data_dirs), seq_len=params["seq_len"], reuse_len=params["reuse_len"],
        num_predict=params["num_predict"], bi_data=bool(params["bi_data"]),
        vocab_size=int(manifest["vocab_size"]), global_batch_size=global_batch_size)


def held_out_unigram_baseline(data_dirs: Sequence[str], eval_dirs: Sequence[str], *,
                              global_batch_size: int, max_steps: int = 2000) -> dict:
    """The training unigram entropy and the held-out cross-entropy under the training unigram
    (see the module docstring), from the first `max_steps` batches of prepared training
    directories and held-out directories."""
    vocab_size = int(manifest_lib.read_manifest(data_dirs[0])["vocab_size"])
    return unigram_baselines(_stream_dataset(data_dirs, global_batch_size),
                             _stream_dataset(eval_dirs, global_batch_size),
                             vocab_size, max_steps)
