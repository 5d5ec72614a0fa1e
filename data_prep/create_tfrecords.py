"""Prepares XLNet pretraining examples with Apache Beam (library: xlnet_tf2.prep.beam_pipeline).

    python data_prep/create_tfrecords.py --input='corpus/*.txt' --spm_model=sp.model \
        --output_dir=data/pretrain --num_streams=64 --bi_data

The flags are the settings of `PrepConfig` and its `DataParams` (xlnet_tf2/prep/prep_config.py,
xlnet_tf2/data/params.py). Flags this script does not know are Beam pipeline options and are
passed through unchanged (--runner, --direct_num_workers, --direct_running_mode, --project,
--region, ...); one that Beam does not know either is an error. Without them the pipeline runs
on the local DirectRunner with one worker per core. --runner=DaskRunner runs it on a
dask.distributed cluster (the `dask` extra): a local one of one worker process per core, or
the one --dask_client_address=tcp://HOST:PORT names (docs/DATA.md#runners).
"""

# The command is xlnet_tf2/commands/create_tfrecords.py, installed as the console script
# `xlnet-create-tfrecords`; this file runs it from a checkout.
from xlnet_tf2.commands.create_tfrecords import main

if __name__ == "__main__":
    main()
