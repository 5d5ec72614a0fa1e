"""Loading a pretrained XLNet by directory or name (`from_pretrained`), and writing one in our
format or HuggingFace's (`save_pretrained`).

    model = xlnet_tf2.from_pretrained("path/to/dir", mem_len=384)
    xlnet_tf2.save_pretrained(model, "hf_dir", format="huggingface")

`name_or_dir` may be
  - a directory this project wrote: a converted release (model.ckpt.*), a pretraining or
    fine-tuning model_dir (its latest checkpoint): xlnet_config.json + a checkpoint;
  - a HuggingFace `save_pretrained` directory (config.json + model.safetensors, read without
    torch, or pytorch_model.bin, which needs torch): converted on the fly;
  - an original zihangdai/xlnet release directory (xlnet_model.ckpt.*, xlnet_config.json,
    spiece.model): converted on the fly;
  - a HuggingFace Hub repository id ("owner/name") or one of the release names in
    `PRETRAINED` ("xlnet-base-cased", "xlnet-large-cased"): taken from the local hub cache,
    else downloaded with the `huggingface_hub` package (imported only then; it is not a
    requirement of this library), then converted on the fly. With HF_HUB_OFFLINE=1 only the
    cache is looked at.
The directory holds the architecture only; run-time settings (mem_len, dropout, ...) are
keyword arguments, as for `load_pretrained`.

Release names are also architecture presets: `from_pretrained("xlnet-base-cased",
load_weights=False)` builds that architecture with fresh weights and needs nothing on disk.

Importing this module registers `from_pretrained` as the loader of every preset our own
format does not cover (models/presets.py), so `XLNetLMHeadModel.from_preset` takes what
`from_pretrained` takes, and registers the implementations of HuggingFace's names on the
models (which cannot import this floor): `XLNetLMHeadModel.from_pretrained`,
`XLNetModel.from_pretrained` / `from_preset` (`load_backbone`), a task model's
`from_pretrained` (`load_task_model`) and every model's `save_pretrained` method.

    backbone = XLNetModel.from_pretrained("xlnet-base-cased")
    classifier = SequenceClassifier.from_pretrained("xlnet-base-cased", num_outputs=3)
    classifier.save_pretrained("out", "spiece.model", label_list=["a", "b", "c"])
    classifier = SequenceClassifier.from_pretrained("out")
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from typing import Optional

import tensorflow as tf

from xlnet_tf2 import run_dir
from xlnet_tf2.config import RUNTIME_KEYS, XLNetConfig
from xlnet_tf2.conversion.convert import DEFAULT_SEQ_LEN, TaskOptions, convert_checkpoint
from xlnet_tf2.conversion.readers import read_json
from xlnet_tf2.conversion.to_huggingface import ARCHITECTURES, HF_CONFIG, save_huggingface
from xlnet_tf2.locate import (ORIGINAL_PREFIX, PRETRAINED, PretrainedNotFoundError, detect_kind,
                              resolve)
from xlnet_tf2.models import (MultipleChoiceModel, SequenceClassifier, SquadModel, TaskModel,
                              XLNetLMHeadModel, XLNetModel)
from xlnet_tf2.models import presets, saving

FORMATS = ("xlnet_tf2", "huggingface")


def pretrained_config(name: str, **runtime) -> XLNetConfig:
    """The architecture of a release name ("xlnet-base-cased", "xlnet-large-cased") with
    run-time settings."""
    if name not in PRETRAINED:
        raise PretrainedNotFoundError(f"Unknown release name {name!r}; known: "
                                      f"{sorted(PRETRAINED)}.")
    return XLNetConfig.preset(PRETRAINED[name].preset, **_check_runtime(runtime))


def _check_runtime(runtime: dict) -> dict:
    architecture = sorted(k for k in runtime if k not in RUNTIME_KEYS)
    if architecture:
        raise ValueError(f"from_pretrained takes run-time settings only ({', '.join(RUNTIME_KEYS)}); "
                         f"{architecture} come from the model directory.")
    return runtime


def from_pretrained(name_or_dir: str, *, load_weights: bool = True,
                    cache_dir: Optional[str] = None, revision: Optional[str] = None,
                    local_files_only: bool = False, **runtime):
    """A ready `XLNetLMHeadModel` (see the module docstring for what `name_or_dir` may be).

    Args:
      load_weights: False builds the architecture of a release name or of a directory's
        xlnet_config.json with fresh weights (nothing is read or downloaded for a name).
      cache_dir, revision, local_files_only: passed to huggingface_hub for repository ids.
      **runtime: run-time settings (mem_len, reuse_len, dropout, dropatt, bi_data, clamp_len,
        attn_type, same_length, initializer_range).
    """
    _check_runtime(runtime)
    if not load_weights:
        if name_or_dir in PRETRAINED and not tf.io.gfile.isdir(name_or_dir):
            config = pretrained_config(name_or_dir, **runtime)
        else:
            path = os.path.join(name_or_dir, run_dir.ARCH_FILE)
            if not tf.io.gfile.exists(path):
                raise PretrainedNotFoundError(
                    f"load_weights=False needs a release name ({', '.join(sorted(PRETRAINED))}) "
                    f"or a directory with {run_dir.ARCH_FILE}; {path} does not exist.")
            config = XLNetConfig.from_json_file(path, **runtime)
        model = XLNetLMHeadModel(config)
        model.build()
        return model
    resolved = resolve(name_or_dir, cache_dir=cache_dir, revision=revision,
                       local_files_only=local_files_only)
    if resolved.kind == "converted":
        return saving.load_pretrained(resolved.directory, **runtime)
    directory = resolved.directory
    spm = os.path.join(directory, run_dir.SPM_FILE)
    spm = spm if tf.io.gfile.exists(spm) else None
    scratch = tempfile.mkdtemp(prefix="xlnet_tf2_convert_")
    try:
        if resolved.kind == "huggingface":
            convert_checkpoint("huggingface", directory, scratch, spm_model=spm,
                               log=logging.getLogger(__name__).info)
        else:
            convert_checkpoint("original", os.path.join(directory, ORIGINAL_PREFIX), scratch,
                               config_path=os.path.join(directory, run_dir.ARCH_FILE),
                               spm_model=spm, log=logging.getLogger(__name__).info)
        return saving.load_pretrained(scratch, **runtime)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def save_pretrained(model, output_dir: str, spm_model: Optional[str] = None, *,
                    format: str = "xlnet_tf2", label_list=None, seq_len: Optional[int] = None):
    """Writes `model` into `output_dir`.

    format "xlnet_tf2": for an XLNetLMHeadModel or XLNetModel, our directory
      (xlnet_config.json, model.ckpt.*, spiece.model), read by from_pretrained /
      load_pretrained / XLNetLMHeadModel.from_preset / XLNetModel.from_pretrained; for a task
      model (SequenceClassifier, MultipleChoiceModel, SquadModel), our task directory
      (task.json, ckpt-0, xlnet_config.json, spiece.model), read by its class's
      from_pretrained and by the keras-hub-style task classes' from_preset. task.json's
      seq_len is `seq_len` (default: the original's for the task), its label_list
      `label_list` (default "0".."n-1").
    format "huggingface": config.json + model.safetensors (+ spiece.model) that transformers'
      XLNetLMHeadModel / XLNetModel / XLNetForSequenceClassification / XLNetForMultipleChoice /
      XLNetForQuestionAnswering `.from_pretrained` load (conversion/to_huggingface.py), for
      those and our task models (label_list: classification label names, HF's id2label).
    A keras-hub-style task (XLNetClassifier, ...) writes itself (its `save_to_preset`), its
    SentencePiece model and task settings included.
    """
    if format not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, got {format!r}.")
    if hasattr(model, "save_to_preset"):
        return model.save_to_preset(output_dir, format=format)
    if format == "huggingface":
        return save_huggingface(model, output_dir, spm_model, label_list)
    if isinstance(model, (XLNetLMHeadModel, XLNetModel)):
        return saving.save_pretrained(model, output_dir, spm_model)
    if isinstance(model, TaskModel):
        return saving.save_task_directory(model, output_dir,
                                          task_settings(model, label_list, seq_len), spm_model)
    raise TypeError(f"save_pretrained writes XLNet models (XLNetLMHeadModel, XLNetModel, task "
                    f"models, keras-hub-style tasks), not a {type(model).__name__}.")


def task_settings(model, label_list=None, seq_len: Optional[int] = None) -> dict:
    """task.json of a bare task model (saving.py's task directory format)."""
    task = saving.task_of(model)
    settings = {"task": task, "seq_len": seq_len or DEFAULT_SEQ_LEN[task],
                "layout": "cls_last"}
    if isinstance(model, SequenceClassifier):
        settings.update(summary_type=model.summary_type, paired=False)
        if task == "classification":
            labels = ([str(i) for i in range(model.num_outputs)] if label_list is None
                      else [str(label) for label in label_list])
            if len(labels) != model.num_outputs:
                raise ValueError(f"label_list names {len(labels)} labels; the model has "
                                 f"{model.num_outputs} outputs.")
            settings["label_list"] = labels
    elif isinstance(model, MultipleChoiceModel):
        settings.update(summary_type=model.summary_type, num_choices=model.num_choices)
    elif model.start_n_top != model.end_n_top:
        raise ValueError(f"start_n_top={model.start_n_top} and end_n_top={model.end_n_top} "
                         "differ; task.json keeps one beam width (n_best_size) for both.")
    else:
        settings["n_best_size"] = model.start_n_top
    return settings


def load_backbone(name_or_dir: str, *, load_weights: bool = True, **kwargs) -> XLNetModel:
    """An `XLNetModel` with the backbone weights of whatever `from_pretrained` takes; our
    task directories too (their head is not read)."""
    if load_weights and tf.io.gfile.isdir(name_or_dir) and detect_kind(name_or_dir) == \
            "converted":
        runtime = _check_runtime({k: v for k, v in kwargs.items()
                                  if k not in ("cache_dir", "revision", "local_files_only")})
        config = XLNetConfig.from_json_file(os.path.join(name_or_dir, run_dir.ARCH_FILE),
                                            **runtime)
        model = XLNetModel(config)
        if tf.io.gfile.exists(os.path.join(name_or_dir, run_dir.TASK_FILE)):
            saving.restore_weights(model, saving.task_checkpoint(name_or_dir))
        else:
            saving.restore_weights(model, name_or_dir)
        return model
    return from_pretrained(name_or_dir, load_weights=load_weights, **kwargs).transformer


_TASK_CLASSES = ((SquadModel, ("squad",)), (MultipleChoiceModel, ("race",)),
                 (SequenceClassifier, ("classification", "regression")))


def _tasks_of(cls) -> tuple:
    for task_class, tasks in _TASK_CLASSES:
        if issubclass(cls, task_class):
            return tasks
    raise TypeError(f"{cls.__name__} is not a task model class (SequenceClassifier, "
                    "MultipleChoiceModel or SquadModel).")


def _huggingface_task(directory: str, tasks: tuple) -> Optional[str]:
    """Which of `tasks` a HuggingFace directory's config.json says it holds (None: none)."""
    config = read_json(os.path.join(directory, HF_CONFIG))
    if ARCHITECTURES[tasks[0]] not in (config.get("architectures") or []):
        return None
    if "regression" in tasks and (config.get("problem_type") == "regression" or
                                  len(config.get("id2label") or {0: 0, 1: 1}) == 1):
        return "regression"
    return tasks[0]


def load_task_model(cls, name_or_dir: str, *, load_weights: bool = True,
                    cache_dir: Optional[str] = None, revision: Optional[str] = None,
                    local_files_only: bool = False, **kwargs):
    """A task model of class `cls` (TaskModel.from_pretrained's docstring); `kwargs` are
    run-time settings and, for a new head, `cls`'s constructor arguments."""
    runtime = {k: kwargs.pop(k) for k in list(kwargs) if k in RUNTIME_KEYS}
    tasks = _tasks_of(cls)
    hub = dict(cache_dir=cache_dir, revision=revision, local_files_only=local_files_only)
    resolved = None
    if load_weights:
        resolved = resolve(name_or_dir, **hub)
    directory = None if resolved is None else resolved.directory
    if directory is not None and tf.io.gfile.exists(os.path.join(directory, run_dir.TASK_FILE)):
        return _task_directory_model(cls, tasks, directory, runtime, kwargs)
    task = None
    if resolved is not None and resolved.kind == "huggingface":
        task = _huggingface_task(directory, tasks)
    if task is not None:
        scratch = tempfile.mkdtemp(prefix="xlnet_tf2_task_")
        try:
            options = TaskOptions(task, num_choices=kwargs.pop("num_choices", 4))
            convert_checkpoint("huggingface", directory, scratch, task=options,
                               log=logging.getLogger(__name__).info)
            return _task_directory_model(cls, tasks, scratch, runtime, kwargs)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    lm = from_pretrained(name_or_dir, load_weights=load_weights, **hub, **runtime)
    model = cls(lm.config, **kwargs)
    # A short dummy batch builds the weights (SQuAD's beam needs n_top positions).
    model(model.dummy_inputs(max(8, getattr(model, "start_n_top", 0),
                                 getattr(model, "end_n_top", 0))), training=False)
    model.transformer.set_weights(lm.transformer.get_weights())
    return model


def _task_directory_model(cls, tasks, directory, runtime, kwargs):
    settings = saving.read_task_settings(directory)
    if settings.get("task") not in tasks:
        raise ValueError(f"{directory} holds a {settings.get('task')} model (task.json); "
                         f"{cls.__name__}.from_pretrained loads {' or '.join(tasks)} models.")
    if kwargs:
        raise ValueError(f"{directory} is a task directory: its head is as task.json says; "
                         f"{sorted(kwargs)} apply to a new head only.")
    model, _ = saving.load_task_directory(directory, **runtime)
    return model


def _load_preset(preset: str, runtime: dict):
    """The presets loader of everything but our own directories (models/presets.py)."""
    if tf.io.gfile.isdir(preset) and detect_kind(preset) == "converted":
        return None  # models/saving.py's loader
    return from_pretrained(preset, **runtime)


presets.register_loader(_load_preset)
presets.register_hub_functions(load_lm=from_pretrained, load_backbone=load_backbone,
                               load_task_model=load_task_model, save_pretrained=save_pretrained)
