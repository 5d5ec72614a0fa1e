"""Raw input sources for data preparation: text files in the original format, or TFDS.

Text format: one sentence per line, a blank line ends a document, `<eop>` may appear in the
text (it is a user-defined piece and is matched by SentencePiece). A TFDS record is one
document whose lines are its sentences.

A *source* is a small JSON-able tuple that a Beam worker can open on its own:
("file", index, path) or ("tfds", index, name, split, text_key).
"""

from __future__ import annotations

from typing import Iterator, List, Sequence, Tuple

from xlnet_tf2 import fileio
from xlnet_tf2.data.params import DataPrepError

Document = Tuple[Tuple[int, int], List[str]]  # ((source index, document index), lines)


def expand_inputs(patterns: Sequence[str]) -> List[str]:
    """Expands comma-separated globs in order; every glob must match at least one file."""
    paths: List[str] = []
    for pattern in patterns:
        for part in [p for p in pattern.split(",") if p.strip()]:
            matched = sorted(fileio.glob(part.strip()))
            if not matched:
                raise DataPrepError(f"--input {part!r} matches no file; fix the path or glob.")
            paths.extend(m for m in matched if m not in paths)
    if not paths:
        raise DataPrepError("No input given: pass --input=GLOB or --tfds_name.")
    return paths


def total_bytes(paths: Sequence[str]) -> int:
    """Total size of the input files; raises DataPrepError if they are all empty."""
    total = sum(fileio.size(p) for p in paths)
    if total == 0:
        raise DataPrepError(f"All {len(paths)} input files are empty ({', '.join(paths[:3])}"
                            f"{'...' if len(paths) > 3 else ''}); pass files with text.")
    return total


def _split_documents(lines: Iterator[str]) -> Iterator[List[str]]:
    doc: List[str] = []
    for line in lines:
        if line and not line.isspace():  # as line.strip(), without a copy
            doc.append(line)
        elif doc:
            yield doc
            doc = []
    if doc:
        yield doc


def decode_line(raw: bytes, path: str, number: int, fix: str) -> str:
    """One line of a text file as str; DataPrepError naming file and line if it is not text.

    A line that is not valid UTF-8, or holds NUL bytes (binary data), is refused with
    "PATH:LINE: ...; FIX".
    """
    if b"\x00" in raw:
        raise DataPrepError(f"{path}:{number}: line holds NUL bytes (binary data, not text); "
                            f"{fix}")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DataPrepError(f"{path}:{number}: line is not valid UTF-8 ({e.reason} at byte "
                            f"{e.start}); {fix}") from None


def check_text_files(paths: Sequence[str], fix: str) -> None:
    """Raises DataPrepError at the first line of `paths` that `decode_line` refuses."""
    for path in paths:
        for _ in read_lines(path, skip_bad_lines=False, fix=fix):
            pass


# Text files are read in blocks of about this many bytes and decoded a block at a time.
READ_BLOCK_BYTES = 1 << 24


def read_lines(path: str, skip_bad_lines: bool, fix: str,
               bad_line_counter=None) -> Iterator[str]:
    """Yields the lines of a text file, without their "\n", decoded a block at a time.

    A block that decodes as UTF-8 without NUL bytes (the normal case) is split at once; a block
    that does not is decoded line by line so the bad line is named ("PATH:LINE: ...; FIX") or,
    with skip_bad_lines, dropped and counted with `bad_line_counter.inc()`.
    """
    lines_before = 0
    pending: List[bytes] = []  # the start of a line that no block so far has ended
    with fileio.open_file(path, "rb") as f:
        while True:
            block = f.read(READ_BLOCK_BYTES)
            if block:
                cut = block.rfind(b"\n") + 1
                if cut == 0:  # no line ends in this block: keep reading
                    pending.append(block)
                    continue
                data = b"".join(pending + [block[:cut]])
                pending = [block[cut:]] if cut < len(block) else []
            elif pending:
                data = b"".join(pending) + b"\n"  # the last line, without its newline
                pending = []
            else:
                return
            lines = None
            if b"\x00" not in data:
                try:
                    lines = data.decode("utf-8").split("\n")[:-1]
                except UnicodeDecodeError:
                    pass
            if lines is None:  # a bad line somewhere in the block: find and name it
                lines = []
                for number, raw in enumerate(data.split(b"\n")[:-1], start=lines_before + 1):
                    try:
                        lines.append(decode_line(raw, path, number, fix))
                    except DataPrepError:
                        if not skip_bad_lines:
                            raise
                        if bad_line_counter is not None:
                            bad_line_counter.inc()
            lines_before += data.count(b"\n")
            yield from lines


def read_text_documents(index: int, path: str, skip_bad_lines: bool,
                        bad_line_counter=None) -> Iterator[Document]:
    """Yields ((index, doc number), lines) of one text file (lines without their "\n").

    An undecodable (non UTF-8) or binary (NUL bytes) line raises DataPrepError naming the
    file and line, unless skip_bad_lines; then the line is dropped and
    `bad_line_counter.inc()` is called.
    """
    lines = read_lines(path, skip_bad_lines, "fix the file or pass --skip_bad_lines.",
                       bad_line_counter)
    for doc_number, doc in enumerate(_split_documents(lines)):
        yield (index, doc_number), doc


def read_tfds_documents(index: int, name: str, split: str,
                        text_key: str) -> Iterator[Document]:
    """Yields ((index, record number), lines) of a TensorFlow Datasets split."""
    import tensorflow_datasets as tfds

    dataset = tfds.load(name, split=split, shuffle_files=False)
    for number, record in enumerate(tfds.as_numpy(dataset)):
        if text_key not in record:
            raise DataPrepError(f"TFDS {name} has no feature {text_key!r} (it has "
                                f"{sorted(record)}); fix --tfds_text_key.")
        text = record[text_key]
        text = text.decode("utf-8") if isinstance(text, bytes) else str(text)
        lines = [l for l in text.splitlines() if l.strip()]
        if lines:
            yield (index, number), lines


def tfds_sources(name: str, split: str, text_key: str, num_slices: int) -> list:
    """Splits a TFDS split into `num_slices` even sub-splits, one source each."""
    import tensorflow_datasets as tfds

    try:
        slices = tfds.even_splits(split, n=num_slices)
    except Exception as e:  # tfds raises several types for a malformed split string
        raise DataPrepError(f"--tfds_split={split!r} is not a valid split ({e}).") from None
    return [("tfds", i, name, str(s), text_key) for i, s in enumerate(slices)]


def read_source(source: tuple, skip_bad_lines: bool, bad_line_counter=None):
    kind = source[0]
    if kind == "file":
        return read_text_documents(source[1], source[2], skip_bad_lines, bad_line_counter)
    if kind == "tfds":
        return read_tfds_documents(*source[1:])
    raise ValueError(f"unknown source kind {kind!r}")
