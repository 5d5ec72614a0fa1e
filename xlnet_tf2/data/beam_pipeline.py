"""The Apache Beam pipeline that turns raw text into prepared pretraining examples.

    sources -> batches of documents (about BATCH_CHARS of text each), split train / held out
            -> (reshuffle) -> tokenized batches (BatchEncoder: one SentencePiece call each)
            -> lengths -> layout (one place, small) -> pieces per (batch, stream)
            -> GroupByKey(stream) -> rows -> examples of every pass and direction, built
               vectorized over the chunks of a row and serialized in bulk
            -> one TFRecord file per (pass, direction, stream) -> record_info.json

The held-out split (--eval_fraction or --eval_input) goes through the same steps into
OUTPUT_DIR/eval, with its own manifest and the same parameters.

Every random choice is a pure function of `--seed` and the identity of what it decides
(document key, stream, chunk, pass, direction), never of the worker that runs it, the order
elements arrive or how they are batched, so the output is byte-identical for any number of
workers and on any runner. The same code runs on Dataflow, Flink or Spark with the runner's
standard options.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import sys
import time
import uuid
from typing import List, Optional, Sequence, Tuple

import apache_beam as beam
import numpy as np
import tensorflow as tf
from apache_beam.options.pipeline_options import PipelineOptions

from xlnet_tf2 import special_ids
from xlnet_tf2.data import inputs, manifest, records, streams
from xlnet_tf2.data.encode import BatchEncoder
from xlnet_tf2.data.examples import row_example_batches
from xlnet_tf2.data.params import DataParams, DataPrepError
from xlnet_tf2.data.span_sampling import start_piece_table
from xlnet_tf2.progress import Progress
from xlnet_tf2.tokenization import SentencePieceTokenizer, TokenizerError

# Errors raised inside workers reach the launcher wrapped in runner tracebacks; this marker
# lets `create_tfrecords` recover the one-line message and raise it cleanly.
_MARK = "[data-prep] "
_PROGRESS_SECONDS = 10.0
_log = logging.getLogger("xlnet_tf2.data")
# Marks progress lines among the log lines Beam forwards from its workers, so a quiet launcher
# (data_prep/create_tfrecords.py) can print them and drop the rest.
PROGRESS_TAG = "[xlnet-progress] "
EVAL_DIR = "eval"
SPM_FILE = "spiece.model"
_PROGRESS_DIR = ".progress"


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
            with tf.io.gfile.GFile(self._path, "w") as f:
                f.write(str(self._mine))
        except tf.errors.OpError:
            pass  # progress is best effort

    def _sum(self) -> int:
        total = 0
        try:
            for name in tf.io.gfile.listdir(self.directory):
                if name.startswith(self.stage + "-"):
                    with tf.io.gfile.GFile(os.path.join(self.directory, name)) as f:
                        total += int(f.read() or 0)
        except (tf.errors.OpError, ValueError):
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


class _ReadSource(beam.DoFn):
    """(source, held_out) -> (batch key, [(document key, lines)]) for each split.

    The train split is the main output, the held-out split the "eval" output; a batch key is
    (source index, batch number, split).
    """

    def __init__(self, skip_bad_lines: bool, eval_fraction: float, seed: int):
        self._skip = skip_bad_lines
        self._eval_fraction = eval_fraction
        self._seed = seed

    def process(self, element):
        source, held_out = element
        bad = []

        class _Count:
            def inc(self):
                bad.append(1)

        batches = {False: ([], [0]), True: ([], [0])}
        numbers = {False: 0, True: 0}

        def flush(split):
            docs, size = batches[split]
            if docs:
                key = (source[1], numbers[split], int(split))
                numbers[split] += 1
                out = (key, list(docs))
                docs.clear()
                size[0] = 0
                return [beam.pvalue.TaggedOutput("eval", out) if split else out]
            return []

        try:
            for key, lines in inputs.read_source(source, self._skip, _Count()):
                split = held_out or is_eval_document(self._seed, key, self._eval_fraction)
                docs, size = batches[split]
                docs.append((key, lines))
                size[0] += sum(len(line) for line in lines)
                if size[0] >= BATCH_CHARS:
                    yield from flush(split)
        except DataPrepError as e:
            _fail(str(e))
        yield from flush(False)
        yield from flush(True)
        if bad:
            yield beam.pvalue.TaggedOutput("bad_lines", (source[2], len(bad)))


class _Tokenize(beam.DoFn):
    """(batch key, [(document key, lines)]) -> (batch key, TokenBatch).

    A TokenBatch is (document keys, int64 [D + 1] document offsets, int32 [n] ids, int32 [n]
    sentence numbers inside the document); each document ends with <eod>, a sentence of its
    own, as in the original. Documents whose lines all encode to nothing are dropped.
    """

    def __init__(self, model_proto: bytes, uncased: bool, word_cache: bool, progress: dict):
        self._proto = model_proto
        self._uncased = uncased
        self._word_cache = word_cache
        self._progress_args = progress

    def setup(self):
        tok = SentencePieceTokenizer(self._proto, lower=self._uncased)
        self._encoder = BatchEncoder(tok, word_cache=self._word_cache)
        self._empty = beam.metrics.Metrics.counter("xlnet_data", "empty_documents")
        self._progress = SharedProgress(**self._progress_args)

    def process(self, element):
        batch_key, docs = element
        lines = [line for _, doc in docs for line in doc]
        ids, per_line = self._encoder.encode_lines(lines)
        lines_per_doc = np.array([len(doc) for _, doc in docs], np.int64)
        # Sentence number of each line inside its document, counting non-empty lines only.
        nonempty = per_line > 0
        doc_of_line = np.repeat(np.arange(len(docs)), lines_per_doc)
        first_line = np.concatenate([[0], np.cumsum(lines_per_doc)[:-1]])
        ranks = np.cumsum(nonempty) - nonempty
        sentence = ranks - ranks[first_line][doc_of_line] if lines else ranks
        tokens_per_doc = np.bincount(doc_of_line, weights=per_line,
                                     minlength=len(docs)).astype(np.int64)
        sentences_per_doc = np.bincount(doc_of_line, weights=nonempty,
                                        minlength=len(docs)).astype(np.int64)
        line_sent = np.repeat(sentence, per_line)
        keep = tokens_per_doc > 0
        if (~keep).any():
            self._empty.inc(int((~keep).sum()))
        # Insert <eod> after every kept document (with sentence number = its sentence count).
        doc_of_token = np.repeat(np.arange(len(docs)), tokens_per_doc)
        token_keep = keep[doc_of_token]
        ids, line_sent, doc_of_token = ids[token_keep], line_sent[token_keep], \
            doc_of_token[token_keep]
        kept = np.flatnonzero(keep)
        lengths = tokens_per_doc[kept] + 1
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        out_ids = np.full(offsets[-1], special_ids.EOD_ID, np.int32)
        out_sent = np.empty(offsets[-1], np.int32)
        eod_pos = offsets[1:] - 1
        body = np.ones(offsets[-1], bool)
        body[eod_pos] = False
        out_ids[body] = ids
        out_sent[body] = line_sent
        out_sent[eod_pos] = sentences_per_doc[kept]
        self._progress.add(sum(len(line) for line in lines))
        if kept.size == 0:
            return []
        keys = [docs[i][0] for i in kept]
        return [(batch_key, (keys, offsets.astype(np.int64), out_ids, out_sent))]

    def teardown(self):
        if hasattr(self, "_progress"):
            self._progress.flush()


def _batch_lengths(element):
    batch_key, (keys, offsets, _, _) = element
    return batch_key, [(k, int(n)) for k, n in zip(keys, np.diff(offsets))]


def _layout(all_lengths, params: DataParams, split: str):
    doc_batch = {}
    lengths = []
    for batch_key, docs in all_lengths:
        for index, (doc_key, n) in enumerate(docs):
            doc_batch[doc_key] = (batch_key, index)
            lengths.append((doc_key, n))
    try:
        layout, placement = streams.compute_layout(lengths, params)
    except DataPrepError as e:
        if split == "eval":
            _fail(f"Held-out split ({EVAL_DIR}/): {e} Or raise --eval_fraction / add "
                  "--eval_input text.")
        _fail(str(e))
    yield beam.pvalue.TaggedOutput("summary", layout.to_dict())
    per_batch = {}
    for doc_key, pieces in placement.items():
        batch_key, index = doc_batch[doc_key]
        per_batch.setdefault(batch_key, []).append((index, pieces))
    for batch_key, docs in sorted(per_batch.items()):
        yield batch_key, sorted(docs)


def _cut_pieces(element):
    """(batch key, {docs, placement}) -> (stream, [(offset, ids, sentence ids)]) per stream."""
    _, grouped = element
    docs, placements = list(grouped["docs"]), list(grouped["placement"])
    if not docs or not placements:
        return []  # a batch whose documents all fall in the dropped tail of the corpus
    _, offsets, ids, sent = docs[0]
    per_stream = {}
    for index, pieces in placements[0]:
        base = int(offsets[index])
        for stream, offset, begin, end in pieces:
            per_stream.setdefault(stream, []).append(
                (offset, ids[base + begin:base + end], sent[base + begin:base + end]))
    return sorted(per_stream.items(), key=lambda kv: kv[0])


class _WriteStream(beam.DoFn):
    """(stream, [[pieces]]) -> one file per (pass, direction); yields their descriptions."""

    def __init__(self, model_proto: bytes, params: DataParams, output_dir: str,
                 progress: dict):
        self._proto = model_proto
        self._params = params
        self._output_dir = output_dir
        self._progress_args = progress

    def setup(self):
        self._starts_word = start_piece_table(SentencePieceTokenizer(self._proto))
        self._progress = SharedProgress(**self._progress_args)

    def process(self, element, summary):
        stream, grouped = element
        pieces = [piece for group in grouped for piece in group]
        ids, sent = streams.assemble_row(pieces, summary["row_len"])
        if self._progress.total == 0:
            p = self._params
            self._progress.total = (summary["chunks_per_row"] * p.num_streams * p.num_passes
                                    * p.num_directions)
        for pass_id in range(self._params.num_passes):
            for direction in range(self._params.num_directions):
                name = records.shard_name(pass_id, direction, stream)
                path = os.path.join(self._output_dir, name)
                tmp = f"{path}.tmp-{uuid.uuid4().hex}"
                count = size = 0
                with tf.io.TFRecordWriter(tmp) as writer:
                    for batch in row_example_batches(ids, sent, params=self._params,
                                                     starts_word=self._starts_word,
                                                     stream_id=stream, pass_id=pass_id,
                                                     direction=direction):
                        num = batch["chunk_index"].shape[0]
                        batch["stream_id"] = np.full(num, stream, np.int32)
                        batch["direction"] = np.full(num, direction, np.int32)
                        batch["pass_id"] = np.full(num, pass_id, np.int32)
                        for record in records.serialize_batch(batch):
                            writer.write(record)
                            size += len(record) + records.TFRECORD_OVERHEAD
                        count += num
                        self._progress.add(num)
                tf.io.gfile.rename(tmp, path, overwrite=True)
                yield {"name": name, "examples": count, "bytes": size, "stream": stream}

    def teardown(self):
        if hasattr(self, "_progress"):
            self._progress.flush()


def _write_manifest(file_infos, summary, bad_lines, *, params, output_dir, vocab_size,
                    spm_sha256, spm_model, sources, split):
    from xlnet_tf2 import __version__

    file_infos = sorted(file_infos, key=lambda f: f["name"])
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
        "inputs": [list(s) for s in sources],
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
        "bad_lines_skipped": int(sum(n for _, n in bad_lines)),
        "files": [f["name"] for f in file_infos],
        "file_stats": {f["name"]: {"records": int(f["examples"]), "bytes": int(f["bytes"])}
                       for f in file_infos},
    }
    expected = params.num_streams * params.num_passes * params.num_directions
    if len(file_infos) != expected or any(f["examples"] != chunks for f in file_infos):
        raise RuntimeError(f"incomplete output: {len(file_infos)} of {expected} files")
    manifest.write_manifest(output_dir, data)
    yield data


def _prepare_split(p, name: str, batches, bad_lines, *, params: DataParams, proto: bytes,
                   output_dir: str, word_cache: bool, tokenizer, spm_model: str, sources,
                   input_chars: int, progress_dir: str):
    """Adds the steps that turn one split's document batches into a prepared directory."""
    tokenize_progress = dict(directory=progress_dir, stage=f"{name}-tokenize",
                             label=f"{name}: tokenizing", unit="chars", total=input_chars)
    write_progress = dict(directory=progress_dir, stage=f"{name}-write",
                          label=f"{name}: writing examples", unit="examples", total=0)
    docs = (batches | f"{name}Spread" >> beam.Reshuffle()
            | f"{name}Tokenize" >> beam.ParDo(
                _Tokenize(proto, params.uncased, word_cache, tokenize_progress)))
    layout = (docs
              | f"{name}Lengths" >> beam.Map(_batch_lengths)
              | f"{name}AllLengths" >> beam.combiners.ToList()
              | f"{name}Layout" >> beam.FlatMap(_layout, params, name).with_outputs(
                  "summary", main="placement"))
    summary = beam.pvalue.AsSingleton(layout.summary)
    files = ({"docs": docs, "placement": layout.placement}
             | f"{name}Join" >> beam.CoGroupByKey()
             | f"{name}Cut" >> beam.FlatMap(_cut_pieces)
             | f"{name}ByStream" >> beam.GroupByKey()
             | f"{name}Write" >> beam.ParDo(
                 _WriteStream(proto, params, output_dir, write_progress), summary))
    return (files | f"{name}AllFiles" >> beam.combiners.ToList()
            | f"{name}Manifest" >> beam.FlatMap(
                _write_manifest, summary, beam.pvalue.AsList(bad_lines), params=params,
                output_dir=output_dir, vocab_size=tokenizer.vocab_size,
                spm_sha256=tokenizer.checksum, spm_model=spm_model, sources=sources,
                split=name))


def _default_beam_options(beam_args: Sequence[str]) -> List[str]:
    """Local DirectRunner on all cores unless the caller chose otherwise."""
    args = list(beam_args)
    given = " ".join(args)
    if "--runner" not in given:
        args.append("--runner=DirectRunner")
    if "--direct_num_workers" not in given:
        args.append("--direct_num_workers=0")  # 0 = one worker per core
    if "--direct_running_mode" not in given:
        args.append("--direct_running_mode=multi_processing")
    return args


def _clear_prepared(directory: str, overwrite: bool, flag: str) -> None:
    """Refuses (without overwrite) or removes prepared data in `directory`, manifest first."""
    if not tf.io.gfile.exists(directory):
        return
    existing = [n for n in tf.io.gfile.listdir(directory)
                if n == manifest.MANIFEST_NAME or ".tfrecord" in n]
    if existing and not overwrite:
        raise DataPrepError(f"{flag}={directory} already holds prepared data; pass "
                            "--overwrite to replace it or choose another directory.")
    # Drop the old manifest first: an interrupted run must not leave it describing new data.
    for name in sorted(existing, key=lambda n: n != manifest.MANIFEST_NAME):
        tf.io.gfile.remove(os.path.join(directory, name))


def _check_size(paths, params: DataParams, fraction: float, what: str, fix: str) -> int:
    size = inputs.total_bytes(paths)
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
              overwrite: bool, num_tfds_slices: int = 16, eval_fraction: float = 0.0,
              eval_input: Sequence[str] = ()):
    """Every check that can run before any work.

    Returns:
      (tokenizer, train sources, held-out sources, input characters or 0 if unknown).
    """
    params.validate()
    if not output_dir:
        raise DataPrepError("--output_dir is required.")
    if bool(input_patterns) == bool(tfds_name):
        raise DataPrepError("Pass exactly one of --input (text files) and --tfds_name.")
    if not 0.0 <= eval_fraction < 1.0:
        raise DataPrepError(f"--eval_fraction must be in [0, 1), got {eval_fraction}.")
    if eval_fraction and eval_input:
        raise DataPrepError("Pass at most one of --eval_fraction and --eval_input.")
    try:
        tokenizer = SentencePieceTokenizer.from_file(spm_model, lower=params.uncased)
    except TokenizerError as e:
        raise DataPrepError(f"--spm_model: {e}") from None
    size = 0
    if input_patterns:
        paths = inputs.expand_inputs(input_patterns)
        size = _check_size(paths, params, 1.0 - eval_fraction, "",
                           "Add text or lower --num_streams.")
        sources = [("file", i, p) for i, p in enumerate(paths)]
    else:
        sources = inputs.tfds_sources(tfds_name, tfds_split, tfds_text_key, num_tfds_slices)
    if eval_fraction and input_patterns:
        _check_size(paths, params, eval_fraction, " for the held-out split",
                    "Raise --eval_fraction, add text or lower --num_streams.")
    eval_sources = []
    if eval_input:
        try:
            eval_paths = inputs.expand_inputs(eval_input)
        except DataPrepError as e:
            raise DataPrepError(str(e).replace("--input", "--eval_input")) from None
        size += _check_size(eval_paths, params, 1.0, " in --eval_input",
                            "Add held-out text or lower --num_streams.")
        eval_sources = [("file", len(sources) + i, p) for i, p in enumerate(eval_paths)]
    eval_dir = os.path.join(output_dir, EVAL_DIR)
    _clear_prepared(output_dir, overwrite, "--output_dir")
    _clear_prepared(eval_dir, overwrite, "--output_dir")  # stale held-out data goes too
    tf.io.gfile.makedirs(output_dir)
    if eval_fraction or eval_sources:
        tf.io.gfile.makedirs(eval_dir)
    return tokenizer, sources, eval_sources, size


def _copy_spm_model(tokenizer: SentencePieceTokenizer, directory: str) -> None:
    """Writes the SentencePiece model beside the data (training finds it there)."""
    path = os.path.join(directory, SPM_FILE)
    tmp = f"{path}.tmp-{uuid.uuid4().hex}"
    with tf.io.gfile.GFile(tmp, "wb") as f:
        f.write(tokenizer.model_proto)
    tf.io.gfile.rename(tmp, path, overwrite=True)


def create_tfrecords(*, params: DataParams, output_dir: str, spm_model: str,
                     input_patterns: Sequence[str] = (), tfds_name: Optional[str] = None,
                     tfds_split: str = "train", tfds_text_key: str = "text",
                     skip_bad_lines: bool = False, overwrite: bool = False,
                     eval_fraction: float = 0.0, eval_input: Sequence[str] = (),
                     beam_args: Sequence[str] = ()) -> dict:
    """Prepares a directory of pretraining examples and returns its manifest.

    Args:
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
        tfds_split=tfds_split, tfds_text_key=tfds_text_key, spm_model=spm_model,
        output_dir=output_dir, overwrite=overwrite, eval_fraction=eval_fraction,
        eval_input=eval_input)
    with_eval = bool(eval_fraction or eval_sources)
    eval_dir = os.path.join(output_dir, EVAL_DIR)
    _copy_spm_model(tokenizer, output_dir)
    if with_eval:
        _copy_spm_model(tokenizer, eval_dir)
    progress_dir = os.path.join(output_dir, _PROGRESS_DIR)
    tf.io.gfile.makedirs(progress_dir)
    options = PipelineOptions(_default_beam_options(beam_args))
    proto = tokenizer.model_proto
    elements = [(s, False) for s in sources] + [(s, True) for s in eval_sources]
    common = dict(params=params, proto=proto, word_cache=params.word_cache,
                  tokenizer=tokenizer, spm_model=spm_model, input_chars=input_chars,
                  progress_dir=progress_dir)
    start = time.time()
    try:
        with beam.Pipeline(options=options) as p:
            read = (p | "Sources" >> beam.Create(elements)
                    | "Read" >> beam.ParDo(
                        _ReadSource(skip_bad_lines, eval_fraction, params.seed)).with_outputs(
                        "bad_lines", "eval", main="docs"))
            _prepare_split(p, "train", read.docs, read.bad_lines, output_dir=output_dir,
                           sources=sources, **common)
            if with_eval:
                _prepare_split(p, "eval", read.eval, read.bad_lines, output_dir=eval_dir,
                               sources=eval_sources or sources, **common)
    except Exception as e:  # runners wrap worker errors; recover our one-line message
        found = re.search(re.escape(_MARK) + r"([^\n]*?)(?:['\"]\)*)?(?:\n|$)", str(e))
        if found:
            raise DataPrepError(found.group(1).replace("\\'", "'")) from None
        raise
    finally:
        if tf.io.gfile.exists(progress_dir):
            tf.io.gfile.rmtree(progress_dir)
    result = manifest.read_manifest(output_dir)
    result["_seconds"] = time.time() - start
    if with_eval:
        result["_eval"] = manifest.read_manifest(eval_dir)
    return result
