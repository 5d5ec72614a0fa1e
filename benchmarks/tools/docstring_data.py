"""Pretraining data prepared on the fly, as a user would prepare theirs, for the benchmarks
that run the real training path (tools/loop_contenders.py, tools/accelerator_check.py).

`prepare_docstring_data(workdir, params, vocab_size, corpus_bytes)`: a docstring corpus
(standard library, then installed packages; xlnet_tf2/prep/docstring_corpus.py build_docstring_corpus), a
SentencePiece model of `vocab_size` pieces trained on it, and the corpus prepared by
data_prep/create_tfrecords.py's library function (`create_tfrecords`, Beam in one process)
into WORKDIR/data. A directory prepared before with the same settings is reused.
With `fewer_pieces_ok`, `vocab_size` is an upper bound: how many pieces SentencePiece can
make depends on the text the machine has (its installed packages), and a caller that needs
some Base-sized vocabulary rather than exactly `vocab_size` pieces (the accelerator check)
takes what the corpus gives; the record's `vocab_size` says how many that was.
"""

from __future__ import annotations

import json
import os
import shutil
import time

from xlnet_tf2.data.params import DataParams, DataPrepError
from xlnet_tf2.prep.beam_pipeline import create_tfrecords
from xlnet_tf2.tokenizers.sentencepiece_tokenizer import (SentencePieceTokenizer,
                                                          train_sentencepiece)
from xlnet_tf2.prep.docstring_corpus import build_docstring_corpus

PREPARED_FILE = "prepared.json"  # what WORKDIR was prepared with (the reuse check)


def prepare_docstring_data(workdir: str, params: DataParams, vocab_size: int,
                           corpus_bytes: int, fewer_pieces_ok: bool = False) -> dict:
    """Prepares WORKDIR/data (see the module docstring) unless WORKDIR/prepared.json records
    the same settings. Returns that record: data_dir, spm_model, vocab_size (the pieces of
    the model made: `vocab_size`, or fewer with `fewer_pieces_ok`), corpus_bytes, tokens,
    chunks_per_stream, seconds of each part, and `reused`."""
    os.makedirs(workdir, exist_ok=True)
    key = {"corpus_bytes": corpus_bytes, "vocab_size": vocab_size, "params": params.to_dict()}
    record_path = os.path.join(workdir, PREPARED_FILE)
    if os.path.exists(record_path):
        with open(record_path) as f:
            record = json.load(f)
        if (record.get("key") == key and "vocab_size" in record
                and os.path.isdir(record.get("data_dir", ""))):
            return dict(record, reused=True)
    timings = {}
    start = time.perf_counter()
    corpus = os.path.join(workdir, "corpus.txt")
    stats = build_docstring_corpus(corpus, corpus_bytes)
    timings["corpus_s"] = time.perf_counter() - start
    start = time.perf_counter()
    try:
        spm = train_sentencepiece([corpus], vocab_size=vocab_size,
                                  model_prefix=os.path.join(workdir, "spiece"),
                                  hard_vocab_limit=not fewer_pieces_ok)
    except RuntimeError as e:  # SentencePiece: "Vocabulary size too high (N) ..."
        raise DataPrepError(
            f"SentencePiece cannot train a {vocab_size}-piece model on the {stats['bytes']:,} "
            f"bytes of docstrings this machine has ({' '.join(str(e).split())[-120:]}); lower "
            "the vocabulary size or raise the corpus size.") from None
    timings["sentencepiece_s"] = time.perf_counter() - start
    data_dir = os.path.join(workdir, "data")
    shutil.rmtree(data_dir, ignore_errors=True)
    manifest = create_tfrecords(params=params, output_dir=data_dir, spm_model=spm,
                                input_patterns=[corpus],
                                beam_args=["--direct_running_mode=in_memory",
                                           "--direct_num_workers=1"])
    timings["create_tfrecords_s"] = manifest["_seconds"]
    record = {"key": key, "data_dir": data_dir, "spm_model": spm,
              "vocab_size": SentencePieceTokenizer.from_file(spm).vocab_size,
              "corpus_bytes": stats["bytes"], "tokens": manifest["total_tokens"],
              "chunks_per_stream": manifest["chunks_per_stream"], **timings}
    with open(record_path + ".tmp", "w") as f:
        json.dump(record, f, indent=1)
    os.replace(record_path + ".tmp", record_path)
    return dict(record, reused=False)
