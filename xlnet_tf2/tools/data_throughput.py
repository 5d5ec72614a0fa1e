"""Data-preparation and input-pipeline throughput on a real corpus (for the benchmarks).

Builds a docstring corpus (standard library, then installed packages, up to the asked size),
trains a SentencePiece model, times every stage of preparation in one process
(`measure_stages`: tokens/s of the corpus per stage, and the SentencePiece-only ceiling),
prepares it with the Beam DirectRunner at each worker count (tokens/s, wall clock including
pipeline start-up), then times `build_pretrain_dataset` (examples/s).

Every rate is corpus tokens per second of that stage; with bi_data each token is in two rows
(forward and backward), and each row token in L / R = 2 examples.
"""

from __future__ import annotations

import os
import re
import sysconfig
import time
from typing import Dict, Sequence

import numpy as np

from xlnet_tf2.data import records
from xlnet_tf2.prep import text_sources
from xlnet_tf2.prep import streams
from xlnet_tf2.prep.beam_pipeline import BATCH_CHARS, create_tfrecords
from xlnet_tf2.tools.corpus import build_stdlib_corpus
from xlnet_tf2.prep.encode import BatchEncoder, normalize
from xlnet_tf2.prep.examples import row_example_batches
from xlnet_tf2.data.params import DataParams
from xlnet_tf2.data.pretrain_dataset import build_pretrain_dataset
from xlnet_tf2.prep.span_sampling import start_piece_table
from xlnet_tf2.tokenizers.sentencepiece_tokenizer import SentencePieceTokenizer, train_sentencepiece


def build_corpus(path: str, corpus_bytes: int) -> dict:
    """Docstrings of the standard library, then of installed packages, up to corpus_bytes."""
    stats = build_stdlib_corpus(path, min_bytes=min(corpus_bytes // 2, 500_000),
                                max_bytes=corpus_bytes)
    if stats["bytes"] < corpus_bytes:
        extra = path + ".packages"
        more = build_stdlib_corpus(extra, min_bytes=0,
                                   max_bytes=corpus_bytes - stats["bytes"],
                                   stdlib_dir=sysconfig.get_paths()["purelib"])
        with open(path, "a", encoding="utf-8") as out, open(extra, encoding="utf-8") as f:
            out.write(f.read())
        os.remove(extra)
        stats = {"path": path, "bytes": stats["bytes"] + more["bytes"],
                 "documents": stats["documents"] + more["documents"]}
    return stats


_REPEATS = [3]


def _timed(fn):
    """(result, best wall-clock seconds of _REPEATS[0] runs): the machine may be shared."""
    best = None
    for _ in range(_REPEATS[0]):
        start = time.perf_counter()
        out = fn()
        seconds = time.perf_counter() - start
        best = seconds if best is None else min(best, seconds)
    return out, best


def measure_stages(corpus: str, spm_model: str, params: DataParams,
                   repeats: int = 3) -> Dict[str, object]:
    """Times each stage of preparation in this process, on the whole corpus (best of
    `repeats` runs of each stage, so other load on a shared machine counts least).

    Returns:
      {"tokens": corpus tokens, "stages": [{"stage", "seconds", "tokens_per_s"}]}; stages:
      read, normalize, SentencePiece only (the ceiling: one batch call on normalized lines,
      one thread), tokenize (exact, what preparation runs), tokenize with the word cache
      (cold and warm), layout (streams), examples (A/B, spans, orders; all rows, every
      direction), serialize, write (TFRecord framing and file). Everything runs on one
      thread, so each rate is per core.
    """
    tok = SentencePieceTokenizer.from_file(spm_model, lower=params.uncased)
    rows = []
    _REPEATS[0] = repeats

    def add(stage, seconds, tokens):
        rows.append({"stage": stage, "seconds": seconds, "tokens_per_s": tokens / seconds})

    def read():
        return list(text_sources.read_lines(corpus, skip_bad_lines=False, fix=""))

    lines, t_read = _timed(read)
    normalized, t_norm = _timed(lambda: [normalize(l, lower=tok.lower, keep_accents=False)
                                         for l in lines])
    encoder = BatchEncoder(tok)
    sp_ids, t_sp = _timed(lambda: encoder._sp.Encode(normalized, num_threads=1))
    (ids, per_line), t_tok = _timed(lambda: encoder.encode_lines(lines))
    tokens = int(ids.shape[0])
    # The word cache as a worker uses it: batches of the pipeline's size, a fresh cache.
    batches, size, start = [], 0, 0
    for k, line in enumerate(lines):
        size += len(line) + 1
        if size >= BATCH_CHARS or k == len(lines) - 1:
            batches.append(lines[start:k + 1])
            size, start = 0, k + 1

    def passes(count):
        cached = BatchEncoder(tok, word_cache=True)
        for _ in range(count):
            for batch in batches:
                cached.encode_lines(batch)
        return cached

    _, t_first = _timed(lambda: passes(1))
    _, t_two = _timed(lambda: passes(2))
    cached = passes(2)
    _, t_warm = _timed(lambda: [cached.encode_lines(batch) for batch in batches])
    add("read lines", t_read, tokens)
    add("normalize (preprocess_text)", t_norm, tokens)
    add("SentencePiece only (ceiling)", t_sp, tokens)
    add("tokenize, line mode (normalize + SentencePiece + checks)", t_tok, tokens)
    add("tokenize, word cache, first pass over new text", t_first, tokens)
    add("tokenize, word cache, second pass (words seen twice are checked)", t_two - t_first,
        tokens)
    add("tokenize, word cache, warm", t_warm, tokens)

    sent = np.repeat(np.arange(per_line.shape[0]), per_line)
    row_len = tokens // params.num_streams

    def layout():
        return [streams.assemble_row([(0, ids[s * row_len:(s + 1) * row_len],
                                       sent[s * row_len:(s + 1) * row_len])], row_len)
                for s in range(params.num_streams)]

    row_data, t_layout = _timed(layout)
    add("layout (rows)", t_layout, tokens)
    starts = start_piece_table(tok)

    def examples():
        out = []
        for stream, (row, row_sent) in enumerate(row_data):
            for direction in range(params.num_directions):
                for batch in row_example_batches(row, row_sent, params=params,
                                                 starts_word=starts, stream_id=stream,
                                                 pass_id=0, direction=direction):
                    num = batch["chunk_index"].shape[0]
                    batch["stream_id"] = np.full(num, stream, np.int32)
                    batch["direction"] = np.full(num, direction, np.int32)
                    batch["pass_id"] = np.zeros(num, np.int32)
                    out.append(batch)
        return out

    batches, t_ex = _timed(examples)
    add("examples (A/B, spans, orders)", t_ex, tokens)
    serialized, t_ser = _timed(lambda: [records.serialize_batch(b) for b in batches])
    add("serialize (tf.train.Example bytes)", t_ser, tokens)
    path = os.path.join(os.path.dirname(corpus), "stage_write.tfrecord")

    def write():
        with records.TFRecordFileWriter(path) as writer:
            for group in serialized:
                writer.write_all(group)
            writer.commit()

    _, t_write = _timed(write)
    add("write (TFRecord framing, file)", t_write, tokens)
    os.remove(path)
    total = sum(r["seconds"] for r in rows
                if not r["stage"].startswith(("SentencePiece", "tokenize, word", "normalize")))
    add("sum of the stages preparation runs (tokenizing in line mode)", total, tokens)
    return {"tokens": tokens, "stages": rows}


def measure_data_throughput(workdir: str, *, corpus_bytes: int = 1_000_000,
                            vocab_size: int = 2000, workers: Sequence[int] = (1, 2),
                            seq_len: int = 512, reuse_len: int = 256, num_predict: int = 85,
                            num_streams: int = 16, global_batch_size: int = 16,
                            pipeline_steps: int = 100, stages: bool = True,
                            word_cache: bool = True,
                            corpus_repeats: int = 1) -> Dict[str, object]:
    """Returns {"corpus": {...}, "stages": measure_stages(...) or None, "prepare": [{workers,
    tokens, examples, seconds, tokens_per_s, examples_per_s}], "pipeline": {examples_per_s,
    tokens_per_s, ...}}.

    The end-to-end runs prepare the corpus concatenated `corpus_repeats` times (Beam's fixed
    start-up of a few seconds weighs less on more text; the stages are timed on one copy).
    "seconds" is the wall clock of `create_tfrecords` (pipeline start-up included, this
    process's imports not).
    """
    os.makedirs(workdir, exist_ok=True)
    corpus = os.path.join(workdir, "corpus.txt")
    stats = build_corpus(corpus, corpus_bytes)
    try:
        spm = train_sentencepiece([corpus], vocab_size=vocab_size,
                                  model_prefix=os.path.join(workdir, "sp"))
    except RuntimeError as e:  # a small corpus cannot fill the vocabulary: use its maximum
        found = re.search(r"<= (\d+)", str(e))
        if not found:
            raise
        vocab_size = int(found.group(1))
        spm = train_sentencepiece([corpus], vocab_size=vocab_size,
                                  model_prefix=os.path.join(workdir, "sp"))
    params = DataParams(seq_len=seq_len, reuse_len=reuse_len, num_predict=num_predict,
                        perm_size=reuse_len, bi_data=True, num_streams=num_streams,
                        word_cache=word_cache)
    result = {"corpus": {"bytes": stats["bytes"], "documents": stats["documents"],
                         "vocab_size": vocab_size, "seq_len": seq_len},
              "stages": measure_stages(corpus, spm, params) if stages else None,
              "prepare": []}
    prepare_input = corpus
    if corpus_repeats > 1:
        prepare_input = os.path.join(workdir, f"corpus_x{corpus_repeats}.txt")
        with open(corpus, "rb") as f:
            text = f.read()
        with open(prepare_input, "wb") as f:
            for _ in range(corpus_repeats):
                f.write(text)
    result["corpus"]["prepare_repeats"] = corpus_repeats
    out = None
    for count in workers:
        out = os.path.join(workdir, f"prepared_w{count}")
        start = time.time()
        mode = "in_memory" if count == 0 else "multi_processing"
        manifest = create_tfrecords(params=params, output_dir=out, spm_model=spm,
                                    input_patterns=[prepare_input], overwrite=True,
                                    beam_args=[f"--direct_running_mode={mode}",
                                               f"--direct_num_workers={max(count, 1)}"])
        seconds = time.time() - start
        result["prepare"].append({
            "workers": int(count), "mode": mode, "tokens": manifest["total_tokens"],
            "examples": manifest["num_examples"], "seconds": seconds,
            "tokens_per_s": manifest["total_tokens"] / seconds,
            "examples_per_s": manifest["num_examples"] / seconds})
    dataset = build_pretrain_dataset(out, seq_len=seq_len, reuse_len=reuse_len,
                                     num_predict=num_predict, bi_data=True,
                                     vocab_size=vocab_size, global_batch_size=global_batch_size)
    iterator = iter(dataset)
    for _ in range(5):  # warm-up
        next(iterator)
    start = time.time()
    for _ in range(pipeline_steps):
        next(iterator)
    seconds = time.time() - start
    rate = pipeline_steps * global_batch_size / seconds
    result["pipeline"] = {"global_batch_size": global_batch_size, "seq_len": seq_len,
                          "examples_per_s": rate, "tokens_per_s": rate * seq_len}
    return result


def format_report(result: Dict[str, object]) -> str:
    c = result["corpus"]
    lines = [f"corpus: {c['bytes']} bytes, {c['documents']} documents, vocab "
             f"{c.get('vocab_size')}, seq_len {c.get('seq_len')}; prepared end to end "
             f"{c.get('prepare_repeats', 1)} time(s) concatenated"]
    if result.get("stages"):
        lines.append(f"stages, one process ({result['stages']['tokens']} tokens):")
        for row in result["stages"]["stages"]:
            lines.append(f"  {row['stage']}: {row['seconds']:.2f}s = "
                         f"{row['tokens_per_s']:,.0f} tokens/s")
    for row in result["prepare"]:
        who = ("in-process (in_memory)" if row["workers"] == 0
               else f"{row['workers']} worker process(es)")
        lines.append(f"prepare end to end, Beam DirectRunner {who}: {row['tokens']} tokens, "
                     f"{row['examples']} examples in {row['seconds']:.1f}s = "
                     f"{row['tokens_per_s']:,.0f} tokens/s, {row['examples_per_s']:,.0f} "
                     "examples/s")
    p = result["pipeline"]
    lines.append(f"input pipeline: batch {p['global_batch_size']} x {p['seq_len']}, "
                 f"{p['examples_per_s']:.0f} examples/s ({p['tokens_per_s']:.0f} tokens/s)")
    return "\n".join(lines)
