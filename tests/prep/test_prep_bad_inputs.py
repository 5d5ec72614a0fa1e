"""Every bad-input case of data preparation fails early with a message naming what to fix."""

import dataclasses
import os
import subprocess
import sys

import pytest

from xlnet_tf2.prep.beam_pipeline import create_tfrecords
from xlnet_tf2.data.params import DataParams, DataPrepError

from fixtures.corpora import LOCAL_BEAM, corpus_path, spm_model
from fixtures.paths import REPO_ROOT as REPO

TINY = DataParams(seq_len=32, reuse_len=16, num_predict=5, perm_size=16, bi_data=False,
                  num_streams=2, num_passes=1)


def _run(tmp_path, params=TINY, inputs=None, **kw):
    kw.setdefault("spm_model", spm_model())
    return create_tfrecords(params=params, output_dir=str(tmp_path / "out"),
                            input_patterns=inputs or [corpus_path()], beam_args=LOCAL_BEAM,
                            **kw)


def _text_with_bad_line(tmp_path):
    with open(corpus_path(), "rb") as f:
        good = f.read(20_000)
    path = tmp_path / "bad.txt"
    lines = good.split(b"\n")
    lines.insert(6, b"caf\xe9 latin-1 bytes")  # line 7
    path.write_bytes(b"\n".join(lines))
    return str(path)


def test_undecodable_line_names_file_and_line(tmp_path):
    bad = _text_with_bad_line(tmp_path)
    with pytest.raises(DataPrepError) as e:
        _run(tmp_path, inputs=[bad])
    assert f"{bad}:7: line is not valid UTF-8" in str(e.value)
    assert "--skip_bad_lines" in str(e.value)
    assert not os.path.exists(tmp_path / "out" / "record_info.json")


def test_skip_bad_lines_counts_them(tmp_path):
    m = _run(tmp_path, inputs=[_text_with_bad_line(tmp_path)], skip_bad_lines=True)
    assert m["bad_lines_skipped"] == 1 and m["num_examples"] > 0


def test_empty_inputs(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    with pytest.raises(DataPrepError, match="input files are empty"):
        _run(tmp_path, inputs=[str(empty)])
    with pytest.raises(DataPrepError, match="matches no file"):
        _run(tmp_path, inputs=[str(tmp_path / "missing-*.txt")])


def test_missing_or_incompatible_spm_model(tmp_path):
    with pytest.raises(DataPrepError, match="--spm_model.*does not exist"):
        _run(tmp_path, spm_model=str(tmp_path / "nope.model"))
    not_a_model = tmp_path / "x.model"
    not_a_model.write_bytes(b"not a model")
    with pytest.raises(DataPrepError, match="not a valid SentencePiece model"):
        _run(tmp_path, spm_model=str(not_a_model))
    import sentencepiece as spm
    prefix = str(tmp_path / "plain")
    spm.SentencePieceTrainer.Train(input=corpus_path(), model_prefix=prefix, vocab_size=300,
                                   minloglevel=2)
    with pytest.raises(DataPrepError, match="incompatible with XLNet"):
        _run(tmp_path, spm_model=prefix + ".model")


@pytest.mark.parametrize("change,message", [
    (dict(perm_size=12), "--perm_size=12 must divide"),
    (dict(reuse_len=30, perm_size=30), "--reuse_len=30 leaves no room"),
    (dict(num_predict=40), "--num_predict=40 asks for more targets"),
    (dict(mask_alpha=1, mask_beta=2), "--mask_alpha=1 must be >= --mask_beta=2"),
    (dict(num_streams=0), "--num_streams must be positive"),
])
def test_incompatible_flags(tmp_path, change, message):
    with pytest.raises(DataPrepError, match=message):
        _run(tmp_path, params=dataclasses.replace(TINY, **change))


def test_too_little_text_before_any_work(tmp_path):
    small = tmp_path / "small.txt"
    small.write_text("One short sentence.\nAnother one.\n")
    with pytest.raises(DataPrepError, match="Too little text.*lower --num_streams"):
        _run(tmp_path, inputs=[str(small)])


def test_too_little_text_after_tokenizing(tmp_path):
    # 20 kB of text is about 7k tokens: the byte bound passes, the exact count does not.
    with open(corpus_path(), "rb") as f:
        text = f.read(20_000)
    path = tmp_path / "part.txt"
    path.write_bytes(text[:text.rindex(b"\n") + 1])
    params = dataclasses.replace(TINY, num_streams=500)
    with pytest.raises(DataPrepError, match=r"Too little text: the inputs give \d+ tokens"):
        _run(tmp_path, params=params, inputs=[str(path)])
    assert not os.path.exists(tmp_path / "out" / "record_info.json")


def test_existing_output_and_interrupted_rerun(tmp_path, capfd):
    m = _run(tmp_path)
    out = tmp_path / "out"
    assert os.path.exists(out / "record_info.json") and m["num_examples"] > 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    with pytest.raises(DataPrepError, match="already holds prepared data.*--overwrite"):
        _run(tmp_path)
    # What a killed run left beside the directory is found, reported and removed.
    stale = tmp_path / f".out.prep-{2 ** 22 + 7}-0123abcd"
    os.makedirs(stale / ".prep" / "tokens")
    (stale / ".prep" / "tokens" / "stale.npy").write_bytes(b"x")
    # A re-run that fails part-way leaves the old data exactly as it was.
    with pytest.raises(DataPrepError, match="bad.txt:7: line is not valid UTF-8"):
        _run(tmp_path, inputs=[_text_with_bad_line(tmp_path)], overwrite=True)
    assert f"found {stale}, an incomplete preparation left by a killed run" in \
        capfd.readouterr().err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert sorted(os.listdir(tmp_path)) == ["bad.txt", "out"]


def test_input_and_tfds_are_exclusive(tmp_path):
    with pytest.raises(DataPrepError, match="exactly one of --input"):
        _run(tmp_path, tfds_name="wikipedia")


@pytest.mark.slow
def test_cli_reports_errors_without_traceback(tmp_path):
    out = subprocess.run(
        [sys.executable, os.path.join(REPO, "data_prep/create_tfrecords.py"),
         f"--input={corpus_path()}", f"--spm_model={spm_model()}",
         f"--output_dir={tmp_path}/o", "--seq_len=64", "--reuse_len=32", "--perm_size=20"],
        capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 2
    assert "create_tfrecords.py: error: --perm_size=20 must divide" in out.stderr
    assert "Traceback" not in out.stderr
    # The only line on stderr: no TensorFlow or Beam start-up noise without --verbosity.
    assert out.stderr.strip().count("\n") == 0, out.stderr


@pytest.mark.slow
def test_misspelled_flag_is_not_passed_to_beam_silently(tmp_path):
    out = subprocess.run(
        [sys.executable, os.path.join(REPO, "data_prep/create_tfrecords.py"),
         f"--input={corpus_path()}", f"--spm_model={spm_model()}",
         f"--output_dir={tmp_path}/o", "--eval_fractoin=0.1", "--direct_num_workers=1"],
        capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 2
    assert out.stderr.strip() == (
        "create_tfrecords.py: error: unknown flag --eval_fractoin=0.1: neither a flag of "
        "create_tfrecords.py nor an Apache Beam pipeline option. Check the spelling (python "
        "data_prep/create_tfrecords.py --help lists the script's flags).")
    assert not os.path.exists(tmp_path / "o")


@pytest.mark.slow
@pytest.mark.parametrize("content,message", [
    (b"good line\ncaf\xe9 latin-1\n", ":2: line is not valid UTF-8"),
    (b"text\n\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\n", ":2: line is not valid UTF-8"),
    (b"text\nmore text\n\x00\x00\x00\x01binary\n", ":3: line holds NUL bytes"),
])
def test_train_sentencepiece_refuses_bad_text(tmp_path, content, message):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(content)
    out = subprocess.run(
        [sys.executable, os.path.join(REPO, "data_prep/train_sentencepiece.py"),
         f"--input={corpus_path()},{bad}", f"--model_prefix={tmp_path}/sp", "--vocab_size=300"],
        capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 2
    assert f"train_sentencepiece.py: error: {bad}{message}" in out.stderr
    assert "remove it from --input" in out.stderr and "Traceback" not in out.stderr
    assert not os.path.exists(tmp_path / "sp.model")


def test_binary_input_is_refused_by_create_tfrecords(tmp_path):
    with open(corpus_path(), "rb") as f:
        good = f.read(20_000)
    path = tmp_path / "bin.txt"
    path.write_bytes(good[:good.rindex(b"\n") + 1] + b"\x00\x01\x02 binary\n")
    lines = good[:good.rindex(b"\n") + 1].count(b"\n") + 1
    with pytest.raises(DataPrepError, match=f"{path}:{lines}: line holds NUL bytes"):
        _run(tmp_path, inputs=[str(path)])
