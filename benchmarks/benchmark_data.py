"""Measures data-preparation and input-pipeline throughput on text the tokenizer never saw.

    python benchmarks/benchmark_data.py --workdir=/tmp/xlnet_data_benchmark

Builds (once per --workdir, then reused) a corpus of documentation prose found on the machine
(man pages, info manuals, /usr/share/doc, docstrings of installed Python packages; every
paragraph once, --corpus_bytes of it, never repeated) and trains a --vocab_size SentencePiece
model on a held-out slice of other documents. Then times every preparation stage in one
process on one thread (tokens/s per core, the SentencePiece-only ceiling, each tokenizer
mode), runs the whole command data_prep/create_tfrecords.py with the default settings and with
--noword_cache, alternating, --runs times each, with the machine's load before every run,
checks that both modes wrote the same bytes, and times build_pretrain_dataset (examples/s).
With --runners=direct,dask (or dask-local) the end-to-end runs compare Beam runners instead:
the command in the default mode on each, alternating, outputs compared byte for byte, a dask
cluster's start-up timed apart:

    python benchmarks/benchmark_data.py --runners=direct,dask,dask-local --nostages --noscaling

The flags are the settings of `DataBenchmarkConfig` (benchmarks/tools/command_configs.py).
"""

import _paths  # noqa: E402,F401  (the checkout's root on sys.path)

from xlnet_tf2 import cli

cli.quiet_startup()  # no TensorFlow start-up noise unless --verbosity

from xlnet_tf2.config_flags import config_from_flags, define_flags  # noqa: E402
from benchmarks.tools.command_configs import DataBenchmarkConfig  # noqa: E402

define_flags(DataBenchmarkConfig)


def main(argv):
    del argv
    c = config_from_flags(DataBenchmarkConfig)  # a bad setting stops here, before TensorFlow
    from benchmarks.tools.data_throughput import format_report, measure_data_throughput

    result = measure_data_throughput(
        c.workdir, corpus_bytes=c.corpus_bytes, spm_bytes=c.spm_bytes,
        vocab_size=c.vocab_size, seq_len=c.seq_len, reuse_len=c.reuse_len,
        num_predict=c.num_predict, num_streams=c.num_streams, workers=c.workers, runs=c.runs,
        runners=c.runners,
        stages=c.stages, stage_bytes=c.stage_bytes, scaling=c.scaling,
        global_batch_size=c.global_batch_size,
        pipeline_steps=c.pipeline_steps, sources=c.sources)
    print(format_report(result))


if __name__ == "__main__":
    cli.run(main)
