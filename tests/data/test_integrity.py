"""Damaged prepared files fail with one error naming the file (and the step), never train
silently: a file cut at a record boundary, a file cut short with the manifest's file_stats, a
record with a bad CRC; through the input pipeline, the training loop and the command line."""

import json
import os
import shutil
import subprocess
import sys

import pytest
import tensorflow as tf

from xlnet_tf2.data import integrity, records
from xlnet_tf2.data.integrity import DataIntegrityError
from xlnet_tf2.data.manifest import ManifestError
from xlnet_tf2.data.pretrain_dataset import build_pretrain_dataset, load_schedule

from fixtures.corpora import SMALL, prepared_dir
from fixtures.paths import REPO_ROOT as ROOT

pytestmark = pytest.mark.slow  # prepared_dir() runs Beam with worker processes

CONFIG = dict(seq_len=SMALL.seq_len, reuse_len=SMALL.reuse_len, num_predict=SMALL.num_predict,
              bi_data=True, vocab_size=600, global_batch_size=8)


def _copy(tmp_path):
    """A private copy of the shared prepared directory (8 streams, 2 passes, bi_data), its
    manifest without file_stats (as written before they existed), so the checks that do not
    need them are exercised; tests that want them add them back (_add_file_stats)."""
    out = str(tmp_path / "data")
    shutil.copytree(prepared_dir(), out)
    manifest = _manifest(out)
    manifest.pop("file_stats", None)
    _write_manifest(out, manifest)
    return out


def _manifest(d):
    with open(os.path.join(d, "record_info.json")) as f:
        return json.load(f)


def _write_manifest(d, manifest):
    with open(os.path.join(d, "record_info.json"), "w") as f:
        json.dump(manifest, f)


def _records(path):
    return [r.numpy() for r in tf.data.TFRecordDataset(path)]


def _keep_records(path, n):
    """Rewrites `path` with its first n records: a file cut at a record boundary."""
    kept = _records(path)[:n]
    with tf.io.TFRecordWriter(path) as w:
        for r in kept:
            w.write(r)


def _add_file_stats(d):
    manifest = _manifest(d)
    manifest["file_stats"] = {
        name: {"records": len(_records(os.path.join(d, name))),
               "bytes": os.path.getsize(os.path.join(d, name))} for name in manifest["files"]}
    _write_manifest(d, manifest)


def _flip_byte_in_record(path, record):
    """Flips one payload byte in the middle of record `record` (its data CRC no longer holds)."""
    data = bytearray(open(path, "rb").read())
    offset = 0
    for _ in range(record):
        length = int.from_bytes(data[offset:offset + 8], "little")
        offset += 16 + length
    length = int.from_bytes(data[offset:offset + 8], "little")
    data[offset + 12 + length // 2] ^= 0x55
    open(path, "wb").write(bytes(data))


def _drain(dataset, n):
    for _ in dataset.take(n):
        pass


def test_records_are_what_the_check_expects():
    d = prepared_dir()
    m = _manifest(d)
    T = m["chunks_per_stream"]
    parsed = records.parse_batch(
        tf.stack(_records(os.path.join(d, records.shard_name(1, 1, 6)))), SMALL.seq_len,
        SMALL.num_predict)
    assert parsed["chunk_index"].numpy().tolist() == list(range(T))
    assert set(parsed["stream_id"].numpy()) == {6} and set(parsed["direction"].numpy()) == {1}
    assert set(parsed["pass_id"].numpy()) == {1}
    assert integrity.expected_records(m, records.shard_name(1, 1, 6)) == T
    # An intact directory passes every check, across block boundaries and the cycle's end.
    schedule = load_schedule(d, **CONFIG)
    assert schedule.steps_per_cycle == 4 * T  # 2 passes x 2 groups of 4 streams
    for start in (T - 3, schedule.steps_per_cycle - 3):
        _drain(build_pretrain_dataset(d, start_step=start, **CONFIG), 6)


def test_file_cut_at_a_record_boundary_names_file_record_and_step(tmp_path):
    d = _copy(tmp_path)
    T = _manifest(d)["chunks_per_stream"]
    name = records.shard_name(0, 0, 1)
    _keep_records(os.path.join(d, name), T - 1)  # still far above the size lower bound
    dataset = build_pretrain_dataset(d, start_step=T - 3, **CONFIG)
    with pytest.raises(tf.errors.InvalidArgumentError) as info:
        _drain(dataset, 5)
    error = integrity.translate_input_error(info.value, T - 2, T + 2)
    assert isinstance(error, DataIntegrityError) and isinstance(error, ValueError)
    message = str(error)
    assert message.startswith(os.path.join(d, name) + f": record {T - 1} (read at training "
                              f"step {T}) should be pass 0 direction 0 stream 1 chunk {T - 1} "
                              "but is pass 0 direction 0 stream 5 chunk 0")
    assert f"gives every file {T} records" in message and "\n" not in message


def test_file_stats_catch_a_short_file_before_training(tmp_path):
    d = _copy(tmp_path)
    _add_file_stats(d)
    _drain(build_pretrain_dataset(d, **CONFIG), 1)  # intact, with file_stats: fine
    name = records.shard_name(1, 1, 3)
    path = os.path.join(d, name)
    before = os.path.getsize(path)
    _keep_records(path, 3)
    with pytest.raises(DataIntegrityError, match=(
            rf"^{path} is {os.path.getsize(path)} bytes, its manifest says {before} "
            rf"\({_manifest(d)['chunks_per_stream']} records\): the file is truncated")):
        build_pretrain_dataset(d, **CONFIG)
    # Inconsistent file_stats are refused too.
    manifest = _manifest(d)
    manifest["file_stats"][name]["records"] = 3
    _write_manifest(d, manifest)
    with pytest.raises(ManifestError, match=f"says {name} holds 3 records but chunks_per_stream"):
        build_pretrain_dataset(d, **CONFIG)


def test_old_manifest_refuses_a_file_too_small_for_its_records(tmp_path):
    d = _copy(tmp_path)
    name = records.shard_name(0, 1, 2)
    _keep_records(os.path.join(d, name), 1)
    with pytest.raises(DataIntegrityError, match=rf"{name} is \d+ bytes, too small for the "):
        build_pretrain_dataset(d, **CONFIG)


def test_bad_crc_is_located_by_file_record_and_step(tmp_path):
    d = _copy(tmp_path)
    name = records.shard_name(0, 1, 2)
    _flip_byte_in_record(os.path.join(d, name), 2)
    dataset = build_pretrain_dataset(d, **CONFIG)
    with pytest.raises(tf.errors.DataLossError) as info:
        _drain(dataset, 6)
    locator = integrity.CorruptRecordLocator(load_schedule(d, **CONFIG), bi_data=True)
    assert locator(1, 4) == (os.path.join(d, name), 2, 3)
    message = str(integrity.translate_input_error(info.value, 1, 4, locator))
    assert message.startswith(f"{os.path.join(d, name)}: record 2 (read at training step 3) "
                              "is corrupted (TensorFlow: corrupted record at ")
    assert "Traceback" not in message and "\n" not in message
    # Not about the data: left alone.
    assert integrity.translate_input_error(tf.errors.InvalidArgumentError(None, None, "x"),
                                           1, 1) is None


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["crc", "misplaced"])
def test_cli_prints_one_line_naming_file_and_step(tmp_path, damage):
    d = _copy(tmp_path)
    name = records.shard_name(0, 0, 3)
    path = os.path.join(d, name)
    if damage == "crc":
        _flip_byte_in_record(path, 1)
        expected = f"{path}: record 1 (read at training step 2) is corrupted"
    else:  # stream 2's file copied over stream 3's: the same checks as a truncated file
        shutil.copy(os.path.join(d, records.shard_name(0, 0, 2)), path)
        expected = (f"{path}: record 0 (read at training step 1) should be pass 0 direction 0 "
                    "stream 3 chunk 0 but is pass 0 direction 0 stream 2 chunk 0")
    proc = subprocess.run(
        [sys.executable, "experiments/run_pretrain.py", f"--data_dir={d}",
         f"--model_dir={tmp_path}/model", "--model_config=tiny", "--train_batch_size=8",
         "--train_steps=4", "--steps_per_loop=1", "--mem_len=8", "--peak_tflops=0.1",
         "--strategy=one_device"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES=""))
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if ": error: " in line]
    assert len(errors) == 1, proc.stderr[-3000:]
    assert expected in errors[0], errors[0]
