"""Typed run configurations as trees of frozen dataclasses, and the absl flags derived from
them, so a setting's name, type, default, help text and resume policy are written once
(`setting`, `define_flags`, `config_from_flags`, `from_flat`, `changed_settings`). How the
commands use it: docs/ARCHITECTURE.md#configuration-one-way-to-make-flags.
"""

from __future__ import annotations

import dataclasses
import sys
import typing
import warnings
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Type

from absl import flags as absl_flags

# Flags defined here belong to the main program (see define_flags), not to this module.
absl_flags.disclaim_key_flags()

RESUME_POLICIES = ("fixed", "warn", "free")


class RunConfigError(ValueError):
    """A run setting is invalid; the message names the flag and what to do."""


def setting(default: Any = dataclasses.MISSING, help: str = "", *,  # noqa: A002 - absl's word
            choices: Optional[Sequence[str]] = None, resume: str = "fixed",
            required: bool = False, default_factory: Any = dataclasses.MISSING,
            default_from: Optional[str] = None, old_names: Sequence[str] = ()):
    """A leaf setting of a run configuration (a dataclass field with flag metadata).

    Args:
      default: the default value (None for optional settings).
      help: the flag's full-sentence help.
      choices: for string settings, the allowed values (an enum flag).
      resume: what a resumed run does when the value changed (`changed_settings`):
        "fixed"  the checkpoint cannot be resumed under another value (batch size, memory
                 length, precision, ...): a changed value is an error naming the flag;
        "warn"   resuming is possible but the run is no longer the one that was started
                 (learning rate, seed, ...): logged and recorded;
        "free"   bookkeeping that may change between attempts (logging, steps per loop, ...).
      required: the flag must be given on the command line.
      default_from: another leaf of the tree whose value this one takes when it is not given
        (or given as None) to `from_flat` or on the command line; `default` still serves the
        dataclass built directly. E.g. data preparation's perm_size defaults to reuse_len.
    """
    if resume not in RESUME_POLICIES:
        raise ValueError(f"resume policy must be one of {RESUME_POLICIES}, got {resume!r}")
    metadata = {"help": help, "choices": tuple(choices) if choices else None,
                "resume": resume, "required": required, "default_from": default_from,
                "old_names": tuple(old_names)}
    if default_factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=default_factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def setting_like(cls: Type, name: str, default: Any = dataclasses.MISSING):
    """A leaf with the help, choices and resume policy of leaf `name` of config class `cls`,
    and its default unless `default` is given: two trees that share one setting (the training
    loop's --precision and feature extraction's, the benchmarks' sizes) write it once."""
    field = {f.name: f for f in dataclasses.fields(cls)}[name]
    if default is not dataclasses.MISSING:
        return dataclasses.field(default=default, metadata=field.metadata)
    if field.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        return dataclasses.field(default_factory=field.default_factory,  # type: ignore[misc]
                                 metadata=field.metadata)
    return dataclasses.field(default=field.default, metadata=field.metadata)


def check_declared(config) -> None:
    """The checks a config class's fields declare, for its `__post_init__` (library callers
    get the same error as the command line): every `required` setting is set, every setting
    with `choices` holds one of them. Raises RunConfigError naming the flag."""
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        if field.metadata.get("required") and value in (None, "", ()):
            raise RunConfigError(f"--{field.name} is required: {field.metadata['help']}")
        choices = field.metadata.get("choices")
        if choices and value is not None and value not in choices:
            raise RunConfigError(f"--{field.name} must be one of {', '.join(choices)}; got "
                                 f"{value!r}.")


def check_positive(config, *names: str) -> None:
    """Raises RunConfigError naming the first setting of `names` that is set (not None) but
    not a positive integer."""
    _check_integers(config, names, 1, "a positive integer")


def check_non_negative(config, *names: str) -> None:
    """Raises RunConfigError naming the first setting of `names` that is set (not None) but
    not an integer >= 0."""
    _check_integers(config, names, 0, "an integer >= 0")


def _check_integers(config, names: Sequence[str], low: int, what: str) -> None:
    for name in names:
        value = getattr(config, name)
        if value is None:
            continue
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise RunConfigError(f"--{name} must be {what}, got {value!r}.")


def section(cls: Type):
    """A nested configuration of class `cls` (its leaves become flags too). The annotation
    may name a base class; `cls` (e.g. one made by `with_defaults`) is what gets built."""
    return dataclasses.field(default_factory=cls, metadata={"section": cls})


# ---------------------------------------------------------------------------- introspection
def _section_class(field: dataclasses.Field, hints: Mapping[str, Any]) -> Optional[Type]:
    """The config class a section field builds (`section(cls)`'s, else its annotation), or
    None for a leaf. `hints`: typing.get_type_hints of the field's class."""
    if not dataclasses.is_dataclass(hints[field.name]):
        return None
    return field.metadata.get("section") or hints[field.name]


def _base_type(annotation) -> Tuple[type, bool, bool]:
    """(scalar type, optional?, sequence?) of an annotation like Optional[Tuple[str, ...]]."""
    optional = False
    origin = typing.get_origin(annotation)
    if origin is typing.Union:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        optional = len(args) != len(typing.get_args(annotation))
        annotation = args[0]
        origin = typing.get_origin(annotation)
    if origin in (tuple, list, Tuple, List):
        return typing.get_args(annotation)[0], optional, True
    return annotation, optional, False


def leaves(cls: Type, prefix: Tuple[str, ...] = ()) -> Iterator[Tuple[Tuple[str, ...],
                                                                      dataclasses.Field, Any]]:
    """(path, field, annotation) of every leaf setting of a config class, depth first."""
    hints = typing.get_type_hints(cls)
    for field in dataclasses.fields(cls):
        section_class = _section_class(field, hints)
        if section_class is not None:
            yield from leaves(section_class, prefix + (field.name,))
        else:
            yield prefix + (field.name,), field, hints[field.name]


def _unique_leaves(cls: Type) -> Dict[str, dataclasses.Field]:
    """{leaf name: field} of a tree whose leaf names are unique (they are its flags)."""
    seen: Dict[str, Tuple[str, ...]] = {}
    fields: Dict[str, dataclasses.Field] = {}
    for path, field, _ in leaves(cls):
        name = path[-1]
        if name in seen:
            raise TypeError(f"{cls.__name__}: setting {name!r} appears at {seen[name]} and "
                            f"{path}; flag names must be unique in a config tree.")
        seen[name], fields[name] = path, field
    for name, field in fields.items():
        source = field.metadata.get("default_from")
        if source is not None and source not in fields:
            raise TypeError(f"{cls.__name__}.{name}: default_from={source!r} is not a setting "
                            "of the tree.")
    return fields


def _default_of(field: dataclasses.Field):
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        return field.default_factory()  # type: ignore[misc]
    return None


# ---------------------------------------------------------------------------- building trees
def from_flat(cls: Type, values: Optional[Mapping[str, Any]] = None, **kwargs):
    """Builds a config tree from flat leaf names; unknown names raise RunConfigError."""
    flat = dict(values or {})
    flat.update(kwargs)
    fields = _unique_leaves(cls)
    for old, new in _renamed(fields).items():
        if old in flat:
            warnings.warn(f"{cls.__name__}: the setting {old!r} is now {new!r}; the old name "
                          "will stop working in a later release.", DeprecationWarning,
                          stacklevel=3)
            if flat.get(new) is None:  # None: not given, as everywhere in a flat dict
                flat.pop(new, None)
            take_old_names(flat, {old: new})
    unknown = sorted(set(flat) - set(fields))
    if unknown:
        raise RunConfigError(f"Unknown {cls.__name__} setting(s) {unknown}.")
    for name, field in fields.items():
        source = field.metadata.get("default_from")
        if source is not None and flat.get(name) is None:
            given = flat.get(source)
            flat[name] = given if given is not None else _default_of(fields[source])
    return _build(cls, flat)


def _renamed(fields: Mapping[str, dataclasses.Field]) -> Dict[str, str]:
    """{old name: setting} of the settings of a tree that were renamed (`old_names`)."""
    return {old: name for name, field in fields.items()
            for old in field.metadata.get("old_names", ())}


def take_old_names(values: Dict[str, Any], renamed: Mapping[str, str],
                   spell=repr) -> List[str]:
    """Moves the value of each old name of `renamed` ({old name: name}) found in `values` to
    its name, in place; returns the old names found. Both names with different values raise
    RunConfigError naming both as `spell` writes them (a flag, a key). The one rule for every
    renamed setting: flags, flat settings, task.json's keys (task_registry.current_settings)."""
    found = []
    for old, new in renamed.items():
        if old not in values:
            continue
        value = values.pop(old)
        if new in values and values[new] != value:
            raise RunConfigError(f"{spell(old)} is the old name of {spell(new)}, and the two "
                                 f"say {value!r} and {values[new]!r}: give {spell(new)} alone.")
        values[new] = value
        found.append(old)
    return found


def _build(cls: Type, flat: Mapping[str, Any]):
    hints = typing.get_type_hints(cls)
    args = {}
    for field in dataclasses.fields(cls):
        section_class = _section_class(field, hints)
        if section_class is not None:
            args[field.name] = _build(section_class, flat)
        elif field.name in flat:
            args[field.name] = _coerce(flat[field.name], hints[field.name], field.name)
    return cls(**args)


def _coerce(value, annotation, name: str):
    """Lists from flags or JSON become tuples where the field is a tuple; the items of a list
    flag (strings) become numbers where the field holds numbers."""
    base, _, sequence = _base_type(annotation)
    if not sequence or not isinstance(value, (list, tuple)):
        return value
    if base in (int, float):
        try:
            return tuple(base(item) for item in value)
        except (TypeError, ValueError):
            kind = "an integer" if base is int else "a number"
            raise RunConfigError(f"--{name}: every item must be {kind}, got "
                                 f"{','.join(map(str, value))!r}.") from None
    return tuple(value)


def to_flat(config) -> Dict[str, Any]:
    """{leaf name: value} of a config tree."""
    out = {}
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        if dataclasses.is_dataclass(value):
            out.update(to_flat(value))
        else:
            out[field.name] = list(value) if isinstance(value, tuple) else value
    return out


def to_dict(config) -> Dict[str, Any]:
    """The nested JSON-able dict of a config tree."""
    out = {}
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        if dataclasses.is_dataclass(value):
            out[field.name] = to_dict(value)
        else:
            out[field.name] = list(value) if isinstance(value, tuple) else value
    return out


def from_dict(cls: Type, values: Mapping[str, Any], *, source: str = "config"):
    """Rebuilds a tree from `to_dict` output; leaves missing from `values` take defaults
    (settings added by a later version), unknown keys raise RunConfigError naming `source`."""
    hints = typing.get_type_hints(cls)
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise RunConfigError(f"{source}: unknown setting(s) {unknown}.")
    args = {}
    for field in dataclasses.fields(cls):
        if field.name not in values:
            continue
        section_class = _section_class(field, hints)
        if section_class is not None:
            args[field.name] = from_dict(section_class, values[field.name], source=source)
        else:
            args[field.name] = _coerce(values[field.name], hints[field.name], field.name)
    return cls(**args)


def with_defaults(cls, name: str, **defaults):
    """A subclass of config class `cls` whose leaves in `defaults` default differently (the
    same help, validation and resume policy): fine-tuning's loop is pretraining's loop with
    fine-tuning's defaults."""
    fields = []
    for field in dataclasses.fields(cls):
        if field.name in defaults:
            new = dataclasses.field(default=defaults.pop(field.name), metadata=field.metadata)
        elif field.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
            new = dataclasses.field(default_factory=field.default_factory,  # type: ignore[misc]
                                    metadata=field.metadata)
        else:
            new = dataclasses.field(default=field.default, metadata=field.metadata)
        fields.append((field.name, field.type, new))
    if defaults:
        raise TypeError(f"{cls.__name__} has no setting(s) {sorted(defaults)}")
    derived = dataclasses.make_dataclass(name, fields, bases=(cls,), frozen=True)
    derived.__module__ = cls.__module__
    derived.__doc__ = f"{cls.__doc__}\n\n    ({name}: the same settings with other defaults.)"
    return derived


# ---------------------------------------------------------------------------- comparing trees
@dataclasses.dataclass(frozen=True)
class ChangedSetting:
    name: str
    old: Any
    new: Any
    resume: str

    def describe(self) -> str:
        return f"--{self.name}: the run was started with {self.old!r}, now {self.new!r}"


def changed_settings(cls: Type, old: Mapping[str, Any], new) -> List[ChangedSetting]:
    """Leaves whose value differs between a stored flat dict (`old`) and a tree (`new`).
    Leaves the stored dict lacks (added by a later version) are not reported."""
    new_flat = to_flat(new)
    changes = []
    for path, field, _ in leaves(cls):
        name = path[-1]
        stored = [n for n in (name,) + field.metadata.get("old_names", ()) if n in old]
        if not stored:
            continue
        before, after = old[stored[0]], new_flat[name]
        if before != after:
            changes.append(ChangedSetting(name, before, after, field.metadata.get("resume", "fixed")))
    return changes


# ---------------------------------------------------------------------------- absl flags
def define_flags(cls: Type, flag_values=None, *, exclude: Sequence[str] = (),
                 defaults: Optional[Mapping[str, Any]] = None) -> List[str]:
    """Defines one absl flag per leaf of `cls` (names, types, defaults, help from the fields).

    `exclude`: leaves that get no flag (the CLI sets them otherwise); `defaults`: different
    defaults for this command. Returns the names defined. The flags are key flags of the
    module that calls this and of the main program (what its --help lists), also when a
    library module defines them for the command.

    Leaf names must be unique across a tree: the flag `--train_steps` is the leaf
    `train_steps` wherever it sits. Validation lives in the config classes' `__post_init__`,
    raising `RunConfigError` naming the flag, so a bad value is one line from any command
    (xlnet_tf2/cli.py) and the same error from library callers.
    """
    from absl import flags

    fv = flag_values if flag_values is not None else flags.FLAGS
    _unique_leaves(cls)
    defaults = dict(defaults or {})
    # The program owns the flags (its --helpfull groups them under its name), not the module
    # that happens to call this.
    program = _program()
    names = []
    for path, field, annotation in leaves(cls):
        name = path[-1]
        if name in exclude:
            continue
        meta = field.metadata
        help_text = meta.get("help") or name
        # A leaf that defaults to another's value has no default of its own on the command line.
        own = None if meta.get("default_from") else _default_of(field)
        default = defaults.get(name, own)
        base, optional, sequence = _base_type(annotation)
        if meta.get("required"):
            default = None
        if sequence:
            # absl list flags hold strings; config_from_flags turns them back into numbers.
            flags.DEFINE_list(name, None if default is None else [str(v) for v in default],
                              help_text, flag_values=fv, module_name=program)
        elif meta.get("choices"):
            flags.DEFINE_enum(name, default, list(meta["choices"]), help_text, flag_values=fv,
                              module_name=program)
        elif base is bool:
            flags.DEFINE_bool(name, default, help_text, flag_values=fv, module_name=program)
        elif base is int:
            flags.DEFINE_integer(name, default, help_text, flag_values=fv, module_name=program)
        elif base is float:
            flags.DEFINE_float(name, default, help_text, flag_values=fv, module_name=program)
        elif base is str:
            flags.DEFINE_string(name, default, help_text, flag_values=fv, module_name=program)
        else:
            raise TypeError(f"{cls.__name__}.{name}: no flag type for {annotation!r}")
        del optional
        if meta.get("required") and not meta.get("old_names"):
            # (A renamed setting may come under its old name: check_declared says it is
            # missing, naming the new flag.)
            flags.mark_flag_as_required(name, flag_values=fv)
        fv.register_key_flag_for_module(program, fv[name])
        names.append(name)
        for old in meta.get("old_names", ()):
            # The old name of a renamed setting: read (config_from_flags says the new name),
            # left out of --help (not a key flag).
            old_help = f"Deprecated: the old name of --{name} (the same values)."
            if meta.get("choices"):
                flags.DEFINE_enum(old, None, list(meta["choices"]), old_help, flag_values=fv,
                                  module_name=program)
            elif base is str and not sequence:
                flags.DEFINE_string(old, None, old_help, flag_values=fv, module_name=program)
            else:
                raise TypeError(f"{cls.__name__}.{name}: old_names are supported for string "
                                "settings only.")
    return names


def _program() -> str:
    """The module name absl's --help lists the key flags of: the main program's (absl names
    the `__main__` module after sys.argv[0])."""
    return sys.argv[0] if sys.argv and sys.argv[0] else "__main__"


def config_from_flags(cls: Type, flag_values=None, *, exclude: Sequence[str] = (), **extra):
    """The config tree from parsed flags (leaves in `exclude` come from `extra` or defaults)."""
    from absl import flags

    fv = flag_values if flag_values is not None else flags.FLAGS
    flat = {}
    for path, field, _ in leaves(cls):
        name = path[-1]
        if name in exclude or name not in fv:
            continue
        flat[name] = fv[name].value
        for old in field.metadata.get("old_names", ()):
            if old in fv and fv[old].present:
                print(f"--{old} is deprecated: use --{name} (the same values).",
                      file=sys.stderr)
                given = {n: fv[n].value for n in (old, name) if fv[n].present}
                take_old_names(given, {old: name}, spell=lambda n: f"--{n}")
                flat[name] = given[name]
    flat.update(extra)
    return from_flat(cls, flat)
