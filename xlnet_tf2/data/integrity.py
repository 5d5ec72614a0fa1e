"""Integrity of prepared pretraining files: wrong sizes, missing or misplaced records, bad CRCs,
checked at start-up (`check_files`), while reading (`RecordCheck`) and after a DataLossError
(`CorruptRecordLocator`); every error is a one-line `DataIntegrityError`. Why and how:
docs/DATA.md#integrity-of-prepared-files.
"""

from __future__ import annotations

import os
import re
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, List, Optional, Sequence, Tuple

import tensorflow as tf

from xlnet_tf2.data.manifest import ManifestError
from xlnet_tf2.data import records

RECORD_FRAMING_BYTES = 16  # uint64 length, uint32 length CRC, uint32 data CRC
_MARK = "@@xlnet-data-integrity@@"
_MARKED = re.compile(re.escape(_MARK) + r"(.*?)" + re.escape(_MARK), re.S)
_FIX = "Re-copy the file from the prepared original or re-run data_prep/create_tfrecords.py."


class DataIntegrityError(ManifestError):
    """A prepared file does not hold what its manifest says (message names file and step)."""


def expected_records(manifest: dict, name: str) -> int:
    """Records file `name` must hold: every (pass, direction, stream) file holds one record per
    chunk of its stream, chunks_per_stream (file_stats, when present, must agree)."""
    return int(manifest["chunks_per_stream"])


def min_record_bytes(manifest: dict) -> int:
    """A lower bound of one serialized record: framing plus one byte per varint it stores."""
    params = manifest["params"]
    return RECORD_FRAMING_BYTES + 3 * int(params["seq_len"]) + int(params["num_predict"]) + 5


def check_file(data_dir: str, manifest: dict, name: str) -> None:
    """Raises DataIntegrityError if file `name` of `data_dir` has the wrong size (see module)."""
    path = os.path.join(data_dir, name)
    records = expected_records(manifest, name)
    try:
        size = tf.io.gfile.stat(path).length
    except tf.errors.NotFoundError:
        raise DataIntegrityError(f"{path} is missing; the manifest of {data_dir} lists it. "
                                 + _FIX) from None
    stats = (manifest.get("file_stats") or {}).get(name)
    if stats is not None:
        if int(stats["records"]) != records:
            raise DataIntegrityError(
                f"{os.path.join(data_dir, 'record_info.json')} says {name} holds "
                f"{stats['records']} records but chunks_per_stream is {records}; the manifest "
                "is inconsistent. Re-run data_prep/create_tfrecords.py.")
        if size != int(stats["bytes"]):
            raise DataIntegrityError(
                f"{path} is {size} bytes, its manifest says {stats['bytes']} ({records} "
                f"records): the file is {'truncated' if size < int(stats['bytes']) else 'longer'}"
                f" or was replaced. " + _FIX)
        return
    least = records * min_record_bytes(manifest)
    if size < least:
        raise DataIntegrityError(
            f"{path} is {size} bytes, too small for the {records} records its manifest gives "
            f"every file (at least {least} bytes): the file is truncated. " + _FIX)


def check_files(data_dir: str, manifest: dict, names: Sequence[str], threads: int = 16) -> None:
    """check_file for each name (in parallel: on GCS a stat takes tens of milliseconds)."""
    names = sorted(set(names))
    if len(names) <= 1 or threads <= 1:
        for name in names:
            check_file(data_dir, manifest, name)
        return
    with ThreadPoolExecutor(max_workers=min(threads, len(names))) as pool:
        for future in [pool.submit(check_file, data_dir, manifest, n) for n in names]:
            future.result()  # the first failure (in name order) is raised


def check_slot_files(schedule, slot_files: List[List[str]]) -> None:
    """check_files for every file of `slot_files` ([slots][blocks] paths, as RecordCheck)."""
    by_dir = {}
    for files in slot_files:
        for path, block in zip(files, schedule.blocks):
            by_dir.setdefault(block.dir_index, (block.data_dir, set()))[1].add(
                os.path.basename(path))
    for index, (data_dir, names) in sorted(by_dir.items()):
        check_files(data_dir, schedule.manifests[index], sorted(names))


class RecordCheck:
    """In-graph check that every record read is the one the schedule expects (module doc, 2).

    Args:
      schedule: the PretrainSchedule (blocks with pass_id, group, steps; streams_per_step).
      slot_files: for each slot this pipeline serves (in batch-row order), the path of its file
        in every block, [num_slots][num_blocks].
      slot_streams: for each slot, (stream index inside the step's group, direction).

    Calling it on the parsed records of one step (int32 tensors [num_slots] for pass_id,
    direction, stream_id, chunk_index) and the 0-based step returns them unchanged, after an
    assertion that fails naming the first wrong record's file, record and training step.
    """

    def __init__(self, schedule, slot_files: List[List[str]],
                 slot_streams: Sequence[Tuple[int, int]]):
        blocks = schedule.blocks
        starts = [0]
        for b in blocks:
            starts.append(starts[-1] + b.steps)
        self._cycle_steps = starts[-1]
        self._block_end = tf.constant(starts[1:], tf.int64)
        self._block_start = tf.constant(starts[:-1], tf.int64)
        self._block_pass = tf.constant([b.pass_id for b in blocks], tf.int32)
        self._block_base = tf.constant([b.group * schedule.streams_per_step for b in blocks],
                                       tf.int32)
        self._slot_stream = tf.constant([s for s, _ in slot_streams], tf.int32)
        self._slot_direction = tf.constant([d for _, d in slot_streams], tf.int32)
        self._files = tf.constant(slot_files, tf.string)  # [slots, blocks]
        self._records = tf.constant([b.steps for b in blocks], tf.int64)

    def __call__(self, parsed: dict, step: tf.Tensor) -> dict:
        step = tf.cast(step, tf.int64)
        position = step % self._cycle_steps
        block = tf.cast(tf.searchsorted(self._block_end, position[None], side="right")[0],
                        tf.int32)
        chunk = tf.cast(position - self._block_start[block], tf.int32)
        expected = {"pass_id": tf.fill(tf.shape(self._slot_stream), self._block_pass[block]),
                    "direction": self._slot_direction,
                    "stream_id": self._block_base[block] + self._slot_stream,
                    "chunk_index": tf.fill(tf.shape(self._slot_stream), chunk)}
        names = ("pass_id", "direction", "stream_id", "chunk_index")
        wrong = tf.reduce_any(tf.stack([tf.not_equal(parsed[n], expected[n]) for n in names]),
                              axis=0)
        slot = tf.cast(tf.argmax(tf.cast(wrong, tf.int32)), tf.int32)

        def described(values):
            return tf.strings.join([
                "pass ", tf.strings.as_string(values["pass_id"][slot]),
                " direction ", tf.strings.as_string(values["direction"][slot]),
                " stream ", tf.strings.as_string(values["stream_id"][slot]),
                " chunk ", tf.strings.as_string(values["chunk_index"][slot])])

        message = tf.strings.join([
            _MARK, self._files[slot, block], ": record ", tf.strings.as_string(chunk),
            " (read at training step ", tf.strings.as_string(step + 1), ") should be ",
            described(expected), " but is ", described(parsed), ": the file is truncated "
            "(a file cut at a record boundary reads as a shorter valid file), holds extra "
            "records or is misplaced; its manifest gives every file ",
            tf.strings.as_string(self._records[block]), " records. " + _FIX, _MARK])
        check = tf.debugging.Assert(tf.logical_not(tf.reduce_any(wrong)), [message],
                                    summarize=1)
        with tf.control_dependencies([check]):
            return {k: tf.identity(v) for k, v in parsed.items()}


class CorruptRecordLocator:
    """Finds the record behind a DataLossError: the first unreadable record of the files read
    at training steps [first, last + lookahead] (module doc, 3).

    Args:
      schedule: the PretrainSchedule of the training data.
      bi_data: whether both directions are read.
      lookahead: steps past `last` that prefetching may already have read.
    """

    def __init__(self, schedule, bi_data: bool, lookahead: int = 64):
        self._schedule = schedule
        self._lookahead = lookahead
        self._directions = (0, 1) if bi_data else (0,)
        self._shard_name = records.shard_name

    def _block_files(self, block) -> List[str]:
        per_step = self._schedule.streams_per_step
        return [os.path.join(block.data_dir, self._shard_name(
            block.pass_id, direction, block.group * per_step + stream))
            for direction in self._directions for stream in range(per_step)]

    def __call__(self, first_step: int, last_step: int) -> Optional[Tuple[str, int, int]]:
        """(path, record index, training step) of the first corrupt record, or None."""
        schedule = self._schedule
        cycle = schedule.steps_per_cycle
        starts = [0]
        for b in schedule.blocks:
            starts.append(starts[-1] + b.steps)
        # Blocks (with the last chunk read) touched by dataset steps first-1 .. last-1+lookahead.
        touched = {}
        for s in range(first_step - 1, last_step + self._lookahead):
            index, chunk = schedule.locate(s)
            key = (s // cycle, index)
            touched[key] = max(touched.get(key, 0), chunk)
        for (cycle_index, index), last_chunk in sorted(touched.items()):
            for path in self._block_files(schedule.blocks[index]):
                record = _first_unreadable(path, last_chunk + 1)
                if record is not None:
                    return path, record, cycle_index * cycle + starts[index] + record + 1
        return None


def _first_unreadable(path: str, limit: int) -> Optional[int]:
    """Index of the first record of `path` (among its first `limit`) TensorFlow cannot read."""
    count = 0
    try:
        for _ in tf.data.TFRecordDataset(path).take(limit):
            count += 1
    except (tf.errors.DataLossError, tf.errors.NotFoundError):
        return count
    return None


def translate_input_error(error: Exception, first_step: int, last_step: int,
                          locate: Optional[Callable[[int, int], Optional[tuple]]] = None
                          ) -> Optional[DataIntegrityError]:
    """A DataIntegrityError for an input error raised by TensorFlow while training steps
    [first_step, last_step] ran, or None when `error` is not about the input data."""
    message = getattr(error, "message", None) or str(error)
    marked = _MARKED.search(message)
    if marked:
        return DataIntegrityError(marked.group(1).replace('\\"', '"'))
    if not isinstance(error, tf.errors.DataLossError):
        return None
    cause = re.sub(r"\{\{[^}]*\}\}|\[Op:[^\]]*\]|name: *$", "", message).strip()
    steps = (f"training step {first_step}" if first_step == last_step
             else f"training steps {first_step}-{last_step}")
    found = locate(first_step, last_step) if locate is not None else None
    if found is not None:
        path, record, step = found
        return DataIntegrityError(
            f"{path}: record {record} (read at training step {step}) is corrupted "
            f"(TensorFlow: {cause}) while running {steps}. " + _FIX)
    return DataIntegrityError(
        f"A corrupted input record stopped {steps} (TensorFlow: {cause}); the file could not "
        "be determined. Re-copy the prepared directory or re-run data_prep/create_tfrecords.py.")
