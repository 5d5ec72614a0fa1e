"""Prepares XLNet pretraining examples with Apache Beam (library: xlnet_tf2.prep.beam_pipeline).

    xlnet-create-tfrecords --input='corpus/*.txt' --spm_model=sp.model \\
        --output_dir=data/pretrain --num_streams=64 --bi_data

(from a checkout: python data_prep/create_tfrecords.py, same flags.) The flags are the
settings of `PrepConfig` and its `DataParams` (xlnet_tf2/prep/prep_config.py,
xlnet_tf2/data/params.py). Flags this command does not know are Beam pipeline options and are
passed through unchanged (--runner, --direct_num_workers, --direct_running_mode, --project,
--region, ...); one that Beam does not know either is an error. Without them the pipeline runs
on the local DirectRunner with one worker per core. --runner=DaskRunner runs it on a
dask.distributed cluster (the `dask` extra): a local one of one worker process per core, or
the one --dask_client_address=tcp://HOST:PORT names (docs/DATA.md#runners).
"""

import contextlib
import logging

from xlnet_tf2 import cli

cli.quiet_startup()  # no TensorFlow/Beam start-up noise unless --verbosity

from xlnet_tf2.config_flags import config_from_flags, define_flags  # noqa: E402
from xlnet_tf2.prep.prep_config import PrepConfig  # noqa: E402

define_flags(PrepConfig)


def run(argv):
    from xlnet_tf2.prep import beam_options

    verbose = cli.verbosity_requested()
    config = config_from_flags(PrepConfig)  # a bad setting stops here, before Beam starts
    # Importing Beam logs warnings about optional packages (crcmod); not without --verbosity.
    with cli.silenced_stderr() if not verbose else contextlib.nullcontext():
        from xlnet_tf2.prep.beam_pipeline import PROGRESS_TAG, create_tfrecords, summary
    program = cli.program_name()  # an unknown flag's error names the console script if run so
    beam_args = beam_options.check_pipeline_args(
        argv[1:], program=None if program.endswith(".py") else program)
    if verbose:
        logging.getLogger().setLevel(logging.INFO)
        logging.getLogger("apache_beam").setLevel(logging.WARNING)
    else:
        beam_options.print_only_tagged_lines(PROGRESS_TAG)
    # Beam's workers are processes that share this one's stderr: without --verbosity their
    # start-up noise goes nowhere; progress comes through logging (above), errors are raised
    # here and printed by cli.run.
    with cli.silenced_stderr() if not verbose else contextlib.nullcontext():
        result = create_tfrecords(
            params=config.params, output_dir=config.output_dir, spm_model=config.spm_model,
            input_patterns=config.input, tfds_name=config.tfds_name,
            tfds_split=config.tfds_split, tfds_text_key=config.tfds_text_key,
            tfds_data_dir=config.tfds_data_dir,
            skip_bad_lines=config.skip_bad_lines, overwrite=config.overwrite,
            eval_fraction=config.eval_fraction, eval_input=config.eval_input,
            beam_args=beam_args)
    print(summary(result, config.output_dir))


def main() -> None:
    """`xlnet-create-tfrecords` and data_prep/create_tfrecords.py."""
    cli.run(run, pass_unknown_flags=True, usage=__doc__)  # the flags it does not know: Beam's
