"""Measures data-preparation and input-pipeline throughput on a real corpus.

    python data_prep/benchmark_data.py --workdir=/tmp/xlnet_bench

Builds a standard-library docstring corpus (--corpus_bytes), trains a SentencePiece model,
prepares it with the Beam DirectRunner at each of --workers (tokens/s, wall clock including
pipeline start-up), then times build_pretrain_dataset (examples/s) at --global_batch_size.
"""

import os
import time

from absl import app, flags

from xlnet_tf2.data.beam_pipeline import create_tfrecords
from xlnet_tf2.data.corpus import build_stdlib_corpus
from xlnet_tf2.data.params import DataParams
from xlnet_tf2.data.pretrain_dataset import build_pretrain_dataset
from xlnet_tf2.tokenization import train_sentencepiece

flags.DEFINE_string("workdir", "/tmp/xlnet_data_benchmark", "Scratch directory.")
flags.DEFINE_integer("corpus_bytes", 1_000_000, "Size of the benchmark corpus in bytes.")
flags.DEFINE_integer("vocab_size", 2000, "SentencePiece vocabulary size.")
flags.DEFINE_list("workers", ["1", "2"], "Beam DirectRunner worker counts to time.")
flags.DEFINE_integer("seq_len", 512, "Example length.")
flags.DEFINE_integer("reuse_len", 256, "Reused prefix length.")
flags.DEFINE_integer("num_predict", 85, "Targets per example.")
flags.DEFINE_integer("num_streams", 16, "Prepared streams.")
flags.DEFINE_integer("global_batch_size", 16, "Batch timed in the input pipeline.")
flags.DEFINE_integer("pipeline_steps", 100, "Batches timed in the input pipeline.")
FLAGS = flags.FLAGS


def main(argv):
    del argv
    os.makedirs(FLAGS.workdir, exist_ok=True)
    corpus = os.path.join(FLAGS.workdir, "corpus.txt")
    stats = build_stdlib_corpus(corpus, min_bytes=FLAGS.corpus_bytes // 2,
                                max_bytes=FLAGS.corpus_bytes)
    spm = train_sentencepiece([corpus], vocab_size=FLAGS.vocab_size,
                              model_prefix=os.path.join(FLAGS.workdir, "sp"))
    params = DataParams(seq_len=FLAGS.seq_len, reuse_len=FLAGS.reuse_len,
                        num_predict=FLAGS.num_predict, perm_size=FLAGS.reuse_len,
                        bi_data=True, num_streams=FLAGS.num_streams)
    lines = [f"corpus: {stats['bytes']} bytes, {stats['documents']} documents"]
    out = None
    for workers in FLAGS.workers:
        out = os.path.join(FLAGS.workdir, f"prepared_w{workers}")
        start = time.time()
        m = create_tfrecords(params=params, output_dir=out, spm_model=spm,
                             input_patterns=[corpus], overwrite=True,
                             beam_args=["--direct_running_mode=multi_processing",
                                        f"--direct_num_workers={workers}"])
        seconds = time.time() - start
        lines.append(f"prepare, {workers} worker(s): {m['total_tokens']} tokens, "
                     f"{m['num_examples']} examples in {seconds:.1f}s = "
                     f"{m['total_tokens'] / seconds:.0f} tokens/s, "
                     f"{m['num_examples'] / seconds:.0f} examples/s")
    dataset = build_pretrain_dataset(out, seq_len=FLAGS.seq_len, reuse_len=FLAGS.reuse_len,
                                     num_predict=FLAGS.num_predict, bi_data=True,
                                     vocab_size=FLAGS.vocab_size,
                                     global_batch_size=FLAGS.global_batch_size)
    iterator = iter(dataset)
    for _ in range(5):  # warm-up
        next(iterator)
    start = time.time()
    for _ in range(FLAGS.pipeline_steps):
        next(iterator)
    seconds = time.time() - start
    rate = FLAGS.pipeline_steps * FLAGS.global_batch_size / seconds
    lines.append(f"input pipeline: batch {FLAGS.global_batch_size} x {FLAGS.seq_len}, "
                 f"{rate:.0f} examples/s ({rate * FLAGS.seq_len:.0f} tokens/s)")
    print("\n".join(lines))


if __name__ == "__main__":
    app.run(main)
