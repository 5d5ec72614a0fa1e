"""benchmarks/gpu/step_comparison.py rehearsed on this CPU up to where a GPU is needed
(--rehearse): the tiny steps with and without the Triton kernels, exported as --gpu_bundle
exports them (the tiny pair standing in for the Base pair, which is converted, not compiled),
run by JAX's XLA on the CPU: the reference step's first loss and gradient norm are
TensorFlow's, the Triton step is a row saying why this machine cannot run it, HuggingFace's
tiny step (eager, PyTorch on the CPU) is a row, and the table prints. Run by the H100 compile
venv's JAX where it exists (XLNET_TF2_AOT_GPU_VENV or .venv-aot-gpu: JAX 0.10, as on the GPU
machine), else by this venv's (the test extra's JAX 0.8.1, which CI has)."""

import json
import os
import shutil
import subprocess
import sys

import pytest
from fixtures.accelerator_exports import cpu_dry_run_export
from fixtures.paths import REPO_ROOT

from benchmarks.tools.deviceless_compile import AcceleratorCompileError, accelerator_python

pytest.importorskip("jax")
pytest.importorskip("triton")
pytest.importorskip("transformers")
pytestmark = [pytest.mark.slow, pytest.mark.xla]  # two tiny exports (shared), their compiles
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    """A bundle laid out as --gpu_bundle writes it: the tiny steps exported with the Triton
    kernels and with the reference attention (`accelerator_check.py --cpu_dry_run
    --export_step --attention_implementation=...`, made once per test run and shared with
    test_triton_export.py and test_accelerator_check.py: tests/fixtures/accelerator_exports.py),
    each copied twice, as tiny_<implementation> and as base_<implementation>."""
    root = tmp_path_factory.mktemp("bundle")
    for implementation in ("triton", "reference"):
        step, _ = cpu_dry_run_export(tmp_path_factory, implementation)
        for shape in ("tiny", "base"):  # copies: the shared export is read only
            shutil.copytree(step, root / f"{shape}_{implementation}")
    return root


def test_the_comparison_runs_what_a_cpu_can_and_says_why_not_for_the_rest(bundle):
    try:
        python = accelerator_python("h100")
    except AcceleratorCompileError:
        python = sys.executable  # no GPU compile venv: this venv's JAX reads the HLO too
    run = subprocess.run(
        [python, "benchmarks/gpu/step_comparison.py", str(bundle), "--rehearse",
         "--hf_steps", "2", f"--hf_python={sys.executable}"],
        cwd=REPO_ROOT, env=dict(ENV, JAX_PLATFORMS="cpu"), capture_output=True, text=True,
        timeout=900)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    records = {r["program"]: r for r in (json.loads(line) for line in run.stdout.splitlines()
                                         if line.startswith("{"))}
    reference = records["tiny_reference"]
    assert abs(reference["loss"] - reference["tf_loss"]) <= 1e-4 * reference["tf_loss"]
    assert abs(reference["grad_norm"] - reference["tf_grad_norm"]) <= \
        1e-3 * reference["tf_grad_norm"]
    for name in ("base_reference", "base_triton"):                 # converted as on a GPU
        assert records[name]["error"] == "converted, not compiled (--rehearse)", records[name]
    assert "__gpu$xla.gpu.triton" in records["tiny_triton"]["error"]  # a GPU's calls
    assert records["huggingface"]["mode"] == "eager" and records["huggingface"]["step_ms"] > 0
    table = run.stdout[run.stdout.index("program "):]
    for row in ("Base, Triton kernels", "Base, reference attention", "tiny, Triton kernels",
                "tiny, reference attention", "HuggingFace, eager",
                "tiny: first-step loss / gradient norm, Triton vs reference (relative): n/a",
                "reference vs TensorFlow on a CPU: "):
        assert row in table, table
