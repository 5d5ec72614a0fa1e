"""Held-out split (--eval_fraction / --eval_input -> OUTPUT_DIR/eval) and manifest file_stats."""

import json
import os

import pytest

from xlnet_tf2.prep.beam_pipeline import create_tfrecords, is_eval_document
from xlnet_tf2.data import integrity
from xlnet_tf2.data.manifest import ManifestError, read_manifest
from xlnet_tf2.data.params import DataParams, DataPrepError
from xlnet_tf2.data.pretrain_dataset import PretrainData, build_pretrain_dataset
from xlnet_tf2.tasks.pretraining_eval import default_eval_dirs
from xlnet_tf2.tasks.pretraining import resolve_spm_model

from fixtures.corpora import LOCAL_BEAM, corpus_path, spm_model, tokenizer

PARAMS = DataParams(seq_len=32, reuse_len=16, num_predict=5, perm_size=16, bi_data=True,
                    num_streams=2, num_passes=1, seed=3)


def _run(out, **kw):
    return create_tfrecords(params=PARAMS, output_dir=str(out), spm_model=spm_model(),
                            input_patterns=kw.pop("inputs", [corpus_path()]),
                            beam_args=LOCAL_BEAM, **kw)


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    root = tmp_path_factory.mktemp("eval_split")
    return root, _run(root / "all"), _run(root / "split", eval_fraction=0.2)


def test_eval_fraction_holds_out_documents(prepared):
    root, everything, train = prepared
    held_out = train["_eval"]
    assert read_manifest(str(root / "split" / "eval")) == held_out
    assert held_out["params"] == train["params"] == PARAMS.to_dict()
    assert held_out["split"] == "eval" and train["split"] == "train"
    # Every document lands in exactly one split, about 20% held out.
    assert train["documents"] + held_out["documents"] == everything["documents"]
    assert 0.1 < held_out["documents"] / everything["documents"] < 0.3
    assert train["total_tokens"] + held_out["total_tokens"] == everything["total_tokens"]
    # Deterministic in (seed, document key).
    assert is_eval_document(3, (0, 5), 0.2) == is_eval_document(3, (0, 5), 0.2)
    assert sum(is_eval_document(3, (0, k), 0.2) for k in range(2000)) in range(340, 460)


def test_pretraining_finds_and_reads_the_held_out_dir(prepared):
    root, _, _ = prepared
    data_dir = str(root / "split")
    assert default_eval_dirs([data_dir]) == [os.path.join(data_dir, "eval")]
    assert default_eval_dirs([str(root / "all")]) == []
    ds = build_pretrain_dataset(os.path.join(data_dir, "eval"), seq_len=32, reuse_len=16,
                                num_predict=5, bi_data=True, vocab_size=600,
                                global_batch_size=4)
    batch = next(iter(ds))
    assert batch["input_ids"].shape == (4, 32)
    # The SentencePiece model sits beside the data and matches the manifest's checksum.
    assert resolve_spm_model(None, PretrainData.read([data_dir])) == os.path.join(
        data_dir, "spiece.model")


def test_file_stats_describe_every_file(prepared):
    root, everything, _ = prepared
    stats = everything["file_stats"]
    assert sorted(stats) == sorted(everything["files"])
    for name, s in stats.items():
        assert s["records"] == everything["chunks_per_stream"]
        assert s["bytes"] == os.path.getsize(root / "all" / name)


def test_truncated_file_is_refused_and_old_manifests_load(tmp_path):
    out = tmp_path / "d"
    m = _run(out)
    victim = out / m["files"][1]
    data = victim.read_bytes()
    victim.write_bytes(data[:-7])
    with pytest.raises(ManifestError, match=f"{victim} is {len(data) - 7} bytes, its manifest "
                       r"says \d+ \(\d+ records\): the file is truncated"):
        integrity.check_files(str(out), read_manifest(str(out)), m["files"])
    victim.write_bytes(data + b"x")
    with pytest.raises(ManifestError, match="the file is longer or was replaced"):
        integrity.check_files(str(out), read_manifest(str(out)), m["files"])
    victim.write_bytes(data)
    assert read_manifest(str(out))["file_stats"] == m["file_stats"]
    # A manifest from before file_stats existed still loads.
    path = out / "record_info.json"
    old = json.loads(path.read_text())
    del old["file_stats"]
    path.write_text(json.dumps(old))
    assert "file_stats" not in read_manifest(str(out))


def test_eval_input_and_flag_errors(tmp_path):
    with open(corpus_path(), "rb") as f:
        text = f.read(60_000)
    held = tmp_path / "held.txt"
    held.write_bytes(text[:text.rindex(b"\n\n") + 2])
    m = _run(tmp_path / "o", eval_input=[str(held)])
    assert m["_eval"]["inputs"] == [["file", 1, str(held)]]
    assert m["_eval"]["documents"] > 0 and m["_eval"]["vocab_size"] == tokenizer().vocab_size
    # Re-preparing without a held-out split removes the stale eval/ directory's data.
    _run(tmp_path / "o", overwrite=True)
    assert not os.path.exists(tmp_path / "o" / "eval" / "record_info.json")
    with pytest.raises(DataPrepError, match="at most one of --eval_fraction and --eval_input"):
        _run(tmp_path / "p", eval_fraction=0.1, eval_input=[str(held)])
    with pytest.raises(DataPrepError, match=r"--eval_fraction must be in \[0, 1\)"):
        _run(tmp_path / "p", eval_fraction=1.5)
    with pytest.raises(DataPrepError, match="--eval_input 'nope-\\*' matches no file"):
        _run(tmp_path / "p", eval_input=["nope-*"])
    with pytest.raises(DataPrepError, match="Too little text for the held-out split"):
        _run(tmp_path / "p", eval_fraction=0.0001)


@pytest.mark.slow
def test_held_out_split_and_word_cache_are_identical_across_worker_counts(tmp_path,
                                                                          monkeypatch):
    """Also with the corpus read in ranges (text_sources.file_ranges; 8 kB here, about 30)
    spread over the workers: the documents and their keys do not depend on who reads what."""
    import dataclasses
    import filecmp

    from xlnet_tf2.prep import text_sources

    monkeypatch.setattr(text_sources, "MIN_RANGE_BYTES", 1 << 13)
    assert len(text_sources.source_parts(("file", 0, corpus_path()))) > 20
    params = dataclasses.replace(PARAMS, word_cache=True)
    dirs = []
    for name, beam_args in [("one", LOCAL_BEAM), ("two", ["--direct_running_mode="
                                                          "multi_processing",
                                                          "--direct_num_workers=2"])]:
        out = tmp_path / name
        m = create_tfrecords(params=params, output_dir=str(out), spm_model=spm_model(),
                             input_patterns=[corpus_path()], eval_fraction=0.2,
                             beam_args=beam_args)
        assert m["params"]["word_cache"] and m["_eval"]["params"]["word_cache"]
        dirs.append(out)
    for sub in ("", "eval"):
        a, b = dirs[0] / sub, dirs[1] / sub
        names = sorted(n for n in os.listdir(a) if n != "eval")
        assert names == sorted(n for n in os.listdir(b) if n != "eval")
        assert sum(n.endswith(".tfrecord") for n in names) == 2 * 2
        match, mismatch, errors = filecmp.cmpfiles(a, b, names, shallow=False)
        assert mismatch == [] and errors == [] and len(match) == len(names)
