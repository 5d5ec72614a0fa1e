"""The Apache Beam pipeline that turns raw text into prepared pretraining examples
(`create_tfrecords`, the command create_tfrecords). Its steps and why they are built so:
`_add_steps`; the runners and the pipeline's shape: docs/DATA.md#runners.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import logging
import os
import re
import sys
import tempfile
import time
import uuid
from typing import Dict, List, Optional, Sequence, Tuple

import apache_beam as beam
import numpy as np
from apache_beam.options.pipeline_options import PipelineOptions

from xlnet_tf2 import __version__, special_ids
from xlnet_tf2.data import manifest, records
from xlnet_tf2 import fileio, run_dir
from xlnet_tf2.prep import dask_runner, text_sources
from xlnet_tf2.prep import streams
from xlnet_tf2.prep.encode import BatchEncoder
from xlnet_tf2.prep.examples import row_example_batches
from xlnet_tf2.data.params import DataParams, DataPrepError
from xlnet_tf2.data.objective_sampling import start_piece_table
from xlnet_tf2.prep.prep_config import check_prep_settings
from xlnet_tf2.progress import Progress
from xlnet_tf2.tokenizers.sentencepiece_tokenizer import (SentencePieceTokenizer, TokenizerError,
                                                     model_checksum)

# Errors raised inside workers reach the launcher wrapped in runner tracebacks; this marker
# lets `create_tfrecords` recover the one-line message and raise it cleanly.
_MARK = "[data-prep] "
_PROGRESS_SECONDS = 10.0
_log = logging.getLogger("xlnet_tf2.data")
# Marks progress lines among the log lines Beam forwards from its workers, so a quiet launcher
# (data_prep/create_tfrecords.py) can print them and drop the rest.
PROGRESS_TAG = "[xlnet-progress] "
EVAL_DIR = "eval"
# Scratch space of one run inside OUTPUT_DIR: progress counts and token files; removed at the
# end (and by the next run if a run was killed).
_WORK_DIR = ".prep"


def _fail(message: str):
    raise DataPrepError(_MARK + message)


class SharedProgress:
    """Progress lines with ETA for one pipeline stage, summed over every worker.

    Each worker adds what it processed; every `_PROGRESS_SECONDS` it writes its own count to
    DIRECTORY/STAGE-<id> and prints one line (xlnet_tf2.progress format) for the sum of all
    workers' files, so the percentage and ETA are those of the whole stage.
    """

    def __init__(self, directory: str, stage: str, label: str, unit: str, total: int):
        self.directory, self.stage, self.total = directory, stage, total
        self._path = os.path.join(directory, f"{stage}-{uuid.uuid4().hex}")
        self._progress = Progress(total=max(total, 1), label=label, unit=unit,
                                  every_seconds=_PROGRESS_SECONDS, stream=sys.stderr)
        self._mine = 0
        self._last = time.perf_counter()

    def add(self, count: int) -> None:
        self._mine += count
        if time.perf_counter() - self._last >= _PROGRESS_SECONDS:
            self.flush()
            # Through logging: the runner forwards worker logs to the launcher's console.
            _log.warning(PROGRESS_TAG + self.line())

    def line(self) -> str:
        """The progress line of the whole stage (all workers' counts summed)."""
        self._progress.count = self._sum()
        if self.total > 0:
            self._progress.total = self.total
            return self._progress.line()
        # Total unknown (TFDS input): count and rate only.
        elapsed = max(time.perf_counter() - self._progress.start, 1e-9)
        return (f"{self._progress.label}: {self._progress.count:,} {self._progress.unit} | "
                f"{self._progress.count / elapsed:,.0f} {self._progress.unit}/s")

    def flush(self) -> None:
        self._last = time.perf_counter()
        try:
            with fileio.open_file(self._path, "w") as f:
                f.write(str(self._mine))
        except Exception:  # progress is best effort (OSError here, tf.errors remotely)
            pass

    def _sum(self) -> int:
        total = 0
        try:
            for name in fileio.listdir(self.directory):
                if name.startswith(self.stage + "-"):
                    with fileio.open_file(os.path.join(self.directory, name)) as f:
                        total += int(f.read() or 0)
        except Exception:  # best effort: a file being replaced, a remote hiccup
            return self._mine
        return total


# Documents are read and tokenized in batches of about this much text: one Beam element per
# batch keeps the per-element overhead negligible. A constant, so the batches (and therefore
# the output) never depend on the number of workers.
BATCH_CHARS = 1 << 18


def is_eval_document(seed: int, key: Tuple[int, int], eval_fraction: float) -> bool:
    """Whether document `key` is held out: a hash of (seed, key) below eval_fraction."""
    if eval_fraction <= 0:
        return False
    digest = hashlib.sha256(f"eval:{seed}:{key[0]}:{key[1]}".encode()).digest()
    return int.from_bytes(digest[:8], "big") < eval_fraction * 2.0 ** 64


def scratch_file_name(batch_key: Tuple[int, int, int, int], suffix: str) -> str:
    """Name of a batch's scratch file (its token ids, ".npy")."""
    source, part, number, split = batch_key
    return f"split{split}-source{source:06d}-part{part:08d}-batch{number:08d}{suffix}"


# A part of a document: ((document key, part number, whether it is the last part), lines).
PartKey = Tuple[Tuple[int, int], int, bool]


def document_parts(key: Tuple[int, int], lines: List[str]):
    """(part key, lines, characters) of the document cut at line ends into parts of about
    BATCH_CHARS characters (lines and their newlines).

    A long document (a book, a changelog) would otherwise make one batch as large as itself,
    and the worker that tokenizes it would keep the other waiting. Parts are tokenized apart
    and joined again by the layout; a part ends at a line end, where a sentence ends anyway,
    so the prepared examples are the same.
    """
    total = sum(map(len, lines)) + len(lines)  # characters, with a newline after each line
    if total < BATCH_CHARS:  # nearly every document
        yield (key, 0, True), lines, total
        return
    start = size = 0
    number = 0
    for end, line in enumerate(lines, start=1):
        size += len(line) + 1
        if size >= BATCH_CHARS and end < len(lines):
            yield (key, number, False), lines[start:end], size
            start, size, number = end, 0, number + 1
    yield (key, number, True), lines[start:], size


def text_batches(source, held_out: bool, skip_bad_lines: bool, eval_fraction: float,
                 seed: int, bad_lines):
    """(split, batch key, TextBatch) of one source, split 0 (train) or 1 (held out).

    A source is a range of a text file or a TFDS slice (text_sources.py); a batch key is
    (source index, range number (0 for TFDS), batch number, split). A TextBatch is (part keys,
    int64 [D] lines per part, text): the batch's lines joined by "\\n". `bad_lines.inc()` counts
    each skipped line.
    """
    batches = {False: ([], [0]), True: ([], [0])}
    numbers = {False: 0, True: 0}

    def flush(split):
        docs, size = batches[split]
        if docs:
            key = (source[1], text_sources.source_part(source), numbers[split], int(split))
            numbers[split] += 1
            text = "\n".join(line for _, doc in docs for line in doc)
            out = (int(split), key, ([k for k, _ in docs],
                                     np.array([len(doc) for _, doc in docs], np.int64), text))
            docs.clear()
            size[0] = 0
            return [out]
        return []

    try:
        for key, lines in text_sources.read_source(source, skip_bad_lines, bad_lines):
            split = held_out or is_eval_document(seed, key, eval_fraction)
            docs, size = batches[split]
            for part_key, part_lines, chars in document_parts(key, lines):
                docs.append((part_key, part_lines))
                size[0] += chars
                if size[0] >= BATCH_CHARS:
                    yield from flush(split)
    except DataPrepError as e:
        _fail(str(e))
    yield from flush(False)
    yield from flush(True)


class ModelCopy:
    """The run's copy of the SentencePiece model (OUTPUT_DIR/spiece.model, written before the
    pipeline starts), as the workers' steps load it.

    The tokenizing step carries this path and checksum, not the model (the writing step
    carries only the start-piece table): Beam pickles (and compresses) every step when the
    pipeline is built and unpickles it in each worker, and with the model inside, that cost
    time per step to build and per worker to load, on the run's critical path
    (BENCHMARKS.md#figures-behind-choices-in-the-code). The output directory
    must be reachable from every worker anyway (it receives their files).
    """

    def __init__(self, path: str, sha256: str):
        self.path = path
        self.sha256 = sha256

    def load(self, lower: bool = False) -> SentencePieceTokenizer:
        try:
            with fileio.open_file(self.path, "rb") as f:
                proto = f.read()
        except Exception as e:  # OSError locally, tf.errors.OpError through tf.io.gfile
            _fail(f"{self.path}: cannot read the run's copy of the SentencePiece model ({e}); "
                  "the output directory must be reachable from every worker.")
        if model_checksum(proto) != self.sha256:
            _fail(f"{self.path}: the run's copy of the SentencePiece model changed while it "
                  "ran; run the command again, with nothing else writing to --output_dir.")
        return SentencePieceTokenizer(proto, lower=lower, source=self.path)


def write_tokens(path: str, ids: np.ndarray, sentences: np.ndarray) -> None:
    """Stores a batch's ids and sentence numbers as one int32 [2, n] .npy file."""
    buffer = io.BytesIO()
    np.save(buffer, np.stack([ids.astype(np.int32), sentences.astype(np.int32)]))
    fileio.write_atomically(path, buffer.getvalue())


def read_tokens(path: str) -> np.ndarray:
    """int32 [2, n] (ids, sentence numbers) of a token file.

    A local file is memory-mapped: a stream's documents are scattered over every token file,
    so each stream needs a small part of each, and reading and parsing whole files cost the
    writing step more than building the examples' targets.
    """
    with fileio.open_file(path, "rb") as f:
        if fileio.is_remote(path):
            return np.load(io.BytesIO(f.read()))
        version = np.lib.format.read_magic(f)
        read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                       else np.lib.format.read_array_header_2_0)
        shape, fortran, dtype = read_header(f)
        # As a plain ndarray (its base keeps the mapping open): slicing a np.memmap runs
        # Python code per slice, and a stream takes two slices of each of its pieces.
        return np.memmap(f, dtype=dtype, mode="r", offset=f.tell(), shape=shape,
                         order="F" if fortran else "C").view(np.ndarray)


# The splits a run prepares: the data and its held-out part (--eval_fraction, --eval_input).
SPLITS = ("train", EVAL_DIR)
# The first item of every split's group: the group exists (and the layout reports too little
# text) even when no batch of the split has a token.
_SPLIT_START = ("start", None)


class _ReadAndTokenize(beam.DoFn):
    """(source, held_out) -> (split name, item) for each batch of the source.

    An item is ("tokens", TokenBatch) with TokenBatch = (batch key, token file, [(part key,
    tokens)]), or ("bad_lines", count) (for each split the run prepares: both manifests count
    them). Reading and tokenizing are one step, so the text never leaves the worker that read
    it, on any runner (a runner that does not fuse steps would move it otherwise).

    The batch's ids and sentence numbers (inside each part) go to the token file; each
    document ends with <eod> (after its last part), a sentence of its own, as in the
    original. Documents whose lines all encode to nothing are dropped (a document of several
    parts by the layout, which sees all of them).
    """

    def __init__(self, model: ModelCopy, *, uncased: bool, word_cache: bool, token_dir: str,
                 progress: dict, skip_bad_lines: bool, eval_fraction: float, seed: int,
                 splits: Sequence[str]):
        self._model = model
        self._uncased = uncased
        self._word_cache = word_cache
        self._token_dir = token_dir
        self._progress_args = progress
        self._skip = skip_bad_lines
        self._eval_fraction = eval_fraction
        self._seed = seed
        self._splits = tuple(splits)

    def setup(self):
        tok = self._model.load(lower=self._uncased)
        self._encoder = BatchEncoder(tok, word_cache=self._word_cache)
        self._empty = beam.metrics.Metrics.counter("xlnet_data", "empty_documents")
        self._progress = SharedProgress(**self._progress_args)

    def process(self, element):
        source, held_out = element
        bad = []

        class _Count:
            def inc(self):
                bad.append(1)

        for split, batch_key, batch in text_batches(source, held_out, self._skip,
                                                    self._eval_fraction, self._seed, _Count()):
            tokens = self.tokenize(batch_key, batch)
            if tokens is not None:
                yield SPLITS[split], ("tokens", tokens)
        if bad:
            for split in self._splits:
                yield split, ("bad_lines", len(bad))

    def tokenize(self, batch_key, batch):
        """The TokenBatch of a TextBatch (its token file written), None if it has no token."""
        doc_keys, lines_per_doc, text = batch
        lines = text.split("\n")
        ids, per_line = self._encoder.encode_lines(lines)
        num_docs = len(doc_keys)
        # Sentence number of each line inside its document, counting non-empty lines only.
        nonempty = per_line > 0
        doc_of_line = np.repeat(np.arange(num_docs), lines_per_doc)
        first_line = np.concatenate([[0], np.cumsum(lines_per_doc)[:-1]])
        ranks = np.cumsum(nonempty) - nonempty
        sentence = ranks - ranks[first_line][doc_of_line]
        tokens_per_doc = np.bincount(doc_of_line, weights=per_line,
                                     minlength=num_docs).astype(np.int64)
        sentences_per_doc = np.bincount(doc_of_line, weights=nonempty,
                                        minlength=num_docs).astype(np.int64)
        line_sent = np.repeat(sentence, per_line)
        last = np.array([key[2] for key in doc_keys], bool)
        later = np.array([key[1] > 0 for key in doc_keys], bool)
        # A part without tokens is dropped, except the last of several: it carries the <eod>.
        keep = (tokens_per_doc > 0) | (last & later)
        if (~keep & last).any():
            self._empty.inc(int((~keep & last).sum()))
        kept = np.flatnonzero(keep)
        with_eod = last[kept]
        lengths = tokens_per_doc[kept] + with_eod
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        # Insert <eod> after every document's last part (sentence number: its sentence count).
        eod_pos = (offsets[1:] - 1)[with_eod]
        body = np.ones(offsets[-1], bool)
        body[eod_pos] = False
        out_ids = np.empty(offsets[-1], np.int32)
        out_sent = np.empty(offsets[-1], np.int32)
        out_ids[body] = ids
        out_ids[eod_pos] = special_ids.EOD_ID
        out_sent[body] = line_sent
        out_sent[eod_pos] = sentences_per_doc[kept][with_eod]
        self._progress.add(len(text) + 1)
        if kept.size == 0:
            return None
        path = os.path.join(self._token_dir, scratch_file_name(batch_key, ".npy"))
        write_tokens(path, out_ids, out_sent)
        return batch_key, path, [(doc_keys[i], int(n)) for i, n in zip(kept, lengths)]

    def teardown(self):
        if hasattr(self, "_progress"):
            self._progress.flush()


# One piece of a stream read from a token file: (offset in the stream, token file, begin,
# end in the file).
FilePiece = Tuple[int, str, int, int]


def _layout(batches, params: DataParams, split: str):
    """All TokenBatches of a split -> (summary, [(stream, [FilePiece])] for every stream)."""
    paths: List[str] = []
    doc_keys: List[Tuple[int, int]] = []
    doc_index: Dict[Tuple[int, int], int] = {}
    part_doc, part_number, part_file, part_start, part_len = [], [], [], [], []
    for _, path, docs in batches:
        start = 0
        for (doc_key, number, _), n in docs:
            doc = doc_index.get(doc_key)
            if doc is None:
                doc = doc_index[doc_key] = len(doc_keys)
                doc_keys.append(doc_key)
            part_doc.append(doc)
            part_number.append(number)
            part_file.append(len(paths))
            part_start.append(start)
            part_len.append(n)
            start += n
        paths.append(path)
    try:
        layout, pieces = streams.compute_layout(doc_keys, part_doc, part_number, part_len,
                                                params)
    except DataPrepError as e:
        if split == "eval":
            _fail(f"Held-out split ({EVAL_DIR}/): {e} Or raise --eval_fraction / add "
                  "--eval_input text.")
        _fail(str(e))
    part = pieces["part"]
    in_file = np.asarray(part_start, np.int64)[part]
    offset = pieces["offset"].tolist()
    files = np.asarray(part_file, np.int64)[part].tolist()
    begin = (in_file + pieces["begin"]).tolist()
    end = (in_file + pieces["end"]).tolist()
    bounds = np.searchsorted(pieces["stream"], np.arange(params.num_streams + 1)).tolist()
    return layout.to_dict(), [
        (stream, [(offset[q], paths[files[q]], begin[q], end[q])
                  for q in range(bounds[stream], bounds[stream + 1])])
        for stream in range(params.num_streams)]


def _layout_split(group, params: DataParams):
    """(split, its items) -> ((split, stream), ([FilePiece], summary)) for every stream.

    The summary (StreamLayout's fields and "bad_lines_skipped") travels with every stream to
    the writing step and on to the manifest: no side input (Beam's DaskRunner runs the steps
    behind a side input a second time: here, the tokenizing).
    """
    split, items = group
    batches = [value for kind, value in items if kind == "tokens"]
    summary, rows = _layout(batches, params, split)
    summary["bad_lines_skipped"] = sum(value for kind, value in items if kind == "bad_lines")
    for stream, pieces in rows:
        yield (split, stream), (pieces, summary)


# Token files a writing worker keeps open (memory-mapped local files cost address space only).
_OPEN_TOKEN_FILES = 4096


def read_stream_pieces(pieces: Sequence[FilePiece], opened: Optional[Dict] = None):
    """[(offset, ids, sentence numbers)] of one stream (views), each token file read once.

    opened: {path: tokens} of the files this worker has already opened (local files only;
    filled here), so the streams a worker writes share them.
    """
    by_file: Dict[str, List[FilePiece]] = {}
    for piece in pieces:
        by_file.setdefault(piece[1], []).append(piece)
    if opened is not None and len(opened) > _OPEN_TOKEN_FILES:
        opened.clear()
    out = []
    for path in sorted(by_file):
        tokens = opened.get(path) if opened is not None else None
        if tokens is None:
            tokens = read_tokens(path)
            if opened is not None and not fileio.is_remote(path):
                opened[path] = tokens
        for offset, _, begin, end in by_file[path]:
            out.append((offset, tokens[0, begin:end], tokens[1, begin:end]))
    return out


class _WriteStream(beam.DoFn):
    """((split, stream), [([FilePiece], summary)]) -> one file per (pass, direction) in the
    split's directory; yields (split, (file description, summary)) for each.

    `starts_word` is the vocabulary's `start_piece_table`, computed once by the launcher (a
    bool per piece) rather than from the model in every worker. output_dirs, progress: by
    split name.
    """

    def __init__(self, starts_word: np.ndarray, params: DataParams, output_dirs: dict,
                 progress: dict):
        self._starts_word = starts_word
        self._params = params
        self._output_dirs = output_dirs
        self._progress_args = progress

    def setup(self):
        self._progress: Dict[str, SharedProgress] = {}
        self._token_files: Dict[str, np.ndarray] = {}

    def process(self, element):
        (split, stream), [(pieces, summary)] = element
        ids, sent = streams.assemble_row(read_stream_pieces(pieces, self._token_files),
                                         summary["row_len"])
        progress = self._progress.get(split)
        if progress is None:
            progress = self._progress[split] = SharedProgress(**self._progress_args[split])
            p = self._params
            progress.total = (summary["chunks_per_row"] * p.num_streams * p.num_passes
                              * p.num_directions)
        for pass_id in range(self._params.num_passes):
            for direction in range(self._params.num_directions):
                name = records.shard_name(pass_id, direction, stream)
                path = os.path.join(self._output_dirs[split], name)
                with records.TFRecordFileWriter(path) as writer:
                    for batch in row_example_batches(ids, sent, params=self._params,
                                                     starts_word=self._starts_word,
                                                     stream_id=stream, pass_id=pass_id,
                                                     direction=direction):
                        num = batch["chunk_index"].shape[0]
                        batch["stream_id"] = np.full(num, stream, np.int32)
                        batch["direction"] = np.full(num, direction, np.int32)
                        batch["pass_id"] = np.full(num, pass_id, np.int32)
                        writer.write_batch(batch)
                        progress.add(num)
                    writer.commit()
                yield split, ({"name": name, "examples": writer.records, "bytes": writer.bytes,
                               "stream": stream}, summary)

    def finish_bundle(self):
        self._token_files.clear()  # the next bundle may be another split's files

    def teardown(self):
        for progress in getattr(self, "_progress", {}).values():
            progress.flush()


def _write_manifest(group, *, params, output_dirs, vocab_size, spm_sha256, spm_model,
                    sources):
    """(split, [(file description, summary)]) -> the split's record_info.json; yields the
    split's name."""
    split, written = group
    file_infos = sorted((info for info, _ in written), key=lambda f: f["name"])
    summary = written[0][1]
    chunks = summary["chunks_per_row"]
    data = {
        "format": manifest.FORMAT,
        "tool": "data_prep/create_tfrecords.py",
        "tool_version": __version__,
        "split": split,
        "params": params.to_dict(),
        "vocab_size": vocab_size,
        "spm_sha256": spm_sha256,
        "spm_model": spm_model,
        "inputs": [list(s) for s in sources[split]],
        "num_streams": params.num_streams,
        "num_passes": params.num_passes,
        "directions": params.num_directions,
        "documents": summary["documents"],
        "total_tokens": summary["total_tokens"],
        "tokens_per_stream": summary["row_len"],
        "tokens_dropped": summary["total_tokens"] - summary["row_len"] * params.num_streams,
        "chunks_per_stream": chunks,
        "examples_per_stream_per_pass": chunks * params.num_directions,
        "num_examples": sum(f["examples"] for f in file_infos),
        "bad_lines_skipped": int(summary["bad_lines_skipped"]),
        "files": [f["name"] for f in file_infos],
        "file_stats": {f["name"]: {"records": int(f["examples"]), "bytes": int(f["bytes"])}
                       for f in file_infos},
    }
    expected = params.num_streams * params.num_passes * params.num_directions
    if len(file_infos) != expected or any(f["examples"] != chunks for f in file_infos):
        raise RuntimeError(f"incomplete output: {len(file_infos)} of {expected} files")
    manifest.write_manifest(output_dirs[split], data)
    yield split


def _add_steps(p, elements, *, splits: Sequence[str], params: DataParams, model: ModelCopy,
               starts_word: np.ndarray, output_dirs: dict, tokenizer, spm_model: str,
               sources: dict, input_chars: int, work_dir: str, skip_bad_lines: bool,
               eval_fraction: float) -> None:
    """Adds the steps that turn the sources into the prepared directories of `splits`.

    One chain of steps, whatever the splits, built only of Create, ParDo (one output, no side
    input), GroupByKey and Flatten: what every runner executes, Beam's DaskRunner included
    (which computes only the last step and what it depends on, mixes a step's tagged outputs,
    runs the steps behind a side input twice and does not shuffle in Reshuffle;
    docs/DATA.md#runners):

        sources (ranges of the text files, or TFDS slices; spread over the workers)
            -> batches of documents (about BATCH_CHARS of text each), split train / held out
            -> tokenize, in the step that read the batch: one SentencePiece call per batch;
               the ids go to a token file OUTPUT_DIR/.prep/tokens/<batch>.npy, only lengths
               go on
            -> (by split) layout (one place per split, small): every stream's pieces as
               (token file, range)
            -> (by stream) per stream: read its pieces, build the examples of every pass
               and direction vectorized over the chunks of the row, serialize in bulk
            -> one TFRecord file per (pass, direction, stream) -> (by split) record_info.json

    Neither text nor token ids travel through the runner's shuffles, only file names and
    lengths, and workers import no TensorFlow for local paths (fileio.py; TFRecord framing in
    records.py): BENCHMARKS.md#figures-behind-choices-in-the-code says why. The held-out split
    goes through the same steps: its elements carry the split's name, and the steps group by
    it.

    Every random choice is a pure function of `--seed` and the identity of what it decides
    (document key, stream, chunk, pass, direction), never of the worker that runs it, the
    order elements arrive or how they are batched, so the output is byte-identical for any
    number of workers and on any runner (OUTPUT_DIR must be on storage every worker can
    reach).
    """
    progress_dir = os.path.join(work_dir, "progress")
    tokenize_progress = dict(directory=progress_dir, stage="tokenize", label="tokenizing",
                             unit="chars", total=input_chars)
    write_progress = {name: dict(directory=progress_dir, stage=f"{name}-write",
                                 label=f"{name}: writing examples", unit="examples", total=0)
                      for name in splits}
    # No shuffle before tokenizing: the sources (ranges of files) are spread over the workers
    # already, and each worker tokenizes what it read.
    items = (p | "Sources" >> beam.Create(elements)
             | "ReadAndTokenize" >> beam.ParDo(_ReadAndTokenize(
                 model, uncased=params.uncased, word_cache=params.word_cache,
                 token_dir=os.path.join(work_dir, "tokens"), progress=tokenize_progress,
                 skip_bad_lines=skip_bad_lines, eval_fraction=eval_fraction, seed=params.seed,
                 splits=splits)))
    starts = p | "Splits" >> beam.Create([(name, _SPLIT_START) for name in splits])
    rows = ((items, starts) | "EverySplit" >> beam.Flatten()
            | "BySplit" >> beam.GroupByKey()
            | "Layout" >> beam.FlatMap(_layout_split, params))
    # Keyed by (split, stream), the streams spread over the workers (as Reshuffle would on
    # the runners where it shuffles).
    (rows | "ByStream" >> beam.GroupByKey()
     | "Write" >> beam.ParDo(_WriteStream(starts_word, params, output_dirs, write_progress))
     | "FilesBySplit" >> beam.GroupByKey()
     | "Manifest" >> beam.FlatMap(
         _write_manifest, params=params, output_dirs=output_dirs,
         vocab_size=tokenizer.vocab_size, spm_sha256=tokenizer.checksum, spm_model=spm_model,
         sources=sources))


def _default_beam_options(beam_args: Sequence[str]) -> List[str]:
    """The local DirectRunner on all cores unless the caller chose another runner or the
    DirectRunner's settings."""
    args = list(beam_args)
    given = " ".join(args)
    if "--runner" not in given:
        args.append("--runner=DirectRunner")
    elif "DirectRunner" not in given:  # the --direct_* options are the DirectRunner's only
        return args
    if "--direct_num_workers" not in given:
        args.append("--direct_num_workers=0")  # 0 = one worker per core
    if "--direct_running_mode" not in given:
        args.append("--direct_running_mode=multi_processing")
    return args


# What a prepared directory holds (besides its eval/ split); anything else in an existing
# --output_dir is someone else's and the directory is refused.
_PREPARED_NAMES = re.compile(r"^(record_info\.json|.*\.tfrecord.*|spiece\.model|eval|"
                             + re.escape(_WORK_DIR) + r")$")


def _check_existing_output(directory: str, overwrite: bool) -> None:
    """Refuses an --output_dir holding prepared data (unless `overwrite`) or files that are
    not prepared data (always: the new data replaces the directory whole). Reports and removes
    what killed runs left beside it (`fileio.leftovers`)."""
    for leftover in fileio.leftovers(directory, "old"):
        if fileio.exists(directory):
            fileio.rmtree(leftover)
        else:  # killed between moving the old data aside and moving the new data in
            print(f"[data-prep] found {leftover}, the previous prepared data of {directory} "
                  "moved aside by a run that was killed; putting it back.", file=sys.stderr,
                  flush=True)
            fileio.rename(leftover, directory)
    for leftover in fileio.leftovers(directory, "prep"):
        print(f"[data-prep] found {leftover}, an incomplete preparation left by a killed run; "
              "removing it.", file=sys.stderr, flush=True)
        fileio.rmtree(leftover)
    if not fileio.exists(directory):
        return
    if not fileio.isdir(directory):
        raise DataPrepError(f"--output_dir={directory} is a file; pass a directory.")
    names = sorted(n.rstrip("/") for n in fileio.listdir(directory))
    foreign = [n for n in names if not _PREPARED_NAMES.match(n)]
    if foreign:
        raise DataPrepError(
            f"--output_dir={directory} holds files that are not prepared data ({foreign[0]}"
            f"{', ...' if len(foreign) > 1 else ''}); prepared data goes into a directory of "
            "its own: choose a new or empty one.")
    if names and not overwrite:
        found = ("already holds prepared data" if manifest.MANIFEST_NAME in names else
                 "holds TFRecord files without record_info.json (an incomplete copy, or a "
                 "preparation by an older version that was stopped)")
        raise DataPrepError(f"--output_dir={directory} {found}; pass --overwrite to replace it "
                            "(only once the new data is complete) or choose another directory.")


def _check_size(paths, params: DataParams, fraction: float, what: str, fix: str) -> int:
    size = text_sources.total_bytes(paths)
    # Upper bound on tokens: at most two pieces ("▁" and one character) per byte.
    need = params.num_streams * params.seq_len
    if 2 * size * fraction < need:
        raise DataPrepError(
            f"Too little text{what}: {int(size * fraction)} bytes in {len(paths)} files cannot "
            f"give the {need} tokens that --num_streams={params.num_streams} streams of "
            f"--seq_len={params.seq_len} need. {fix}")
    return size


def preflight(*, params: DataParams, input_patterns: Sequence[str], tfds_name: Optional[str],
              tfds_split: str, tfds_text_key: str, spm_model: str, output_dir: str,
              overwrite: bool, tfds_data_dir: Optional[str] = None,
              num_tfds_slices: int = text_sources.TFDS_SLICES, eval_fraction: float = 0.0,
              eval_input: Sequence[str] = ()):
    """Every check that can run before any work.

    Returns:
      (tokenizer, train sources, held-out sources, input characters or 0 if unknown).
    """
    check_prep_settings(params, output_dir=output_dir, input_patterns=input_patterns,
                        tfds_name=tfds_name, eval_fraction=eval_fraction, eval_input=eval_input)
    try:
        tokenizer = SentencePieceTokenizer.from_file(spm_model, lower=params.uncased)
    except TokenizerError as e:
        raise DataPrepError(f"--spm_model: {e}") from None
    size = 0
    if input_patterns:
        paths = text_sources.expand_inputs(input_patterns)
        size = _check_size(paths, params, 1.0 - eval_fraction, "",
                           "Add text or lower --num_streams.")
        sources = [("file", i, p) for i, p in enumerate(paths)]
    else:
        sources = text_sources.tfds_sources(tfds_name, tfds_split, tfds_text_key,
                                            num_tfds_slices, tfds_data_dir)
    if eval_fraction and input_patterns:
        _check_size(paths, params, eval_fraction, " for the held-out split",
                    "Raise --eval_fraction, add text or lower --num_streams.")
    eval_sources = []
    if eval_input:
        try:
            eval_paths = text_sources.expand_inputs(eval_input)
        except DataPrepError as e:
            raise DataPrepError(str(e).replace("--input", "--eval_input")) from None
        size += _check_size(eval_paths, params, 1.0, " in --eval_input",
                            "Add held-out text or lower --num_streams.")
        eval_sources = [("file", len(sources) + i, p) for i, p in enumerate(eval_paths)]
    _check_existing_output(output_dir, overwrite)
    return tokenizer, sources, eval_sources, size


def _copy_spm_model(tokenizer: SentencePieceTokenizer, directory: str) -> ModelCopy:
    """Writes the SentencePiece model beside the data (training finds it there)."""
    path = os.path.join(directory, run_dir.SPM_FILE)
    fileio.write_atomically(path, tokenizer.model_proto)
    return ModelCopy(path, tokenizer.checksum)


@contextlib.contextmanager
def _private_tempdir():
    """Points `tempfile` at a fresh directory for the run and removes it afterwards.

    Beam's local job service makes a "beam-temp*" directory in the temporary directory for
    every run and never removes it; this keeps them from piling up in /tmp.
    """
    directory = tempfile.mkdtemp(prefix="xlnet-prep-")
    saved = tempfile.tempdir
    tempfile.tempdir = directory
    try:
        yield
    finally:
        tempfile.tempdir = saved
        fileio.rmtree(directory)


def create_tfrecords(*, params: DataParams, output_dir: str, spm_model: str,
                     input_patterns: Sequence[str] = (), tfds_name: Optional[str] = None,
                     tfds_split: str = "train", tfds_text_key: str = "text",
                     tfds_data_dir: Optional[str] = None, skip_bad_lines: bool = False,
                     overwrite: bool = False, eval_fraction: float = 0.0,
                     eval_input: Sequence[str] = (),
                     beam_args: Sequence[str] = ()) -> dict:
    """Prepares a directory of pretraining examples and returns its manifest.

    Args:
      tfds_name, tfds_split, tfds_text_key, tfds_data_dir: or a split of a TFDS dataset
        prepared in tfds_data_dir, one record a document (text_sources.tfds_sources).
      eval_fraction: hold out this fraction of the documents (chosen by a hash of --seed and
        the document's identity) into OUTPUT_DIR/eval.
      eval_input: or: text files prepared into OUTPUT_DIR/eval instead.

    Returns:
      The train manifest, with "_seconds" (wall clock) and, if a held-out split was
      prepared, "_eval" (its manifest).

    Raises:
      DataPrepError with a one-line message naming the file, line or flag to change.
    """
    tokenizer, sources, eval_sources, input_chars = preflight(
        params=params, input_patterns=input_patterns, tfds_name=tfds_name,
        tfds_split=tfds_split, tfds_text_key=tfds_text_key, tfds_data_dir=tfds_data_dir,
        spm_model=spm_model, output_dir=output_dir, overwrite=overwrite,
        eval_fraction=eval_fraction,
        eval_input=eval_input)
    with_eval = bool(eval_fraction or eval_sources)
    # Everything is written under a staging name beside --output_dir and swapped in once
    # complete and checked: a failed or killed run leaves the previous data as it was.
    staging = fileio.staging_directory(output_dir, "prep")
    start = time.time()
    try:
        _run_pipeline(staging, params=params, tokenizer=tokenizer, sources=sources,
                      eval_sources=eval_sources, with_eval=with_eval, spm_model=spm_model,
                      input_chars=input_chars, skip_bad_lines=skip_bad_lines,
                      eval_fraction=eval_fraction, beam_args=beam_args)
        result = manifest.read_manifest(staging)
        if with_eval:
            result["_eval"] = manifest.read_manifest(os.path.join(staging, EVAL_DIR))
        fileio.replace_directory(staging, output_dir)
    except BaseException as e:
        fileio.rmtree(staging)
        raise _translated(e, output_dir) or e
    result["_seconds"] = time.time() - start
    return result


def _translated(error: BaseException, output_dir: str) -> Optional[Exception]:
    """The one-line error of a failed preparation: our own message recovered from a runner's
    wrapping, or a full disk / refused write named by --output_dir; None: a bug (raised as
    it is)."""
    # Beam's DoFn runner appends the step: "... [while running 'ReadAndTokenize']".
    found = re.search(re.escape(_MARK) + r"([^\n]*?)(?: \[while running '[^\n]*?'\])?"
                      r"(?:['\"]\)*)?(?:\n|$)", str(error))
    if found:
        return DataPrepError(found.group(1).replace("\\'", "'"))
    output = fileio.output_error(error)
    if output is not None:
        reason = output.strerror.split(": ", 1)[-1]
        return DataPrepError(f"--output_dir={output_dir}: {reason}")
    return None


def _run_pipeline(directory: str, *, params: DataParams, tokenizer, sources, eval_sources,
                  with_eval: bool, spm_model: str, input_chars: int, skip_bad_lines: bool,
                  eval_fraction: float, beam_args: Sequence[str]) -> None:
    """Runs the Beam pipeline that writes the prepared data (and eval/) into `directory`."""
    eval_dir = os.path.join(directory, EVAL_DIR)
    model = _copy_spm_model(tokenizer, directory)
    if with_eval:
        fileio.makedirs(eval_dir)
        _copy_spm_model(tokenizer, eval_dir)
    work_dir = os.path.join(directory, _WORK_DIR)
    fileio.makedirs(os.path.join(work_dir, "progress"))
    fileio.makedirs(os.path.join(work_dir, "tokens"))
    options = PipelineOptions(_default_beam_options(beam_args))
    # Each text file is read in ranges (text_sources.file_ranges), spread over the workers.
    elements = ([(part, False) for s in sources for part in text_sources.source_parts(s)]
                + [(part, True) for s in eval_sources for part in text_sources.source_parts(s)])
    splits = SPLITS if with_eval else SPLITS[:1]
    try:
        with _private_tempdir(), beam.Pipeline(runner=dask_runner.pipeline_runner(options),
                                               options=options) as p:
            _add_steps(p, elements, splits=splits, params=params, model=model,
                       starts_word=start_piece_table(tokenizer),
                       output_dirs={SPLITS[0]: directory, EVAL_DIR: eval_dir},
                       tokenizer=tokenizer, spm_model=spm_model,
                       sources={SPLITS[0]: sources, EVAL_DIR: eval_sources or sources},
                       input_chars=input_chars, work_dir=work_dir,
                       skip_bad_lines=skip_bad_lines, eval_fraction=eval_fraction)
    finally:
        fileio.rmtree(work_dir)


def summary(result: dict, output_dir: str) -> str:
    """What data_prep/create_tfrecords.py prints about `create_tfrecords`' result."""
    m, seconds = result, result["_seconds"]
    lines = [
        f"Done in {seconds:.1f}s: {m['documents']} documents, {m['total_tokens']} tokens "
        f"({m['total_tokens'] / seconds:.0f} tokens/s), {m['num_streams']} streams x "
        f"{m['chunks_per_stream']} chunks x {m['directions']} directions x "
        f"{m['num_passes']} passes = {m['num_examples']} examples in {len(m['files'])} "
        f"files; {m['tokens_dropped']} tail tokens dropped; {m['bad_lines_skipped']} bad "
        f"lines skipped. Manifest: {output_dir}/record_info.json"]
    if "_eval" in m:
        e = m["_eval"]
        lines.append(f"Held out: {e['documents']} documents, {e['total_tokens']} tokens, "
                     f"{e['num_examples']} examples. Manifest: {output_dir}/{EVAL_DIR}/"
                     "record_info.json")
    return "\n".join(lines)
