"""Loading a model by directory, release name or hub id, and saving one: the one place that
decides what `name_or_dir` holds and reads it into a model class (HuggingFace's
`from_pretrained` / `save_pretrained`, keras-hub's `from_preset` / `presets`).

`name_or_dir` may be (locate.py finds it and names its kind)
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

Every loader takes the class to build (`cls`): the model classes' own methods are them or
call them (`XLNetLMHeadModel.from_pretrained` is `classmethod(from_pretrained)`), so nothing
here imports a model class. A model says what it is by its `kind` ("backbone", "lm", or task.json's
task); a task model class lists the kinds it serves in `KINDS`.
"""

from __future__ import annotations

import logging
import os
from typing import Callable, Dict, Optional

from xlnet_tf2 import fileio, run_dir, task_registry
from xlnet_tf2.config import RUNTIME_KEYS, XLNetConfig
from xlnet_tf2.conversion.convert import TaskOptions, fill, huggingface_task, read_foreign
from xlnet_tf2.conversion.to_huggingface import save_huggingface
from xlnet_tf2.locate import ORIGINAL_PREFIX, PRETRAINED, PretrainedNotFoundError, resolve
from xlnet_tf2.models import saving

FORMATS = ("xlnet_tf2", "huggingface")
HUB_KEYS = ("cache_dir", "revision", "local_files_only")
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
        return cls.from_pretrained(preset, **runtime)

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


# ---------------------------------------------------------------------------- reading weights
class _Source:
    """A resolved model directory opened for reading: its architecture with this load's
    run-time settings (`config`), and `read_backbone(backbone)` that puts its backbone
    weights into a built XLNetModel (ours: from the checkpoint; released ones: converted)."""

    def __init__(self, resolved, runtime: dict):
        self.directory, self.kind = resolved.directory, resolved.kind
        self.foreign = None
        if self.kind == "converted":
            self.config = XLNetConfig.from_json_file(
                os.path.join(self.directory, run_dir.ARCH_FILE), **runtime)
        else:
            self.foreign = foreign_checkpoint(resolved.kind, self.directory)
            self.config = XLNetConfig.from_architecture(self.foreign.config.to_dict(), **runtime)

    def is_head_directory(self) -> bool:
        return self.kind == "converted" and fileio.exists(
            os.path.join(self.directory, run_dir.TASK_FILE))

    def read_backbone(self, backbone) -> None:
        if self.foreign is not None:
            fill(backbone, self.foreign, _log)
        elif self.is_head_directory():  # a task model's backbone, its head left out
            saving.restore_weights(backbone, saving.task_checkpoint(self.directory))
        else:
            saving.restore_weights(backbone, self.directory)


def foreign_checkpoint(kind: str, directory: str, task: Optional[TaskOptions] = None):
    """A HuggingFace or original release directory read for conversion (conversion/)."""
    if kind == "huggingface":
        return read_foreign("huggingface", directory, task=task)
    return read_foreign("original", os.path.join(directory, ORIGINAL_PREFIX),
                        config_path=os.path.join(directory, run_dir.ARCH_FILE), task=task)


def _built(model):
    model.build()
    return model


def from_pretrained(cls, name_or_dir: str, *, load_weights: bool = True,
                    cache_dir: Optional[str] = None, revision: Optional[str] = None,
                    local_files_only: bool = False, **runtime):
    """`XLNetLMHeadModel.from_pretrained` and `xlnet_tf2.from_pretrained`: a ready model of
    class `cls` (XLNetLMHeadModel) from `name_or_dir`: a directory (ours, HuggingFace's or the
    original release's), a hub repository id or a release name (module docstring).

        model = xlnet_tf2.from_pretrained("path/to/dir", mem_len=384)

    Args:
      load_weights: False builds the architecture of a release name or of a directory's
        xlnet_config.json with fresh weights (nothing is read or downloaded for a name).
      cache_dir, revision, local_files_only: passed to huggingface_hub for repository ids.
      **runtime: run-time settings (mem_len, reuse_len, dropout, dropatt, bi_data, clamp_len,
        attn_type, same_length, initializer_range).
    """
    check_runtime(runtime)
    if not load_weights:
        return _built(cls(_architecture(name_or_dir, runtime)))
    resolved = resolve(name_or_dir, cache_dir=cache_dir, revision=revision,
                       local_files_only=local_files_only)
    if resolved.kind == "converted":
        if fileio.exists(os.path.join(resolved.directory, run_dir.TASK_FILE)):
            task = saving.read_task_settings(resolved.directory).get("task")
            raise ValueError(f"{resolved.directory} is a {task} task directory, not a language "
                             "model: load it with its task class (e.g. "
                             "xlnet_tf2.XLNetClassifier.from_preset).")
        return load_lm_directory(cls, resolved.directory, **runtime)
    foreign = foreign_checkpoint(resolved.kind, resolved.directory)
    model = _built(cls(XLNetConfig.from_architecture(foreign.config.to_dict(), **runtime)))
    fill(model, foreign, _log)
    return model


def load_lm_directory(cls, directory: str, **config_overrides):
    """A model of class `cls` (XLNetLMHeadModel) from one of our LM directories (a converted
    release, a pretraining model_dir); `config_overrides` set run-time fields."""
    config = XLNetConfig.from_json_file(os.path.join(directory, run_dir.ARCH_FILE),
                                        **config_overrides)
    model = cls(config)
    saving.restore_weights(model, directory)
    return model


def load_backbone(cls, name_or_dir: str, *, load_weights: bool = True,
                  cache_dir: Optional[str] = None, revision: Optional[str] = None,
                  local_files_only: bool = False, **runtime):
    """A model of class `cls` (XLNetModel) with the backbone weights of whatever
    `from_pretrained` takes; our task directories too (their head is not read)."""
    check_runtime(runtime)
    if not load_weights:
        return _built(cls(_architecture(name_or_dir, runtime)))
    source = _Source(resolve(name_or_dir, cache_dir=cache_dir, revision=revision,
                             local_files_only=local_files_only), runtime)
    model = _built(cls(source.config))
    source.read_backbone(model)
    return model


def load_head_model(cls, name_or_dir: str, *, load_weights: bool = True,
                    cache_dir: Optional[str] = None, revision: Optional[str] = None,
                    local_files_only: bool = False, **kwargs):
    """A task model of class `cls` (SequenceClassifier, MultipleChoiceModel, SquadModel):
      - our task directory (task.json) of one of `cls.KINDS`, with its head;
      - transformers' directory (or hub id) of the matching XLNetFor... class, with its head;
      - any other model directory, hub id or release name: its backbone with a new head from
        `cls`'s constructor arguments in `kwargs` (num_outputs=..., ...).
    `kwargs` also take run-time settings (dropout=..., ...)."""
    runtime = check_runtime(_split(kwargs, RUNTIME_KEYS))
    if not load_weights:
        return cls(_architecture(name_or_dir, runtime), **kwargs).build_weights()
    resolved = resolve(name_or_dir, cache_dir=cache_dir, revision=revision,
                       local_files_only=local_files_only)

    def build(config, settings):
        if kwargs:
            raise ValueError(f"{resolved.directory} is a task directory: its head is as "
                             f"task.json says; {sorted(kwargs)} apply to a new head only.")
        return cls.from_settings(config, settings)

    if fileio.exists(os.path.join(resolved.directory, run_dir.TASK_FILE)):
        return read_head_directory(build, resolved.directory, cls.KINDS, cls.__name__, runtime)
    task = (huggingface_task(resolved.directory, cls.KINDS)
            if resolved.kind == "huggingface" else None)
    if task is not None:
        foreign = foreign_checkpoint(resolved.kind, resolved.directory, TaskOptions(
            task, num_choices=kwargs.pop("num_choices", 4)))
        model = build(XLNetConfig.from_architecture(foreign.config.to_dict(), **runtime),
                      foreign.settings)
        fill(model, foreign, _log)
        return model
    source = _Source(resolved, runtime)
    model = cls(source.config, **kwargs).build_weights()
    source.read_backbone(model.transformer)
    return model


def read_head_directory(build: Callable, directory: str, kinds=None, reader: str = "",
                        runtime: Optional[dict] = None, which: str = "best",
                        head_model_of: Callable = lambda model: model):
    """The model `build(config, settings)` makes of one of our task directories' xlnet_config.json
    (with `runtime`) and task.json, with the weights of its `which` checkpoint ("best", else
    "latest") read into its task model (`head_model_of(model)`). `kinds`: the tasks `reader`
    (a class name, for the error) loads (None: `build` checks)."""
    settings = saving.read_task_settings(directory)
    if kinds is not None and settings.get("task") not in kinds:
        raise ValueError(f"{directory} holds a {settings.get('task')} model (task.json); "
                         f"{reader} loads {' or '.join(kinds)} models.")
    config = XLNetConfig.from_json_file(os.path.join(directory, run_dir.ARCH_FILE),
                                        **(runtime or {}))
    model = build(config, settings)
    saving.restore_task_weights(head_model_of(model), directory, which)
    return model


def load_preset_model(cls, preset: str, *, seq_len=None, preprocessor="auto",
                      load_weights: bool = True, **kwargs):
    """keras-hub's `from_preset` of a model with a preprocessor (XLNetClassifier, ...):

      - one of our task directories (task.json: a fine-tuning model_dir, a fine-tuned
        checkpoint converted with --task, a `save_to_preset` output) of the class's task: that
        model, head and weights, with a preprocessor laid out as task.json says;
      - a HuggingFace directory or hub repository id whose config.json `architectures` is the
        class's counterpart (XLNetForSequenceClassification, XLNetForMultipleChoice,
        XLNetForQuestionAnswering): converted with its head;
      - any other model preset (release names, hub ids, our LM or pretraining directories,
        HuggingFace XLNetLMHeadModel / XLNetModel directories, the original release): its
        backbone with a new head, built from the constructor's arguments (e.g. num_classes).

    kwargs: the class's constructor arguments; `seq_len` for the preprocessor (task
    directories know theirs; default the task's declared default_seq_len); `preprocessor` to
    use instead of the one built from the preset's spiece.model (None: token dicts only);
    `load_weights=False` for the architecture with fresh weights (release names need nothing
    on disk); run-time settings (dropout, dropatt, ...); cache_dir / revision /
    local_files_only for the hub."""
    runtime = check_runtime(_split(kwargs, RUNTIME_KEYS))
    hub = _split(kwargs, HUB_KEYS)
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
            return read_head_directory(build, resolved.directory, (cls.TASK,), cls.__name__,
                                       runtime, head_model_of=lambda model: model.task_model)
        if resolved.kind == "huggingface" and huggingface_task(resolved.directory,
                                                               (cls.TASK,)):
            foreign = foreign_checkpoint(resolved.kind, resolved.directory, TaskOptions(
                cls.TASK, seq_len=seq_len, num_choices=kwargs.get("num_choices", 4)))
            model = build(XLNetConfig.from_architecture(foreign.config.to_dict(), **runtime),
                          foreign.settings)
            fill(model.task_model, foreign, _log)
            return model
    settings = {"seq_len": seq_len or task_registry.declared(cls.TASK).default_seq_len,
                **kwargs}
    source = _Source(resolved, runtime) if load_weights else None
    config = source.config if load_weights else _architecture(preset, runtime)
    model = cls(config, preprocessor=_preprocessor(cls, preprocessor, spm, settings, preset),
                **kwargs)
    if source is not None:
        source.read_backbone(model.backbone)
    return model


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
