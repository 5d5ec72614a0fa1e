"""A synthetic pretraining input with the real pipeline's layout, for loop tests and benchmarks.

Same contract as `xlnet_tf2.data.pretrain_dataset.build_pretrain_dataset`: a dataset of
per-replica batches in which batch slot s of step t carries chunk t of its stream (so memory
continues per slot), elements of one input pipeline in round-robin replica order (what
`distribute_datasets_from_function` hands to its local replicas), and with `bi_data` each
replica's batch is [forward half; backward half] of the same streams. Deterministic in
(seed, step): a dataset started at `start_step` continues exactly where another one stopped.

Token t of stream g is a fixed function of (g, t) with some structure to learn; targets are
`num_predict` positions per example; perm_mask blocks every target from everyone (the simplest
valid factorization: non-targets first, targets last, all at one rank).
"""

from __future__ import annotations

import tensorflow as tf


def synthetic_pretrain_dataset(*, seq_len: int, reuse_len: int, num_predict: int, bi_data: bool,
                               vocab_size: int, global_batch_size: int,
                               input_context: tf.distribute.InputContext = None,
                               start_step: int = 0, seed: int = 0) -> tf.data.Dataset:
    pipelines = input_context.num_input_pipelines if input_context else 1
    pipeline_id = input_context.input_pipeline_id if input_context else 0
    replicas = input_context.num_replicas_in_sync if input_context else 1
    local_replicas = replicas // pipelines
    b = global_batch_size // replicas
    streams_per_replica = b // 2 if bi_data else b
    L, R, P, V = seq_len, reuse_len, num_predict, vocab_size

    def element(e):
        step = start_step + e // local_replicas
        replica = pipeline_id * local_replicas + e % local_replicas
        streams = replica * streams_per_replica + tf.range(streams_per_replica, dtype=tf.int64)
        # Stream positions of this chunk: [step*R, step*R + L).
        pos = step * R + tf.range(L, dtype=tf.int64)
        grid = streams[:, None] * 7919 + pos[None, :]
        tokens = (grid * 31 + (grid // 3) * 17 + seed * 101) % (V - 10) + 10  # [S, L]
        direction = tf.zeros([streams_per_replica], tf.int32)
        if bi_data:
            tokens = tf.concat([tokens, tf.reverse(tokens, axis=[1])], axis=0)
            streams = tf.concat([streams, streams], axis=0)
            direction = tf.concat([direction, tf.ones_like(direction)], axis=0)
        tokens = tf.cast(tokens, tf.int32)
        rows = tf.shape(tokens)[0]
        # Targets: P distinct positions per row, chosen by a seeded permutation of the row.
        keys = tf.random.stateless_uniform([b, L], seed=tf.stack([tf.cast(seed, tf.int64), step * 1009 + tf.cast(replica, tf.int64)]))
        target_pos = tf.sort(tf.math.top_k(keys, k=P).indices, axis=-1)  # [b, P]
        target_mapping = tf.one_hot(target_pos, L, dtype=tf.float32)  # [b, P, L]
        is_target = tf.reduce_max(target_mapping, axis=1)  # [b, L]
        perm_mask = tf.broadcast_to(is_target[:, None, :], [b, L, L])
        segment_ids = tf.concat([tf.zeros([b, L - L // 4], tf.int32), tf.ones([b, L // 4], tf.int32)], 1)
        return {
            "input_ids": tokens,
            "segment_ids": segment_ids,
            "perm_mask": perm_mask,
            "target_mapping": target_mapping,
            "target": tf.gather(tokens, target_pos, batch_dims=1),
            "target_mask": tf.ones([b, P], tf.float32),
            "stream_id": tf.cast(streams, tf.int32),
            "chunk_index": tf.fill([rows], tf.cast(step, tf.int32)),
            "direction": direction,
            "pass_id": tf.zeros([rows], tf.int32),
        }

    return tf.data.Dataset.range(10 ** 12).map(element).prefetch(2)
