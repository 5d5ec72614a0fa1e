"""Measures data-preparation and input-pipeline throughput on a real corpus.

    python data_prep/benchmark_data.py --workdir=/tmp/xlnet_bench

Builds a docstring corpus (--corpus_bytes: standard library, then installed packages), trains a
SentencePiece model, times every preparation stage in one process on one thread (tokens/s per
core for each stage and the SentencePiece-only ceiling, best of 3), prepares the corpus
concatenated --corpus_repeats times with the Beam DirectRunner at each of --workers (0 =
in-process; tokens/s, wall clock including pipeline start-up), then times
build_pretrain_dataset (examples/s) at --global_batch_size.
"""

from absl import app, flags

from xlnet_tf2 import cli

cli.quiet_startup()  # no TensorFlow start-up noise unless --verbosity

from xlnet_tf2.tools.data_throughput import format_report, measure_data_throughput

flags.DEFINE_string("workdir", "/tmp/xlnet_data_benchmark", "Scratch directory for the corpus, "
                    "the SentencePiece model and the prepared data.")
flags.DEFINE_integer("corpus_bytes", 5_000_000, "Size of the benchmark corpus in bytes.")
flags.DEFINE_integer("corpus_repeats", 16, "The end-to-end runs prepare the corpus "
                     "concatenated this many times (16 x 5 MB is about 18M tokens), so Beam's "
                     "fixed start-up weighs as it does on real data; the stages use one copy.")
flags.DEFINE_integer("vocab_size", 8000, "SentencePiece vocabulary size.")
flags.DEFINE_list("workers", ["0", "1", "2"], "Beam DirectRunner worker process counts to "
                  "time (0: in-process, in_memory mode).")
flags.DEFINE_bool("word_cache", True, "Prepare with the word cache (the default of "
                  "create_tfrecords.py); --noword_cache for line mode.")
flags.DEFINE_bool("stages", True, "Also time each stage in one process.")
flags.DEFINE_integer("seq_len", 512, "Example length.")
flags.DEFINE_integer("reuse_len", 256, "Reused prefix length.")
flags.DEFINE_integer("num_predict", 85, "Targets per example.")
flags.DEFINE_integer("num_streams", 16, "Prepared streams.")
flags.DEFINE_integer("global_batch_size", 16, "Batch timed in the input pipeline.")
flags.DEFINE_integer("pipeline_steps", 100, "Batches timed in the input pipeline.")
FLAGS = flags.FLAGS


def main(argv):
    del argv
    result = measure_data_throughput(
        FLAGS.workdir, corpus_bytes=FLAGS.corpus_bytes, vocab_size=FLAGS.vocab_size,
        workers=[int(w) for w in FLAGS.workers], seq_len=FLAGS.seq_len,
        reuse_len=FLAGS.reuse_len, num_predict=FLAGS.num_predict, num_streams=FLAGS.num_streams,
        global_batch_size=FLAGS.global_batch_size, pipeline_steps=FLAGS.pipeline_steps,
        stages=FLAGS.stages, word_cache=FLAGS.word_cache, corpus_repeats=FLAGS.corpus_repeats)
    print(format_report(result))


if __name__ == "__main__":
    app.run(main)
