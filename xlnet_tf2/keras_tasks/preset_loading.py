"""What `from_preset(preset, **kwargs)` of a keras-hub-style task (XLNetClassifier, ...) reads.

  - one of our task directories (task.json: a fine-tuning model_dir, a fine-tuned checkpoint
    converted with --task, a `save_to_preset` output) of the class's task: that model, head
    and weights, with a preprocessor laid out as task.json says;
  - a HuggingFace directory or hub repository id whose config.json `architectures` is the
    class's counterpart (XLNetForSequenceClassification, XLNetForMultipleChoice,
    XLNetForQuestionAnswering): converted with its head (conversion/convert.py);
  - any other model preset (the release names of `presets`, hub ids, our LM or pretraining
    directories, HuggingFace XLNetLMHeadModel / XLNetModel directories, the original
    release): its backbone with a new head, built from the constructor's arguments
    (e.g. num_classes).

kwargs: the class's constructor arguments; `seq_len` for the preprocessor (task directories
know theirs; default conversion.DEFAULT_SEQ_LEN of the task); `preprocessor` to use instead of
the one built from the preset's spiece.model (None: token dicts only); `load_weights=False`
for the architecture with fresh weights (release names need nothing on disk); run-time
settings (dropout, dropatt, ...); cache_dir / revision / local_files_only for the hub.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile

from xlnet_tf2 import run_dir
from xlnet_tf2.config import RUNTIME_KEYS, XLNetConfig
from xlnet_tf2.conversion.convert import DEFAULT_SEQ_LEN, TaskOptions, convert_checkpoint
from xlnet_tf2.conversion.readers import read_json
from xlnet_tf2.conversion.to_huggingface import ARCHITECTURES, HF_CONFIG
from xlnet_tf2.hub import from_pretrained
from xlnet_tf2.locate import PRETRAINED, resolve
from xlnet_tf2.models import saving

_HUB_KEYS = ("cache_dir", "revision", "local_files_only")


def load_task_preset(cls, preset: str, *, seq_len=None, preprocessor="auto",
                     load_weights: bool = True, **kwargs):
    runtime = {k: kwargs.pop(k) for k in list(kwargs) if k in RUNTIME_KEYS}
    hub = {k: kwargs.pop(k) for k in list(kwargs) if k in _HUB_KEYS}
    resolved = None
    if load_weights or preset not in PRETRAINED or os.path.isdir(preset):
        resolved = resolve(preset, **hub)
    if resolved is not None and load_weights:
        spm = os.path.join(resolved.directory, run_dir.SPM_FILE)
        spm = spm if os.path.exists(spm) else None
        if os.path.exists(os.path.join(resolved.directory, run_dir.TASK_FILE)):
            return _from_task_directory(cls, resolved.directory, spm, seq_len, preprocessor,
                                        runtime, kwargs)
        if resolved.kind == "huggingface" and _is_hf_task(resolved.directory, cls.TASK):
            scratch = tempfile.mkdtemp(prefix="xlnet_tf2_preset_")
            try:
                options = TaskOptions(cls.TASK, seq_len=seq_len,
                                      num_choices=kwargs.get("num_choices", 4))
                convert_checkpoint("huggingface", resolved.directory, scratch, task=options,
                                   log=logging.getLogger(__name__).info)
                return _from_task_directory(cls, scratch, spm, seq_len, preprocessor, runtime,
                                            kwargs)
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
    lm = from_pretrained(preset, load_weights=load_weights, **hub, **runtime)
    settings = {"seq_len": seq_len or DEFAULT_SEQ_LEN[cls.TASK], **kwargs}
    spm = None if resolved is None else os.path.join(resolved.directory, run_dir.SPM_FILE)
    task = cls(lm.config, preprocessor=_preprocessor(cls, preprocessor, spm, settings, preset),
               **kwargs)
    task.backbone.set_weights(lm.transformer.get_weights())
    return task


def _is_hf_task(directory: str, task: str) -> bool:
    return ARCHITECTURES[task] in (read_json(os.path.join(directory, HF_CONFIG))
                                   .get("architectures") or [])


def _from_task_directory(cls, directory, spm, seq_len, preprocessor, runtime, kwargs):
    settings = saving.read_task_settings(directory)
    if settings.get("task") != cls.TASK:
        raise ValueError(f"{directory} holds a {settings.get('task')} model (task.json); "
                         f"{cls.__name__} loads {cls.TASK} models.")
    if seq_len is not None and seq_len != settings.get("seq_len"):
        settings = {**settings, "seq_len": seq_len}
    config = XLNetConfig.from_json_file(os.path.join(directory, run_dir.ARCH_FILE), **runtime)
    task = cls.from_task_settings(config, settings,
                                  _preprocessor(cls, preprocessor, spm, settings, directory),
                                  **kwargs)
    saving.restore_task_weights(task.task_model, directory)
    return task


def _preprocessor(cls, preprocessor, spm, settings, preset):
    if preprocessor != "auto":
        return preprocessor
    if spm is None or not os.path.exists(spm):
        logging.getLogger(__name__).warning(
            "%s has no %s: %s takes token dicts only (pass preprocessor=... for raw strings).",
            preset, run_dir.SPM_FILE, cls.__name__)
        return None
    return cls.make_preprocessor(spm, settings)
