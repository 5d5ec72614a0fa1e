"""A synthetic pretraining input with the real pipeline's layout, for loop tests and benchmarks.

Same contract as `xlnet_tf2.data.pretrain_dataset.build_pretrain_dataset`: a dataset of
per-replica batches of the compact features (`OUTPUT_FEATURES`, the dense masks are built on
the device by the training step) in which batch slot s of step t carries chunk t of its
stream (so memory continues per slot), elements of one input pipeline in round-robin replica
order (what `distribute_datasets_from_function` hands to its local replicas), the same slot
layout (`BatchLayout.slot`: with `bi_data` every replica's batch, and with `micro_batches` > 1
every micro-batch, is [forward half; backward half] of the same streams). Deterministic in
(seed, step): a dataset started at `start_step` continues exactly where another one stopped.

Token t of stream g is a fixed function of (g, t) with some structure to learn. The content
of a row (tokens, factorization order, targets) depends only on (seed, step, stream,
direction), never on the row's place in the batch, so a step holds the same examples on any
topology and with any number of micro-batches. The factorization order is a random
permutation of each half ([0, R) and [R, L)); the targets are `num_predict` random positions.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Optional

import tensorflow as tf

from xlnet_tf2.data.batch_layout import BatchLayout
from xlnet_tf2.data.pretrain_dataset import OUTPUT_DTYPES, OUTPUT_FEATURES, DataShape


def _mix(x: tf.Tensor) -> tf.Tensor:
    """A 31-bit integer hash of int64 x (elementwise), good enough for test randomness."""
    x = tf.math.floormod(x, 2147483647)
    for multiplier in (1103515245, 2654435761 % 2147483647, 1664525):
        x = tf.math.floormod(x * multiplier + 12345, 2147483647)
        x = tf.bitwise.bitwise_xor(x, tf.bitwise.right_shift(x, 13))
    return x


def _row_orders(streams, direction, step, seed, L, R, P):
    """perm_rank int32 [n, L] (a permutation inside each half) and target_positions int32
    [n, P] (ascending), functions of (seed, step, stream, direction) of each row."""
    row_key = ((tf.cast(streams, tf.int64) * 2 + tf.cast(direction, tf.int64)) * 1000003
               + step * 7919 + seed * 104729)                                   # [n]
    pos = tf.range(L, dtype=tf.int64)
    keys = _mix(row_key[:, None] * 65537 + pos[None, :])                        # [n, L]
    halves = []
    for start, stop in ((0, R), (R, L)):
        if stop > start:
            order = tf.argsort(tf.argsort(keys[:, start:stop], axis=-1, stable=True), axis=-1,
                               stable=True)
            halves.append(order + start)
    perm_rank = tf.cast(tf.concat(halves, axis=1), tf.int32)                    # [n, L]
    target_keys = _mix(keys + 77)
    targets = tf.argsort(target_keys, axis=-1, stable=True)[:, :P]             # [n, P]
    return perm_rank, tf.cast(tf.sort(targets, axis=-1), tf.int32)


def synthetic_pretrain_dataset(*, seq_len: int, reuse_len: int, num_predict: int, bi_data: bool,
                               vocab_size: int, global_batch_size: int,
                               input_context: tf.distribute.InputContext = None,
                               start_step: int = 0, seed: int = 0,
                               micro_batches: int = 1) -> tf.data.Dataset:
    pipelines = input_context.num_input_pipelines if input_context else 1
    pipeline_id = input_context.input_pipeline_id if input_context else 0
    replicas = input_context.num_replicas_in_sync if input_context else 1
    local_replicas = replicas // pipelines
    b = global_batch_size // replicas
    L, R, P, V = seq_len, reuse_len, num_predict, vocab_size
    # [replicas, b] stream within the step and direction of every row (the pipeline's rule).
    batch_layout = BatchLayout(global_batch_size, replicas, micro_batches, bi_data)
    layout = [[batch_layout.slot(r, row) for row in range(b)] for r in range(replicas)]
    stream_table = tf.constant([[s for s, _ in rows] for rows in layout], tf.int64)
    direction_table = tf.constant([[d for _, d in rows] for rows in layout], tf.int32)

    def element(e):
        step = start_step + e // local_replicas
        replica = pipeline_id * local_replicas + e % local_replicas
        streams = stream_table[replica]                                         # [b]
        direction = direction_table[replica]                                    # [b]
        # Stream positions of this chunk: [step*R, step*R + L).
        pos = step * R + tf.range(L, dtype=tf.int64)
        grid = streams[:, None] * 7919 + pos[None, :]
        tokens = (grid * 31 + (grid // 3) * 17 + seed * 101) % (V - 10) + 10  # [b, L]
        tokens = tf.where(direction[:, None] > 0, tf.reverse(tokens, axis=[1]), tokens)
        perm_rank, target_positions = _row_orders(streams, direction, step, seed, L, R, P)
        features = {
            "input_ids": tokens,
            "segment_ids": tf.concat([tf.zeros([b, L - L // 4]), tf.ones([b, L // 4])], 1),
            "perm_rank": perm_rank,
            "target_positions": target_positions,
            "stream_id": streams,
            "chunk_index": tf.fill([b], step),
            "direction": direction,
            "pass_id": tf.zeros([b]),
        }
        return {k: tf.cast(features[k], OUTPUT_DTYPES[k][0]) for k in OUTPUT_FEATURES}

    return tf.data.Dataset.range(10 ** 12).map(element).prefetch(2)


@dataclasses.dataclass(frozen=True)
class SyntheticPretrainData:
    """Training data for `PretrainTask` (tasks/pretraining.py) without prepared files: the
    synthetic stream above, or batches from `dataset_fn(input_context, start_step)` (tests
    that need special data: a stream that runs out, a scripted sequence of blocks)."""

    shape: DataShape
    vocab_size: int
    dataset_fn: Optional[Callable] = None

    def validate(self, layout) -> None:
        """Nothing to check: any batch layout can be served (BatchLayout checks itself)."""

    def corrupt_record_locator(self, global_batch_size: int):
        return None  # no files

    def dataset(self, global_batch_size: int, *, input_context=None, start_step: int = 0,
                online_permutation: bool = False, seed: int = 0,
                micro_batches: int = 1) -> tf.data.Dataset:
        if self.dataset_fn is not None:
            return self.dataset_fn(input_context, start_step)
        s = self.shape
        return synthetic_pretrain_dataset(
            seq_len=s.seq_len, reuse_len=s.reuse_len, num_predict=s.num_predict,
            bi_data=s.bi_data, vocab_size=self.vocab_size, global_batch_size=global_batch_size,
            input_context=input_context, start_step=start_step, seed=seed,
            micro_batches=micro_batches)
