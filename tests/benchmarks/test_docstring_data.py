"""benchmarks/tools/docstring_data.py: the benchmarks' pretraining data, prepared as a user prepares
theirs, reused when prepared before with the same settings, and a clear error when the corpus
cannot carry the vocabulary."""

import dataclasses
import json
import os

import pytest

from xlnet_tf2.data.manifest import MANIFEST_NAME
from xlnet_tf2.data.params import DataParams, DataPrepError
from xlnet_tf2.data.pretrain_dataset import PretrainData
from benchmarks.tools.docstring_data import PREPARED_FILE, prepare_docstring_data

PARAMS = DataParams(seq_len=16, reuse_len=8, num_predict=3, bi_data=True, perm_size=8,
                    num_streams=2, num_passes=1, seed=0)


def test_prepares_readable_records_and_reuses_them(tmp_path):
    first = prepare_docstring_data(str(tmp_path), PARAMS, vocab_size=300, corpus_bytes=60_000)
    assert first["reused"] is False
    assert first["data_dir"] == str(tmp_path / "data")
    # The corpus stops after the document that reaches the size (a few KB more at most).
    assert first["corpus_bytes"] == os.path.getsize(tmp_path / "corpus.txt")
    assert 60_000 <= first["corpus_bytes"] < 80_000
    data = PretrainData.read(first["data_dir"])
    assert data.vocab_size == 300
    assert (data.shape.seq_len, data.shape.reuse_len, data.shape.num_predict,
            data.shape.bi_data) == (16, 8, 3, True)
    # Every token of the corpus is in a stream: some tens of thousands of pieces.
    assert first["tokens"] > 5_000 and first["chunks_per_stream"] > 50
    batch = next(iter(data.dataset(4)))
    assert batch["input_ids"].shape == (4, 16)
    assert int(batch["input_ids"].numpy().max()) < 300

    record = json.loads((tmp_path / PREPARED_FILE).read_text())
    assert record["key"] == {"corpus_bytes": 60_000, "vocab_size": 300,
                             "params": PARAMS.to_dict()}
    manifest = os.path.join(first["data_dir"], MANIFEST_NAME)
    written = os.path.getmtime(manifest)
    again = prepare_docstring_data(str(tmp_path), PARAMS, vocab_size=300, corpus_bytes=60_000)
    assert again["reused"] is True and again["tokens"] == first["tokens"]
    assert os.path.getmtime(manifest) == written  # not prepared again
    # Another setting prepares anew.
    other = prepare_docstring_data(str(tmp_path), dataclasses.replace(PARAMS, num_predict=4),
                                   vocab_size=300, corpus_bytes=60_000)
    assert other["reused"] is False
    assert PretrainData.read(other["data_dir"]).shape.num_predict == 4


def test_too_small_a_corpus_for_the_vocabulary_is_one_clear_error(tmp_path):
    with pytest.raises(DataPrepError, match=r"cannot train a 60000-piece model on the "
                                            r"[\d,]+ bytes of docstrings"):
        prepare_docstring_data(str(tmp_path), PARAMS, vocab_size=60_000, corpus_bytes=50_000)
