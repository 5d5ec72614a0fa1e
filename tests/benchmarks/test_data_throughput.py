"""benchmarks/tools/data_throughput.py's scaling measurement: the whole command on the first half and on
the whole corpus, and the line through the two medians (fixed cost, marginal tokens/s); the
runners the end-to-end runs compare (the DirectRunner, a dask cluster)."""

import json
import os

import pytest

from xlnet_tf2.data.params import DataParams
from benchmarks.tools.data_throughput import (first_half, format_report, format_scaling,
                                              measure_end_to_end, measure_scaling, runner_args,
                                              scaling_line)

from fixtures.corpora import corpus_path, spm_model

PARAMS = DataParams(seq_len=64, reuse_len=32, num_predict=10, perm_size=32, bi_data=True,
                    num_streams=2)


def test_first_half_ends_at_a_document_end(tmp_path):
    path = first_half(corpus_path(), str(tmp_path / "half.txt"))
    with open(corpus_path(), "rb") as f:
        whole = f.read()
    with open(path, "rb") as f:
        half = f.read()
    assert whole.startswith(half) and half.endswith(b"\n\n")
    assert len(whole) // 2 <= len(half) < len(whole)
    assert first_half(corpus_path(), path) == path  # kept, not rewritten


@pytest.mark.slow
def test_scaling_runs_both_halves_and_fits_the_line(tmp_path):
    logged = []
    result = measure_scaling(corpus_path(), spm_model(), PARAMS, str(tmp_path), workers=1,
                             runs=1, log=logged.append)
    assert [r["corpus"] for r in result["runs"]] == ["whole", "half"] and len(logged) == 2
    tokens, median = result["tokens"], result["median"]
    assert 0 < tokens["half"] < tokens["whole"]
    for name in ("half", "whole"):
        with open(os.path.join(tmp_path, f"prepared_{name}", "record_info.json")) as f:
            assert json.load(f)["total_tokens"] == tokens[name]
    # On this tiny corpus the two timings may come out in either order; the line is the one
    # scaling_line gives for the medians (its cases are tested below with fixed numbers).
    assert {k: result[k] for k in ("fixed_seconds", "marginal_tokens_per_s")} == \
        scaling_line(tokens, median)


def test_scaling_line_passes_through_both_points():
    tokens, seconds = {"half": 1_000_000, "whole": 2_000_000}, {"half": 3.5, "whole": 4.0}
    line = scaling_line(tokens, seconds)
    assert line["marginal_tokens_per_s"] == pytest.approx(2_000_000)
    assert line["fixed_seconds"] == pytest.approx(3.0)
    for name in ("half", "whole"):
        assert seconds[name] == pytest.approx(
            line["fixed_seconds"] + tokens[name] / line["marginal_tokens_per_s"])


@pytest.mark.parametrize("whole_seconds", [3.5, 3.4])
def test_scaling_line_refuses_when_the_whole_corpus_was_not_slower(whole_seconds):
    line = scaling_line({"half": 1_000_000, "whole": 2_000_000},
                        {"half": 3.5, "whole": whole_seconds})
    assert line == {"fixed_seconds": None, "marginal_tokens_per_s": None}


@pytest.mark.parametrize("whole_seconds,expected", [
    (4.0, "fixed cost 3.00s, then 2,000,000 tokens/s per added token"),
    (3.4, "no line fitted (use a larger --corpus_bytes)"),
])
def test_format_scaling_reports_the_line_or_why_there_is_none(whole_seconds, expected):
    tokens, median = {"half": 1_000_000, "whole": 2_000_000}, {"half": 3.5, "whole": whole_seconds}
    scale = {"runs": [{}] * 6, "tokens": tokens, "median": median,
             **scaling_line(tokens, median)}
    line = format_scaling(scale)
    assert line.startswith("scaling (default mode, medians of 3 runs each): first half "
                           "1,000,000 tokens in 3.50s, whole 2,000,000 in ")
    assert line.endswith(expected)


def test_runner_args_put_the_command_on_each_runner():
    assert runner_args("direct", 3) == ["--direct_num_workers=3",
                                        "--direct_running_mode=multi_processing"]
    assert runner_args("dask", 3, "tcp://127.0.0.1:8786") == [
        "--runner=DaskRunner", "--dask_client_address=tcp://127.0.0.1:8786"]
    assert runner_args("dask-local", 3) == ["--runner=DaskRunner"]
    with pytest.raises(ValueError, match="unknown runner 'flink'"):
        runner_args("flink", 2)


@pytest.mark.slow
def test_runners_side_by_side_on_a_dask_cluster(tmp_path):
    pytest.importorskip("distributed")
    logged = []
    e = measure_end_to_end(corpus_path(), spm_model(), PARAMS, str(tmp_path), workers=1,
                           runs=1, runners=("direct", "dask"), log=logged.append)
    assert [r["mode"] for r in e["runs"]] == ["direct", "dask"]
    assert e["identical"] and set(e["ratios"]) == {"dask"} and "ratio" not in e
    assert 0 < e["cluster_start_seconds"] < e["cluster_warm_seconds"]
    assert logged[0].startswith("  dask cluster: scheduler and 1 worker up in ")
    # The cluster's processes did the work: their CPU is counted with the command's.
    assert all(r["cpu_seconds"] > 0 for r in e["runs"])
    assert e["data_dir"] == str(tmp_path / "prepared_direct")
    report = format_report({"corpus": {"by_source": {}, "bytes": 1, "documents": 1,
                                       "sha256": "0" * 16, "vocab_size": 600, "spm_bytes": 1},
                            "params": PARAMS.to_dict(), "end_to_end": e,
                            "pipeline": {"global_batch_size": 4, "seq_len": 64,
                                         "examples_per_s": 1.0, "tokens_per_s": 64.0}})
    assert "| run | runner | seconds |" in report
    assert f"dask / direct: {e['ratios']['dask']:.3f}x; prepared files byte-identical: yes" \
        in report
