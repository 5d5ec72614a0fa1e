"""xlnet_tf2/prep/docstring_corpus.py: the docstring corpus holds only lines data preparation
accepts, even when an installed package's docstrings hold control characters (a NUL written as
an escape)."""

from xlnet_tf2.prep.text_sources import check_text_files
from xlnet_tf2.prep.docstring_corpus import build_docstring_corpus, build_stdlib_corpus

# A package module as found on a machine: its docstrings spell control characters as escapes,
# so the parsed docstring holds them (a NUL byte, a backspace, an escape).
MODULE = '''"""Reads the archive and returns its members in the order they were written.

Each member name ends with a NUL byte (\\x00) in the archive header on disk. The reader
strips the padding of every header before it returns the name of the member.
"""


def seek(archive):
    """Moves to the next header of the archive and returns its offset in bytes.

    Use ``\\x08`` to emulate the word boundary of the regular expression module here. Names
    print in red (\\x1b[31m) on a terminal that shows the colors of the escape codes. The offset
    counts from the first byte of the archive, never from the end of the previous member.
    """
'''


def test_control_characters_never_reach_the_corpus(tmp_path):
    library = tmp_path / "lib"
    library.mkdir()
    (library / "archive.py").write_text(MODULE)
    out = tmp_path / "corpus.txt"
    stats = build_stdlib_corpus(str(out), min_bytes=0, stdlib_dir=str(library))
    lines = out.read_text().splitlines()
    # The clean sentences are there, the three holding a control character are not.
    assert lines == [
        "Reads the archive and returns its members in the order they were written.",
        "The reader strips the padding of every header before it returns the name of the "
        "member.",
        "Moves to the next header of the archive and returns its offset in bytes.",
        "The offset counts from the first byte of the archive, never from the end of the "
        "previous member.",
        ""]
    assert stats["sentences"] == 4
    check_text_files([str(out)], fix="unused")  # data preparation accepts every line


def test_docstring_corpus_of_this_machine_is_printable_ascii(tmp_path):
    out = tmp_path / "corpus.txt"
    stats = build_docstring_corpus(str(out), 300_000)
    data = out.read_bytes()
    assert len(data) == stats["bytes"] >= 300_000
    assert b"\x00" not in data
    assert all(line.isascii() and line.isprintable() for line in data.decode().split("\n"))
    check_text_files([str(out)], fix="unused")
