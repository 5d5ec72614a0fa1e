"""Loading a model by directory, release name or hub id, and saving one: the one place that
decides what `name_or_dir` holds and reads it into a model class (HuggingFace's
`from_pretrained` / `save_pretrained`, keras-hub's `from_preset` / `presets`).

`name_or_dir` may be (locate.py finds it and names its layout)
  - a directory this project wrote ("converted"): a converted release (model.ckpt.*), a
    pretraining or fine-tuning model_dir (its latest checkpoint; a task directory's best):
    xlnet_config.json + a checkpoint, read by saving.py;
  - a HuggingFace `save_pretrained` directory (config.json + model.safetensors, read without
    torch, or pytorch_model.bin, which needs torch): converted in memory (conversion/);
  - an original zihangdai/xlnet release directory (xlnet_model.ckpt.*, xlnet_config.json,
    spiece.model): converted in memory;
  - a HuggingFace Hub repository id ("owner/name") or a release name of `locate.PRETRAINED`
    ("xlnet-base-cased", "xlnet-large-cased"): taken from the local hub cache, else
    downloaded with the `huggingface_hub` package (imported only then; not a requirement of
    this library), then converted in memory. With HF_HUB_OFFLINE=1 only the cache is read.
The directory holds the architecture only; run-time settings (mem_len, dropout, ...) are
keyword arguments. Release names are also architecture presets: with `load_weights=False`
they build that architecture with fresh weights and need nothing on disk.

One loader, `load(cls, name_or_dir, ...)`, reads every kind of model: every class's
`from_pretrained` and `from_preset` is it (`XLNetLMHeadModel.from_pretrained` is
`classmethod(load)`, and `xlnet_tf2.from_pretrained`), and what it builds is the class it is
given, so nothing here imports a model class (they import this module). A model says what it
is by its `kind` ("backbone", "lm", or task.json's kind: a fine-tuning task's name); a task
model class serves the kinds whose tasks' declarations name it (`KINDS`,
xlnet_tf2/task_registry.py). The trained model_dir of a command is read through it too
(tasks/finetuned_model.py's `load_task_model`), and every command's --init_checkpoint
(`read_weights`, called by `training/checkpointing.py` for pretraining and
`tasks/finetuning.py` for fine-tuning).
"""

from __future__ import annotations

import logging
import os
import warnings
from typing import Callable, Dict, Optional

from xlnet_tf2 import fileio, run_dir, task_registry
from xlnet_tf2.config import RUNTIME_KEYS, XLNetConfig
from xlnet_tf2.config_flags import RunConfigError
from xlnet_tf2.conversion.convert import (HeadOptions, fill, huggingface_architecture,
                                          huggingface_kind, read_foreign)
from xlnet_tf2.conversion.to_huggingface import save_huggingface
from xlnet_tf2.locate import (ORIGINAL_PREFIX, PRETRAINED, PretrainedNotFoundError, Resolved,
                              resolve)
from xlnet_tf2.models import saving

FORMATS = ("xlnet_tf2", "huggingface")
_log = logging.getLogger(__name__).info


# ---------------------------------------------------------------------------- names and settings
def check_runtime(runtime: dict) -> dict:
    """`runtime` when it holds run-time settings only (the architecture is the directory's)."""
    architecture = sorted(k for k in runtime if k not in RUNTIME_KEYS)
    if architecture:
        raise ValueError(f"from_pretrained takes run-time settings only "
                         f"({', '.join(RUNTIME_KEYS)}); {architecture} come from the model "
                         "directory.")
    return runtime


def pretrained_config(name: str, **runtime) -> XLNetConfig:
    """The architecture of a release name ("xlnet-base-cased", "xlnet-large-cased") with
    run-time settings."""
    if name not in PRETRAINED:
        raise PretrainedNotFoundError(f"Unknown release name {name!r}; known: "
                                      f"{sorted(PRETRAINED)}.")
    return XLNetConfig.preset(PRETRAINED[name].preset, **check_runtime(runtime))


def presets() -> Dict[str, dict]:
    """The release names from_preset knows, with their architecture and hub repository."""
    listing = {}
    for name, release in PRETRAINED.items():
        arch = XLNetConfig.preset(release.preset).architecture()
        listing[name] = {
            "description": (f"XLNet {release.preset}, cased: {arch['n_layer']} layers, width "
                            f"{arch['d_model']}, {arch['n_head']} heads, "
                            f"{arch['n_token']} SentencePiece pieces."),
            "repo_id": release.repo_id, "architecture": arch}
    return listing


class ClassProperty:
    """A read-only attribute computed on the class (keras-hub's `Model.presets`)."""

    def __init__(self, getter: Callable[[], object]):
        self.getter = getter

    def __get__(self, instance, owner):
        return self.getter()


class PretrainedModel:
    """Mixin of XLNetModel and XLNetLMHeadModel (a subclass sets `kind` and its own
    `from_pretrained`): the XLNetConfig they echo (`get_config` / `from_config`), keras-hub's
    `presets` and `from_preset` (its `from_pretrained`), and HuggingFace's `save_pretrained`."""

    presets = ClassProperty(presets)

    def get_config(self):
        return {"config": self.config.to_dict(), "name": self.name, "trainable": self.trainable}

    @classmethod
    def from_config(cls, config):
        return cls(**config)

    @classmethod
    def from_preset(cls, preset: str, **runtime):
        """keras-hub's name for `from_pretrained`: one of `presets`, a hub repository id, or a
        directory (ours, HuggingFace's or the original release's); `runtime` sets run-time
        fields (mem_len=..., dropout=...)."""
        return load(cls, preset, **runtime)

    def save_pretrained(self, output_dir: str, spm_model: Optional[str] = None, *,
                        format: str = "xlnet_tf2"):  # noqa: A002 - HF's keyword
        """Writes this model for `from_pretrained`: our directory (format="xlnet_tf2") or the
        transformers class of its `kind` (format="huggingface"); `spm_model` adds the
        SentencePiece model. See `save_pretrained` below (`xlnet_tf2.save_pretrained`)."""
        return save_pretrained(self, output_dir, spm_model, format=format)


def _split(kwargs: dict, keys) -> dict:
    """The entries of `kwargs` named in `keys`, taken out of it."""
    return {k: kwargs.pop(k) for k in list(kwargs) if k in keys}


def _architecture(name_or_dir: str, runtime: dict) -> XLNetConfig:
    """load_weights=False: a release name's architecture, or a directory's xlnet_config.json."""
    if name_or_dir in PRETRAINED and not fileio.isdir(name_or_dir):
        return pretrained_config(name_or_dir, **runtime)
    path = os.path.join(name_or_dir, run_dir.ARCH_FILE)
    if not fileio.exists(path):
        raise PretrainedNotFoundError(
            f"load_weights=False needs a release name ({', '.join(sorted(PRETRAINED))}) "
            f"or a directory with {run_dir.ARCH_FILE}; {path} does not exist.")
    return XLNetConfig.from_json_file(path, **runtime)


# ---------------------------------------------------------------------------- loading
def load(cls, name_or_dir: str, *, load_weights: bool = True, which: str = "best",
         cache_dir: Optional[str] = None, revision: Optional[str] = None,
         local_files_only: bool = False, **kwargs):
    """The one loader: a model of class `cls` from `name_or_dir` (a directory of ours,
    HuggingFace's or the original release's, a hub repository id or a release name: module
    docstring). Every class's `from_pretrained` / `from_preset` is this function, so every
    load resolves the name the same way (locate.resolve) and reads the same files. What it
    returns is `cls`'s:

      XLNetModel (kind "backbone")      the backbone of any of them (a task directory's too,
                                        its head left out)
      XLNetLMHeadModel (kind "lm")      the LM model (a task directory is refused: it has no
                                        LM head)
      a HeadModel subclass              our task directory of one of its tasks (`KINDS`) with
                                        its head; transformers' directory of the matching
                                        XLNetFor... class with its head; any other model's
                                        backbone with a new head from `cls`'s constructor
                                        arguments in `kwargs` (`_load_head_model`)
      HeadModel itself                  our task directory of any task, as the class its
                                        task.json's kind declares (HeadModel.from_settings)
      a ModelWithPreprocessor subclass  the keras-hub-style model (`_load_preset_model`)

    Args:
      load_weights: False builds the architecture of a release name or of a directory's
        xlnet_config.json with fresh weights (nothing is read or downloaded for a name).
      which: a task directory's checkpoint, "best" (the best evaluation's, else the latest)
        or "latest".
      cache_dir, revision, local_files_only: passed to huggingface_hub for repository ids.
      **kwargs: run-time settings (mem_len, reuse_len, dropout, dropatt, bi_data, clamp_len,
        attn_type, same_length, initializer_range); for a task model also its constructor's
        arguments (a new head's) or head_dropout (a task directory's head).
    """
    if which not in ("best", "latest"):
        raise ValueError(f"which must be 'best' or 'latest', got {which!r}.")
    hub = {"cache_dir": cache_dir, "revision": revision, "local_files_only": local_files_only}
    if hasattr(cls, "from_task_settings"):
        return _load_preset_model(cls, name_or_dir, load_weights, which, hub, **kwargs)
    if hasattr(cls, "from_settings"):
        return _load_head_model(cls, name_or_dir, load_weights, which, hub, kwargs)
    runtime = check_runtime(kwargs)
    if not load_weights:
        return _built(cls(_architecture(name_or_dir, runtime)))
    source = _Source(resolve(name_or_dir, **hub), runtime)
    if cls.kind == "lm" and source.is_head_directory():
        kind = saving.read_task_settings(source.directory).get("kind")
        raise ValueError(f"{source.directory} is a {kind} task directory, not a language "
                         "model: load it with its task class (e.g. "
                         "xlnet_tf2.XLNetClassifier.from_preset, or "
                         "xlnet_tf2.models.HeadModel.from_pretrained for any task).")
    model = _built(cls(source.config))
    source.read(model, which)
    return model


class _Source:
    """A resolved model directory opened for reading: its architecture with this load's
    run-time settings (`config`), and `read(model)` that puts its weights into a built
    XLNetModel or XLNetLMHeadModel (ours: from the checkpoint, a task directory's backbone
    alone; released ones: converted in memory)."""

    def __init__(self, resolved, runtime: dict):
        self.directory, self.layout = resolved.directory, resolved.layout
        self.foreign = None
        if self.layout == "converted":
            self.config = XLNetConfig.from_json_file(
                os.path.join(self.directory, run_dir.ARCH_FILE), **runtime)
        else:
            self.foreign = foreign_checkpoint(resolved.layout, self.directory)
            self.config = XLNetConfig.from_architecture(self.foreign.config.to_dict(), **runtime)

    def is_head_directory(self) -> bool:
        return self.layout == "converted" and fileio.exists(
            os.path.join(self.directory, run_dir.TASK_FILE))

    def read(self, model, which: str = "best", prefix: Optional[str] = None,
             source: str = "checkpoint") -> str:
        """Reads the weights into `model` (ours: `prefix`, else the directory's checkpoint,
        `which` of a task directory; `source` names it in errors); returns what was read (a
        checkpoint prefix, or the directory of a release converted in memory)."""
        if self.foreign is not None:
            fill(model, self.foreign, _log)
            return self.directory
        if prefix is None and self.is_head_directory():  # a task model's backbone alone
            prefix = saving.task_checkpoint(self.directory, which)
        return saving.restore_weights(model, prefix or self.directory, source=source)


def _checkpoint_prefix(name_or_dir: str) -> Optional[str]:
    """`name_or_dir` when it is one of our checkpoint prefixes (DIR/ckpt-1000), else None."""
    if not fileio.isdir(name_or_dir) and fileio.exists(name_or_dir + ".index"):
        return name_or_dir
    return None


def model_directory(name_or_dir: str, source: Optional[str] = None) -> Resolved:
    """Where `load` reads `name_or_dir` from (locate.resolve: a directory of any layout, a
    hub id, a release name, each as a local directory with its layout); one of our
    checkpoint prefixes (DIR/ckpt-1000) stands for its directory, which holds the
    architecture (xlnet_config.json) and the SentencePiece model. `source` (a flag) opens
    the error of a name that gives no model: `load`'s message after `--flag='name': `."""
    try:
        prefix = _checkpoint_prefix(name_or_dir)
        if prefix is None:
            return resolve(name_or_dir)
        directory = run_dir.directory_of(prefix)
        if not fileio.exists(os.path.join(directory, run_dir.ARCH_FILE)):
            raise PretrainedNotFoundError(f"{directory} holds no {run_dir.ARCH_FILE} beside "
                                          f"the checkpoint {prefix}: its architecture is not "
                                          "known.")
        return Resolved(directory, "converted")
    except PretrainedNotFoundError as e:
        if source is None:
            raise
        raise PretrainedNotFoundError(f"{source}={name_or_dir!r}: {e}") from None


def architecture(name_or_dir: str, source: Optional[str] = "--init_checkpoint",
                 **runtime) -> XLNetConfig:
    """The architecture `load` builds for `name_or_dir` (anything it takes, or one of our
    checkpoint prefixes), with `runtime` settings; no weight is read."""
    resolved = model_directory(name_or_dir, source)
    if resolved.layout == "huggingface":
        return XLNetConfig.from_architecture(
            huggingface_architecture(resolved.directory).architecture(), **runtime)
    return XLNetConfig.from_json_file(os.path.join(resolved.directory, run_dir.ARCH_FILE),
                                      **runtime)


def read_weights(model, name_or_dir: str, *, which: str = "best",
                 source: str = "--init_checkpoint") -> str:
    """The weights `name_or_dir` holds read into `model`, built: an XLNetModel (a task
    model's backbone) or an XLNetLMHeadModel. What every command's --init_checkpoint reads
    (pretraining's LM model, fine-tuning's backbone), so they take what `load` takes, resolved
    and read the same way: our directories (a converted release, a pretraining run's latest
    checkpoint, a task directory's backbone at its `which` checkpoint), HuggingFace
    directories and hub ids, release names, original releases (converted in memory), and
    also one of our checkpoint prefixes (DIR/ckpt-1000). Values the model does not have (an
    LM bias for a backbone, a head, optimizer slots) are left. Errors are `load`'s, after
    `source` (the flag); an architecture other than `model.config`'s is RunConfigError
    naming the keys. Returns what was read: a checkpoint prefix, or the directory of a
    release converted in memory."""
    found = _Source(model_directory(name_or_dir, source), {})
    ours, theirs = model.config.architecture(), found.config.architecture()
    differ = [f"{k} {theirs.get(k)!r} (the run's {ours[k]!r})" for k in ours
              if theirs.get(k) != ours[k]]
    if differ:
        raise RunConfigError(f"{source}={name_or_dir!r} holds another architecture than the "
                             f"model it initializes: {', '.join(differ)}; give the run that "
                             "model's architecture (--model_config).")
    return found.read(model, which, _checkpoint_prefix(name_or_dir), source=source)


def foreign_checkpoint(layout: str, directory: str, head: Optional[HeadOptions] = None):
    """A HuggingFace or original release directory (`layout`, locate.LAYOUTS) read for
    conversion (conversion/)."""
    if layout == "huggingface":
        return read_foreign("huggingface", directory, head=head)
    return read_foreign("original", os.path.join(directory, ORIGINAL_PREFIX),
                        config_path=os.path.join(directory, run_dir.ARCH_FILE), head=head)


def _built(model):
    model.build()
    return model


def _load_head_model(cls, name_or_dir: str, load_weights: bool, which: str, hub: dict,
                     kwargs: dict):
    """`load` of a task model class (SequenceClassifier, MultipleChoiceModel, SquadModel, ...:
    a class a task's declaration names; or HeadModel for any task directory):
      - our task directory (task.json) of one of `cls.KINDS` (HeadModel: any), with its head;
      - transformers' directory (or hub id) of the matching XLNetFor... class, with its head;
      - any other model directory, hub id or release name: its backbone with a new head from
        `cls`'s constructor arguments in `kwargs` (num_outputs=..., ...).
    `kwargs` also take run-time settings (dropout=..., ...)."""
    runtime = check_runtime(_split(kwargs, RUNTIME_KEYS))
    resolved = resolve(name_or_dir, **hub) if load_weights else None
    if resolved is not None and fileio.exists(os.path.join(resolved.directory,
                                                            run_dir.TASK_FILE)):
        def build(config, settings):
            extra = dict(kwargs)
            head_dropout = extra.pop("head_dropout", 0.1)
            if extra:
                raise ValueError(f"{resolved.directory} is a task directory: its head is as "
                                 f"task.json says; {sorted(extra)} apply to a new head only.")
            return cls.from_settings(config, settings, head_dropout)

        return _read_task_directory(build, resolved.directory, cls.KINDS or None,
                                    cls.__name__, runtime, which)
    if not cls.KINDS:
        why = ("load_weights=False reads no task.json" if resolved is None
               else f"{resolved.directory} holds no {run_dir.TASK_FILE}")
        raise ValueError(f"{cls.__name__}.from_pretrained reads a task directory of any task "
                         f"and {why}; a new head on a model's backbone needs the task model's "
                         "class (e.g. SequenceClassifier.from_pretrained(name, num_outputs=2)).")
    if resolved is None:
        return cls(_architecture(name_or_dir, runtime), **kwargs).build_weights()
    kind = (huggingface_kind(resolved.directory, cls.KINDS)
            if resolved.layout == "huggingface" else None)
    if kind is not None:
        foreign = foreign_checkpoint(resolved.layout, resolved.directory, HeadOptions(
            kind, num_choices=kwargs.pop("num_choices", 4)))
        model = cls.from_settings(
            XLNetConfig.from_architecture(foreign.config.to_dict(), **runtime),
            foreign.settings, kwargs.pop("head_dropout", 0.1))
        if kwargs:
            raise ValueError(f"{resolved.directory} holds a {kind} head: its head is as "
                             f"config.json says; {sorted(kwargs)} apply to a new head only.")
        fill(model, foreign, _log)
        return model
    source = _Source(resolved, runtime)
    model = cls(source.config, **kwargs).build_weights()
    source.read(model.transformer, which)
    return model


def _read_task_directory(build: Callable, directory: str, kinds=None, reader: str = "",
                         runtime: Optional[dict] = None, which: str = "best",
                         head_model_of: Callable = lambda model: model):
    """The model `build(config, settings)` makes of one of our task directories'
    xlnet_config.json (with `runtime`) and task.json, with the weights of its `which`
    checkpoint ("best", else "latest") read into its task model (`head_model_of(model)`).
    `kinds`: the kinds `reader` (a class name, for the error) loads (None: any)."""
    settings = saving.read_task_settings(directory)
    if kinds is not None and settings.get("kind") not in kinds:
        raise ValueError(f"{directory} holds a {settings.get('kind')} model (task.json); "
                         f"{reader} loads {' or '.join(kinds)} models.")
    config = XLNetConfig.from_json_file(os.path.join(directory, run_dir.ARCH_FILE),
                                        **(runtime or {}))
    model = build(config, settings)
    saving.restore_task_weights(head_model_of(model), directory, which)
    return model


def _load_preset_model(cls, preset: str, load_weights: bool, which: str, hub: dict, *,
                       seq_len=None, preprocessor="auto", **kwargs):
    """`load` of a model with a preprocessor (keras-hub's `from_preset` of XLNetClassifier,
    ...):

      - one of our task directories (task.json: a fine-tuning model_dir, a fine-tuned
        checkpoint converted with --kind, a `save_to_preset` output) of the class's task: that
        model, head and weights (its `which` checkpoint), with a preprocessor laid out as
        task.json says;
      - a HuggingFace directory or hub repository id whose config.json `architectures` is the
        class's counterpart (its task's declared huggingface_architecture): converted with
        its head;
      - any other model preset (release names, hub ids, our LM or pretraining directories,
        HuggingFace XLNetLMHeadModel / XLNetModel directories, the original release): its
        backbone with a new head, built from the constructor's arguments (e.g. num_classes).

    kwargs: the class's constructor arguments; `seq_len` for the preprocessor (task
    directories know theirs; default the task's declared default_seq_len); `preprocessor` to
    use instead of the one built from the preset's spiece.model (None: token dicts only);
    run-time settings (dropout, dropatt, ...)."""
    runtime = check_runtime(_split(kwargs, RUNTIME_KEYS))
    resolved = None
    if load_weights or preset not in PRETRAINED or os.path.isdir(preset):
        resolved = resolve(preset, **hub)
    spm = None if resolved is None else os.path.join(resolved.directory, run_dir.SPM_FILE)

    def build(config, settings):
        if seq_len is not None:
            settings = {**settings, "seq_len": seq_len}
        return cls.from_task_settings(
            config, settings, _preprocessor(cls, preprocessor, spm, settings, preset), **kwargs)

    if resolved is not None and load_weights:
        if fileio.exists(os.path.join(resolved.directory, run_dir.TASK_FILE)):
            return _read_task_directory(build, resolved.directory, (cls.KIND,), cls.__name__,
                                        runtime, which, head_model_of=lambda m: m.task_model)
        if resolved.layout == "huggingface" and huggingface_kind(resolved.directory,
                                                               (cls.KIND,)):
            foreign = foreign_checkpoint(resolved.layout, resolved.directory, HeadOptions(
                cls.KIND, seq_len=seq_len, num_choices=kwargs.get("num_choices", 4)))
            model = build(XLNetConfig.from_architecture(foreign.config.to_dict(), **runtime),
                          foreign.settings)
            fill(model.task_model, foreign, _log)
            return model
    settings = {"seq_len": seq_len or task_registry.declared(cls.KIND).default_seq_len,
                **kwargs}
    source = _Source(resolved, runtime) if load_weights else None
    config = source.config if load_weights else _architecture(preset, runtime)
    model = cls(config, preprocessor=_preprocessor(cls, preprocessor, spm, settings, preset),
                **kwargs)
    if source is not None:
        source.read(model.backbone, which)
    return model


def restore_weights(model, checkpoint_path: str) -> str:
    """Deprecated: reads our checkpoint (a prefix, or a directory's latest) into `model`, an
    XLNetModel or XLNetLMHeadModel you built; returns the prefix read."""
    warnings.warn("xlnet_tf2.restore_weights is deprecated: load the model whole with "
                  "XLNetModel.from_pretrained(dir) or xlnet_tf2.from_pretrained(dir).",
                  DeprecationWarning, stacklevel=2)
    return saving.restore_weights(model, checkpoint_path)


def _preprocessor(cls, preprocessor, spm, settings, preset):
    if preprocessor != "auto":
        return preprocessor
    if spm is None or not fileio.exists(spm):
        logging.getLogger(__name__).warning(
            "%s has no %s: %s takes token dicts only (pass preprocessor=... for raw strings).",
            preset, run_dir.SPM_FILE, cls.__name__)
        return None
    return cls.make_preprocessor(spm, settings)


# ---------------------------------------------------------------------------- saving
def save_pretrained(model, output_dir: str, spm_model: Optional[str] = None, *,
                    format: str = "xlnet_tf2", label_list=None,  # noqa: A002 - HF's keyword
                    seq_len: Optional[int] = None):
    """Writes `model` into `output_dir`.

    format "xlnet_tf2": for an XLNetLMHeadModel or XLNetModel, our directory
      (xlnet_config.json, model.ckpt.*, spiece.model); for a task model (SequenceClassifier,
      MultipleChoiceModel, SquadModel), our task directory (task.json, ckpt-0,
      xlnet_config.json, spiece.model), read by its class's from_pretrained and by the
      keras-hub-style classes' from_preset. task.json's seq_len is `seq_len` (default: the
      original's for the task), its label_list `label_list` (default "0".."n-1").
    format "huggingface": config.json + model.safetensors (+ spiece.model) that transformers'
      XLNetLMHeadModel / XLNetModel / XLNetForSequenceClassification / XLNetForMultipleChoice /
      XLNetForQuestionAnswering `.from_pretrained` load (conversion/to_huggingface.py)
      (label_list: classification label names, HF's id2label).
    A keras-hub-style model (XLNetClassifier, ...) writes itself (its `save_to_preset`), its
    SentencePiece model and task settings included.
    """
    if format not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, got {format!r}.")
    if hasattr(model, "save_to_preset"):
        return model.save_to_preset(output_dir, format=format)
    kind = getattr(model, "kind", None)
    if kind is None:
        raise TypeError(f"save_pretrained writes XLNet models (XLNetLMHeadModel, XLNetModel, "
                        f"task models, keras-hub-style tasks), not a {type(model).__name__}.")
    if format == "huggingface":
        return save_huggingface(model, output_dir, spm_model, label_list)
    if kind in ("lm", "backbone"):
        return saving.save_pretrained(model, output_dir, spm_model)
    return saving.save_task_directory(model, output_dir, model.task_settings(label_list, seq_len),
                                      spm_model)
