"""Measures data-preparation and input-pipeline throughput on a real corpus.

    python data_prep/benchmark_data.py --workdir=/tmp/xlnet_bench

Builds a docstring corpus (--corpus_bytes: standard library, then installed packages), trains a
SentencePiece model, times every preparation stage in one process on one thread (tokens/s per
core for each stage and the SentencePiece-only ceiling, best of 3), prepares the corpus
concatenated --corpus_repeats times with the Beam DirectRunner at each of --workers (0 =
in-process; tokens/s, wall clock including pipeline start-up), then times
build_pretrain_dataset (examples/s) at --global_batch_size. The flags are the settings of
`DataBenchmarkConfig` (xlnet_tf2/tools/command_configs.py).
"""

from xlnet_tf2 import cli

cli.quiet_startup()  # no TensorFlow start-up noise unless --verbosity

from xlnet_tf2.config_flags import config_from_flags, define_flags  # noqa: E402
from xlnet_tf2.tools.command_configs import DataBenchmarkConfig  # noqa: E402

define_flags(DataBenchmarkConfig)


def main(argv):
    cli.no_arguments(argv)
    c = config_from_flags(DataBenchmarkConfig)  # a bad setting stops here, before TensorFlow
    from xlnet_tf2.tools.data_throughput import format_report, measure_data_throughput

    result = measure_data_throughput(
        c.workdir, corpus_bytes=c.corpus_bytes, vocab_size=c.vocab_size, workers=c.workers,
        seq_len=c.seq_len, reuse_len=c.reuse_len, num_predict=c.num_predict,
        num_streams=c.num_streams, global_batch_size=c.global_batch_size,
        pipeline_steps=c.pipeline_steps, stages=c.stages, word_cache=c.word_cache,
        corpus_repeats=c.corpus_repeats)
    print(format_report(result))


if __name__ == "__main__":
    cli.run(main)
