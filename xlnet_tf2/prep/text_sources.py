"""Raw input sources for data preparation: text files in the original format, or TFDS.

Text format: one sentence per line, a blank line ends a document, `<eop>` may appear in the
text (it is a user-defined piece and is matched by SentencePiece). A TFDS record is one
document whose lines are its sentences.

A *source* is a small JSON-able tuple that a Beam worker can open on its own: a range of a text
file ("file", index, path, begin, end, range number; `file_ranges`) or a slice of a prepared
TFDS split ("tfds", index, name, slice, text_key, data_dir, key source, first key;
`tfds_sources`).
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


# A TFDS split is read in at most this many slices (the sources of a TFDS input), spread over
# the workers; a slice is a range of record numbers of one split.
TFDS_SLICES = 16


def _first_line(error: Exception) -> str:
    # TFDS's messages run to hundreds of lines (a "not found" lists every dataset it knows).
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0] if text else ''}"


def tfds_builder(name: str, data_dir: Optional[str]):
    """The prepared TFDS dataset `name` ("name", "name/config", "name:1.0.0", ...) found in
    `data_dir` (None: TFDS's default directory) as a builder.

    A dataset prepared in `data_dir` is found without its builder class (TFDS reads its
    dataset_info.json): a dataset of one's own needs no import here. Data preparation never
    downloads: a registered dataset that is not prepared yet is an error saying how to
    prepare it.

    Raises:
      DataPrepError naming --tfds_name / --tfds_data_dir.
    """
    import tensorflow_datasets as tfds

    where = f"--tfds_data_dir={data_dir}" if data_dir else "TFDS's default data directory"
    try:
        builder = tfds.builder(name, data_dir=data_dir)
        prepared = builder.is_prepared()
    except Exception as e:  # tfds raises several types (not found, bad name or version, ...)
        raise DataPrepError(f"--tfds_name={name}: no such dataset in {where} "
                            f"({_first_line(e)}); prepare it with `tfds build` (or "
                            "download_and_prepare) and pass its data directory as "
                            "--tfds_data_dir.") from None
    if not prepared:
        raise DataPrepError(f"--tfds_name={name} is not prepared in {where}; data preparation "
                            "does not download: run `tfds build` for it first (e.g. `tfds "
                            f"build {name.split(':')[0]} --data_dir=DIR`) and pass "
                            "--tfds_data_dir=DIR.")
    return builder


def tfds_sources(name: str, split: str, text_key: str, num_slices: int = TFDS_SLICES,
                 data_dir: Optional[str] = None) -> list:
    """The sources ("tfds", index, name, slice, text_key, data_dir, key source, first key) that
    read a split of a prepared TFDS dataset: `num_slices` ranges of record numbers of about
    equal size ("train[0:1250]", ...; fewer if the split has fewer records, one more per
    extra part of the split), checked here, before any work.

    A document's key is (key source, record number in its split): the index of the first
    slice of its part of `split` ("train+test" has two parts) and the absolute record number,
    so keys (and with them the document order and the held-out choice) do not depend on the
    slicing, and a dataset read whole ("train") keys its documents (0, 0), (0, 1), ... like a
    text file of one range holding the same documents in the same order.

    Raises:
      DataPrepError naming the flag to change (dataset, split or text feature).
    """
    import tensorflow as tf  # TFDS imports TensorFlow anyway
    import tensorflow_datasets as tfds

    builder = tfds_builder(name, data_dir)
    info = builder.info
    features = sorted(info.features.keys())
    if text_key not in features:
        raise DataPrepError(f"--tfds_text_key={text_key}: {name} has no such feature (it has "
                            f"{features}); pass the feature holding the text.")
    feature = info.features[text_key]
    if getattr(feature, "tf_dtype", None) != tf.string or tuple(feature.shape) != ():
        raise DataPrepError(f"--tfds_text_key={text_key}: that feature of {name} is "
                            f"{type(feature).__name__} of {feature.tf_dtype.name} "
                            f"{list(feature.shape)}, not one text per record; pass the "
                            "feature holding the text.")
    try:
        parts = tfds.core.ReadInstruction.from_spec(split).to_absolute(info.splits)
    except Exception as e:  # tfds raises several types for a malformed or unknown split
        raise DataPrepError(f"--tfds_split={split!r} is not a valid split of {name} "
                            f"({_first_line(e)}); its splits are {sorted(info.splits.keys())}."
                            ) from None
    ranges = []  # (split name, start, stop) of each part
    for part in parts:
        total = info.splits[part.splitname].num_examples
        start = 0 if part.from_ is None else min(max(part.from_, 0), total)
        stop = total if part.to is None else min(max(part.to, start), total)
        ranges.append((part.splitname, start, stop))
    records = sum(stop - start for _, start, stop in ranges)
    if not records:
        raise DataPrepError(f"--tfds_split={split!r} of {name} holds no records; choose a "
                            "split with documents.")
    # Even cuts of the records (all parts in a row), then each part's share of every slice.
    count = min(max(num_slices, 1), records)
    cuts = [i * records // count for i in range(count + 1)]
    sources: list = []
    offset = 0
    for splitname, start, stop in ranges:
        size = stop - start
        if not size:
            continue
        key_source = len(sources)
        bounds = [0] + [c - offset for c in cuts if offset < c < offset + size] + [size]
        for begin, end in zip(bounds, bounds[1:]):
            sources.append(("tfds", len(sources), name, f"{splitname}[{start + begin}:"
                            f"{start + end}]", text_key, data_dir, key_source, start + begin))
        offset += size
    return sources


def tfds_document_lines(text: str) -> List[str]:
    """The lines of a TFDS record's text as a text file's lines: split at "\n" (a "\r" stays,
    as in a file), blank lines dropped (a record is one document)."""
    return [line for line in text.split("\n") if not _is_blank(line)]


def read_tfds_documents(index: int, name: str, split: str, text_key: str,
                        data_dir: Optional[str], key_source: int,
                        first_key: int) -> Iterator[Document]:
    """Yields ((key_source, first_key + record number in the slice), lines) of a slice of a
    prepared TFDS dataset (a source of `tfds_sources`); a record without text yields none."""
    import tensorflow_datasets as tfds

    dataset = tfds.load(name, split=split, data_dir=data_dir, shuffle_files=False,
                        download=False)
    for number, record in enumerate(tfds.as_numpy(dataset)):
        if text_key not in record:
            raise DataPrepError(f"TFDS {name} has no feature {text_key!r} (it has "
                                f"{sorted(record)}); fix --tfds_text_key.")
        text = record[text_key]
        if isinstance(text, bytes):
            try:
                text = text.decode("utf-8")
            except UnicodeDecodeError as e:
                raise DataPrepError(f"TFDS {name}[{split}] record {number}: feature "
                                    f"{text_key!r} is not valid UTF-8 ({e.reason} at byte "
                                    f"{e.start}); fix the dataset.") from None
        elif not isinstance(text, str):
            raise DataPrepError(f"TFDS {name}: feature {text_key!r} holds {type(text).__name__}"
                                ", not text; pass a text feature as --tfds_text_key.")
        lines = tfds_document_lines(text)
        if lines:
            yield (key_source, first_key + number), lines


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
