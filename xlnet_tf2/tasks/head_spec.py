"""`HeadSpec`, a fine-tuned model's `task.json`: which head it has (its `kind`, summary,
labels, beam) and how its inputs are laid out (sequence length, layout, lowercasing, SQuAD's
windows), so evaluation and export need no flags repeated.

Written by the fine-tuning tasks next to the checkpoints; the SentencePiece model is copied
into the model_dir as `spiece.model` so the directory is self-contained.
"""

from __future__ import annotations

import dataclasses
import os

import tensorflow as tf

from xlnet_tf2 import fileio, run_dir, task_registry
from xlnet_tf2.config_flags import RunConfigError
from xlnet_tf2.tasks.finetune_config import check_squad_windows

TASK_FILE = run_dir.TASK_FILE


def _check(spec) -> None:
    """task.json's checks (unknown kind, types, ranges), each a RunConfigError naming the key."""
    if spec.kind not in task_registry.names():
        raise RunConfigError(f"kind must be one of {task_registry.names()}, got {spec.kind!r}.")
    declaration = task_registry.declared(spec.kind)
    for field in dataclasses.fields(spec):
        value, kind = getattr(spec, field.name), _TYPES[field.name]
        if value is not None and (
                not isinstance(value, kind) or (kind is int and isinstance(value, bool))):
            raise RunConfigError(f"{field.name} must be "
                                 f"{getattr(kind, '__name__', 'a number or a list')}, got "
                                 f"{value!r}.")
    for name in _POSITIVE:
        if getattr(spec, name) <= 0:
            raise RunConfigError(f"{name} must be positive, got {getattr(spec, name)}.")
    if spec.label_list is not None and not all(isinstance(x, str) for x in spec.label_list):
        raise RunConfigError(f"label_list must hold label names, got {spec.label_list!r}.")
    if declaration.min_labels > 1 and spec.label_list is not None and \
            len(spec.label_list) < declaration.min_labels:
        raise RunConfigError(f"a {spec.kind} model needs a label_list of at least "
                             f"{declaration.min_labels} labels, got {spec.label_list!r}.")
    if "doc_stride" in {s.name for s in declaration.settings}:
        check_squad_windows(spec)


# Every key of task.json: the shared ones, then each declared task's settings (task_registry).
# An old task.json holds every key of every task (with defaults): all of them are read.
_FIELDS = ([(name, kind, default) for name, (kind, default)
            in task_registry.SHARED_SETTINGS.items()]
           + [(s.name, s.type, s.default) for s in task_registry.task_settings()])
_TYPES = {name: kind for name, kind, _ in _FIELDS}
# The keys whose value must be positive.
_POSITIVE = ("seq_len",) + tuple(s.name for s in task_registry.task_settings() if s.positive)


class _HeadSpecMethods:
    """task.json, checked (unknown keys, types, ranges raise RunConfigError naming them). Its
    fields are task_registry's SHARED_SETTINGS and every declared task's settings."""

    def __post_init__(self):
        _check(self)

    def replace(self, **changes) -> "HeadSpec":
        return dataclasses.replace(self, **changes)

    def write(self, model_dir: str) -> None:
        fileio.makedirs(model_dir)
        fileio.write_json_atomically(os.path.join(model_dir, TASK_FILE), dataclasses.asdict(self))

    @classmethod
    def read(cls, model_dir: str) -> "HeadSpec":
        path = os.path.join(model_dir, TASK_FILE)
        if not tf.io.gfile.exists(path):
            commands = sorted({d.command for d in task_registry.declared_tasks()})
            raise FileNotFoundError(f"{path} does not exist: --model_dir must be a directory "
                                    f"written by a fine-tuning command ({', '.join(commands)}) "
                                    "or xlnet-convert --kind.")
        values = fileio.read_json_object(path, RunConfigError, "what the fine-tuned model is",
                                         "Restore it from the run that wrote the directory.")
        try:
            values = task_registry.current_settings(values, path)
        except ValueError as e:
            raise RunConfigError(f"{e} Restore it from the run that wrote the directory.") \
                from None
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise RunConfigError(f"{path}: unknown key(s) {unknown}.")
        try:
            return cls(**values)
        except RunConfigError as e:
            raise RunConfigError(f"{path}: {e} Restore it from the run that wrote the "
                                 "directory.") from None
        except TypeError as e:  # a required key (kind, seq_len) is missing
            raise RunConfigError(f"{path}: {e}.") from None


HeadSpec = dataclasses.make_dataclass(
    "HeadSpec", [(name, kind if isinstance(kind, type) else object,
                  dataclasses.field() if default is dataclasses.MISSING
                  else dataclasses.field(default=default))
                 for name, kind, default in _FIELDS],
    bases=(_HeadSpecMethods,), frozen=True)
HeadSpec.__module__, HeadSpec.__doc__ = __name__, _HeadSpecMethods.__doc__
