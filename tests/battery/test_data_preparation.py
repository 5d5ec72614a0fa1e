"""Bad input to data preparation (create_tfrecords.py, train_sentencepiece.py,
build_corpus.py): each row is (id, what runs, the fault, the outcome); see
tests/fixtures/battery.py for how a row runs and what it asserts."""

from __future__ import annotations

import json
import os

import pytest

from fixtures.battery import (Case, as_params, bitflip, both, clear, command, faults, killed,
                              on_small_disk, put, read_only, run_case, says, spawn, truncate, works)
from fixtures.battery_artefacts import LOCAL_BEAM, artefact

PREP = "data_prep/create_tfrecords.py"
SPM = "data_prep/train_sentencepiece.py"
CORPUS = "data_prep/build_corpus.py"
SHAPE = ("--seq_len=32", "--reuse_len=16", "--num_predict=5", "--num_streams=4")


def prep(*argv, inputs="{corpus.txt}", spm="{sp.model}", output="{ws}/out", runner=command):
    return runner(PREP, f"--input={inputs}", f"--spm_model={spm}", f"--output_dir={output}",
                  *SHAPE, *LOCAL_BEAM, *argv)


def killed_prep(*argv, output="{data}", kill_at):
    return spawn(PREP, "--input={corpus.txt}", "--spm_model={sp.model}",
                 f"--output_dir={output}", *SHAPE, *LOCAL_BEAM, *argv, kill_at=kill_at)


def corpus_with(line: bytes, at: int = 7):
    """The corpus's first 20 kB with `line` inserted as line `at`."""
    def content(ws):
        with open(ws.path("corpus.txt"), "rb") as f:
            text = f.read(20_000)
        lines = text[:text.rindex(b"\n")].split(b"\n")
        lines.insert(at - 1, line)
        return b"\n".join(lines) + b"\n"
    return content


def prepared(directory: str, num_streams: int = 4, eval_split: bool = False):
    """A check: `directory` holds complete prepared data of `num_streams` streams."""
    def check(ws, result):
        from xlnet_tf2.data.manifest import read_manifest

        path = ws.fmt(directory)
        manifest = read_manifest(path)
        assert manifest["num_streams"] == num_streams and manifest["num_examples"] > 0
        assert sorted(os.listdir(path)) == sorted(
            manifest["files"] + ["record_info.json", "spiece.model"]
            + (["eval"] if eval_split else []))
        assert not [n for n in os.listdir(os.path.dirname(path)) if ".prep-" in n]
    return check




def same_as_artefact(name: str):
    """A check: the workspace's copy of artefact `name` is byte-identical to the artefact."""
    def check(ws, result):
        from fixtures.battery import snapshot

        assert snapshot(ws.path(name)) == snapshot(artefact(name))
        assert not [n for n in os.listdir(ws.root) if n.startswith(f".{name}.")]
    return check


def spm_loads(prefix: str):
    def check(ws, result):
        from xlnet_tf2.tokenizers.sentencepiece_tokenizer import SentencePieceTokenizer

        assert SentencePieceTokenizer.from_file(ws.fmt(prefix) + ".model").vocab_size == 300
        assert not [n for n in os.listdir(ws.root) if ".tmp-" in n]
    return check


BAD_UTF8 = corpus_with(b"caf\xe9 latin-1 bytes")
CASES = [
    # --- create_tfrecords: the text
    Case("prep/input-line-not-utf8", prep(inputs="{ws}/bad.txt"),
         clear("{ws}/bad.txt:7", "not valid UTF-8", "--skip_bad_lines"),
         put("{ws}/bad.txt", BAD_UTF8)),
    Case("prep/input-line-with-nul", prep(inputs="{ws}/bad.txt"),
         clear("{ws}/bad.txt:3", "NUL"), put("{ws}/bad.txt", corpus_with(b"\x00\x01bin", 3))),
    Case("prep/input-png-bytes", prep(inputs="{ws}/bad.txt"),
         clear("{ws}/bad.txt:", "not valid UTF-8"),
         put("{ws}/bad.txt", corpus_with(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", 12))),
    Case("prep/input-empty-file", prep(inputs="{ws}/empty.txt"), clear("{ws}/empty.txt", "empty"),
         put("{ws}/empty.txt", b"")),
    Case("prep/input-glob-matches-nothing", prep(inputs="{ws}/missing-*.txt"),
         clear("{ws}/missing-*.txt", "matches no file")),
    Case("prep/input-is-a-directory", prep(inputs="{ws}/adir"), clear("{ws}/adir"),
         put("{ws}/adir/inner.txt", b"text\n")),
    Case("prep/input-too-little-text", prep(inputs="{ws}/small.txt"),
         clear("Too little text", "--num_streams"),
         put("{ws}/small.txt", "One short sentence.\nAnother one.\n")),
    Case("prep/input-bad-line-skipped", prep("--skip_bad_lines", inputs="{ws}/bad.txt"),
         works(lambda ws, r: json.load(open(ws.fmt("{ws}/out/record_info.json")))[
             "bad_lines_skipped"] == 1),
         put("{ws}/bad.txt", corpus_with(b"caf\xe9 latin-1 bytes")), changes=("out/*",)),
    # --- the SentencePiece model
    Case("prep/spm-missing", prep(spm="{ws}/none.model"), clear("--spm_model", "{ws}/none.model")),
    Case("prep/spm-truncated", prep(spm="{ws}/sp.model"), clear("--spm_model", "{ws}/sp.model"),
         faults(lambda ws: ws.path("sp.model"), truncate("{sp.model}"))),
    Case("prep/spm-bitflip-header", prep(spm="{ws}/sp.model"),
         clear("--spm_model", "{ws}/sp.model"),
         faults(lambda ws: ws.path("sp.model"), bitflip("{sp.model}", 0, 3))),
    Case("prep/spm-is-text", prep(spm="{ws}/x.model"), clear("--spm_model", "{ws}/x.model"),
         put("{ws}/x.model", "not a model\n")),
    # --- the output directory
    Case("prep/existing-data-without-overwrite", prep(output="{data}"),
         clear("{data}", "already holds prepared data", "--overwrite")),
    Case("prep/overwrite-then-bad-line-keeps-old-data",
         prep("--overwrite", inputs="{ws}/bad.txt", output="{data}"),
         clear("{ws}/bad.txt:7", "not valid UTF-8"), put("{ws}/bad.txt", BAD_UTF8)),
    Case("prep/overwrite-then-too-little-text-keeps-old-data",
         prep("--overwrite", "--num_streams=500", inputs="{ws}/part.txt", output="{data}"),
         clear("Too little text"), put("{ws}/part.txt", corpus_with(b"more", 2))),
    Case("prep/overwrite-good-replaces", prep("--overwrite", "--num_streams=2", output="{data}"),
         works(prepared("{data}", num_streams=2)), changes=("data/*",)),
    Case("prep/overwrite-with-eval-split", prep("--overwrite", "--eval_input={corpus.txt}",
                                                output="{data}"),
         works(prepared("{data}", eval_split=True)), changes=("data/*",)),
    Case("prep/output-holds-other-files", prep(output="{ws}/mixed"),
         clear("{ws}/mixed", "not prepared data", "notes.txt"),
         put("{ws}/mixed/notes.txt", "mine\n")),
    Case("prep/output-is-a-file", prep(output="{ws}/file"), clear("{ws}/file", "is a file"),
         put("{ws}/file", "x")),
    Case("prep/output-tfrecords-without-manifest", prep(output="{ws}/half"),
         clear("{ws}/half", "without record_info.json", "--overwrite"),
         put("{ws}/half/pass000-dir0-stream000000.tfrecord", b"\x00" * 64)),
    Case("prep/disk-full-new-output", prep(output="{ws}/disk/out"),
         clear("--output_dir={ws}/disk/out", "No space left on device"),
         on_small_disk("{ws}/disk", 200_000)),
    Case("prep/disk-full-overwrite-keeps-old-data",
         prep("--overwrite", output="{ws}/disk/data"),
         clear("--output_dir={ws}/disk/data", "No space left on device"),
         on_small_disk("{ws}/disk", 300_000, [("{data}", "data")])),
    Case("prep/read-only-output", prep(output="{ws}/ro/out"),
         clear("{ws}/ro/out", "Read-only file system"), read_only("{ws}/ro")),
    # --- flags
    Case("prep/flag-num-streams-not-a-number", prep("--num_streams=abc"),
         clear("--num_streams=abc")),
    Case("prep/flag-seq-len-zero", prep("--seq_len=0"), clear("--seq_len")),
    Case("prep/flag-perm-size-does-not-divide", prep("--perm_size=12"),
         clear("--perm_size=12 must divide")),
    Case("prep/flag-num-predict-too-large", prep("--num_predict=40"), clear("--num_predict=40")),
    Case("prep/flag-eval-fraction-above-one", prep("--eval_fraction=1.5"),
         clear("--eval_fraction")),
    Case("prep/flag-eval-input-missing", prep("--eval_input={ws}/none.txt"),
         clear("--eval_input", "{ws}/none.txt")),
    Case("prep/flag-misspelled", prep("--eval_fractoin=0.1"),
         clear("unknown flag --eval_fractoin=0.1")),
    Case("prep/flag-no-output-dir", command(PREP, "--input={corpus.txt}", "--spm_model={sp.model}",
                                            *LOCAL_BEAM), clear("--output_dir")),
    Case("prep/flag-input-and-tfds", prep("--tfds_name=wikipedia"), clear("--input", "--tfds_name")),
    # --- killed runs, then the rerun
    Case("prep/killed-writing-records-then-rerun",
         prep("--overwrite", "--num_streams=2", output="{data}"),
         works(both(prepared("{data}", num_streams=2),
                    says("an incomplete preparation left by a killed run", "stderr"))),
         killed(killed_prep("--overwrite", "--num_streams=2",
                            kill_at="xlnet_tf2.data.records|TFRecordFileWriter.commit|1|")),
         changes=("data/*", ".data.prep-*")),
    Case("prep/killed-before-swap-then-rerun", prep("--overwrite", output="{data}"),
         works(both(prepared("{data}"),
              says("an incomplete preparation left by a killed run", "stderr"))),
         killed(killed_prep("--overwrite", kill_at="xlnet_tf2.fileio|replace_directory|1|")),
         changes=("data/*", ".data.prep-*")),
    Case("prep/killed-between-renames-then-rerun", prep(output="{data}"),
         clear("{data}", "already holds prepared data", check=both(
             same_as_artefact("data"),
                  says("the previous prepared data of {data} moved aside", "stderr"),
             says("an incomplete preparation left by a killed run", "stderr"))),
         killed(killed_prep("--overwrite", kill_at="os|rename|1|.data.prep-"), protect=()),
         changes=("data/*", ".data.*")),
    Case("prep/killed-fresh-output-then-rerun", prep(output="{ws}/new"),
         works(both(prepared("{ws}/new"),
              says("an incomplete preparation left by a killed run", "stderr"))),
         killed(killed_prep(output="{ws}/new",
                            kill_at="xlnet_tf2.data.records|TFRecordFileWriter.commit|2|")),
         changes=("new/*", ".new.prep-*")),
    # --- train_sentencepiece
    Case("spm/input-empty", command(SPM, "--input={ws}/empty.txt", "--model_prefix={ws}/sp",
                                    "--vocab_size=300"),
         clear("{ws}/empty.txt", "empty"), put("{ws}/empty.txt", b"")),
    Case("spm/input-blank-lines-only", command(SPM, "--input={ws}/blank.txt",
                                               "--model_prefix={ws}/sp", "--vocab_size=300"),
         clear("{ws}/blank.txt", "holds no text"), put("{ws}/blank.txt", "\n \n\t\n")),
    Case("spm/input-not-utf8", command(SPM, "--input={ws}/bad.txt", "--model_prefix={ws}/sp",
                                       "--vocab_size=300"),
         clear("{ws}/bad.txt:7", "not valid UTF-8"), put("{ws}/bad.txt", BAD_UTF8)),
    Case("spm/input-missing", command(SPM, "--input={ws}/none.txt", "--model_prefix={ws}/sp",
                                      "--vocab_size=300"),
         clear("{ws}/none.txt", "matches no file")),
    Case("spm/vocab-too-large", command(SPM, "--input={ws}/small.txt", "--model_prefix={ws}/sp",
                                        "--vocab_size=5000"),
         clear("--vocab_size"), put("{ws}/small.txt", corpus_with(b"x", 1))),
    Case("spm/vocab-not-a-number", command(SPM, "--input={corpus.txt}", "--model_prefix={ws}/sp",
                                           "--vocab_size=many"), clear("--vocab_size=many")),
    Case("spm/prefix-is-a-directory", command(SPM, "--input={corpus.txt}",
                                              "--model_prefix={ws}/adir", "--vocab_size=300"),
         clear("--model_prefix={ws}/adir", "directory"), put("{ws}/adir/x", "x")),
    Case("spm/prefix-under-a-file", command(SPM, "--input={corpus.txt}",
                                            "--model_prefix={corpus.txt}/sp", "--vocab_size=300"),
         clear("{corpus.txt}")),
    Case("spm/read-only-output", command(SPM, "--input={corpus.txt}", "--model_prefix={ws}/ro/sp",
                                         "--vocab_size=300"),
         clear("{ws}/ro/sp", "Read-only file system"), read_only("{ws}/ro")),
    Case("spm/killed-then-rerun", command(SPM, "--input={corpus.txt}", "--model_prefix={ws}/sp",
                                          "--vocab_size=300"),
         works(spm_loads("{ws}/sp")),
         faults(put("{ws}/sp.model", "an earlier model\n"),
                killed(spawn(SPM, "--input={corpus.txt}", "--model_prefix={ws}/sp",
                             "--vocab_size=300", kill_at="xlnet_tf2.fileio|rename|1|spm.vocab"))),
         changes=("sp.model", "sp.vocab", ".sp.model.tmp-*")),
    # --- build_corpus
    Case("corpus/output-is-a-directory", command(CORPUS, "--output={ws}/adir"),
         clear("--output={ws}/adir", "directory"), put("{ws}/adir/x", "x")),
    Case("corpus/min-bytes-negative", command(CORPUS, "--output={ws}/c.txt", "--min_bytes=-1"),
         clear("--min_bytes")),
    Case("corpus/too-little-text", command(CORPUS, "--output={ws}/c.txt", "--max_bytes=1000",
                                           "--min_bytes=100000000"),
         clear("--min_bytes")),
    Case("corpus/read-only-output", command(CORPUS, "--output={ws}/ro/c.txt", "--max_bytes=10000",
                                            "--min_bytes=0"),
         clear("{ws}/ro/c.txt", "Read-only file system"), read_only("{ws}/ro")),
    Case("corpus/replaces-a-file-whole", command(CORPUS, "--output={ws}/c.txt",
                                                 "--max_bytes=10000", "--min_bytes=0"),
         works(lambda ws, r: os.path.getsize(ws.fmt("{ws}/c.txt")) >= 10000),
         put("{ws}/c.txt", "old\n"), changes=("c.txt",)),
]


@pytest.mark.parametrize("case", as_params(CASES))
def test_data_preparation(case, tmp_path):
    run_case(case, str(tmp_path), artefact)
