"""The Apache Beam pipeline that turns raw text into prepared pretraining examples.

    sources -> documents -> (reshuffle) -> tokenized documents
            -> lengths -> layout (one place, small) -> pieces per stream
            -> GroupByKey(stream) -> rows -> examples of every pass and direction
            -> one TFRecord file per (pass, direction, stream) -> record_info.json

Every random choice is a pure function of `--seed` and the identity of what it decides
(document key, stream, chunk, pass, direction), never of the worker that runs it or of the
order elements arrive, so the output is byte-identical for any number of workers and on any
runner. The same code runs on Dataflow, Flink or Spark with the runner's standard options.
"""

from __future__ import annotations

import logging
import os
import re
import time
import uuid
from typing import List, Optional, Sequence

import apache_beam as beam
import numpy as np
import tensorflow as tf
from apache_beam.options.pipeline_options import PipelineOptions

from xlnet_tf2 import special_ids
from xlnet_tf2.data import inputs, manifest, records, streams
from xlnet_tf2.data.examples import row_examples
from xlnet_tf2.data.params import DataParams, DataPrepError
from xlnet_tf2.data.span_sampling import start_piece_table
from xlnet_tf2.tokenization import SentencePieceTokenizer, TokenizerError

# Errors raised inside workers reach the launcher wrapped in runner tracebacks; this marker
# lets `create_tfrecords` recover the one-line message and raise it cleanly.
_MARK = "[data-prep] "
_PROGRESS_SECONDS = 10.0
_log = logging.getLogger("xlnet_tf2.data")


def _fail(message: str):
    raise DataPrepError(_MARK + message)


class _ReadSource(beam.DoFn):
    def __init__(self, skip_bad_lines: bool):
        self._skip = skip_bad_lines

    def process(self, source):
        bad = []

        class _Count:
            def inc(self):
                bad.append(1)

        try:
            for doc in inputs.read_source(source, self._skip, _Count()):
                yield doc
        except DataPrepError as e:
            _fail(str(e))
        if bad:
            yield beam.pvalue.TaggedOutput("bad_lines", (source[2], len(bad)))


class _Tokenize(beam.DoFn):
    """(key, lines) -> (key, (ids int32 [n], sentence ids int32 [n])), <eod> appended."""

    def __init__(self, model_proto: bytes, uncased: bool):
        self._proto = model_proto
        self._uncased = uncased

    def setup(self):
        self._tok = SentencePieceTokenizer(self._proto, lower=self._uncased)
        self._docs = self._tokens = 0
        self._start = self._last = time.time()
        self._empty = beam.metrics.Metrics.counter("xlnet_data", "empty_documents")

    def process(self, element):
        key, lines = element
        ids: List[int] = []
        sent: List[int] = []
        sentence = 0
        for line in lines:
            line_ids = self._tok.encode_ids(line)
            if line_ids:
                ids.extend(line_ids)
                sent.extend([sentence] * len(line_ids))
                sentence += 1
        if not ids:  # a document whose lines all encode to nothing
            self._empty.inc()
            return []
        ids.append(special_ids.EOD_ID)  # <eod> is a sentence of its own, as in the original
        sent.append(sentence)
        self._docs += 1
        self._tokens += len(ids)
        now = time.time()
        if now - self._last >= _PROGRESS_SECONDS:
            self._last = now
            _log.warning("worker %d: %d documents, %d tokens, %.0f tokens/s", os.getpid(),
                         self._docs, self._tokens, self._tokens / (now - self._start))
        return [(key, (np.asarray(ids, np.int32), np.asarray(sent, np.int32)))]


def _layout(lengths, params: DataParams):
    try:
        layout, placement = streams.compute_layout(lengths, params)
    except DataPrepError as e:
        _fail(str(e))
    yield beam.pvalue.TaggedOutput("summary", layout.to_dict())
    for key, pieces in sorted(placement.items()):
        yield key, pieces


def _cut_pieces(element):
    _, grouped = element
    docs, placements = list(grouped["docs"]), list(grouped["placement"])
    if not docs or not placements:
        return []  # a document in the dropped tail of the corpus
    ids, sent = docs[0]
    return [(stream, (offset, ids[begin:end], sent[begin:end]))
            for stream, offset, begin, end in placements[0]]


class _WriteStream(beam.DoFn):
    """(stream, pieces) -> one file per (pass, direction); yields their descriptions."""

    def __init__(self, model_proto: bytes, params: DataParams, output_dir: str):
        self._proto = model_proto
        self._params = params
        self._output_dir = output_dir

    def setup(self):
        self._starts_word = start_piece_table(SentencePieceTokenizer(self._proto))
        self._streams = self._examples = 0
        self._start = self._last = time.time()

    def process(self, element, summary):
        stream, pieces = element
        ids, sent = streams.assemble_row(pieces, summary["row_len"])
        for pass_id in range(self._params.num_passes):
            for direction in range(self._params.num_directions):
                name = records.shard_name(pass_id, direction, stream)
                path = os.path.join(self._output_dir, name)
                tmp = f"{path}.tmp-{uuid.uuid4().hex}"
                count = 0
                with tf.io.TFRecordWriter(tmp) as writer:
                    for example in row_examples(ids, sent, params=self._params,
                                                starts_word=self._starts_word,
                                                stream_id=stream, pass_id=pass_id,
                                                direction=direction):
                        writer.write(records.serialize(example))
                        count += 1
                tf.io.gfile.rename(tmp, path, overwrite=True)
                self._examples += count
                yield {"name": name, "examples": count, "stream": stream}
        self._streams += 1
        now = time.time()
        if now - self._last >= _PROGRESS_SECONDS:
            self._last = now
            _log.warning("worker %d: %d streams, %d examples written, %.0f examples/s",
                         os.getpid(), self._streams, self._examples,
                         self._examples / (now - self._start))


def _write_manifest(file_infos, summary, bad_lines, *, params, output_dir, vocab_size,
                    spm_sha256, spm_model, sources):
    from xlnet_tf2 import __version__

    file_infos = sorted(file_infos, key=lambda f: f["name"])
    chunks = summary["chunks_per_row"]
    data = {
        "format": manifest.FORMAT,
        "tool": "data_prep/create_tfrecords.py",
        "tool_version": __version__,
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
    }
    expected = params.num_streams * params.num_passes * params.num_directions
    if len(file_infos) != expected or any(f["examples"] != chunks for f in file_infos):
        raise RuntimeError(f"incomplete output: {len(file_infos)} of {expected} files")
    manifest.write_manifest(output_dir, data)
    yield data


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


def preflight(*, params: DataParams, input_patterns: Sequence[str], tfds_name: Optional[str],
              tfds_split: str, tfds_text_key: str, spm_model: str, output_dir: str,
              overwrite: bool, num_tfds_slices: int = 16):
    """Every check that can run before any work; returns (tokenizer, sources)."""
    params.validate()
    if not output_dir:
        raise DataPrepError("--output_dir is required.")
    if bool(input_patterns) == bool(tfds_name):
        raise DataPrepError("Pass exactly one of --input (text files) and --tfds_name.")
    try:
        tokenizer = SentencePieceTokenizer.from_file(spm_model, lower=params.uncased)
    except TokenizerError as e:
        raise DataPrepError(f"--spm_model: {e}") from None
    if input_patterns:
        paths = inputs.expand_inputs(input_patterns)
        size = inputs.total_bytes(paths)
        # Upper bound on tokens: at most two pieces ("▁" and one character) per byte.
        need = params.num_streams * params.seq_len
        if 2 * size < need:
            raise DataPrepError(
                f"Too little text: {size} bytes in {len(paths)} files cannot give the {need} "
                f"tokens that --num_streams={params.num_streams} streams of --seq_len="
                f"{params.seq_len} need. Add text or lower --num_streams.")
        sources = [("file", i, p) for i, p in enumerate(paths)]
    else:
        sources = inputs.tfds_sources(tfds_name, tfds_split, tfds_text_key, num_tfds_slices)
    if tf.io.gfile.exists(output_dir):
        existing = [n for n in tf.io.gfile.listdir(output_dir)
                    if n == manifest.MANIFEST_NAME or ".tfrecord" in n]
        if existing and not overwrite:
            raise DataPrepError(f"--output_dir={output_dir} already holds prepared data; pass "
                                "--overwrite to replace it or choose another directory.")
        # Drop the old manifest first: an interrupted run must not leave it describing new data.
        for name in sorted(existing, key=lambda n: n != manifest.MANIFEST_NAME):
            tf.io.gfile.remove(os.path.join(output_dir, name))
    tf.io.gfile.makedirs(output_dir)
    return tokenizer, sources


def create_tfrecords(*, params: DataParams, output_dir: str, spm_model: str,
                     input_patterns: Sequence[str] = (), tfds_name: Optional[str] = None,
                     tfds_split: str = "train", tfds_text_key: str = "text",
                     skip_bad_lines: bool = False, overwrite: bool = False,
                     beam_args: Sequence[str] = ()) -> dict:
    """Prepares a directory of pretraining examples and returns its manifest.

    Raises:
      DataPrepError with a one-line message naming the file, line or flag to change.
    """
    tokenizer, sources = preflight(
        params=params, input_patterns=input_patterns, tfds_name=tfds_name,
        tfds_split=tfds_split, tfds_text_key=tfds_text_key, spm_model=spm_model,
        output_dir=output_dir, overwrite=overwrite)
    options = PipelineOptions(_default_beam_options(beam_args))
    proto = tokenizer.model_proto
    start = time.time()
    try:
        with beam.Pipeline(options=options) as p:
            read = (p | "Sources" >> beam.Create(sources)
                    | "Read" >> beam.ParDo(_ReadSource(skip_bad_lines)).with_outputs(
                        "bad_lines", main="docs"))
            docs = (read.docs | "Spread" >> beam.Reshuffle()
                    | "Tokenize" >> beam.ParDo(_Tokenize(proto, params.uncased)))
            layout = (docs
                      | "Lengths" >> beam.Map(lambda kv: (kv[0], int(kv[1][0].shape[0])))
                      | "AllLengths" >> beam.combiners.ToList()
                      | "Layout" >> beam.FlatMap(_layout, params).with_outputs(
                          "summary", main="placement"))
            summary = beam.pvalue.AsSingleton(layout.summary)
            files = ({"docs": docs, "placement": layout.placement}
                     | "Join" >> beam.CoGroupByKey()
                     | "Cut" >> beam.FlatMap(_cut_pieces)
                     | "ByStream" >> beam.GroupByKey()
                     | "Write" >> beam.ParDo(
                         _WriteStream(proto, params, output_dir), summary))
            _ = (files | "AllFiles" >> beam.combiners.ToList()
                 | "Manifest" >> beam.FlatMap(
                     _write_manifest, summary,
                     beam.pvalue.AsList(read.bad_lines), params=params,
                     output_dir=output_dir, vocab_size=tokenizer.vocab_size,
                     spm_sha256=tokenizer.checksum, spm_model=spm_model, sources=sources))
    except Exception as e:  # runners wrap worker errors; recover our one-line message
        found = re.search(re.escape(_MARK) + r"([^\n]*?)(?:['\"]\)*)?(?:\n|$)", str(e))
        if found:
            raise DataPrepError(found.group(1).replace("\\'", "'")) from None
        raise
    result = manifest.read_manifest(output_dir)
    result["_seconds"] = time.time() - start
    return result
