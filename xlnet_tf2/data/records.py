"""The on-disk format of prepared examples: feature names, file names, (de)serialization.

One TFRecord file holds every chunk of one (pass, direction, stream), chunk 0 first, so the
input pipeline can follow a stream's text without an index. Features (all int64 on disk,
int32 after parsing; varint encoding keeps small ranks compact):

  input_ids         [L]  token ids
  segment_ids       [L]  0 reused prefix and A (with its <sep>), 1 B (with its <sep>), 2 <cls>
  target_positions  [P]  ascending target positions, padded with -1
  perm_rank         [L]  factorization order, one rank per position (permutation.py)
  stream_id, chunk_index, direction, pass_id, is_next   [] bookkeeping and the A/B label
"""

from __future__ import annotations

import tensorflow as tf

from xlnet_tf2.data.examples import Example

SEQUENCE_FEATURES = ("input_ids", "segment_ids", "perm_rank")
SCALAR_FEATURES = ("stream_id", "chunk_index", "direction", "pass_id", "is_next")


def shard_name(pass_id: int, direction: int, stream_id: int) -> str:
    """File name of one (pass, direction, stream) inside a prepared directory."""
    return f"pass{pass_id:03d}-dir{direction}-stream{stream_id:06d}.tfrecord"


def serialize(example: Example) -> bytes:
    def ints(values):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=[int(v) for v in values]))

    feature = {name: ints(getattr(example, name)) for name in SEQUENCE_FEATURES}
    feature["target_positions"] = ints(example.target_positions)
    for name in SCALAR_FEATURES:
        feature[name] = ints([getattr(example, name)])
    example_proto = tf.train.Example(features=tf.train.Features(feature=feature))
    # Map fields serialize in arbitrary order unless asked; byte-identical output needs this.
    return example_proto.SerializeToString(deterministic=True)


def feature_spec(seq_len: int, num_predict: int) -> dict:
    spec = {name: tf.io.FixedLenFeature([seq_len], tf.int64) for name in SEQUENCE_FEATURES}
    spec["target_positions"] = tf.io.FixedLenFeature([num_predict], tf.int64)
    for name in SCALAR_FEATURES:
        spec[name] = tf.io.FixedLenFeature([], tf.int64)
    return spec


def parse_batch(serialized: tf.Tensor, seq_len: int, num_predict: int) -> dict:
    """Parses string [N] records into int32 tensors ([N, L], [N, P] and [N])."""
    parsed = tf.io.parse_example(serialized, feature_spec(seq_len, num_predict))
    # int64 -> int32: TPUs and XLA handle int32 natively.
    return {k: tf.cast(v, tf.int32) for k, v in parsed.items()}
