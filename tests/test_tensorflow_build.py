"""xlnet_tf2/tensorflow_build.py: which TensorFlow build is installed, and the one line each build
gives for what only the other can run (--tpu on the plain wheel, XLA on the CPU under the TPU
build). Runs on both of CI's legs: the plain tensorflow venv and the tensorflow-tpu one."""

import importlib.metadata

import pytest
import tensorflow as tf

from xlnet_tf2 import tensorflow_build
from xlnet_tf2.config_flags import RunConfigError
from xlnet_tf2.training import distribution
from xlnet_tf2.training.run_config import JIT_MIN_STEPS, LoopConfig


@pytest.fixture
def build(monkeypatch):
    """Pretend the given distributions are installed: build({"tensorflow-tpu": "2.20.0"})."""
    def pretend(versions):
        monkeypatch.setattr(tensorflow_build, "_version", versions.get)
        tensorflow_build.installed.cache_clear()
    yield pretend
    tensorflow_build.installed.cache_clear()


def test_this_venv_is_the_build_its_distributions_say():
    names = {d.metadata["Name"].lower().replace("_", "-") for d in importlib.metadata.distributions()}
    expected = ("tensorflow-tpu" if "tensorflow-tpu" in names and "tensorflow" not in names
                else "tensorflow")
    assert tensorflow_build.installed() == expected


@pytest.mark.parametrize("versions,expected", [
    ({"tensorflow": "2.20.0"}, "tensorflow"),
    ({"tensorflow-tpu": "2.20.0"}, "tensorflow-tpu"),
    # The plain wheel installed over the TPU build: its files won.
    ({"tensorflow": "2.20.0", "tensorflow-tpu": "2.20.0"}, "tensorflow"),
])
def test_installed_build(build, versions, expected):
    build(versions)
    assert tensorflow_build.installed() == expected
    tpu = expected == "tensorflow-tpu"
    assert (tensorflow_build.tpu_runtime_missing() is None) == tpu
    assert (tensorflow_build.xla_on_cpu_missing() is None) == (not tpu)


def test_tpu_flag_on_the_plain_wheel_is_one_line_naming_the_tpu_install(build):
    build({"tensorflow": "2.20.0"})
    with pytest.raises(distribution.StrategyError) as error:
        distribution.resolve_strategy("auto", "local", tpu_timeout_s=5)
    line = str(error.value)
    assert "\n" not in line
    assert line.startswith("--tpu='local': ") and "plain `tensorflow` 2.20.0 wheel" in line
    assert "scripts/setup_tpu_env.sh" in line


def test_jit_compile_off_a_tpu_under_the_tpu_build_is_one_line(build):
    build({"tensorflow-tpu": "2.20.0"})
    strategy = tf.distribute.get_strategy()
    with pytest.raises(RunConfigError, match=r"^--jit_compile: this TensorFlow is the TPU build "
                                             r"\(tensorflow-tpu 2\.20\.0\).*--nojit_compile\.$"):
        distribution.check_jit_compile(True, strategy)
    distribution.check_jit_compile(False, strategy)   # nothing to compile: no error
    build({"tensorflow": "2.20.0"})
    distribution.check_jit_compile(True, strategy)


def test_default_jit_compile_is_off_under_the_tpu_build(build):
    build({"tensorflow-tpu": "2.20.0"})
    assert LoopConfig(model_dir="m", train_steps=JIT_MIN_STEPS).jit_compile is False
    assert LoopConfig(model_dir="m", train_steps=JIT_MIN_STEPS, jit_compile=True).jit_compile is True
    build({"tensorflow": "2.20.0"})
    assert LoopConfig(model_dir="m", train_steps=JIT_MIN_STEPS).jit_compile is True
    assert LoopConfig(model_dir="m", train_steps=JIT_MIN_STEPS - 1).jit_compile is False


def test_generation_with_xla_under_the_tpu_build_is_one_line(build):
    from xlnet_tf2.models.generation import _check_search
    build({"tensorflow-tpu": "2.20.0"})
    with pytest.raises(ValueError, match=r"^jit_compile=True: this TensorFlow is the TPU build"):
        _check_search(1, 1, False, None, True, True, 1.0, False)
    _check_search(1, 1, False, None, True, False, 1.0, False)


@pytest.mark.slow
def test_tpu_local_on_a_machine_without_one_is_one_line(tmp_path):
    """`--tpu=local` with no TPU: the plain wheel names the TPU install before trying; the TPU
    build tries, finds no TPU and says so. One stderr line, status 2, nothing written."""
    import os
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    model_dir = tmp_path / "m"
    proc = subprocess.run(
        [sys.executable, "experiments/run_pretrain.py", "--tpu=local", "--tpu_timeout=300",
         f"--data_dir={tmp_path}", f"--model_dir={model_dir}"],
        cwd=root, capture_output=True, text=True, timeout=900,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("run_pretrain.py: error: --tpu='local': ")
    if tensorflow_build.is_tpu_build():
        assert "this machine has no TPU" in lines[0]
    else:
        assert "has no TPU runtime" in lines[0] and "scripts/setup_tpu_env.sh" in lines[0]
    assert not model_dir.exists()
