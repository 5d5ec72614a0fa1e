"""Raw input sources for data preparation: text files in the original format, or TFDS.

Text format: one sentence per line, a blank line ends a document, `<eop>` may appear in the
text (it is a user-defined piece and is matched by SentencePiece). A TFDS record is one
document whose lines are its sentences.

A *source* is a small JSON-able tuple that a Beam worker can open on its own: a range of a text
file ("file", index, path, begin, end, range number; `file_ranges`) or a TFDS slice ("tfds",
index, name, split, text_key).
"""

from __future__ import annotations

from typing import Iterator, List, Optional, Sequence, Tuple

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
# Reading on past the end of a range, to finish its last document: blocks of this size.
_FOLLOW_BLOCK_BYTES = 1 << 16


def _count_lines_before(path: str, offset: int) -> int:
    """Line ends in the first `offset` bytes of the file (only to name a bad line)."""
    count = 0
    with fileio.open_file(path, "rb") as f:
        while offset > 0:
            block = f.read(min(offset, READ_BLOCK_BYTES))
            if not block:
                break
            count += block.count(b"\n")
            offset -= len(block)
    return count


def read_line_range(path: str, start: int, stop: Optional[int], skip_bad_lines: bool, fix: str,
                    block_bytes: Optional[int] = None) -> Iterator[Optional[str]]:
    """Yields the lines that start in [start, stop) of a text file (stop None: to its end),
    without their "\n", decoded a block at a time; `start` and `stop` must be line starts
    (or the file's end).

    A block that decodes as UTF-8 without NUL bytes (the normal case) is split at once; a block
    that does not is decoded line by line and its bad line is named ("PATH:LINE: ...; FIX",
    LINE counted from the start of the file) or, with skip_bad_lines, yielded as None.
    """
    block_bytes = block_bytes or READ_BLOCK_BYTES
    lines_before_start: Optional[int] = 0 if start == 0 else None  # only to name a bad line
    lines_read = 0
    pending: List[bytes] = []  # the start of a line that no block so far has ended
    position = start
    with fileio.open_file(path, "rb") as f:
        f.seek(start)
        while True:
            size = block_bytes if stop is None else min(block_bytes, stop - position)
            block = f.read(size) if size > 0 else b""
            position += len(block)
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
                if lines_before_start is None:
                    lines_before_start = _count_lines_before(path, start)
                lines = []
                for number, raw in enumerate(data.split(b"\n")[:-1],
                                             start=lines_before_start + lines_read + 1):
                    try:
                        lines.append(decode_line(raw, path, number, fix))
                    except DataPrepError:
                        if not skip_bad_lines:
                            raise
                        lines.append(None)
            lines_read += data.count(b"\n")
            yield from lines


def read_lines(path: str, skip_bad_lines: bool, fix: str,
               bad_line_counter=None) -> Iterator[str]:
    """Yields the lines of a text file, without their "\n" (`read_line_range` of the whole
    file); a bad line skipped with skip_bad_lines is counted with `bad_line_counter.inc()`."""
    for line in read_line_range(path, 0, None, skip_bad_lines, fix):
        if line is not None:
            yield line
        elif bad_line_counter is not None:
            bad_line_counter.inc()


def _is_blank(line: str) -> bool:
    return not line or line.isspace()


def _line_start_at_or_after(f, offset: int, limit: Optional[int] = None) -> int:
    """The first line start >= offset: the file size if there is none, `limit` if there is
    none before it (the search reads no further: a range looking for its first line start
    reads only its own bytes, so a file of one long line is not read once per range)."""
    if offset == 0:
        return 0
    f.seek(offset - 1)
    position = offset - 1
    while limit is None or position < limit:
        size = _FOLLOW_BLOCK_BYTES if limit is None else min(_FOLLOW_BLOCK_BYTES,
                                                             limit - position)
        block = f.read(size)
        if not block:
            return position
        found = block.find(b"\n")
        if found >= 0:
            return position + found + 1
        position += len(block)
    return limit


def _line_before(f, end: int) -> Tuple[int, bytes]:
    """(start, bytes) of the line whose "\n" is at end - 1 (end > 0)."""
    position, chunks = end - 1, []
    while position > 0:
        low = max(0, position - _FOLLOW_BLOCK_BYTES)
        f.seek(low)
        block = f.read(position - low)
        found = block.rfind(b"\n")
        if found >= 0:
            chunks.insert(0, block[found + 1:])
            return low + found + 1, b"".join(chunks)
        chunks.insert(0, block)
        position = low
    return 0, b"".join(chunks)


def _document_open_at(f, start: int, skip_bad_lines: bool) -> bool:
    """Whether the line at `start` continues a document (the line before it holds text).

    A bad line (not UTF-8, NUL bytes) skipped with skip_bad_lines is not there: the line
    before it decides. Without skip_bad_lines it counts as text (its reader stops the run).
    """
    while start > 0:
        start, raw = _line_before(f, start)
        try:
            line = decode_line(raw, "", 0, "")  # its message is not used
        except DataPrepError:
            if skip_bad_lines:
                continue
            return True
        return not _is_blank(line)
    return False


# A text file is read in ranges of about this many bytes, each by whichever worker gets it, so a
# large file is read (and tokenized) in parallel: the size is a function of the file's size
# alone (never of the number of workers), so the ranges, the documents' keys and the prepared
# data are the same on any topology. A range owns the documents whose first line starts in it.
RANGES_PER_FILE = 64
MIN_RANGE_BYTES = 1 << 18
MAX_RANGE_BYTES = 1 << 26
# Document keys: (file index, range number * RANGE_DOC_STRIDE + document number in the range),
# so a file of one range (< MIN_RANGE_BYTES) numbers its documents 0, 1, 2, ... as a whole.
RANGE_DOC_STRIDE = 1 << 32


def range_bytes(file_size: int) -> int:
    """The range size of a file: a power of two near file_size / RANGES_PER_FILE, within
    [MIN_RANGE_BYTES, MAX_RANGE_BYTES]."""
    target = max(-(-file_size // RANGES_PER_FILE), 1)
    return min(max(1 << (target - 1).bit_length(), MIN_RANGE_BYTES), MAX_RANGE_BYTES)


def file_ranges(index: int, path: str, size: int) -> list:
    """The sources ("file", index, path, begin, end, range number) that read one text file."""
    step = range_bytes(size)
    return [("file", index, path, begin, min(begin + step, size), begin // step)
            for begin in range(0, size, step)] or [("file", index, path, 0, 0, 0)]


def read_text_range(index: int, path: str, begin: int, end: int, number: int,
                    skip_bad_lines: bool, bad_line_counter=None) -> Iterator[Document]:
    """Yields ((index, number * RANGE_DOC_STRIDE + k), lines) of the documents whose first line
    starts in bytes [begin, end) of a text file (lines without their "\n"); the last one is
    read to its end, past `end` if it runs on.

    An undecodable (non UTF-8) or binary (NUL bytes) line raises DataPrepError naming the
    file and line, unless skip_bad_lines; then the line is dropped and
    `bad_line_counter.inc()` is called (for the lines of this range's documents only).
    """
    fix = "fix the file or pass --skip_bad_lines."
    with fileio.open_file(path, "rb") as f:
        start = _line_start_at_or_after(f, begin, limit=end)
        if start >= end:
            return
        stop = _line_start_at_or_after(f, end)
        continues = _document_open_at(f, start, skip_bad_lines)

    def owned_lines() -> Iterator[str]:
        skipping = continues  # the end of a document that an earlier range owns
        in_document = False
        for line in read_line_range(path, start, stop, skip_bad_lines, fix):
            if line is None:
                if not skipping and bad_line_counter is not None:
                    bad_line_counter.inc()
                continue
            blank = _is_blank(line)
            if skipping:
                skipping = not blank
                continue
            in_document = not blank
            yield line
        if not in_document:
            return
        for line in read_line_range(path, stop, None, skip_bad_lines, fix,
                                    block_bytes=_FOLLOW_BLOCK_BYTES):
            if line is None:
                if bad_line_counter is not None:
                    bad_line_counter.inc()
                continue
            if _is_blank(line):
                return
            yield line

    for k, doc in enumerate(_split_documents(owned_lines())):
        yield (index, number * RANGE_DOC_STRIDE + k), doc


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


def source_parts(source: tuple) -> list:
    """What `read_source` reads of a source given as ("file", index, path) (its ranges) or as
    a TFDS slice (itself)."""
    if source[0] == "file" and len(source) == 3:
        return file_ranges(source[1], source[2], fileio.size(source[2]))
    return [source]


def source_part(source: tuple) -> int:
    """The range number of a file range, 0 for a TFDS slice."""
    return source[5] if source[0] == "file" else 0


def read_source(source: tuple, skip_bad_lines: bool, bad_line_counter=None):
    """The documents of a source: a range of a text file (`file_ranges`) or a TFDS slice."""
    kind = source[0]
    if kind == "file":
        return read_text_range(*source[1:], skip_bad_lines, bad_line_counter)
    if kind == "tfds":
        return read_tfds_documents(*source[1:])
    raise ValueError(f"unknown source kind {kind!r}")
