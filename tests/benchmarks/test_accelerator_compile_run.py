"""benchmarks/accelerator_compile.py as a user runs it, on the tiny step that
benchmarks/accelerator_check.py --cpu_dry_run --export_step writes: compiled for one TPU v5e
chip by libtpu (the project's .venv has libtpu with the `test` extra; elsewhere
XLNET_TF2_AOT_TPU_VENV or .venv-aot-tpu, else the test is skipped) and for an H100 where its
venv is (about 5.5 GB, which CI does not install: skipped without it); a missing venv is one
line."""

import json
import os
import subprocess
import sys

import pytest
from fixtures.paths import REPO_ROOT

from benchmarks.tools.deviceless_compile import AcceleratorCompileError, accelerator_python

pytestmark = pytest.mark.slow
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")


def _run(script, *args, timeout=900):
    return subprocess.run([sys.executable, f"benchmarks/{script}.py", *args], cwd=REPO_ROOT,
                          env=ENV, capture_output=True, text=True, timeout=timeout)


def _venv_or_skip(target):
    try:
        return accelerator_python(target)
    except AcceleratorCompileError as e:
        pytest.skip(f"no compile venv for {target}: {e}")


@pytest.fixture(scope="module")
def tiny_step(tmp_path_factory):
    """The tiny step exported for a TPU."""
    root = tmp_path_factory.mktemp("compile")
    run = _run("accelerator_check", "--cpu_dry_run", f"--workdir={root / 'work'}",
               f"--export_step={root / 'step'}", "--export_target=tpu")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return root / "step"


def _compile(target, step, out):
    run = _run("accelerator_compile", f"--target={target}", str(step), f"--json={out}")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "Traceback" not in run.stderr
    return run.stdout, json.loads(out.read_text())


def _check_totals(report, meta):
    # every kernel is in the part tables; the H100's bytes are theirs, a TPU's libtpu's
    assert sum(r["kernels"] for r in report["parts"]) == report["kernels"]
    if "h100" in report:
        assert sum(r["bytes"] for r in report["part_totals"]) == report["bytes"]
    else:
        assert report["bytes"] == report["tpu"]["cost_analysis"]["bytes accessed"]
    assert report["flops_per_step"] == meta["flops_per_step"] > 0
    assert report["shape"] == meta["shape"] and report["export_target"] == "tpu"
    parts = {r["part"] for r in report["part_totals"]}
    assert {"attention scores and values (q.k, p.v)", "position scores (q.r)", "rel shift",
            "softmax", "feed-forward", "layer norm", "optimizer (AdamW)",
            "gradient clipping"} <= parts


@pytest.mark.xla
def test_tiny_step_compiles_for_tpu_v5e(tiny_step, tmp_path):
    _venv_or_skip("tpu_v5e")
    stdout, report = _compile("tpu_v5e", tiny_step, tmp_path / "v5e.json")
    meta = json.loads((tiny_step / "meta.json").read_text())
    assert report["device"] == "TPU v5 lite" and report["versions"]["libtpu"] == "0.0.42.1"
    # The tiny program: hundreds of kernels, megabytes of traffic, a sliver of 16 GiB.
    assert 300 < report["kernels"] < 20_000 and 1e6 < report["bytes"] < 1e9
    tpu = report["tpu"]
    assert tpu["fits"] is True and 0 < tpu["needs_bytes"] < 2 ** 30
    assert tpu["hbm_bytes"] == 16 * 2 ** 30
    assert tpu["cost_analysis"]["flops"] > 0 and tpu["cost_analysis"]["bytes accessed"] > 0
    assert tpu["estimated_cycles"] > 0 and tpu["kernels_with_cycles"] > 100
    _check_totals(report, meta)
    assert "fits HBM: needs 0.0" in stdout and "of 16.00 GiB" in stdout
    assert f"kernels {report['kernels']:,} top-level ops (" in stdout


@pytest.mark.xla
def test_tiny_step_compiles_for_h100(tiny_step, tmp_path):
    _venv_or_skip("h100")
    stdout, report = _compile("h100", tiny_step, tmp_path / "h100.json")
    meta = json.loads((tiny_step / "meta.json").read_text())
    assert report["device"] == "NVIDIA H100 80GB HBM3"
    assert 100 < report["kernels"] < 5_000 and report["flops"] > 0
    h = report["h100"]
    assert h["proxy_ms"] > h["launch_ms"] == pytest.approx(report["kernels"] * 2e-3)
    assert h["predicted_ms"] == pytest.approx(h["ratio"] * h["proxy_ms"])
    _check_totals(report, meta)
    assert "predicted H100 step" in stdout and "+-18%" in stdout


@pytest.mark.xla
def test_a_missing_venv_is_one_line(tiny_step):
    run = _run("accelerator_compile", "--target=tpu_v4", "--venv=/nonexistent/venv",
               str(tiny_step))
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert run.stderr.strip().splitlines() == [
        "accelerator_compile.py: error: no TPU compile venv at --venv=/nonexistent/venv: "
        "`bash scripts/setup_accelerator_compile.sh tpu` creates it."]
