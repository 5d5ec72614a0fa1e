"""Data-preparation and input-pipeline throughput on a real corpus (for the benchmarks).

Builds a standard-library docstring corpus, trains a SentencePiece model, prepares it with the
Beam DirectRunner at each worker count (tokens/s, wall clock including pipeline start-up),
then times `build_pretrain_dataset` (examples/s).
"""

from __future__ import annotations

import os
import time
from typing import Dict, Sequence

from xlnet_tf2.data.beam_pipeline import create_tfrecords
from xlnet_tf2.data.corpus import build_stdlib_corpus
from xlnet_tf2.data.params import DataParams
from xlnet_tf2.data.pretrain_dataset import build_pretrain_dataset
from xlnet_tf2.tokenization import train_sentencepiece


def measure_data_throughput(workdir: str, *, corpus_bytes: int = 1_000_000,
                            vocab_size: int = 2000, workers: Sequence[int] = (1, 2),
                            seq_len: int = 512, reuse_len: int = 256, num_predict: int = 85,
                            num_streams: int = 16, global_batch_size: int = 16,
                            pipeline_steps: int = 100) -> Dict[str, object]:
    """Returns {"corpus": {...}, "prepare": [{workers, tokens, examples, seconds,
    tokens_per_s, examples_per_s}], "pipeline": {examples_per_s, tokens_per_s, ...}}."""
    os.makedirs(workdir, exist_ok=True)
    corpus = os.path.join(workdir, "corpus.txt")
    stats = build_stdlib_corpus(corpus, min_bytes=corpus_bytes // 2, max_bytes=corpus_bytes)
    spm = train_sentencepiece([corpus], vocab_size=vocab_size,
                              model_prefix=os.path.join(workdir, "sp"))
    params = DataParams(seq_len=seq_len, reuse_len=reuse_len, num_predict=num_predict,
                        perm_size=reuse_len, bi_data=True, num_streams=num_streams)
    result = {"corpus": {"bytes": stats["bytes"], "documents": stats["documents"]},
              "prepare": []}
    out = None
    for count in workers:
        out = os.path.join(workdir, f"prepared_w{count}")
        start = time.time()
        manifest = create_tfrecords(params=params, output_dir=out, spm_model=spm,
                                    input_patterns=[corpus], overwrite=True,
                                    beam_args=["--direct_running_mode=multi_processing",
                                               f"--direct_num_workers={count}"])
        seconds = time.time() - start
        result["prepare"].append({
            "workers": int(count), "tokens": manifest["total_tokens"],
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
    lines = [f"corpus: {result['corpus']['bytes']} bytes, {result['corpus']['documents']} documents"]
    for row in result["prepare"]:
        lines.append(f"prepare, {row['workers']} worker(s): {row['tokens']} tokens, "
                     f"{row['examples']} examples in {row['seconds']:.1f}s = "
                     f"{row['tokens_per_s']:.0f} tokens/s, {row['examples_per_s']:.0f} examples/s")
    p = result["pipeline"]
    lines.append(f"input pipeline: batch {p['global_batch_size']} x {p['seq_len']}, "
                 f"{p['examples_per_s']:.0f} examples/s ({p['tokens_per_s']:.0f} tokens/s)")
    return "\n".join(lines)
