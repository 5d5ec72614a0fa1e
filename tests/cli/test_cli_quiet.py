"""Command lines start quietly: no TensorFlow start-up lines (C++ log lines, oneDNN and CUDA
notices) on stderr, for --help and for a failing run that imports TensorFlow, unless
--verbosity is given; importing xlnet_tf2 and xlnet_tf2.cli does not import TensorFlow; a
command's Keras is imported without matplotlib and its TensorFlow without JAX; every flag of
the project's commands has full-sentence help."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from fixtures.paths import REPO_ROOT as ROOT
# Without TF_CPP_MIN_LOG_LEVEL: the commands decide what TensorFlow may print.
ENV = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
TF_NOISE = re.compile(r"^[IWEF]\d{4} |oneDNN|cuda|cuInit|cuDNN|TensorRT|InitializeLog|"
                      r"cpu_feature_guard|This TensorFlow binary", re.IGNORECASE | re.MULTILINE)
COMMANDS = ["run_classifier", "run_squad", "run_race", "extract_features",
            "export_saved_model", "convert_checkpoint"]


def _run(args, **kwargs):
    return subprocess.run([sys.executable] + args, capture_output=True, text=True, env=ENV,
                          cwd=ROOT, timeout=300, **kwargs)


@pytest.fixture(scope="module")
def tensorflow_is_noisy():
    """Whether a bare `import tensorflow` prints start-up lines on this machine (it does on
    CPU-only and GPU machines alike with the TF builds we use)."""
    run = _run(["-c", "import tensorflow as tf; tf.config.list_physical_devices()"])
    return bool(TF_NOISE.search(run.stderr))


@pytest.mark.slow
def test_importing_the_package_and_cli_does_not_import_tensorflow():
    run = _run(["-c", "import sys, xlnet_tf2, xlnet_tf2.cli; "
                      "from xlnet_tf2.tasks import finetune_config; "
                      "print('tensorflow' in sys.modules, xlnet_tf2.__version__); "
                      "print(xlnet_tf2.XLNetConfig.preset('tiny').d_model, "
                      "'tensorflow' in sys.modules)"])
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["False", "0.1.0", "64", "False"]


@pytest.mark.slow
@pytest.mark.parametrize("command", COMMANDS)
def test_help_is_quiet_and_every_flag_has_sentence_help(command):
    run = _run([f"experiments/{command}.py", "--helpfull"])
    assert run.returncode == 0, run.stderr  # absl's exits with 1; asking for help is no failure
    assert "--verbosity" in run.stdout
    assert "--model_dir" in run.stdout or "--output_dir" in run.stdout
    assert not TF_NOISE.search(run.stderr), run.stderr
    helps = _project_flags(command)
    assert len(helps) >= 5
    for name, text in helps.items():
        text = re.sub(r"^<[^>]*>: ", "", text)  # an enum's choices, added by absl
        assert text[:1].isupper() and text.endswith((".", ".)")) and len(text.split()) >= 5, (
            f"--{name}: {text!r}")


def _project_flags(command):
    """{flag: help} of the flags a command defines itself or through xlnet_tf2 (not absl's or
    TensorFlow's)."""
    script = (
        "import runpy, sys\n"
        "from absl import flags\n"
        f"runpy.run_path('experiments/{command}.py', run_name='as_module')\n"
        "for module, defined in flags.FLAGS.flags_by_module_dict().items():\n"
        "    if module.startswith(('absl', 'tensorflow', 'keras')):\n"
        "        continue\n"
        "    for flag in defined:\n"
        "        print(flag.name + '\\t' + ' '.join(flag.help.split()))\n")
    listed = _run(["-c", script])
    assert listed.returncode == 0, listed.stderr
    return dict(line.split("\t", 1) for line in listed.stdout.strip().splitlines())


@pytest.mark.slow
def test_the_commands_that_run_a_model_share_strategy_and_precision_flags():
    shared = ("strategy", "tpu", "tpu_timeout", "precision")
    reference = _project_flags("run_classifier")
    for command in ("run_squad", "run_race", "extract_features", "run_pretrain"):
        helps = _project_flags(command)
        assert {name: helps.get(name) for name in shared} == {
            name: reference[name] for name in shared}, command


@pytest.mark.slow  # three TensorFlow start-ups
def test_failing_run_is_one_line_and_verbosity_brings_the_logs_back(tmp_path,
                                                                    tensorflow_is_noisy):
    args = ["experiments/export_saved_model.py", f"--model_dir={tmp_path}/missing",
            "--kind=squad", f"--export_dir={tmp_path}/export"]
    quiet = _run(args)
    assert quiet.returncode == 2
    assert quiet.stderr.strip().splitlines() == [
        f"export_saved_model.py: error: --model_dir='{tmp_path}/missing' does not exist or is "
        "not a directory; pass a pretraining or fine-tuning --model_dir or a converted release "
        "directory."]
    verbose = _run(args + ["--verbosity=0"])
    assert verbose.returncode == 2
    assert verbose.stderr.strip().splitlines()[-1] == quiet.stderr.strip()
    assert bool(TF_NOISE.search(verbose.stderr)) == tensorflow_is_noisy


@pytest.mark.slow
def test_a_fine_tuning_run_that_imports_tensorflow_is_quiet(tmp_path):
    # run_squad.py --nodo_train loads the model directory with TensorFlow, then fails on it
    run = _run(["experiments/run_squad.py", "--nodo_train", f"--model_dir={tmp_path}",
                f"--predict_file={tmp_path}/dev.json"])
    assert run.returncode == 2, run.stderr
    assert not TF_NOISE.search(run.stderr), run.stderr
    assert run.stderr.strip().splitlines()[0].startswith("run_squad.py: error: ")


def test_verbosity_detection():
    from xlnet_tf2.cli import verbosity_requested

    assert not verbosity_requested(["--model_dir=x", "--kind=squad"])
    for args in (["--verbosity=1"], ["--verbosity", "1"], ["-v", "1"], ["-v=0"], ["--v=2"]):
        assert verbosity_requested(args), args
    assert not verbosity_requested(["--", "--verbosity=1"])
    assert not verbosity_requested(["--verbose_name=1"])


def test_help_detection():
    from xlnet_tf2.cli import help_requested

    for args in (["--help"], ["-help"], ["--helpfull"], ["--helpshort=true"], ["-?"],
                 ["--model_dir=x", "--helpxml"]):
        assert help_requested(args), args
    for args in ([], ["--model_dir=help"], ["--", "--help"], ["--helpful"], ["-h"]):
        assert not help_requested(args), args


@pytest.mark.slow
def test_absl_info_lines_only_with_verbosity(tmp_path):
    script = tmp_path / "tool.py"
    script.write_text(
        "from xlnet_tf2 import cli\n"
        "cli.quiet_startup()\n"
        "from absl import logging\n"
        "def main(argv):\n"
        "    logging.info('an info line')\n"
        "    logging.warning('a warning line')\n"
        "cli.run(main)\n")
    quiet = _run([str(script)])
    assert quiet.returncode == 0, quiet.stderr
    assert "a warning line" in quiet.stderr and "an info line" not in quiet.stderr
    verbose = _run([str(script), "--verbosity=0"])
    assert "a warning line" in verbose.stderr and "an info line" in verbose.stderr


@pytest.mark.slow
def test_quiet_import_leaves_the_runtime_unconfigured():
    """The silenced import queries the devices but does not start TensorFlow's runtime:
    threading, determinism and strategies can still be set up afterwards."""
    run = _run(["-c", "from xlnet_tf2 import cli; assert cli.quiet_startup([])\n"
                      "import tensorflow as tf\n"
                      "tf.config.threading.set_inter_op_parallelism_threads(1)\n"
                      "print(tf.config.threading.get_inter_op_parallelism_threads())"])
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["1"] and not TF_NOISE.search(run.stderr), run.stderr


@pytest.mark.slow
def test_a_command_imports_keras_and_tensorflow_without_matplotlib_and_jax_which_import_after():
    """Keras' own import takes matplotlib.pyplot, and TensorFlow's and Keras' take JAX, when
    they are installed (about 0.6 CPU-s of every start-up each, cli.SKIPPED); after
    quiet_startup, Keras' plotting helpers go without matplotlib, TensorFlow's TFLite helpers
    and Keras' Orbax callback without JAX, and both import as usual later."""
    pytest.importorskip("matplotlib")
    pytest.importorskip("jax")
    from keras.src.visualization import plot_image_gallery
    from tensorflow.lite.python import util as tflite_util

    assert plot_image_gallery.plt is not None  # Keras imported normally: with pyplot
    assert tflite_util._jit is not None  # TensorFlow imported normally: with JAX
    run = _run(["-c", "import sys\nfrom xlnet_tf2 import cli; cli.quiet_startup([])\n"
                      "import tensorflow, keras\n"
                      "from keras.src.visualization import plot_image_gallery as gallery\n"
                      "from tensorflow.lite.python import util\n"
                      "print('matplotlib' in sys.modules, gallery.plt is None)\n"
                      "print('jax' in sys.modules, util._jit is None)\n"
                      "import matplotlib.pyplot as plt\n"
                      "print(callable(plt.figure), 'matplotlib' in sys.modules)\n"
                      "import jax.numpy as jnp\n"
                      "print(float(jnp.ones(3).sum()) == 3.0, 'jax' in sys.modules)"])
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["False", "True", "False", "True", "True", "True",
                                  "True", "True"], run.stdout + run.stderr


@pytest.mark.slow
def test_a_run_that_computes_is_quiet_from_start_to_end(tmp_path):
    """A command that runs a model to the end (the README's kind of run) prints its result and
    nothing else: no start-up lines, and none of TensorFlow's C++ notices at the first ops
    (those come after the silenced import)."""
    import xlnet_tf2
    from fixtures.task_files import train_tiny_spm

    spm = train_tiny_spm(str(tmp_path))
    model = xlnet_tf2.XLNetLMHeadModel(xlnet_tf2.XLNetConfig.preset("tiny", n_token=500))
    model.build()
    model.save_pretrained(str(tmp_path / "converted"), spm)
    (tmp_path / "texts.txt").write_text("Sort the list in place.\nParse an email message.\n")
    run = _run(["experiments/extract_features.py", f"--model_dir={tmp_path}/converted",
                f"--input_file={tmp_path}/texts.txt", f"--output_file={tmp_path}/f.npz",
                "--seq_len=16", "--batch_size=2"])
    assert run.returncode == 0, run.stderr
    assert run.stderr == "", run.stderr
    assert run.stdout.strip() == f"2 texts, seq_len 16: features written to {tmp_path}/f.npz"
