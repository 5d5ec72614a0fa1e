"""What every command-line tool of the project shares: bad input becomes one line, not a
traceback.

    if __name__ == "__main__":
        cli.run(main)

`run` calls absl's `app.run(main)`; an error a user can fix (a flag, a file, a record, a
checkpoint: the project's error classes below) is printed as `<program>: error: <message>`
and the program exits with status 2. Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import os
import sys
from typing import Callable, Tuple, Type


def user_error_types() -> Tuple[Type[BaseException], ...]:
    """The exceptions that mean "the input is wrong" (their messages name file/flag/record)."""
    from xlnet_tf2.config import ConfigError
    from xlnet_tf2.config_flags import RunConfigError
    from xlnet_tf2.conversion.readers import CheckpointReadError
    from xlnet_tf2.conversion.weight_maps import WeightMismatchError
    from xlnet_tf2.data.manifest import ManifestError
    from xlnet_tf2.data.params import DataPrepError
    from xlnet_tf2.data.pretrain_dataset import BatchLayoutError
    from xlnet_tf2.finetuning.errors import TaskDataError
    from xlnet_tf2.tokenization import TokenizerError
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
