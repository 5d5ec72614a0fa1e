"""What every command-line tool of the project shares: a quiet start-up, and bad input
becomes one line, not a traceback.

    from xlnet_tf2 import cli
    cli.quiet_startup()          # first, before anything imports TensorFlow

    ...flags...

    if __name__ == "__main__":
        cli.run(main)

`quiet_startup` hides TensorFlow's start-up noise (the C++ log lines printed while
`import tensorflow` runs and while the devices are discovered: CUDA/cuDNN/TensorRT probes,
"oneDNN custom operations are on", "All log messages before absl::InitializeLog() ...", XLA
notices) and sets TF_CPP_MIN_LOG_LEVEL=2 (unless set) so later C++ info and warning lines stay
away too, and absl's Python logging defaults to WARNING (no INFO lines; the project's
progress and results are printed to stdout). Unless `--verbosity`/`-v` is on the command line:
then nothing is hidden (`--verbosity=0`: everything TensorFlow says and the INFO lines).
Importing this module does not import TensorFlow (xlnet_tf2/__init__.py is lazy), and
`quiet_startup` does not either: it silences TensorFlow's import when it happens, so `--help`
stays fast. Python errors are never hidden: an exception raised by the import still reaches
the user with its traceback.

`run` calls absl's `app.run(main)`; an error a user can fix (a flag, a file, a record, a
checkpoint: the project's error classes below) is printed as `<program>: error: <message>`
and the program exits with status 2. Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.util
import os
import sys
import warnings
from typing import Callable, Optional, Sequence, Tuple, Type

VERBOSITY_FLAGS = ("--verbosity", "-verbosity", "--v", "-v")


def verbosity_requested(argv: Optional[Sequence[str]] = None) -> bool:
    """Whether the command line asks for log output: --verbosity[=N] or -v[=N] (absl's)."""
    argv = sys.argv[1:] if argv is None else argv
    for arg in argv:
        if arg == "--":
            break
        if arg.split("=", 1)[0] in VERBOSITY_FLAGS:
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


class _QuietTensorFlowImport(importlib.abc.MetaPathFinder):
    """Runs the first `import tensorflow` (and the device discovery after it) with stderr
    silenced."""

    def find_spec(self, name, path=None, target=None):
        if name != "tensorflow":
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)  # once; the real finders find the package
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        exec_module = spec.loader.exec_module

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

        spec.loader.exec_module = quiet_exec_module
        return spec


def quiet_startup(argv: Optional[Sequence[str]] = None) -> bool:
    """Hides TensorFlow's start-up log lines unless --verbosity/-v is in argv (default
    sys.argv). Call it first in a command-line program, before TensorFlow is imported.
    Returns whether the start-up is quiet."""
    if verbosity_requested(argv):
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
    return True


def user_error_types() -> Tuple[Type[BaseException], ...]:
    """The exceptions that mean "the input is wrong" (their messages name file/flag/record)."""
    from xlnet_tf2.config import ConfigError
    from xlnet_tf2.config_flags import RunConfigError
    from xlnet_tf2.conversion.readers import CheckpointReadError
    from xlnet_tf2.conversion.weight_maps import WeightMismatchError
    from xlnet_tf2.data.manifest import ManifestError
    from xlnet_tf2.data.params import DataPrepError
    from xlnet_tf2.data.pretrain_dataset import BatchLayoutError
    from xlnet_tf2.tasks.errors import TaskDataError
    from xlnet_tf2.tokenizers.sentencepiece_tokenizer import TokenizerError
    from xlnet_tf2.training.checkpointing import CheckpointRestoreError
    from xlnet_tf2.training.distribution import StrategyError

    return (ConfigError, RunConfigError, CheckpointReadError, WeightMismatchError,
            ManifestError, DataPrepError, BatchLayoutError, TaskDataError, TokenizerError,
            CheckpointRestoreError, StrategyError, FileNotFoundError)


def program_name() -> str:
    return os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "xlnet_tf2"


def with_error_lines(main: Callable) -> Callable:
    """main(argv) -> the same, printing a user error as one line and returning status 2."""

    def wrapped(argv):
        try:
            return main(argv)
        except user_error_types() as e:
            message = str(e).strip() or type(e).__name__
            if isinstance(e, FileNotFoundError) and e.filename and e.filename not in message:
                message = f"{message}: {e.filename}"
            print(f"{program_name()}: error: {message}", file=sys.stderr, flush=True)
            return 2

    return wrapped


def run(main: Callable) -> None:
    """absl's app.run(main) with user errors printed as one line (exit status 2)."""
    from absl import app

    app.run(with_error_lines(main))
