"""The benchmark's corpus of documentation prose: sources, paragraph deduplication, and a
SentencePiece slice disjoint from the benchmarked text."""

import gzip

import pytest

from benchmarks.tools import doc_corpus
from benchmarks.tools.doc_corpus import build_doc_corpus, is_held_out

LICENSE = ("Permission is granted to copy, distribute and modify this document under the "
           "terms of the license.")


def _package_docs(root, count):
    """`count` packages, each with a README and a gzipped changelog; every README ends
    with the same licence paragraph."""
    for k in range(count):
        package = root / f"package{k:02d}"
        package.mkdir(parents=True)
        (package / "README").write_text(
            f"Package number {k} reads the input files and writes a summary of them.\n"
            f"It keeps every option of version {k} working as it did before.\n\n"
            f"{LICENSE}\n")
        with gzip.open(package / "changelog.gz", "wt") as f:
            f.write(f"* Fix the parser of package {k} when a line ends without a newline.\n"
                    f"* Document how package {k} reports the errors it finds in a file.\n")
        (package / "logo.png").write_bytes(b"\x89PNG\x00\x01binary")
        (package / "notes.txt").write_bytes(b"caf\xe9 is not UTF-8 text, so it is skipped\n")


def test_paragraphs_are_kept_once_and_the_slices_are_disjoint(tmp_path):
    docs = tmp_path / "doc"
    _package_docs(docs, 24)
    site = tmp_path / "site"
    site.mkdir()
    (site / "module.py").write_text(
        '"""Reads configuration files and merges them into one dictionary of settings.\n\n'
        '>>> merge(["a.cfg"])\n{}\n"""\n\n\ndef merge(paths):\n'
        '    """Returns the settings of every file in paths, later files winning over '
        'earlier ones."""\n')
    out, spm = tmp_path / "corpus.txt", tmp_path / "spm.txt"
    stats = build_doc_corpus(str(out), str(spm), max_bytes=10 ** 9, spm_fraction=0.25,
                             sources=("doc", "python"),
                             roots={"doc": str(docs), "python": str(site)})
    text, held = out.read_text(), spm.read_text()
    lines = [line for line in (text + held).split("\n") if line]
    # Each paragraph once in both files together: the licence only in the first README read.
    assert len(lines) == len(set(lines))
    assert sum(line == LICENSE for line in lines) == 1
    assert stats["duplicate_paragraphs"] == 23
    # Binary and non-UTF-8 files are skipped; code examples are not prose.
    assert "PNG" not in text + held and "not UTF-8" not in text + held
    assert ">>>" not in text + held and "merge([" not in text + held
    # Documents are split by a hash of their name: the held-out ones train the tokenizer.
    names = [f"doc:package{k:02d}/{f}" for k in range(24) for f in ("README", "changelog.gz")]
    for name in names:
        package = name.split("/")[0].split(":")[1]
        number = int(package[-2:])
        marker = f"package {number} when a line" if name.endswith("gz") else \
            f"Package number {number} reads"
        assert (marker in held) == is_held_out(name, 0.25), name
        assert (marker in text) != is_held_out(name, 0.25), name
    assert 0 < stats["spm_bytes"] < stats["bytes"]
    # The module's docstrings: both sentences, in the slice its name picks.
    module = held if is_held_out("python:module.py", 0.25) else text
    assert "Reads configuration files and merges them into one dictionary of settings.\n" \
        "Returns the settings of every file in paths, later files winning over earlier " \
        "ones.\n\n" in module
    assert (stats["by_source"]["python"] > 0) == (module is text)
    # Documents are blank-line separated, one sentence per line.
    assert text.endswith("\n\n") and "\n\n\n" not in text


def test_size_limit_and_balanced_sources(tmp_path):
    docs = tmp_path / "doc"
    _package_docs(docs, 30)
    info = tmp_path / "info"
    info.mkdir()
    with gzip.open(info / "tool.info.gz", "wt") as f:
        f.write("\x1f\nFile: tool.info,  Node: Top\n\n" + "\n\n".join(
            f"Section {k} of the manual explains how the tool treats option number {k}."
            for k in range(200)) + "\n")
    stats = build_doc_corpus(str(tmp_path / "c.txt"), str(tmp_path / "s.txt"),
                             max_bytes=2_000, spm_fraction=0.0, sources=("info", "doc"),
                             roots={"info": str(info), "doc": str(docs)})
    # Writing stops after the document that reaches max_bytes.
    assert 2_000 <= stats["bytes"] < 2_000 + 20_000
    assert "File: tool.info" not in (tmp_path / "c.txt").read_text()
    with pytest.raises(ValueError, match="gave only"):
        build_doc_corpus(str(tmp_path / "c.txt"), str(tmp_path / "s.txt"), max_bytes=10 ** 9,
                         min_bytes=10 ** 8, sources=("doc",), roots={"doc": str(docs)})
    with pytest.raises(ValueError, match="unknown corpus sources"):
        build_doc_corpus(str(tmp_path / "c.txt"), str(tmp_path / "s.txt"), max_bytes=1,
                         sources=("web",))
    assert doc_corpus.SOURCES == ("man", "info", "doc", "python")
