"""A real English corpus assembled from text already on the machine.

`build_stdlib_corpus` collects the docstrings of the Python standard library (parsed with
`ast`, never imported) and writes them in the pretraining input format: one sentence per
line (printable ASCII only), a blank line after each document (one document per module).
Tests and the demo use it, so nothing is written by hand and nothing is downloaded.
"""

from __future__ import annotations

import ast
import os
import re
import sysconfig
from typing import Iterator, List, Optional

from xlnet_tf2 import fileio
from xlnet_tf2.data.params import DataPrepError

# A sentence ends at ". ", "? " or "! " followed by an upper-case letter or a quote.
SENTENCE_END = re.compile(r"(?<=[.?!])\s+(?=[A-Z\"'(])")
_MIN_SENTENCE_CHARS = 20


def _stdlib_sources(root: str) -> List[str]:
    paths = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames
                             if d not in ("site-packages", "test", "tests", "idlelib",
                                          "__pycache__", "lib2to3", "dist-packages"))
        paths.extend(os.path.join(dirpath, f) for f in sorted(filenames) if f.endswith(".py"))
    return paths


def docstrings(path: str) -> Iterator[str]:
    try:
        with open(path, "rb") as f:
            tree = ast.parse(f.read())
    except (SyntaxError, ValueError, OSError):
        return
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node)
            if doc:
                yield doc


def _sentences(docstring: str) -> Iterator[str]:
    # Paragraphs are separated by blank lines; code examples (">>>", indented) are skipped.
    for paragraph in re.split(r"\n\s*\n", docstring):
        lines = paragraph.splitlines()
        if any(l.lstrip().startswith((">>>", "...")) or l.startswith("    ") for l in lines):
            continue
        text = " ".join(l.strip() for l in lines).strip()
        for sentence in SENTENCE_END.split(text):
            sentence = sentence.strip()
            # Printable ASCII only: some installed packages' docstrings hold control
            # characters (a NUL written as an escape, a backspace), and data preparation
            # refuses a line with a NUL byte as binary data.
            if (len(sentence) >= _MIN_SENTENCE_CHARS and sentence.isascii()
                    and sentence.isprintable()):
                yield sentence


def iter_stdlib_documents(stdlib_dir: Optional[str] = None) -> Iterator[List[str]]:
    """Yields documents (lists of sentences) from the standard library, in a fixed order."""
    root = stdlib_dir or sysconfig.get_paths()["stdlib"]
    for path in _stdlib_sources(root):
        sentences = [s for doc in docstrings(path) for s in _sentences(doc)]
        if len(sentences) >= 2:
            yield sentences


def build_stdlib_corpus(output_path: str, min_bytes: int = 1_000_000,
                        max_bytes: Optional[int] = None,
                        stdlib_dir: Optional[str] = None) -> dict:
    """Writes an English corpus of standard-library docstrings in the pretraining format.

    Args:
      output_path: the text file to write (one sentence per line, blank line after each
        document).
      min_bytes: fail with DataPrepError if the standard library yields less text than this.
      max_bytes: stop after the first document that reaches this size (None: everything).
      stdlib_dir: the library to scan; defaults to this interpreter's standard library.

    Returns:
      {"path", "bytes", "documents", "sentences"} of what was written.
    """
    if os.path.isdir(output_path):
        raise DataPrepError(f"--output={output_path} is a directory; pass the path of the text "
                            "file to write.")
    written = docs = sentences = 0
    blocks = []
    for doc in iter_stdlib_documents(stdlib_dir):
        block = "\n".join(doc) + "\n\n"
        blocks.append(block)
        written += len(block.encode("utf-8"))
        docs += 1
        sentences += len(doc)
        if max_bytes is not None and written >= max_bytes:
            break
    if written < min_bytes:
        raise DataPrepError(f"The standard library under {stdlib_dir or 'the default path'} "
                            f"gave only {written} bytes of docstrings, less than --min_bytes="
                            f"{min_bytes}; lower --min_bytes.")
    fileio.makedirs(os.path.dirname(os.path.abspath(output_path)))
    fileio.write_atomically(output_path, "".join(blocks).encode("utf-8"))
    return {"path": output_path, "bytes": written, "documents": docs, "sentences": sentences}


def build_docstring_corpus(path: str, corpus_bytes: int) -> dict:
    """The docstrings of the standard library, then of the installed packages (purelib), up
    to `corpus_bytes`, written to `path` (the benchmarks that train on real text use it)."""
    stats = build_stdlib_corpus(path, min_bytes=min(corpus_bytes // 2, 500_000),
                                max_bytes=corpus_bytes)
    if stats["bytes"] < corpus_bytes:
        extra = path + ".packages"
        more = build_stdlib_corpus(extra, min_bytes=0, max_bytes=corpus_bytes - stats["bytes"],
                                   stdlib_dir=sysconfig.get_paths()["purelib"])
        with fileio.open_file(extra, "r") as f:
            fileio.append_line(path, f.read().rstrip("\n"))
        fileio.remove(extra)
        stats = {"path": path, "bytes": stats["bytes"] + more["bytes"],
                 "documents": stats["documents"] + more["documents"]}
    return stats
