"""Converts checkpoints between the original TF1 release, HuggingFace and our format.

  source original / huggingface, target xlnet_tf2: a pretrained model -> our LM directory
    (models/saving.py); with `task`, a fine-tuned one -> a task directory, head included
    (task.json + ckpt-0), which fine-tuning's evaluation and export read as a model_dir.
  source xlnet_tf2 (our LM, pretraining or task directory), target huggingface: the
    HuggingFace layout (to_huggingface.py). original/huggingface -> huggingface goes through
    our format.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import shutil
import sys
import tempfile
from typing import List, Optional

from xlnet_tf2 import fileio, run_dir
from xlnet_tf2.config_flags import RunConfigError
from xlnet_tf2.config import ConfigError, XLNetConfig
from xlnet_tf2.conversion import head_maps
from xlnet_tf2.conversion.convert_config import DEFAULT_SEQ_LEN, SOURCES, TARGETS
from xlnet_tf2.conversion.readers import (CheckpointReadError, read_huggingface_directory,
                                          read_json, read_original_checkpoint)
from xlnet_tf2.conversion.to_huggingface import ARCHITECTURES, model_kind, save_huggingface
from xlnet_tf2.conversion.weight_maps import (WeightMismatchError, assign_weights, extra_layers,
                                              huggingface_backbone_map, huggingface_weight_map,
                                              original_backbone_map, original_weight_map)
from xlnet_tf2.models import XLNetLMHeadModel
from xlnet_tf2.models import saving

# Why a tensor a fine-tuned checkpoint lacks does not matter, for the report.
_OPTIONAL_REASON = {
    "mask_emb": "the query stream's mask embedding, used only by pretraining",
    "lm_loss": "the LM output bias, used only by pretraining and generation",
}
_LAYER_PATTERNS = {"original": r"model/transformer/layer_(\d+)/",
                   "huggingface": r"transformer\.layer\.(\d+)\."}


@dataclasses.dataclass(frozen=True)
class TaskOptions:
    """What a fine-tuned checkpoint's head is and how its inputs were laid out (task.json).

    task: one of saving.TASKS. seq_len: default DEFAULT_SEQ_LEN[task]. label_list:
    classification label names in id order (default: the HuggingFace config's id2label, else
    "0".."n-1"). summary_type: the original's --summary_type (HuggingFace configs say theirs).
    cls_scope: the original's classification_<scope> / regression_<scope> (default: the only
    one in the checkpoint). paired: classification/regression inputs are text pairs.
    num_choices: RACE options per question."""
    task: str
    seq_len: Optional[int] = None
    label_list: Optional[List[str]] = None
    summary_type: Optional[str] = None
    cls_scope: Optional[str] = None
    paired: bool = False
    num_choices: int = 4

    def __post_init__(self):
        if self.task not in saving.TASKS:
            raise ValueError(f"--task must be one of {saving.TASKS}, got {self.task!r}.")


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
                       log=logging.info, task: Optional[TaskOptions] = None,
                       target: str = "xlnet_tf2", overwrite: bool = False) -> dict:
    """Converts and writes `output_dir` whole (built under a staging name beside it, then
    swapped in: a failed or killed conversion leaves an existing directory as it was); returns
    the report of `_convert`. `output_dir` must be new or empty, or `overwrite` set; one that
    holds a training run or prepared data is always refused (check_output_dir)."""
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
        report = _convert(source, checkpoint, staging, config_path, spm_model, log, task,
                          target)
        fileio.replace_directory(staging, output_dir)
    except BaseException as e:
        fileio.rmtree(staging)
        raise fileio.output_error(e, output_dir) or e
    log(f"wrote {output_dir}")
    return report


def _convert(source: str, checkpoint: str, output_dir: str, config_path: Optional[str],
             spm_model: Optional[str], log, task: Optional[TaskOptions], target: str) -> dict:
    """Converts and writes into the empty `output_dir`; returns a report {"converted", "skipped", "unused", "initialized",
    "runtime_settings", "notes"} (and "task" settings for a task conversion).

    source "original": `checkpoint` is the TF1 prefix, `config_path` its xlnet_config.json
    (default: beside the checkpoint). source "huggingface": `checkpoint` is a save_pretrained
    directory (config.json inside; `config_path` is ignored). source "xlnet_tf2" (target
    huggingface only): one of our directories.

    Without `task`, fine-tuned checkpoints convert their backbone: mask_emb and the LM bias
    (pretraining only), when absent, keep their initial values and are listed in
    "initialized"; task-head tensors are listed in "unused". With `task`, the head converts
    too (head_maps.py names them) into a task directory. Run-time settings of a HuggingFace
    config (mem_len, reuse_len, bi_data, ...) are not part of the converted architecture:
    they are returned in "runtime_settings" and logged, to be passed when loading.
    """
    if target == "huggingface":
        return _to_huggingface(source, checkpoint, output_dir, config_path, spm_model, log, task)
    if source == "xlnet_tf2":
        raise ValueError("--source=xlnet_tf2 converts to --target=huggingface only.")
    runtime, hf_config, notes, skipped = {}, None, [], []
    if source == "original":
        config_file = config_path or os.path.join(os.path.dirname(checkpoint), run_dir.ARCH_FILE)
        config_values, tensors, skipped = read_original_checkpoint(checkpoint, config_path)
    else:
        config_file = os.path.join(checkpoint, "config.json")
        config_values, runtime, tensors, notes = read_huggingface_directory(checkpoint)
        hf_config = read_json(config_file)
    try:
        config = XLNetConfig.from_architecture(config_values)
    except ConfigError as e:
        raise ConfigError(f"{config_file}: {e}") from None
    extra = extra_layers(sorted(tensors), _LAYER_PATTERNS[source], config.n_layer)
    if extra:
        raise WeightMismatchError(
            f"{source} checkpoint {checkpoint} has layers up to {extra[-1]} but the config says "
            f"n_layer={config.n_layer}; converting would silently drop layers "
            f"{config.n_layer}..{extra[-1]}. Use the checkpoint's own config.")
    settings = None
    if task is None:
        model = XLNetLMHeadModel(config)
        model.build()
        lm_map = original_weight_map if source == "original" else huggingface_weight_map
        weight_map = lm_map(model)
    else:
        settings, scope = _task_settings(source, task, tensors, hf_config, checkpoint)
        model = saving.build_task_model(config, settings)
        if source == "original":
            weight_map = (original_backbone_map(model.transformer)
                          + head_maps.original_head_map(model, scope))
        else:
            weight_map = (huggingface_backbone_map(model.transformer)
                          + head_maps.huggingface_head_map(model))
    assigned = assign_weights(weight_map, tensors, f"{source} checkpoint {checkpoint}")
    unused, initialized = assigned.unused, assigned.initialized
    for name in initialized:
        reason = next((r for key, r in _OPTIONAL_REASON.items() if key in name), "")
        notes.append(f"{name} is not in the checkpoint (a fine-tuned or bare backbone?): "
                     f"{reason}; it keeps its initial value.")
    if runtime:
        notes.append("the HuggingFace config's run-time settings are not part of the converted "
                     f"architecture: {runtime}; pass them when loading, e.g. "
                     "xlnet_tf2.load_pretrained(dir, mem_len=...).")
    if source == "huggingface":
        # lm_loss.weight is the tied embedding; per-layer copies of tied biases are redundant.
        unused = [n for n in unused if n != "lm_loss.weight"]
        if not config.untie_r:
            _check_tied_copies(tensors, config, unused)
            unused = [n for n in unused if not _is_bias_copy(n)]
    for name in unused:
        log(f"not converted (a task head or another model's tensor): {name}")
    for note in notes:
        log(note)
    if settings is None:
        saving.save_pretrained(model, output_dir, spm_model)
    else:
        saving.save_task_directory(model, output_dir, settings, spm_model)
    log(f"converted {len(weight_map)} tensors")
    report = {"converted": len(weight_map) - len(initialized), "skipped": skipped,
              "unused": unused, "initialized": initialized, "runtime_settings": runtime,
              "notes": notes}
    if settings is not None:
        report["task"] = settings
    return report


def _to_huggingface(source, checkpoint, output_dir, config_path, spm_model, log, task) -> dict:
    """Our directory (or, through a scratch copy in our format, a foreign one) -> HF layout."""
    if source != "xlnet_tf2":
        scratch = tempfile.mkdtemp(prefix="xlnet_tf2_convert_")
        try:
            report = _convert(source, checkpoint, scratch, config_path, spm_model, log, task,
                              "xlnet_tf2")
            report.update(_to_huggingface("xlnet_tf2", scratch, output_dir, None, None, log,
                                          None))
            return report
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    if task is not None:
        raise ValueError("--task is read from the directory's task.json for "
                         "--source=xlnet_tf2; do not pass it.")
    label_list = None
    if os.path.exists(os.path.join(checkpoint, run_dir.TASK_FILE)):
        model, settings = saving.load_task_directory(checkpoint)
        label_list = settings.get("label_list")
    else:
        model = saving.load_pretrained(checkpoint)
    spm = spm_model or os.path.join(checkpoint, run_dir.SPM_FILE)
    written = save_huggingface(model, output_dir, spm if os.path.exists(spm) else None,
                               label_list)
    log(f"wrote {', '.join(written)}")
    return {"written": written, "architecture": ARCHITECTURES[model_kind(model)]}


def _task_settings(source, task: TaskOptions, tensors, hf_config, checkpoint):
    """(task.json settings, original classification/regression scope) of a fine-tuned
    checkpoint; checks what the checkpoint says against what was asked."""
    settings = {"task": task.task, "seq_len": task.seq_len or DEFAULT_SEQ_LEN[task.task],
                "layout": "cls_last"}
    scope = None
    where = f"{source} checkpoint {checkpoint}"
    if source == "huggingface":
        expected = ARCHITECTURES[task.task]
        found = hf_config.get("architectures") or []
        if found and expected not in found:
            raise WeightMismatchError(f"{where} is a {found} (config.json architectures); "
                                      f"--task={task.task} needs a {expected}.")
        summary_type = hf_config.get("summary_type", "last")
        # Without a cls_index input (sequence classification passes none) "cls_index" is
        # the last token.
        summary_type = "last" if summary_type == "cls_index" else summary_type
        if task.summary_type and task.summary_type != summary_type:
            raise WeightMismatchError(f"{where}: config.json says summary_type "
                                      f"{summary_type!r}, --summary_type={task.summary_type}.")
        if task.task != "squad" and (not hf_config.get("summary_use_proj", True) or
                                     hf_config.get("summary_activation") != "tanh"):
            raise WeightMismatchError(
                f"{where}: its summary (summary_use_proj={hf_config.get('summary_use_proj')}, "
                f"summary_activation={hf_config.get('summary_activation')!r}) is not the "
                "original's dense + tanh, which our heads compute.")
        outputs_name, axis = "logits_proj.weight", 0
    else:
        summary_type = task.summary_type or "last"
        if task.task != "squad" and head_maps.original_summary_is_attention(tensors):
            summary_type = "attn"  # rejected below with the reason
        scope = head_maps.original_scope(sorted(tensors), task.task, task.cls_scope, checkpoint)
        outputs_name, axis = f"model/{task.task}_{scope}/logit/kernel", 1
    if task.task != "squad":
        head_maps.check_summary_maps(summary_type, where)
        settings["summary_type"] = summary_type
    if task.task in ("classification", "regression"):
        settings["paired"] = task.paired
        n = head_maps.output_count(tensors, outputs_name, axis)
        if task.task == "regression" and n != 1:
            raise WeightMismatchError(f"{where}: the head has {n} outputs; a regression head "
                                      "has 1 (use --task=classification).")
        if task.task == "classification":
            if n < 2:
                raise WeightMismatchError(f"{where}: the head has 1 output; convert it with "
                                          "--task=regression.")
            settings["label_list"] = _label_list(task.label_list, hf_config, n, where)
    elif task.task == "race":
        settings["num_choices"] = task.num_choices
    else:
        n_top = 5  # the original's --start_n_top / --end_n_top defaults
        if hf_config is not None:
            n_top = hf_config.get("start_n_top", 5)
            if hf_config.get("end_n_top", 5) != n_top:
                raise WeightMismatchError(
                    f"{where}: start_n_top={n_top} and end_n_top={hf_config.get('end_n_top')} "
                    "differ; task.json keeps one beam width (n_best_size) for both.")
        settings["n_best_size"] = n_top
    return settings, scope


def _label_list(given, hf_config, n, where):
    if given:
        labels = list(given)
    elif hf_config and hf_config.get("id2label"):
        id2label = hf_config["id2label"]
        labels = [id2label[k] for k in sorted(id2label, key=int)]
    else:
        labels = [str(i) for i in range(n)]
    if len(labels) != n:
        raise WeightMismatchError(f"{where}: the head has {n} outputs but the label list "
                                  f"{labels} has {len(labels)}.")
    return labels


def _is_bias_copy(name: str) -> bool:
    return name.startswith("transformer.layer.") and name.rsplit(".", 1)[-1] in (
        "r_w_bias", "r_r_bias", "r_s_bias")


def _check_tied_copies(tensors, config, unused):
    import numpy as np

    for name in unused:
        if _is_bias_copy(name):
            parts = name.split(".")  # transformer.layer.{i}.rel_attn.{bias}
            parts[2] = "0"
            first = ".".join(parts)
            if not np.array_equal(tensors[name], tensors[first]):
                raise ValueError(f"untie_r is false but {name} differs from {first}; the "
                                 "checkpoint really has per-layer biases: set untie_r true.")


def describe_report(report: dict, output_dir: str) -> str:
    """What experiments/convert_checkpoint.py prints about a conversion's report."""
    lines = []
    if "converted" in report:
        head = f" with the {report['task']['task']} head" if "task" in report else ""
        lines.append(
            f"Converted {report['converted']} tensors{head}; skipped {len(report['skipped'])} "
            f"optimizer/step variables; {len(report['unused'])} tensors not converted "
            f"(another head's, or a head without --task); {len(report['initialized'])} "
            "pretraining-only tensors absent (left initialized).")
        lines += [f"note: {note}" for note in report["notes"]]
    if "architecture" in report:
        lines.append(f"Wrote a HuggingFace {report['architecture']} to {output_dir}.")
    else:
        lines.append(f"Wrote {output_dir}.")
    return "\n".join(lines)


__all__ = ["CheckpointReadError", "DEFAULT_SEQ_LEN", "SOURCES", "TARGETS", "TaskOptions",
           "convert_checkpoint", "describe_report"]
