"""The on-disk format of prepared examples: feature names, file names, (de)serialization.

One TFRecord file holds every chunk of one (pass, direction, stream), chunk 0 first, so the
input pipeline can follow a stream's text without an index. Features (all int64 on disk,
int32 after parsing; varint encoding keeps small ranks compact):

  input_ids         [L]  token ids
  segment_ids       [L]  0 reused prefix and A (with its <sep>), 1 B (with its <sep>), 2 <cls>
  target_positions  [P]  ascending target positions, padded with -1
  perm_rank         [L]  factorization order, one rank per position (objective_sampling.py)
  stream_id, chunk_index, direction, pass_id, is_next   [] bookkeeping and the A/B label

`serialize_batch` writes the tf.train.Example wire format directly from numpy arrays (varints
encoded vectorized, features in sorted key order as `SerializeToString(deterministic=True)`
orders map entries); tests/data/test_records.py checks it byte for byte against `serialize`.
"""

from __future__ import annotations

import dataclasses
import struct
from typing import Dict, Iterable, List, Tuple

import google_crc32c
import numpy as np

from xlnet_tf2 import fileio

SEQUENCE_FEATURES = ("input_ids", "segment_ids", "perm_rank")
SCALAR_FEATURES = ("stream_id", "chunk_index", "direction", "pass_id", "is_next")
# TFRecord framing around each record: uint64 length, masked CRC32C of it, masked CRC32C of
# the data.
TFRECORD_OVERHEAD = 16


@dataclasses.dataclass
class Example:
    """One pretraining example as stored on disk (all arrays int32)."""

    input_ids: np.ndarray         # [L]
    segment_ids: np.ndarray       # [L]
    target_positions: np.ndarray  # [P], ascending, padded with -1
    perm_rank: np.ndarray         # [L], see objective_sampling.py
    stream_id: int
    chunk_index: int
    direction: int                # 0 forward, 1 backward
    pass_id: int
    is_next: int                  # A/B label: 1 if B is the text after A, 0 if random


def shard_name(pass_id: int, direction: int, stream_id: int) -> str:
    """File name of one (pass, direction, stream) inside a prepared directory."""
    return f"pass{pass_id:03d}-dir{direction}-stream{stream_id:06d}.tfrecord"


def serialize(example: Example) -> bytes:
    import tensorflow as tf  # the reference implementation; data prep itself needs no TF

    def ints(values):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=[int(v) for v in values]))

    feature = {name: ints(getattr(example, name)) for name in SEQUENCE_FEATURES}
    feature["target_positions"] = ints(example.target_positions)
    for name in SCALAR_FEATURES:
        feature[name] = ints([getattr(example, name)])
    example_proto = tf.train.Example(features=tf.train.Features(feature=feature))
    # Map fields serialize in arbitrary order unless asked; byte-identical output needs this.
    return example_proto.SerializeToString(deterministic=True)


ALL_FEATURES = tuple(sorted(SEQUENCE_FEATURES + ("target_positions",) + SCALAR_FEATURES))


def varint_groups(values: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Protobuf varints of int values [E, k] (negative: 10-byte two's complement), unpacked.

    Returns:
      (uint8 [E, k, w] the w 7-bit groups of every value, low group first, each with its
      continuation bit; bool [E, k, w] whether the value's varint uses the group: a prefix
      of each value's w). w is what the largest value needs.
    """
    values = np.asarray(values)
    if values.size and int(values.min()) < 0:
        v = np.ascontiguousarray(values, dtype=np.int64).view(np.uint64)  # two's complement
    elif values.size == 0 or int(values.max()) < (1 << 32):
        v = values.astype(np.uint32)
    else:
        v = values.astype(np.uint64)
    top = int(v.max()) if v.size else 0
    width = max(1, (top.bit_length() + 6) // 7)
    used = np.empty(v.shape + (width,), dtype=bool)
    used[..., 0] = True
    for k in range(1, width):
        np.greater_equal(v, 1 << (7 * k), out=used[..., k])
    groups = np.empty(v.shape + (width,), dtype=np.uint8)
    for k in range(width):
        byte = (v >> (7 * k)).astype(np.uint8) & 0x7F
        if k + 1 < width:
            byte |= used[..., k + 1].view(np.uint8) << 7                  # more follow
        groups[..., k] = byte
    return groups, used


def varints(values: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Protobuf varints of int values [E, k] (negative: 10-byte two's complement).

    Returns:
      (flat uint8 bytes of all values in row-major order, int64 [E] bytes per row).
    """
    groups, used = varint_groups(values)
    return groups[used], used.reshape(used.shape[0], -1).sum(axis=-1, dtype=np.int64)


def _varint_bytes(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


_HEADERS: Dict[tuple, bytes] = {}


def _entry_header(name: str, packed_len: int) -> bytes:
    """Map entry of feature `name` up to its packed values (which have packed_len bytes)."""
    key = (name, packed_len)
    header = _HEADERS.get(key)
    if header is None:
        name_bytes = name.encode()
        int64_list = b"\x0a" + _varint_bytes(packed_len)             # Int64List.value
        il_len = len(int64_list) + packed_len
        feature = b"\x1a" + _varint_bytes(il_len) + int64_list        # Feature.int64_list
        ft_len = len(feature) - len(int64_list) + il_len
        entry = (b"\x0a" + _varint_bytes(len(name_bytes)) + name_bytes   # entry key
                 + b"\x12" + _varint_bytes(ft_len) + feature)          # entry value
        en_len = len(entry) - len(feature) + ft_len
        header = b"\x0a" + _varint_bytes(en_len) + entry               # Features.feature
        _HEADERS[key] = header
    return header


def _header_slots(name: str, packed_lengths: np.ndarray):
    """`_entry_header(name, n)` of each example's packed length n, as padded slots.

    Returns:
      (uint8 [E, h] header bytes padded to the longest, bool [E, h] which are used,
      int64 [E] header lengths).
    """
    unique, inverse = np.unique(packed_lengths, return_inverse=True)
    headers = [_entry_header(name, int(n)) for n in unique]
    sizes = np.array([len(h) for h in headers], np.int64)
    table = np.zeros((len(headers), int(sizes.max())), np.uint8)
    for row, header in enumerate(headers):
        table[row, :len(header)] = np.frombuffer(header, np.uint8)
    used = np.arange(table.shape[1])[None, :] < sizes[:, None]
    return table[inverse], used[inverse], sizes[inverse]


def _masked_crcs(crcs: np.ndarray) -> np.ndarray:
    """CRC32Cs [E] -> the TFRecord checksums (`_mask`), little-endian uint32 [E]."""
    return _mask(crcs.astype(np.uint64)).astype("<u4")


def _example_layout(batch: Dict[str, np.ndarray], framed: bool):
    """E serialized examples (TFRecord-framed if `framed`) in one buffer.

    Every example is first laid out in the same fixed slots, [E, s] bytes with a mask of
    the slots it uses: frame head (uint64 length, its masked CRC), 0x0a and the varint body
    length, then per feature its map-entry header (`_entry_header`) and its values' varint
    groups (`varint_groups`: w slots per value), and the record's CRC. One boolean selection
    of the used slots (row-major) is then the whole byte string, examples one after another:
    no per-example Python and no index arithmetic.

    Returns:
      (uint8 buffer, int64 [E] start of each record, int64 [E] record lengths); with
      `framed`, each record's CRC is left zero (`framed_batch` fills it in).
    """
    if np.asarray(batch[ALL_FEATURES[0]]).shape[0] == 0:
        return np.zeros(0, np.uint8), np.zeros(0, np.int64), np.zeros(0, np.int64)
    slots: List[np.ndarray] = []
    used: List[np.ndarray] = []
    body_len = None
    for name in ALL_FEATURES:
        values = np.asarray(batch[name])
        if values.ndim == 1:
            values = values[:, None]
        groups, group_used = varint_groups(values)                    # [E, k, w] each
        num = values.shape[0]
        group_used = group_used.reshape(num, -1)
        packed = group_used.sum(axis=-1, dtype=np.int64)               # [E]
        header, header_used, header_len = _header_slots(name, packed)
        slots += [header, groups.reshape(num, -1)]
        used += [header_used, group_used]
        body_len = header_len + packed if body_len is None else body_len + header_len + packed
    num = body_len.shape[0]
    size_groups, size_used = varint_groups(body_len[:, None])         # [E, 1, w] each
    size_used = size_used[:, 0, :]
    record_len = 1 + size_used.sum(axis=-1, dtype=np.int64) + body_len
    start = [np.full((num, 1), 0x0A, np.uint8), size_groups[:, 0, :]]
    start_used = [np.ones((num, 1), bool), size_used]
    head = tail = 0
    if framed:
        head, tail = 12, 4
        unique, inverse = np.unique(record_len, return_inverse=True)
        length_crcs = _masked_crcs(np.array(
            [google_crc32c.value(struct.pack("<Q", int(n))) for n in unique], np.uint64))
        start = [record_len.astype("<u8").view(np.uint8).reshape(num, 8),
                 length_crcs[inverse].view(np.uint8).reshape(num, 4)] + start
        start_used = [np.ones((num, 12), bool)] + start_used
        slots.append(np.zeros((num, 4), np.uint8))
        used.append(np.ones((num, 4), bool))
    out = np.concatenate(start + slots, axis=1)[np.concatenate(start_used + used, axis=1)]
    record_start = np.cumsum(record_len + head + tail) - record_len - tail
    return out, record_start, record_len


def serialize_batch(batch: Dict[str, np.ndarray]) -> List[bytes]:
    """Serialized tf.train.Example records of E examples, byte-identical to `serialize`.

    Args:
      batch: every name of ALL_FEATURES -> int array [E, k] (sequences) or [E] (scalars).
    """
    out, starts, lengths = _example_layout(batch, framed=False)
    data = out.tobytes()
    return [data[s:s + n] for s, n in zip(starts.tolist(), lengths.tolist())]


def framed_batch(batch: Dict[str, np.ndarray]) -> bytes:
    """The TFRecord file bytes of E examples: `tfrecord_frames(serialize_batch(batch))`,
    built in one buffer (every example's bytes placed by vectorized scatters; only the
    CRC32C of each record is a call per example)."""
    out, starts, lengths = _example_layout(batch, framed=True)
    if not lengths.shape[0]:
        return b""
    data = out.tobytes()
    crcs = np.array([google_crc32c.value(data[s:s + n])
                     for s, n in zip(starts.tolist(), lengths.tolist())], np.uint64)
    out[(starts + lengths)[:, None] + np.arange(4)] = (
        _masked_crcs(crcs).view(np.uint8).reshape(-1, 4))
    return out.tobytes()


def feature_spec(seq_len: int, num_predict: int) -> dict:
    import tensorflow as tf

    spec = {name: tf.io.FixedLenFeature([seq_len], tf.int64) for name in SEQUENCE_FEATURES}
    spec["target_positions"] = tf.io.FixedLenFeature([num_predict], tf.int64)
    for name in SCALAR_FEATURES:
        spec[name] = tf.io.FixedLenFeature([], tf.int64)
    return spec


def parse_batch(serialized, seq_len: int, num_predict: int) -> dict:
    """Parses string [E] records (a tf.Tensor) into int32 tensors ([E, L], [E, P] and [E])."""
    import tensorflow as tf

    parsed = tf.io.parse_example(serialized, feature_spec(seq_len, num_predict))
    # int64 -> int32: TPUs and XLA handle int32 natively.
    return {k: tf.cast(v, tf.int32) for k, v in parsed.items()}


def _mask(crc):
    """A CRC32C (int, or uint64 array) rotated right by 15 bits plus a constant, as TFRecord
    framing stores it."""
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _masked_crc(data: bytes) -> int:
    """The TFRecord checksum of `data`."""
    return _mask(google_crc32c.value(data))


def tfrecord_frames(records_: Iterable[bytes]) -> bytes:
    """The TFRecord file bytes of `records_`, each framed as tf.io.TFRecordWriter frames it.

    Frame: uint64 length (little endian), masked CRC32C of those 8 bytes, the record, masked
    CRC32C of the record. Computed with google-crc32c (hardware CRC32C), so writing prepared
    data needs no TensorFlow (tests/data/test_records.py compares with tf.io.TFRecordWriter).
    """
    parts = []
    for record in records_:
        length = struct.pack("<Q", len(record))
        parts.append(length)
        parts.append(struct.pack("<I", _masked_crc(length)))
        parts.append(record)
        parts.append(struct.pack("<I", _masked_crc(record)))
    return b"".join(parts)


class TFRecordFileWriter:
    """Writes one uncompressed TFRecord file to a temporary name; `commit` renames it.

    Usage: `with TFRecordFileWriter(path) as w: w.write_all(records); w.commit()`. A writer
    left without `commit` (an exception, a killed worker) removes its temporary file, so a
    prepared directory never holds a partial file under its final name.
    """

    def __init__(self, path: str):
        self.path = path
        self._tmp = fileio.temporary_name(path)
        self._file = fileio.open_file(self._tmp, "wb")
        self.records = 0
        self.bytes = 0
        self._committed = False

    def write_all(self, records_: List[bytes]) -> None:
        data = tfrecord_frames(records_)
        self._file.write(data)
        self.records += len(records_)
        self.bytes += len(data)

    def write_batch(self, batch: Dict[str, np.ndarray]) -> None:
        """Writes the E examples of `batch` (see `serialize_batch`)."""
        data = framed_batch(batch)
        self._file.write(data)
        self.records += int(np.asarray(batch[ALL_FEATURES[0]]).shape[0])
        self.bytes += len(data)

    def commit(self) -> None:
        self._file.close()
        fileio.rename(self._tmp, self.path)
        self._committed = True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if not self._committed:
            self._file.close()
            try:
                fileio.remove(self._tmp)
            except Exception:  # best effort: the error being raised matters more
                pass
        return False
