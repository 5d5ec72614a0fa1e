"""Converting a checkpoint into a directory (`xlnet-convert`): the model class comes from
what --kind (or a directory's task.json) says, through its task's declaration
(HeadModel.from_settings, HeadModel.from_pretrained; models/pretrained.py is the one loader).

  source original / huggingface, target xlnet_tf2: a pretrained model -> our LM directory
    (saving.py); with `head`, a fine-tuned one -> a task directory, head included
    (task.json + ckpt-0), which fine-tuning's evaluation and export read as a model_dir.
  source xlnet_tf2 (our LM, pretraining or task directory), target huggingface: the
    HuggingFace layout (conversion/to_huggingface.py). original/huggingface -> huggingface
    goes through our format.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import tempfile
from typing import Optional

from xlnet_tf2 import fileio, run_dir
from xlnet_tf2.config_flags import RunConfigError
from xlnet_tf2.conversion.convert import HeadOptions, fill, read_foreign
from xlnet_tf2.conversion.convert_config import SOURCES, TARGETS
from xlnet_tf2.conversion.to_huggingface import ARCHITECTURES, save_huggingface
from xlnet_tf2.models import saving
from xlnet_tf2.models.head_model import HeadModel
from xlnet_tf2.models.lm_head_model import XLNetLMHeadModel


# Files that make a directory a training run or prepared data: conversion never writes there.
_RUN_FILES = (run_dir.RUN_CONFIG_FILE, "attempts.jsonl", "record_info.json",
              run_dir.BEST_EVAL_FILE)


def check_output_dir(output_dir: str, overwrite: bool) -> None:
    """Refuses an --output_dir that holds a training run or prepared data (always) or
    anything else (unless `overwrite`: then the directory is replaced whole on success)."""
    if not fileio.exists(output_dir):
        return
    if not fileio.isdir(output_dir):
        raise RunConfigError(f"--output_dir={output_dir!r} is a file; pass a directory.")
    names = sorted(n.rstrip("/") for n in fileio.listdir(output_dir))
    run = [n for n in names if n in _RUN_FILES or (n.startswith("ckpt-") and
                                                   n.endswith(".index") and n != "ckpt-0.index")]
    if run:
        raise RunConfigError(
            f"--output_dir={output_dir!r} holds a training run or prepared data ({run[0]}); "
            "conversion never writes into one. Choose a new --output_dir.")
    if names and not overwrite:
        raise RunConfigError(
            f"--output_dir={output_dir!r} is not empty ({', '.join(names[:3])}"
            f"{', ...' if len(names) > 3 else ''}); pass --overwrite to replace it, or choose "
            "a new directory.")


def convert_checkpoint(source: str, checkpoint: str, output_dir: str,
                       config_path: Optional[str] = None, spm_model: Optional[str] = None,
                       log=logging.info, head: Optional[HeadOptions] = None,
                       target: str = "xlnet_tf2", overwrite: bool = False) -> dict:
    """Converts and writes `output_dir` whole (built under a staging name beside it, then
    swapped in: a failed or killed conversion leaves an existing directory as it was); returns
    the report of conversion.convert.fill (and "written", "architecture" for
    target huggingface). `output_dir` must be new or empty, or `overwrite` set; one that
    holds a training run or prepared data is always refused (check_output_dir).

    source "original": `checkpoint` is the TF1 prefix, `config_path` its xlnet_config.json
    (default: beside the checkpoint). source "huggingface": `checkpoint` is a save_pretrained
    directory. source "xlnet_tf2" (target huggingface only): one of our directories. With
    `head` (what the head is), it converts too, into a task directory."""
    if target not in TARGETS:
        raise ValueError(f"--target must be one of {TARGETS}, got {target!r}.")
    if source not in SOURCES:
        raise ValueError(f"--source must be one of {SOURCES}, got {source!r}.")
    check_output_dir(output_dir, overwrite)
    for leftover in fileio.leftovers(output_dir):
        print(f"[convert] found {leftover}, an incomplete conversion left by a killed run; "
              "removing it.", file=sys.stderr, flush=True)
        fileio.rmtree(leftover)
    staging = fileio.staging_directory(output_dir)
    try:
        report = _convert(source, checkpoint, staging, config_path, spm_model, log, head,
                          target)
        fileio.replace_directory(staging, output_dir)
    except BaseException as e:
        fileio.rmtree(staging)
        raise fileio.output_error(e, output_dir) or e
    log(f"wrote {output_dir}")
    return report


def _convert(source: str, checkpoint: str, output_dir: str, config_path: Optional[str],
             spm_model: Optional[str], log, head: Optional[HeadOptions], target: str) -> dict:
    """Converts and writes into the empty `output_dir` (convert_checkpoint)."""
    if target == "huggingface":
        return _to_huggingface(source, checkpoint, output_dir, config_path, spm_model, log, head)
    if source == "xlnet_tf2":
        raise ValueError("--source=xlnet_tf2 converts to --target=huggingface only.")
    foreign = read_foreign(source, checkpoint, config_path, head)
    if foreign.settings is None:
        model = XLNetLMHeadModel(foreign.config)
        model.build()
    else:
        model = HeadModel.from_settings(foreign.config, foreign.settings)
    report = fill(model, foreign, log)
    if foreign.settings is None:
        saving.save_pretrained(model, output_dir, spm_model)
    else:
        saving.save_task_directory(model, output_dir, foreign.settings, spm_model)
    return report


def _to_huggingface(source, checkpoint, output_dir, config_path, spm_model, log, head) -> dict:
    """Our directory (or, through a scratch copy in our format, a foreign one) -> HF layout."""
    if source != "xlnet_tf2":
        scratch = tempfile.mkdtemp(prefix="xlnet_tf2_convert_")
        try:
            report = _convert(source, checkpoint, scratch, config_path, spm_model, log, head,
                              "xlnet_tf2")
            report.update(_to_huggingface("xlnet_tf2", scratch, output_dir, None, None, log,
                                          None))
            return report
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    if head is not None:
        raise ValueError("--kind is read from the directory's task.json for "
                         "--source=xlnet_tf2; do not pass it.")
    label_list = None
    if os.path.exists(os.path.join(checkpoint, run_dir.TASK_FILE)):
        model = HeadModel.from_pretrained(checkpoint)
        label_list = saving.read_task_settings(checkpoint).get("label_list")
    else:
        model = XLNetLMHeadModel.from_pretrained(checkpoint)
    spm = spm_model or os.path.join(checkpoint, run_dir.SPM_FILE)
    written = save_huggingface(model, output_dir, spm if os.path.exists(spm) else None,
                               label_list)
    log(f"wrote {', '.join(written)}")
    return {"written": written, "architecture": ARCHITECTURES[model.kind]}
