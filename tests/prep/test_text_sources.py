"""Reading text inputs a block at a time, and data-prep workers that never import TensorFlow."""

import os
import random
import subprocess
import sys

import pytest

from xlnet_tf2.prep import text_sources
from xlnet_tf2.data.params import DataPrepError

from fixtures.paths import REPO_ROOT as REPO


def _lines_one_by_one(path):
    """The lines as iterating the file object yields them, without the "\\n"."""
    with open(path, "rb") as f:
        return [raw[:-1].decode() if raw.endswith(b"\n") else raw.decode() for raw in f]


def test_block_reading_equals_line_reading_at_every_block_size(tmp_path, monkeypatch):
    rng = random.Random(0)
    path = str(tmp_path / "t.txt")
    for case in range(150):
        parts = [rng.choice(["", "a", "bc d", "  ", "\u00e9\u3000x", "\r", "y" * rng.randint(0, 40)])
                 for _ in range(rng.randint(0, 30))]
        with open(path, "w", encoding="utf-8", newline="") as f:
            f.write("\n".join(parts) + rng.choice(["", "\n", "\n\n"]))
        # Blocks from 1 byte (every multi-byte character is cut) to longer than the file.
        monkeypatch.setattr(text_sources, "READ_BLOCK_BYTES", rng.randint(1, 60))
        assert list(text_sources.read_lines(path, False, "fix")) == _lines_one_by_one(path), case


def test_bad_line_is_named_across_blocks_and_skipped_when_asked(tmp_path, monkeypatch):
    path = tmp_path / "bad.txt"
    lines = [f"sentence {i}".encode() for i in range(50)]
    lines[36] = b"caf\xe9"               # line 37: not UTF-8
    lines[41] = b"nul \x00 byte"         # line 42: binary
    path.write_bytes(b"\n".join(lines) + b"\n")
    monkeypatch.setattr(text_sources, "READ_BLOCK_BYTES", 64)  # the bad lines are blocks away
    with pytest.raises(DataPrepError, match=f"{path}:37: line is not valid UTF-8"):
        list(text_sources.read_lines(str(path), False, "fix it."))

    class Count:
        n = 0

        def inc(self):
            Count.n += 1

    kept = list(text_sources.read_lines(str(path), True, "fix it.", Count()))
    assert Count.n == 2 and len(kept) == 48 and "sentence 49" == kept[-1]
    lines[36] = b"fine"
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(DataPrepError, match=f"{path}:42: line holds NUL bytes"):
        list(text_sources.read_lines(str(path), False, "fix it."))


def test_a_line_longer_than_a_block(tmp_path, monkeypatch):
    path = tmp_path / "long.txt"
    long_line = "w " * 5000
    path.write_text(f"a\n{long_line}\nb", encoding="utf-8")
    monkeypatch.setattr(text_sources, "READ_BLOCK_BYTES", 100)
    assert list(text_sources.read_lines(str(path), False, "fix")) == ["a", long_line, "b"]


class _Count:
    def __init__(self):
        self.n = 0

    def inc(self):
        self.n += 1


def _whole_file(path, skip):
    count = _Count()
    try:
        docs = list(text_sources._split_documents(
            text_sources.read_lines(path, skip, "fix the file or pass --skip_bad_lines.", count)))
    except DataPrepError as e:
        return str(e), count.n
    return docs, count.n


def _in_ranges(path, size, step, skip):
    count, docs, keys = _Count(), [], []
    try:
        for begin in range(0, max(size, 1), step):
            for key, doc in text_sources.read_text_range(0, path, begin,
                                                         min(begin + step, max(size, 1)),
                                                         begin // step, skip, count):
                keys.append(key)
                docs.append(doc)
    except DataPrepError as e:
        return str(e), count.n, keys
    return docs, count.n, keys


def test_reading_in_ranges_gives_the_whole_files_documents(tmp_path):
    """Any cut of a file into byte ranges yields, range after range, exactly the documents
    of the whole file (a range owns those whose first line starts in it and reads the last
    one to its end), counts each skipped bad line once, and names a bad line as the whole
    file does: blank and whitespace-only lines, long lines across cuts, no final newline,
    bad lines at the cuts."""
    rng = random.Random(1)
    path = str(tmp_path / "t.txt")
    for case in range(300):
        parts = [rng.choice(["", "", "a", "bc d", "  ", "\u00e9\u3000x", "\r", "\u3000",
                             "y" * rng.randint(0, 40)]) for _ in range(rng.randint(0, 40))]
        data = ("\n".join(parts) + rng.choice(["", "\n", "\n\n"])).encode()
        if case % 3 == 0 and parts:
            lines = data.split(b"\n")
            lines[rng.randrange(len(lines))] = rng.choice([b"caf\xe9", b"x\x00y", b"\xff"])
            data = b"\n".join(lines)
        with open(path, "wb") as f:
            f.write(data)
        for skip in (True, False):
            expected = _whole_file(path, skip)
            for step in (1, 2, 3, 7, 13, 64, 1 << 20):
                docs, count, keys = _in_ranges(path, len(data), step, skip)
                assert (docs, count) == expected, (case, skip, step, data)
                if not isinstance(docs, str):
                    assert len(set(keys)) == len(keys) and keys == sorted(keys)


def test_a_long_line_is_not_read_once_per_range(tmp_path, monkeypatch):
    """A range looks for its first line start in its own bytes only: a file that is mostly
    one long line is read about once in all, not once per range."""
    path = tmp_path / "long.txt"
    path.write_bytes(b"w " * 100_000 + b"\n\nshort document\n")
    size = path.stat().st_size
    read = [0]
    real_open = text_sources.fileio.open_file

    class Counting:
        def __init__(self, f):
            self._f = f

        def read(self, *args):
            data = self._f.read(*args)
            read[0] += len(data)
            return data

        def readline(self, *args):
            data = self._f.readline(*args)
            read[0] += len(data)
            return data

        def seek(self, *args):
            return self._f.seek(*args)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self._f.close()

    monkeypatch.setattr(text_sources.fileio, "open_file",
                        lambda *a, **k: Counting(real_open(*a, **k)))
    docs = []
    for begin in range(0, size, 1000):
        docs += [d for _, d in text_sources.read_text_range(0, str(path), begin,
                                                            min(begin + 1000, size),
                                                            begin // 1000, False)]
    assert docs == [["w " * 99_999 + "w "], ["short document"]]
    # The owner scans to the line's end and reads it, the range after it reads it back to
    # see whether a document is open, every other range reads its own 1,000 bytes: about 4x
    # the file, where every range searching on to the next line end read 100 times the file.
    assert read[0] < 5 * size


def test_file_ranges_depend_on_the_file_alone():
    assert text_sources.range_bytes(0) == text_sources.MIN_RANGE_BYTES
    assert text_sources.range_bytes(32 << 20) == 1 << 19            # 64 ranges of 512 kB
    assert text_sources.range_bytes(1 << 40) == text_sources.MAX_RANGE_BYTES
    assert text_sources.range_bytes((32 << 20) + 1) == 1 << 20      # never more than 64
    parts = text_sources.file_ranges(3, "f.txt", (32 << 20) - 5)
    assert len(parts) == 64 and parts[0] == ("file", 3, "f.txt", 0, 1 << 19, 0)
    assert parts[-1] == ("file", 3, "f.txt", 63 << 19, (32 << 20) - 5, 63)
    # A file below the smallest range is one range: its documents are numbered 0, 1, 2, ...
    assert text_sources.file_ranges(0, "s.txt", 1000) == [("file", 0, "s.txt", 0, 1000, 0)]
    assert text_sources.file_ranges(0, "e.txt", 0) == [("file", 0, "e.txt", 0, 0, 0)]


@pytest.mark.slow
def test_workers_import_no_tensorflow():
    """What a Beam worker imports to run the pipeline's steps pulls in no TensorFlow."""
    code = ("import sys\n"
            "import xlnet_tf2.prep.beam_pipeline, xlnet_tf2.data.records\n"
            "import xlnet_tf2.data.manifest, xlnet_tf2.prep.text_sources\n"
            "import apache_beam.runners.worker.sdk_worker_main\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('tensorflow', 'keras')))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_beam_scratch_goes_to_a_private_temp_dir_that_is_removed():
    import tempfile

    from xlnet_tf2.prep.beam_pipeline import _private_tempdir

    before = tempfile.gettempdir()
    with _private_tempdir():
        inside = tempfile.gettempdir()
        leaked = tempfile.mkdtemp(prefix="beam-temp")  # what Beam's job service does
        assert os.path.dirname(leaked) == inside != before
    assert tempfile.gettempdir() == before and not os.path.exists(inside)


def _prepare_twice(tmp_path, inputs, **variants):
    """Prepares `inputs` once per variant ({name: (word_cache, BATCH_CHARS)}, in-process
    runner) and returns the output directories."""
    from unittest import mock

    import dataclasses

    from xlnet_tf2.prep import beam_pipeline
    from xlnet_tf2.data.params import DataParams
    from fixtures.corpora import LOCAL_BEAM, spm_model

    params = DataParams(seq_len=64, reuse_len=32, num_predict=10, perm_size=32, bi_data=True,
                        num_streams=2)
    outs = []
    for name, (cache, batch_chars) in variants.items():
        out = str(tmp_path / name)
        with mock.patch.object(beam_pipeline, "BATCH_CHARS", batch_chars):
            beam_pipeline.create_tfrecords(
                params=dataclasses.replace(params, word_cache=cache), output_dir=out,
                spm_model=spm_model(), input_patterns=inputs, beam_args=LOCAL_BEAM)
        outs.append(out)
    return outs


def _same_records(*dirs):
    import filecmp

    names = sorted(n for n in os.listdir(dirs[0]) if n.endswith(".tfrecord"))
    assert len(names) == 4
    for other in dirs[1:]:
        match, mismatch, errors = filecmp.cmpfiles(dirs[0], other, names, shallow=False)
        assert mismatch == [] and errors == [] and len(match) == 4


def test_tokenizer_modes_prepare_the_same_bytes_on_new_and_repetitive_text(tmp_path):
    """Line mode and the default (the word cache where it pays: left off on new text, on
    for repetitive text) are both exact, so the prepared files are byte for byte the same."""
    from fixtures.corpora import corpus_path

    batch = 1 << 18
    _same_records(*_prepare_twice(tmp_path / "new", [corpus_path()],
                                  line=(False, batch), default=(True, batch)))
    with open(corpus_path()) as f:
        lines = [line for line in f.read().split("\n") if line.strip()][:60]
    repetitive = tmp_path / "repetitive.txt"
    repetitive.write_text("\n\n".join("\n".join(lines[k % 50:k % 50 + 10])
                                       for k in range(300)) + "\n")
    _same_records(*_prepare_twice(tmp_path / "rep", [str(repetitive)],
                                  line=(False, batch), default=(True, batch)))


def test_long_documents_cut_into_parts_prepare_the_same_bytes(tmp_path):
    """Documents longer than a batch are tokenized in parts and joined by the layout."""
    from xlnet_tf2.prep.beam_pipeline import document_parts
    from fixtures.corpora import corpus_path

    from unittest import mock

    from xlnet_tf2.prep import beam_pipeline

    lines = ["a" * 10, "b" * 10, "c" * 10, "d"]
    with mock.patch.object(beam_pipeline, "BATCH_CHARS", 20):  # a part ends at >= 20 chars
        assert list(document_parts((0, 5), lines)) == [
            (((0, 5), 0, False), lines[:2], 22), (((0, 5), 1, True), lines[2:], 13)]
        assert list(document_parts((0, 6), lines[:1])) == [(((0, 6), 0, True), lines[:1], 11)]
    # The test corpus's documents average 4 kB: cut at 3,000 characters, most have parts.
    _same_records(*_prepare_twice(tmp_path, [corpus_path()], whole=(False, 1 << 18),
                                  parts=(False, 3000), parts_cached=(True, 3000)))


def test_remote_paths_go_through_gfile():
    """URLs (gs:// on Dataflow; TensorFlow's in-memory ram:// here) take the tf.io.gfile path
    for every file operation data preparation makes, scratch and token files included."""
    import numpy as np
    import tensorflow as tf

    from xlnet_tf2.data import records
    from xlnet_tf2 import fileio
    from xlnet_tf2.prep.beam_pipeline import read_tokens, write_tokens

    root = "ram://xlnet-remote-test/out"
    assert fileio.is_remote(root) and not fileio.is_remote("/tmp/x")
    assert not fileio.is_remote("file:///tmp/x")
    fileio.makedirs(root + "/.prep/tokens")
    ids, sent = np.arange(7, dtype=np.int32), np.array([0, 0, 1, 1, 1, 2, 2], np.int32)
    path = root + "/.prep/tokens/t.npy"
    write_tokens(path, ids, sent)
    np.testing.assert_array_equal(read_tokens(path), np.stack([ids, sent]))
    fileio.write_atomically(root + "/m.json", b"{}")
    with fileio.open_file(root + "/m.json") as f:
        assert f.read() == "{}"
    with records.TFRecordFileWriter(root + "/r.tfrecord") as w:
        w.write_all([b"a", b"bc"])
        w.commit()
    assert [r.numpy() for r in tf.data.TFRecordDataset(root + "/r.tfrecord")] == [b"a", b"bc"]
    assert sorted(fileio.listdir(root)) == [".prep", "m.json", "r.tfrecord"]
    fileio.remove(root + "/m.json")
    fileio.rmtree(root + "/.prep")
    assert fileio.listdir(root) == ["r.tfrecord"] and not fileio.exists(path)
    # Text read in ranges (seeks, reads back to the line before, reads on past the end).
    text = "".join(f"line {i} of document {d}\n" + ("\n" if i == 2 else "")
                   for d in range(40) for i in range(3))
    fileio.write_atomically(root + "/t.txt", text.encode())
    size = fileio.size(root + "/t.txt")
    docs = []
    for begin in range(0, size, 37):
        docs += [d for _, d in text_sources.read_text_range(
            0, root + "/t.txt", begin, min(begin + 37, size), begin // 37, False)]
    assert docs == [[f"line {i} of document {d}" for i in range(3)] for d in range(40)]
    fileio.rmtree("ram://xlnet-remote-test")
