"""The tiny step exported for a GPU with --attention_implementation=triton, as a user runs it
(benchmarks/accelerator_check.py --cpu_dry_run --export_step): its program holds the flash
kernels' `__gpu$xla.gpu.triton` calls, TensorFlow 2.20's own XLA parses and verifies their TTIR
(benchmarks/tools/triton_parse_check.py), and, where the H100 compile venv is
(XLNET_TF2_AOT_GPU_VENV or .venv-aot-gpu; skipped otherwise), XLA compiles them for an H100 and
the proxy counts them."""

import json
import os
import subprocess
import sys

import pytest
from fixtures.accelerator_exports import cpu_dry_run_export
from fixtures.paths import REPO_ROOT

from benchmarks.tools import triton_parse_check
from benchmarks.tools.deviceless_compile import AcceleratorCompileError, accelerator_python

pytest.importorskip("triton")
pytestmark = pytest.mark.slow
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
LAYERS = 2  # the tiny model's


def _run(script, *args, timeout=900):
    return subprocess.run([sys.executable, f"benchmarks/{script}.py", *args], cwd=REPO_ROOT,
                          env=ENV, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def triton_step(tmp_path_factory):
    """`accelerator_check.py --cpu_dry_run --export_step --attention_implementation=triton`,
    made once per test run and shared with test_gpu_step_comparison.py
    (tests/fixtures/accelerator_exports.py); exported for a GPU, --export_target's default."""
    step, run = cpu_dry_run_export(tmp_path_factory, "triton")
    assert "for validation" not in run.stderr + run.stdout  # this CPU cannot run that step
    assert json.loads((step / "meta.json").read_text())["target"] == "gpu"
    return step


@pytest.mark.xla
def test_the_step_holds_the_kernels_and_tensorflows_xla_parses_them(triton_step):
    checks = triton_parse_check.check_module((triton_step / "step.hlo.pb").read_bytes())
    names = sorted(c.name for c in checks)
    assert names == sorted(["flash_fwd", "flash_bwd_dkdv", "flash_bwd_dq"] * LAYERS)
    assert all(c.module == "OK" for c in checks), [c.module[:300] for c in checks]
    assert all(c.num_warps == 4 and c.grid[2] == 1 for c in checks)


@pytest.mark.xla
def test_the_kernels_compile_for_an_h100_and_the_proxy_counts_them(triton_step, tmp_path):
    try:
        accelerator_python("h100")
    except AcceleratorCompileError as e:
        pytest.skip(f"no compile venv for h100: {e}")
    out = tmp_path / "h100.json"
    run = _run("accelerator_compile", "--target=h100", str(triton_step), f"--json={out}")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    h = json.loads(out.read_text())["h100"]
    assert h["triton_kernels"] == 3 * LAYERS and h["triton_flops"] > 0
    assert 0 < h["triton_ms"] < h["proxy_ms"]
    assert "Triton custom calls" in run.stdout and "ASSUMED efficiencies 50%" in run.stdout
