"""The Apache Beam side of data_prep/create_tfrecords.py's command line.

* `check_pipeline_args`: the arguments the script does not define are handed to Beam as
  pipeline options; Beam itself silently discards the ones it does not know, so a misspelled
  flag (`--eval_fractoin=0.01`) would prepare data without the user's setting. They are checked
  here against every option Beam defines, and an unknown one is an error naming it.
* The DaskRunner's names (`names_dask_runner`: `--runner=DaskRunner`, the short name Beam
  itself does not know, or its qualified name; dask_runner.py runs it) and options
  (`load_dask_options`): the Dask options (--dask_client_address, ...) are declared by Beam's
  module of that runner, which needs the optional packages dask and distributed; it is
  imported, for the check above too, only when the arguments name the runner or a Dask
  option, and their absence is one clear line.
* `print_only_tagged_lines`: a quiet console for a pipeline run. Beam's DirectRunner forwards
  its workers' log records to the launcher's logging; lines carrying the progress tag are
  printed (to stdout, tag and Beam's envelope removed) and every other record of Beam's loggers
  is dropped.
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
from typing import List, Optional, Sequence

from xlnet_tf2.data.params import DataPrepError

DASK_RUNNER = "apache_beam.runners.dask.dask_runner.DaskRunner"
# How the dask extra is installed (pyproject.toml, requirements-dask.txt).
DASK_INSTALL = ("pip install 'xlnet-tf2[dask]', or from a checkout "
                "pip install -r requirements-dask.txt")


def names_dask_runner(runner: Optional[str]) -> bool:
    """Whether a --runner value names Beam's DaskRunner (short or qualified, any case)."""
    return (runner or "").lower() in ("daskrunner", DASK_RUNNER.lower())


def _runner_value(args: Sequence[str]) -> Optional[str]:
    for i, arg in enumerate(args):
        if arg.startswith("--runner="):
            return arg.split("=", 1)[1]
        if arg == "--runner" and i + 1 < len(args):
            return args[i + 1]
    return None


def load_dask_options(what: str) -> None:
    """Imports Beam's DaskRunner module (it declares the Dask pipeline options).

    what: the argument that asked for it, which the error names.

    Raises:
      DataPrepError if dask or distributed is not installed.
    """
    try:
        # distributed first: with dask installed but not distributed, Beam's module does not
        # raise ImportError but AttributeError (it falls back to a dict for the module).
        import distributed  # noqa: F401
        import apache_beam.runners.dask.dask_runner  # noqa: F401 - declares DaskOptions
    except ImportError as e:
        raise DataPrepError(
            f"{what}: data preparation on Dask needs the packages dask and distributed "
            f"({e}); install them: {DASK_INSTALL}.") from None


def _option_classes():
    from apache_beam.options.pipeline_options import PipelineOptions

    seen, todo = [], list(PipelineOptions.__subclasses__())
    while todo:
        cls = todo.pop()
        if cls not in seen:
            seen.append(cls)
            todo.extend(cls.__subclasses__())
    return seen


def known_option_parser() -> argparse.ArgumentParser:
    """An argparse parser that knows every pipeline option of the installed Beam."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False,
                                     conflict_handler="resolve")
    for cls in _option_classes():
        try:
            cls._add_argparse_args(parser)  # noqa: SLF001 - Beam's way to declare options
        except Exception:  # noqa: BLE001 - an option class that cannot declare itself here
            continue
    return parser


def check_pipeline_args(args: Sequence[str], program: Optional[str] = None) -> List[str]:
    """Returns `args` unchanged if Beam knows every option in them.

    program: the console script the command runs as (`xlnet-create-tfrecords`), which the
    error names; None: the script file, data_prep/create_tfrecords.py.

    Raises:
      DataPrepError naming the unknown arguments.
    """
    args = list(args)
    if not args:
        return args
    runner = _runner_value(args)
    dask_flags = [a.split("=", 1)[0] for a in args if a.startswith("--dask_")]
    if dask_flags and not names_dask_runner(runner):
        raise DataPrepError(f"{dask_flags[0]} is an option of the DaskRunner, and the runner "
                            f"is {runner or 'the DirectRunner'}: add --runner=DaskRunner.")
    if names_dask_runner(runner):
        load_dask_options(f"--runner={runner}")
    _, unknown = known_option_parser().parse_known_args(args)
    unknown = [a for a in unknown if a.startswith("-")]
    if unknown:
        listing = (f"{program} --help lists its flags" if program else
                   "python data_prep/create_tfrecords.py --help lists the script's flags")
        raise DataPrepError(
            f"unknown flag{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}: neither a "
            f"flag of {program or 'create_tfrecords.py'} nor an Apache Beam pipeline option. "
            f"Check the spelling ({listing}).")
    return args


_FORWARDED = re.compile(r'((?:[^"\\]|\\.)*)')


class _TaggedLinesToStdout(logging.Handler):
    def __init__(self, tag: str):
        super().__init__(level=logging.INFO)
        self.tag = tag

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = record.getMessage()
        except Exception:  # noqa: BLE001 - a malformed record is not worth a crash
            return
        at = text.find(self.tag)
        if at < 0:
            return
        line = text[at + len(self.tag):]
        if record.name.startswith("apache_beam"):  # inside Beam's envelope: message: "..."
            line = _FORWARDED.match(line).group(1)
            line = line.encode("latin-1", "backslashreplace").decode("unicode_escape")
        print(line, file=sys.stdout, flush=True)


class _DropBeamAndTagged(logging.Filter):
    def __init__(self, tag: str):
        super().__init__()
        self.tag = tag

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name.startswith("apache_beam"):
            return False
        try:
            return self.tag not in record.getMessage()
        except Exception:  # noqa: BLE001
            return True


def print_only_tagged_lines(tag: str) -> None:
    """Quiet console for a pipeline run (see the module docstring)."""
    root = logging.getLogger()
    for handler in root.handlers:
        handler.addFilter(_DropBeamAndTagged(tag))
    root.addHandler(_TaggedLinesToStdout(tag))
    if root.level > logging.WARNING or root.level == logging.NOTSET:
        root.setLevel(logging.WARNING)
    # Beam's forwarded worker records are WARNING (progress) or INFO; keep WARNING and up.
    logging.getLogger("apache_beam").setLevel(logging.WARNING)
