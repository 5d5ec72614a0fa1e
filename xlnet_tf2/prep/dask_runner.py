"""Beam's DaskRunner as data preparation runs it (`--runner=DaskRunner`): the pipeline on a
`dask.distributed` cluster, a running one (`--dask_client_address`, `--dask_scheduler_file`) or
a local one of one worker process per core. What it fixes in Beam's runner: `DaskRunner`; how
to run it: docs/DATA.md#runners. Needs the `dask` extra (imported only inside functions).
"""

from __future__ import annotations

import argparse
import logging
import os
from typing import Optional

from apache_beam.options.pipeline_options import StandardOptions
from apache_beam.runners.runner import PipelineResult, PipelineRunner, PipelineState

from xlnet_tf2.data.params import DataPrepError
from xlnet_tf2.prep import beam_options

# Partitions of the sources per worker thread: more than one, so a worker that finishes its
# share early takes over part of a slower one's; few, because every partition loads the
# tokenizer and learns its word cache anew.
PARTITIONS_PER_THREAD = 2
_FORWARDED_LOGGER = "xlnet_tf2"

# dask, distributed and Beam's DaskRunner module (which imports dask) are imported inside the
# functions: they are the optional `dask` extra, and the library imports without them.


def pipeline_runner(options):
    """The runner object for `options`' --runner: this module's DaskRunner when it names Beam's
    DaskRunner (beam_options.names_dask_runner), else None (Beam makes it from the name).

    Raises:
      DataPrepError if it names the DaskRunner and dask or distributed is not installed.
    """
    runner = options.view_as(StandardOptions).runner
    if not beam_options.names_dask_runner(runner):
        return None
    beam_options.load_dask_options(f"--runner={runner}")
    return DaskRunner()


def dask_settings(options) -> dict:
    """The Dask options `options` sets to other than their defaults, by name (Beam's dests:
    address, timeout, scheduler_file, name, connection_limit, npartitions, partition_size)."""
    from apache_beam.runners.dask.dask_runner import DaskOptions

    parser = argparse.ArgumentParser(add_help=False)
    DaskOptions._add_argparse_args(parser)  # noqa: SLF001 - Beam's declaration
    defaults = {a.dest: a.default for a in parser._actions}  # noqa: SLF001
    given = options.view_as(DaskOptions).get_all_options(drop_default=True)
    return {name: value for name, value in given.items()
            if name in defaults and value != defaults[name]}


# dask's nanny starts every worker process with MALLOC_TRIM_THRESHOLD_=65536. glibc then
# hands every large free back to the system (and stops raising its mmap threshold), so each
# numpy array of the writing step is mapped and faulted in anew: that step cost 2.4 times its
# CPU (BENCHMARKS.md#data-preparation-on-dask). The workers keep glibc's defaults instead, as
# the DirectRunner's do. On a running cluster, the same setting in a dask configuration file
# of every worker host (WORKER_CONFIG_YAML, e.g. in ~/.config/dask/; docs/DATA.md#runners).
KEEP_MALLOC_DEFAULTS = {"distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None}
WORKER_CONFIG_YAML = ("distributed:\n  nanny:\n    pre-spawn-environ:\n"
                      "      MALLOC_TRIM_THRESHOLD_: null\n")


def local_cluster(workers: Optional[int] = None):
    """A distributed.LocalCluster on this machine: `workers` processes (default: one per
    core), one thread each, glibc's allocator defaults (KEEP_MALLOC_DEFAULTS), no dashboard,
    only errors logged."""
    import dask
    import distributed

    if workers is None:
        workers = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (
            os.cpu_count() or 1)
    with dask.config.set(KEEP_MALLOC_DEFAULTS):  # read when the nannies are made, here
        return distributed.LocalCluster(n_workers=workers, threads_per_worker=1,
                                        processes=True, dashboard_address=None,
                                        silence_logs=logging.ERROR)


class DaskRunner(PipelineRunner):
    """Executes a pipeline on a dask.distributed cluster with the translation of Beam's
    DaskRunner (the pipeline into dask bags); `pipeline_runner` gives Beam this runner when
    --runner names it.

    `--dask_client_address=tcp://HOST:PORT` (or `--dask_scheduler_file`) points it at a
    running cluster (scheduler and workers talk over TCP, on one machine or many); without
    either, it starts a local cluster of one worker process per core (one thread each) and
    closes it when the pipeline ends. What Beam 2.70's
    `apache_beam.runners.dask.dask_runner.DaskRunner` does differently, and why this one does
    not:

    * Beam hands every pipeline option that is not at its default (--runner,
      --direct_num_workers, ...) to `distributed.Client`, whose local cluster passes them on
      to its workers, which then fail to start (TypeError: Server.__init__() got an
      unexpected keyword argument 'runner'). Here only the Dask options reach the client.
    * Beam leaves the client, and the local cluster it starts, to the interpreter's exit: a
      process that prepares data twice has two clusters. Here both are closed when the
      pipeline ends, and on failure the run's tasks are cancelled first.
    * Beam puts up to 128 elements of a Create in one partition: the sources of a corpus of a
      few files are one task on one worker, and every later step has as many partitions as
      that. Here, unless --dask_npartitions or --dask_partition_size says otherwise, the
      sources are cut into PARTITIONS_PER_THREAD partitions per worker thread of the cluster.
    * The workers' progress lines (logger xlnet_tf2) come to this process's logging, as the
      DirectRunner forwards its workers' log records, so the command prints them.
    * The local cluster's workers keep glibc's allocator defaults (KEEP_MALLOC_DEFAULTS).

    Beam's runner computes only the last step of the pipeline and what it depends on; the
    pipeline is one chain for that reason (beam_pipeline._add_steps, docs/DATA.md#runners).
    """

    def is_fnapi_compatible(self):
        return False  # Beam's DaskRunner executes the pipeline's own graph, not the Fn API

    def run_pipeline(self, pipeline, options):
        import dask
        from apache_beam.runners.dask.dask_runner import DaskOptions
        from apache_beam.runners.dask.dask_runner import DaskRunner as BeamDaskRunner
        from apache_beam.runners.dask.overrides import dask_overrides

        settings = dask_settings(options)
        bag_kwargs = DaskOptions._extract_bag_kwargs(settings)  # noqa: SLF001
        cluster = None
        if not settings.get("address") and not settings.get("scheduler_file"):
            cluster = local_cluster()
            settings["address"] = cluster
        client = None
        try:
            client = _connect(settings)
            if not bag_kwargs:
                threads = sum(client.nthreads().values())
                bag_kwargs["npartitions"] = PARTITIONS_PER_THREAD * max(threads, 1)
            client.forward_logging(_FORWARDED_LOGGER, level=logging.WARNING)
            pipeline.replace_all(dask_overrides())
            visitor = BeamDaskRunner.to_dask_bag_visitor(bag_kwargs)
            pipeline.visit(visitor)
            # The last step visited and everything it depends on (the whole pipeline when it
            # is one chain, as beam_pipeline's is).
            last = list(visitor.bags.values())[-1]
            futures = client.compute(dask.optimize(last))
        except BaseException:
            _close(client, cluster)
            raise
        return ClosingResult(client, futures, cluster)


def _connect(settings: dict):
    import distributed

    try:
        return distributed.Client(**settings)
    except (OSError, ValueError) as e:  # no scheduler there (in time), an address unparsed
        flag = (f"--dask_client_address={settings['address']}" if settings.get("address")
                else f"--dask_scheduler_file={settings.get('scheduler_file')}")
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise DataPrepError(f"{flag}: no Dask scheduler answered ({reason}); start it "
                            "(dask scheduler, then dask worker on each host) or correct the "
                            "flag.") from None


def _close(client, cluster) -> None:
    if client is not None:
        client.close()
    if cluster is not None:
        cluster.close()


class ClosingResult(PipelineResult):
    """The result of a run on Dask: waits for the futures of the pipeline's last step (which
    raises a worker's exception here), then closes the client (and a local cluster), after
    cancelling what is left of the run if it failed or was interrupted."""

    def __init__(self, client, futures, cluster):
        super().__init__(PipelineState.RUNNING)
        self.client, self.futures, self.cluster = client, futures, cluster

    def wait_until_finish(self, duration=None):
        import distributed

        try:
            # Gathering the results is what raises a task's exception in this process.
            for _ in distributed.as_completed(self.futures, with_results=True,
                                              timeout=None if duration is None
                                              else duration / 1000):
                pass
            self._state = PipelineState.DONE
        except BaseException:
            self._state = PipelineState.FAILED
            self.client.cancel(self.futures)
            raise
        finally:
            _close(self.client, self.cluster)
        return self._state

    def cancel(self):
        self.client.cancel(self.futures)
        _close(self.client, self.cluster)
        self._state = PipelineState.CANCELLED
        return self._state

    def metrics(self):
        raise NotImplementedError("Beam's DaskRunner collects no metrics")
