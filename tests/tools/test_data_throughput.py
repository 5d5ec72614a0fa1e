"""tools/data_throughput.py's scaling measurement: the whole command on the first half and on
the whole corpus, and the line through the two medians (fixed cost, marginal tokens/s)."""

import json
import os

import pytest

from xlnet_tf2.data.params import DataParams
from xlnet_tf2.tools.data_throughput import first_half, measure_scaling

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
        # Both points lie on the line: seconds = fixed + tokens / marginal.
        assert median[name] == pytest.approx(
            result["fixed_seconds"] + tokens[name] / result["marginal_tokens_per_s"])
