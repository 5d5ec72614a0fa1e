"""The command's Beam arguments (xlnet_tf2/prep/beam_options.py) and the runner they choose
(dask_runner.pipeline_runner): the DaskRunner by its short or qualified name, its options known
to the check, one clear line without the dask extra."""

import sys

import pytest

from xlnet_tf2.data.params import DataPrepError
from xlnet_tf2.prep import beam_options, dask_runner


def test_the_dask_runner_by_either_name():
    for name in ("DaskRunner", "daskrunner", "apache_beam.runners.dask.dask_runner.DaskRunner"):
        assert beam_options.names_dask_runner(name)
    for name in (None, "DirectRunner", "DataflowRunner", "Dask"):
        assert not beam_options.names_dask_runner(name)


def test_dask_options_pass_the_check():
    pytest.importorskip("distributed")
    args = ["--runner=DaskRunner", "--dask_client_address=tcp://127.0.0.1:8786",
            "--dask_npartitions=8"]
    assert beam_options.check_pipeline_args(args) == args
    with pytest.raises(DataPrepError, match="unknown flag --dask_client_adress=x: neither"):
        beam_options.check_pipeline_args(["--runner=DaskRunner", "--dask_client_adress=x"])


def test_a_dask_option_without_the_dask_runner_is_refused():
    with pytest.raises(DataPrepError, match=r"^--dask_client_address is an option of the "
                                            r"DaskRunner, and the runner is the DirectRunner: "
                                            r"add --runner=DaskRunner\.$"):
        beam_options.check_pipeline_args(["--dask_client_address=tcp://127.0.0.1:8786"])


def test_without_the_dask_extra_one_line_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)  # `import distributed` fails
    for check in (lambda: beam_options.check_pipeline_args(["--runner=DaskRunner"]),
                  lambda: dask_runner.pipeline_runner(_options("--runner=DaskRunner"))):
        with pytest.raises(DataPrepError) as e:
            check()
        message = str(e.value)
        assert message.startswith("--runner=DaskRunner: data preparation on Dask needs the "
                                  "packages dask and distributed (")
        assert "pip install 'xlnet-tf2[dask]'" in message and "requirements-dask.txt" in message
        assert "\n" not in message


def test_other_runners_are_left_to_beam():
    assert dask_runner.pipeline_runner(_options("--runner=DirectRunner")) is None
    assert dask_runner.pipeline_runner(_options()) is None


def _options(*args):
    from apache_beam.options.pipeline_options import PipelineOptions

    return PipelineOptions(list(args))
