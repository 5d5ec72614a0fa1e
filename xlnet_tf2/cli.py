"""What every command-line tool of the project shares: a quiet start-up (`quiet_startup`,
first, before anything imports TensorFlow) and `run`, which turns bad input into one line and
an exit status instead of a traceback. A command's shape: xlnet_tf2/commands/build_corpus.py.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.util
import os
import sys
import warnings
from typing import Callable, Optional, Sequence

from xlnet_tf2 import fileio

VERBOSITY_FLAGS = ("--verbosity", "-verbosity", "--v", "-v")
# absl's help flags: each prints its text and ends the program while the flags are parsed.
HELP_FLAGS = tuple(dash + name for name in ("help", "helpshort", "helpfull", "helpxml", "?")
                   for dash in ("--", "-"))


def verbosity_requested(argv: Optional[Sequence[str]] = None) -> bool:
    """Whether the command line asks for log output: --verbosity[=N] or -v[=N] (absl's)."""
    argv = sys.argv[1:] if argv is None else argv
    for arg in argv:
        if arg == "--":
            break
        if arg.split("=", 1)[0] in VERBOSITY_FLAGS:
            return True
    return False


def help_requested(argv: Sequence[str]) -> bool:
    """Whether the command line asks for help (--help, -?, --helpfull, ...; absl's)."""
    for arg in argv:
        if arg == "--":
            break
        if arg.split("=", 1)[0] in HELP_FLAGS:
            return True
    return False


@contextlib.contextmanager
def silenced_stderr():
    """File descriptor 2 (what C++ libraries write to) goes to /dev/null inside the block."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):  # no usable stderr: nothing to silence
        yield
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        try:
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def _spec_run_by(finder, name: str, wrap: Callable, *, once: bool):
    """The spec the other finders give `name`, its loader's exec_module replaced by
    `wrap(exec_module)` (a loader without exec_module: the spec as it is). `once`: `finder`
    leaves sys.meta_path for good, else it goes back in front after the search."""
    if finder in sys.meta_path:
        sys.meta_path.remove(finder)  # the real finders find the module
    try:
        spec = importlib.util.find_spec(name)
    finally:
        if not once:
            sys.meta_path.insert(0, finder)
    if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
        return spec
    spec.loader.exec_module = wrap(spec.loader.exec_module)
    return spec


class _QuietTensorFlowImport(importlib.abc.MetaPathFinder):
    """Runs the first `import tensorflow` (and the device discovery after it) with stderr
    silenced."""

    def find_spec(self, name, path=None, target=None):
        if name != "tensorflow":
            return None

        def quiet(exec_module):
            def quiet_exec_module(module):
                with silenced_stderr():
                    exec_module(module)
                    try:  # CUDA initialization logs on the first device query, not at import
                        module.config.list_physical_devices()
                    except Exception:  # noqa: BLE001 - a device problem shows up later, loudly
                        pass
                # importing TensorFlow may set absl's verbosity: back to WARNING
                from absl import logging as absl_logging

                absl_logging.set_verbosity(-1)

            return quiet_exec_module

        return _spec_run_by(self, name, quiet, once=True)


class _ImportWithout(importlib.abc.MetaPathFinder):
    """Runs the import of the modules of each package `host` of `skipped` ((host, missing)
    pairs) as if its package `missing` were not installed (`import missing...` raises
    ImportError inside them); `missing` stays importable afterwards, as before. A program that
    imported `missing` first keeps `host`'s usual import. For optional imports a dependency
    makes at its own import, for features no command uses (lean_startup's `SKIPPED`)."""

    def __init__(self, skipped):
        self.skipped = tuple(skipped)

    def find_spec(self, name, path=None, target=None):
        missing = next((m for host, m in self.skipped
                        if name == host or name.startswith(host + ".")), None)
        if missing is None or sys.modules.get(missing, None) is not None:  # else the usual
            return None

        def without(exec_module):
            def exec_without(module):
                # One of these modules may import another: the outermost one lifts the block.
                outermost = missing not in sys.modules
                if outermost:
                    sys.modules[missing] = None  # `import missing...` raises ImportError
                try:
                    exec_module(module)
                finally:
                    if outermost and sys.modules.get(missing, False) is None:
                        del sys.modules[missing]

            return exec_without

        return _spec_run_by(self, name, without, once=False)


def quiet_startup(argv: Optional[Sequence[str]] = None) -> bool:
    """Hides TensorFlow's start-up log lines unless --verbosity/-v is in argv (default
    sys.argv). Call it first in a command-line program, before TensorFlow is imported.
    Returns whether the start-up is quiet.

    Hidden: the C++ log lines printed while `import tensorflow` runs and while the devices are
    discovered (CUDA/cuDNN/TensorRT probes, oneDNN and XLA notices); TF_CPP_MIN_LOG_LEVEL=2 is
    set (unless set) so later C++ info and warning lines stay away too, and absl's Python
    logging defaults to WARNING (the project's progress and results go to stdout). With
    `--verbosity`/`-v` nothing is hidden (`--verbosity=0`: everything, INFO lines included).
    This does not import TensorFlow (xlnet_tf2/__init__.py is lazy): it silences the import
    when it happens, so `--help` stays fast. Keras is imported without matplotlib and
    TensorFlow without JAX (with --verbosity too: `lean_startup`). Python errors are never
    hidden: an exception raised by the import still reaches the user with its traceback.
    """
    if verbosity_requested(argv):
        lean_startup()
        return False
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    # absl's Python logging at WARNING: TensorFlow's INFO lines ("Sharding callback
    # duration", ...) and the INFO twins of the lines the project prints to stdout stay away.
    # (app.run raises an unset --verbosity to INFO after parsing; this runs after that.)
    from absl import app as absl_app
    from absl import logging as absl_logging

    absl_logging.set_verbosity(-1)  # absl's verbosity scale: -1 = WARNING
    absl_app.call_after_init(lambda: absl_logging.set_verbosity(-1))
    # Python-level notices of the frameworks (deprecations and the like), not of this project.
    warnings.filterwarnings("ignore", module=r"(tensorflow|tf_keras|keras|tensorflow_text|"
                            r"absl|google\.protobuf|h5py|numpy)(\..*)?$")
    if "tensorflow" not in sys.modules and not any(
            isinstance(f, _QuietTensorFlowImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _QuietTensorFlowImport())
    lean_startup()
    return True


# What a command's start-up imports without: (host package, the package it imports for a
# feature no command uses). Measured in one process, 2026-12-05 and -06:
# - Keras imports matplotlib.pyplot at its own import when matplotlib is installed, for
#   `keras.visualization.plot_image_gallery`: `import keras` after quiet_startup took 4.4-5.2
#   CPU-s without it, 5.4-5.6 with it. (The payoff report imports matplotlib afterwards.)
# - TensorFlow's TFLite helpers and Keras' Orbax checkpoint callback import JAX when it is
#   installed (the TPU install's `tpu` extra), for TFLite's conversion of JAX functions and
#   JAX's monitoring: `import numpy, ml_dtypes` then `import jax` took 0.6-0.8 CPU-s more than
#   without. (The TPU step's Pallas kernel imports JAX when it is traced.)
SKIPPED = (("keras.src.visualization", "matplotlib"), ("tensorflow.lite.python.util", "jax"),
           ("keras.src.callbacks.orbax_checkpoint", "jax"))


def lean_startup() -> None:
    """Keras and TensorFlow imported without what SKIPPED lists (`_ImportWithout`), in a
    command-line program; quiet_startup calls it, with --verbosity too."""
    if not any(isinstance(f, _ImportWithout) for f in sys.meta_path):
        sys.meta_path.insert(0, _ImportWithout(SKIPPED))


# The exceptions that mean "the input is wrong" (their messages name file/flag/record), as
# (module, class): a module that was never imported raised none of them, so a bad flag is
# reported without importing TensorFlow just to check.
USER_ERRORS = (
    ("xlnet_tf2.config", "ConfigError"),
    ("xlnet_tf2.config_flags", "RunConfigError"),
    ("xlnet_tf2.conversion.readers", "CheckpointReadError"),
    ("xlnet_tf2.conversion.weight_maps", "WeightMismatchError"),
    ("xlnet_tf2.data.manifest", "ManifestError"),
    ("xlnet_tf2.data.params", "DataPrepError"),
    ("xlnet_tf2.data.batch_layout", "BatchLayoutError"),
    ("xlnet_tf2.tasks.errors", "TaskDataError"),
    ("xlnet_tf2.tokenizers.sentencepiece_tokenizer", "TokenizerError"),
    ("xlnet_tf2.training.checkpointing", "CheckpointRestoreError"),
    ("xlnet_tf2.models.memory", "MemoryStateError"),
    ("xlnet_tf2.training.distribution", "StrategyError"),
    ("xlnet_tf2.locate", "PretrainedNotFoundError"),
    ("xlnet_tf2.run_dir", "ModelFilesError"),
)
# Runs stopped by what they met on the way: status 3.
STOPPED_ERRORS = (
    ("xlnet_tf2.training.trainer", "TrainingDivergedError"),
    ("xlnet_tf2.training.trainer", "DataExhaustedError"),
)
# A training run told to stop (SIGTERM, a termination notice) that saved a checkpoint of the
# step it stopped at. 75 is EX_TEMPFAIL of sysexits.h ("temporary failure; try again later"):
# distinct from 0 (done), 1 (a bug's traceback), 2 (bad input), 3 (stopped) and 143 (killed by
# a SIGTERM that came before training started, when nothing was caught or lost), so a
# scheduler can restart on it (and on 143) and count the others as failures.
PREEMPTED_STATUS = 75
PREEMPTED_ERRORS = (("xlnet_tf2.training.preemption", "TrainingPreempted"),)


def _is_one_of(error: BaseException, classes) -> bool:
    for module, name in classes:
        loaded = sys.modules.get(module)
        if loaded is not None and isinstance(error, getattr(loaded, name)):
            return True
    return False


def is_user_error(error: BaseException) -> bool:
    """Whether `error` is one a user can fix (USER_ERRORS, a missing or existing file, a full
    disk or a refused write)."""
    if isinstance(error, (FileNotFoundError, FileExistsError, NotADirectoryError,
                          IsADirectoryError)):
        return True
    return _is_one_of(error, USER_ERRORS) or fileio.output_error(error) is not None


def user_message(error: BaseException) -> str:
    """The one line printed for a user error (without the program name)."""
    output = None if _is_one_of(error, USER_ERRORS) else fileio.output_error(error)
    if output is not None:
        return str(output.strerror)
    if isinstance(error, OSError) and error.strerror:  # OSError(errno, strerror, filename)
        message = error.strerror
        if error.filename and str(error.filename) not in message:
            message = f"{error.filename}: {message}"
    else:
        message = str(error)
    return " ".join(message.split()) or type(error).__name__


def program_name() -> str:
    return os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "xlnet_tf2"


def with_error_lines(main: Callable) -> Callable:
    """main(argv) -> the same, printing a user error as one line and returning status 2 (a
    stopped run: status 3; a preempted run: PREEMPTED_STATUS)."""

    def wrapped(argv):
        try:
            return main(argv)
        except Exception as e:  # noqa: BLE001 - anything else is re-raised with its traceback
            if _is_one_of(e, PREEMPTED_ERRORS):
                print(f"{program_name()}: preempted: {' '.join(str(e).split())}",
                      file=sys.stderr, flush=True)
                return PREEMPTED_STATUS
            if _is_one_of(e, STOPPED_ERRORS):
                print(f"{program_name()}: stopped: {' '.join(str(e).split())}",
                      file=sys.stderr, flush=True)
                return 3
            if not is_user_error(e):
                raise
            print(f"{program_name()}: error: {user_message(e)}", file=sys.stderr, flush=True)
            return 2

    return wrapped


def parse_flags(argv: Sequence[str], *, known_only: bool = False,
                takes_arguments: bool = False) -> list:
    """absl's flag parsing, with a value absl cannot parse, an unknown flag or a missing
    required flag printed as one line `<program>: error: <message>` and exit status 2 (absl's
    own parser writes two lines and exits with 1). Words left after the flags (a value meant
    for a flag that lost its `=`, a misplaced glob) are refused the same way, naming them,
    unless `takes_arguments`. `known_only`: arguments that are not the command's flags stay in
    the returned argv."""
    from absl import flags

    try:
        remaining = flags.FLAGS(list(argv), known_only=known_only)
    except flags.Error as e:
        message = " ".join(str(e).split())
        print(f"{program_name()}: error: {message} (--help lists the flags)", file=sys.stderr,
              flush=True)
        sys.exit(2)
    except SystemExit as e:
        # absl's help flags print the help and exit with 1; asking for help is no failure.
        if e.code == 1 and help_requested(argv[1:]):
            sys.exit(0)
        raise
    if len(remaining) > 1 and not (known_only or takes_arguments):
        print(f"{program_name()}: error: unexpected arguments {' '.join(remaining[1:])!r}: "
              "every setting is a --flag=value.", file=sys.stderr, flush=True)
        sys.exit(2)
    return remaining


def run(main: Callable, *, pass_unknown_flags: bool = False, takes_arguments: bool = False,
        usage: Optional[str] = None) -> None:
    """absl's app.run(main) with user errors printed as one line (exit status 2): bad flags
    (`parse_flags`) and the project's error classes (`with_error_lines`).

    pass_unknown_flags: arguments that are not flags of the command reach `main` in argv
    (create_tfrecords.py hands them to Apache Beam, which checks them).
    takes_arguments: words after the flags reach `main` in argv (otherwise they are refused).
    usage: what `--help` prints above the flags when the program has no docstring of its own
    (absl prints the `__main__` module's: a console script's wrapper has none, a script file
    has its own).

    Exit statuses: `--help` (and `--helpshort`, `--helpfull`, `--helpxml`) prints its text and
    exits 0 (absl's exits 1). An error a user can fix (a flag absl cannot parse, an unknown or
    missing flag, a setting the config tree rejects, a file, a record, a checkpoint: the
    project's error classes; a full disk or a place it may not write) prints
    `<program>: error: <message>`, status 2. A run stopped by what it met on the way (the loss
    diverged, the data ran out: STOPPED_ERRORS) prints `<program>: stopped: <message>`,
    status 3. A training run preempted by SIGTERM or a termination notice (it saved a
    checkpoint of the step it stopped at: xlnet_tf2/training/preemption.py) prints
    `<program>: preempted: <message>`, status 75 (PREEMPTED_STATUS): run the same command again
    to resume. Anything else is a bug and keeps its traceback.
    """
    from absl import app

    program = sys.modules.get("__main__")
    if usage and program is not None and not getattr(program, "__doc__", None):
        program.__doc__ = usage
    app.run(with_error_lines(main),
            flags_parser=lambda argv: parse_flags(argv, known_only=pass_unknown_flags,
                                                  takes_arguments=takes_arguments))
