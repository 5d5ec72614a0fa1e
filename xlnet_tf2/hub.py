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
`from_pretrained` takes.
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
from xlnet_tf2.conversion.convert import convert_checkpoint
from xlnet_tf2.conversion.to_huggingface import save_huggingface
from xlnet_tf2.locate import (ORIGINAL_PREFIX, PRETRAINED, PretrainedNotFoundError, detect_kind,
                              resolve)
from xlnet_tf2.models import XLNetLMHeadModel, XLNetModel
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
                    format: str = "xlnet_tf2", label_list=None):
    """Writes `model` into `output_dir`.

    format "xlnet_tf2": our directory (xlnet_config.json, model.ckpt.*, spiece.model), read
      by from_pretrained / load_pretrained / XLNetLMHeadModel.from_preset; for an
      XLNetLMHeadModel or XLNetModel.
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
    raise TypeError(
        f"A {type(model).__name__} in our format is a task directory (task.json + checkpoint), "
        "which fine-tuning runs and experiments/convert_checkpoint.py --task write; wrap it in "
        "a task class (xlnet_tf2.XLNetClassifier, ...) and call save_to_preset, or pass "
        "format='huggingface'.")


def _load_preset(preset: str, runtime: dict):
    """The presets loader of everything but our own directories (models/presets.py)."""
    if tf.io.gfile.isdir(preset) and detect_kind(preset) == "converted":
        return None  # models/saving.py's loader
    return from_pretrained(preset, **runtime)


presets.register_loader(_load_preset)
