"""Bulk serialization is byte-identical to tf.train.Example.SerializeToString."""

import os

import numpy as np
import pytest
import tensorflow as tf

from xlnet_tf2.data import records
from xlnet_tf2.data.records import Example


def _batch(rng, num, seq_len, num_predict, big=False):
    high = 2 ** 62 if big else 32000
    return {
        "input_ids": rng.integers(0, high, (num, seq_len)),
        "segment_ids": rng.integers(0, 3, (num, seq_len)),
        "perm_rank": rng.integers(0, seq_len, (num, seq_len)),
        "target_positions": np.where(rng.random((num, num_predict)) < 0.3, -1,
                                     rng.integers(0, seq_len, (num, num_predict))),
        "stream_id": rng.integers(0, 100_000, num), "chunk_index": rng.integers(0, 10 ** 7, num),
        "direction": rng.integers(0, 2, num), "pass_id": rng.integers(0, 4, num),
        "is_next": rng.integers(0, 2, num)}


@pytest.mark.parametrize("seq_len,num_predict,big", [(64, 10, False), (512, 85, False),
                                                     (16, 3, True)])
def test_serialize_batch_is_byte_identical(seq_len, num_predict, big):
    rng = np.random.default_rng(seq_len)
    batch = _batch(rng, 40, seq_len, num_predict, big)
    fast = records.serialize_batch(batch)
    assert len(fast) == 40
    for c in range(40):
        example = Example(**{name: batch[name][c] for name in records.ALL_FEATURES})
        assert fast[c] == records.serialize(example), c
    parsed = records.parse_batch(tf.constant(fast), seq_len, num_predict)
    if not big:
        for name in records.ALL_FEATURES:
            np.testing.assert_array_equal(parsed[name].numpy(), batch[name])


@pytest.mark.parametrize("seq_len,num_predict,big", [(64, 10, False), (512, 85, False),
                                                     (16, 3, True)])
def test_framed_batch_is_tensorflows_tfrecord_file(tmp_path, seq_len, num_predict, big):
    """The one-buffer writer (`framed_batch`, `TFRecordFileWriter.write_batch`) gives the
    bytes tf.io.TFRecordWriter writes for the examples `serialize` gives."""
    rng = np.random.default_rng(seq_len + 1)
    batch = _batch(rng, 33, seq_len, num_predict, big)
    path = str(tmp_path / "tf.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        for c in range(33):
            writer.write(records.serialize(
                Example(**{name: batch[name][c] for name in records.ALL_FEATURES})))
    with open(path, "rb") as f:
        expected = f.read()
    assert records.framed_batch(batch) == expected
    ours = str(tmp_path / "ours.tfrecord")
    with records.TFRecordFileWriter(ours) as w:
        w.write_batch({k: v[:20] for k, v in batch.items()})
        w.write_batch({k: v[20:] for k, v in batch.items()})
        w.write_batch({k: v[:0] for k, v in batch.items()})  # nothing
        w.commit()
    assert open(ours, "rb").read() == expected and (w.records, w.bytes) == (33, len(expected))


def test_varint_groups_mark_the_bytes_each_value_uses():
    groups, used = records.varint_groups(np.array([[0, 127, 128, 300]]))
    assert groups.shape == used.shape == (1, 4, 2)
    assert used[0].tolist() == [[True, False], [True, False], [True, True], [True, True]]
    assert groups[0, 3].tolist() == [0xAC, 0x02]      # 300 = 0b10_0101100


def test_varints_edge_values():
    values = np.array([[0, 1, 127, 128, 16383, 16384, 2 ** 31 - 1, 2 ** 63 - 1, -1, -2]])
    flat, lengths = records.varints(values)
    expected = b"".join(records._varint_bytes(int(v) % 2 ** 64) for v in values[0])
    assert flat.tobytes() == expected and lengths.tolist() == [len(expected)]
    assert records.TFRECORD_OVERHEAD == 16


def test_tfrecord_frames_equal_tensorflows_writer(tmp_path):
    rng = np.random.default_rng(3)
    payloads = [b"", b"x", rng.bytes(5000)] + records.serialize_batch(_batch(rng, 3, 64, 10))
    path = str(tmp_path / "tf.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        for p in payloads:
            writer.write(p)
    with open(path, "rb") as f:
        expected = f.read()
    assert records.tfrecord_frames(payloads) == expected
    # The file writer: same bytes, counts, and nothing under the final name until commit.
    ours = str(tmp_path / "ours.tfrecord")
    with records.TFRecordFileWriter(ours) as w:
        w.write_all(payloads[:2])
        w.write_all(payloads[2:])
        assert not os.path.exists(ours)
        w.commit()
    assert open(ours, "rb").read() == expected
    assert (w.records, w.bytes) == (len(payloads), len(expected))
    assert [r.numpy() for r in tf.data.TFRecordDataset(ours)] == payloads


def test_uncommitted_writer_leaves_no_file(tmp_path):
    target = str(tmp_path / "f.tfrecord")
    with pytest.raises(RuntimeError):
        with records.TFRecordFileWriter(target) as w:
            w.write_all([b"abc"])
            raise RuntimeError("worker died")
    assert os.listdir(tmp_path) == []
