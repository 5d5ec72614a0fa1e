"""Reading a released checkpoint into one of our models: the original TF1 release or a
HuggingFace directory, a pretrained model or a fine-tuned one with its head.

    foreign = read_foreign("huggingface", directory, head=HeadOptions("classification"))
    model = SomeModelClass(foreign.config, ...)     # the caller builds the model (task.json
    report = fill(model, foreign)                   # settings: foreign.settings)

`read_foreign` reads the architecture, the tensors and, with `head`, what the head is (task.json
settings, checked against the checkpoint); `fill` assigns every tensor to the model's variable
by the weight maps (weight_maps.py, head_maps.py) and reports what it did. Building the model
and writing our directories is models/' (models/pretrained.py loads, models/directories.py
converts a directory for xlnet-convert); nothing here imports a model class.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import warnings
from typing import Dict, List, Optional

import numpy as np

from xlnet_tf2 import run_dir, task_registry
from xlnet_tf2.config import ConfigError, XLNetConfig
from xlnet_tf2.conversion import head_maps
from xlnet_tf2.conversion.readers import (read_huggingface_config, read_huggingface_directory,
                                          read_json, read_original_checkpoint)
from xlnet_tf2.conversion.to_huggingface import HF_CONFIG
from xlnet_tf2.conversion.weight_maps import (WeightMismatchError, assign_weights, extra_layers,
                                              huggingface_backbone_map, huggingface_weight_map,
                                              original_backbone_map, original_weight_map)

# Why a tensor a fine-tuned checkpoint lacks does not matter, for the report.
_OPTIONAL_REASON = {
    "mask_emb": "the query stream's mask embedding, used only by pretraining",
    "lm_loss": "the LM output bias, used only by pretraining and generation",
}
_LAYER_PATTERNS = {"original": r"model/transformer/layer_(\d+)/",
                   "huggingface": r"transformer\.layer\.(\d+)\."}


@dataclasses.dataclass(frozen=True)
class HeadOptions:
    """What a fine-tuned checkpoint's head is and how its inputs were laid out (task.json).

    kind: one of run_dir.TASKS (task.json's kind). seq_len: default its declared
    default_seq_len. label_list: classification label names in id order (default: the
    HuggingFace config's id2label, else "0".."n-1"). summary_type: the original's
    --summary_type (HuggingFace configs say theirs). cls_scope: the original's
    classification_<scope> / regression_<scope> (default: the only one in the checkpoint).
    paired: classification/regression inputs are text pairs. num_choices: RACE options per
    question."""
    kind: str
    seq_len: Optional[int] = None
    label_list: Optional[List[str]] = None
    summary_type: Optional[str] = None
    cls_scope: Optional[str] = None
    paired: bool = False
    num_choices: int = 4

    def __post_init__(self):
        if self.kind not in run_dir.TASKS:
            raise ValueError(f"--kind must be one of {run_dir.TASKS}, got {self.kind!r}.")


def TaskOptions(task: str, **options) -> HeadOptions:  # noqa: N802 - the old class's name
    """Deprecated: `HeadOptions(kind, ...)`, which it returns."""
    warnings.warn("xlnet_tf2.conversion.TaskOptions is deprecated: use HeadOptions(kind=...) "
                  "(the same options).", DeprecationWarning, stacklevel=2)
    return HeadOptions(task, **options)


@dataclasses.dataclass
class ForeignCheckpoint:
    """A released checkpoint as read: `config` its architecture (run-time fields default),
    `settings` the task.json of its head (None: a pretrained model, no head read), `tensors`
    by their stored names, `runtime` the run-time settings of a HuggingFace config (not part
    of the architecture), `skipped` optimizer/step variables."""
    source: str
    checkpoint: str
    config: XLNetConfig
    tensors: Dict[str, np.ndarray]
    settings: Optional[dict] = None
    scope: Optional[str] = None
    runtime: dict = dataclasses.field(default_factory=dict)
    skipped: list = dataclasses.field(default_factory=list)


def read_foreign(source: str, checkpoint: str, config_path: Optional[str] = None,
                 head: Optional[HeadOptions] = None) -> ForeignCheckpoint:
    """Reads a released checkpoint (no model is built).

    source "original": `checkpoint` is the TF1 prefix, `config_path` its xlnet_config.json
    (default: beside the checkpoint). source "huggingface": `checkpoint` is a save_pretrained
    directory (config.json inside; `config_path` is ignored). With `head`, the head's settings
    are read and checked (head_maps.py names its tensors); without, task-head tensors stay
    unused. Run-time settings of a HuggingFace config (mem_len, reuse_len, bi_data, ...) are
    not part of the architecture: they are in `runtime`, to be passed when loading."""
    runtime, hf_config, skipped = {}, None, []
    if source == "original":
        config_file = config_path or os.path.join(os.path.dirname(checkpoint), run_dir.ARCH_FILE)
        config_values, tensors, skipped = read_original_checkpoint(checkpoint, config_path)
    else:
        config_file = os.path.join(checkpoint, HF_CONFIG)
        config_values, runtime, tensors = read_huggingface_directory(checkpoint)
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
    settings = scope = None
    if head is not None:
        settings, scope = _task_settings(source, head, tensors, hf_config, checkpoint)
    return ForeignCheckpoint(source, checkpoint, config, tensors, settings, scope, runtime,
                             skipped)


def huggingface_architecture(directory: str) -> XLNetConfig:
    """The architecture a HuggingFace `save_pretrained` directory's config.json describes (its
    weights are not read)."""
    config_values, _ = read_huggingface_config(directory)
    try:
        return XLNetConfig.from_architecture(config_values)
    except ConfigError as e:
        raise ConfigError(f"{os.path.join(directory, HF_CONFIG)}: {e}") from None


def huggingface_kind(directory: str, kinds: tuple) -> Optional[str]:
    """Which of `kinds` (those of one model class) a HuggingFace directory's config.json says
    it holds, by its `architectures` (None: none of them, e.g. a bare XLNetLMHeadModel)."""
    config = read_json(os.path.join(directory, HF_CONFIG))
    if task_registry.declared(kinds[0]).huggingface_architecture not in (
            config.get("architectures") or []):
        return None
    if "regression" in kinds and (config.get("problem_type") == "regression" or
                                  len(config.get("id2label") or {0: 0, 1: 1}) == 1):
        return "regression"
    return kinds[0]


def fill(model, foreign: ForeignCheckpoint, log=logging.info) -> dict:
    """Assigns the checkpoint's tensors to `model` (built: an XLNetLMHeadModel or an
    XLNetModel, or for a head read with `head` the task model its settings describe); returns
    the report {"converted", "skipped", "unused", "initialized", "runtime_settings", "notes"}
    (and "head": its task.json settings). Pretraining-only tensors a fine-tuned checkpoint lacks
    (mask_emb, the LM bias) keep their initial values and are listed in "initialized"; tensors
    no variable takes (a head without `head`) in "unused"."""
    source, tensors = foreign.source, foreign.tensors
    notes = []
    if model.kind == "backbone":
        backbone_map = (original_backbone_map if source == "original"
                        else huggingface_backbone_map)
        weight_map = backbone_map(model)
    elif foreign.settings is None:
        lm_map = original_weight_map if source == "original" else huggingface_weight_map
        weight_map = lm_map(model)
    elif source == "original":
        weight_map = (original_backbone_map(model.transformer)
                      + head_maps.original_head_map(model, foreign.scope))
    else:
        weight_map = (huggingface_backbone_map(model.transformer)
                      + head_maps.huggingface_head_map(model))
    assigned = assign_weights(weight_map, tensors, f"{source} checkpoint {foreign.checkpoint}")
    unused, initialized = assigned.unused, assigned.initialized
    for name in initialized:
        reason = next((r for key, r in _OPTIONAL_REASON.items() if key in name), "")
        notes.append(f"{name} is not in the checkpoint (a fine-tuned or bare backbone?): "
                     f"{reason}; it keeps its initial value.")
    if foreign.runtime:
        notes.append("the HuggingFace config's run-time settings are not part of the converted "
                     f"architecture: {foreign.runtime}; pass them when loading, e.g. "
                     "xlnet_tf2.load_pretrained(dir, mem_len=...).")
    if source == "huggingface":
        # lm_loss.weight is the tied embedding; per-layer copies of tied biases are redundant.
        unused = [n for n in unused if n != "lm_loss.weight"]
        if not foreign.config.untie_r:
            _check_tied_copies(tensors, unused)
            unused = [n for n in unused if not _is_bias_copy(n)]
    for name in unused:
        log(f"not converted (a task head or another model's tensor): {name}")
    for note in notes:
        log(note)
    log(f"converted {len(weight_map)} tensors")
    report = {"converted": len(weight_map) - len(initialized), "skipped": foreign.skipped,
              "unused": unused, "initialized": initialized, "runtime_settings": foreign.runtime,
              "notes": notes}
    if foreign.settings is not None:
        report["head"] = foreign.settings
    return report


def _task_settings(source, head: HeadOptions, tensors, hf_config, checkpoint):
    """(task.json settings, original classification/regression scope) of a fine-tuned
    checkpoint; checks what the checkpoint says against what was asked."""
    declaration = task_registry.declared(head.kind)
    settings = {"kind": head.kind, "seq_len": head.seq_len or declaration.default_seq_len,
                "layout": "cls_last"}
    scope = None
    where = f"{source} checkpoint {checkpoint}"
    if source != "huggingface" and not declaration.original_release:
        raise WeightMismatchError(f"{where}: the original release has no {head.kind} head; "
                                  f"convert HuggingFace's {declaration.huggingface_architecture}.")
    if source == "huggingface":
        expected = declaration.huggingface_architecture
        found = hf_config.get("architectures") or []
        if found and expected not in found:
            raise WeightMismatchError(f"{where} is a {found} (config.json architectures); "
                                      f"--kind={head.kind} needs a {expected}.")
    if declaration.huggingface_label_tensor is not None:  # its labels alone, no summary
        n = head_maps.output_count(tensors, declaration.huggingface_label_tensor, 0)
        settings["label_list"] = _label_list(head.label_list, hf_config, n, where)
        return settings, scope
    if source == "huggingface":
        summary_type = hf_config.get("summary_type", "last")
        # Without a cls_index input (sequence classification passes none) "cls_index" is
        # the last token.
        summary_type = "last" if summary_type == "cls_index" else summary_type
        if head.summary_type and head.summary_type != summary_type:
            raise WeightMismatchError(f"{where}: config.json says summary_type "
                                      f"{summary_type!r}, --summary_type={head.summary_type}.")
        if declaration.summary and (not hf_config.get("summary_use_proj", True) or
                                     hf_config.get("summary_activation") != "tanh"):
            raise WeightMismatchError(
                f"{where}: its summary (summary_use_proj={hf_config.get('summary_use_proj')}, "
                f"summary_activation={hf_config.get('summary_activation')!r}) is not the "
                "original's dense + tanh, which our heads compute.")
        outputs_name, axis = "logits_proj.weight", 0
    else:
        summary_type = head.summary_type or "last"
        if declaration.summary and head_maps.original_summary_is_attention(tensors):
            summary_type = "attn"  # rejected below with the reason
        scope = head_maps.original_scope(sorted(tensors), head.kind, head.cls_scope, checkpoint)
        outputs_name, axis = f"model/{head.kind}_{scope}/logit/kernel", 1
    if declaration.summary:
        head_maps.check_summary_maps(summary_type, where)
        settings["summary_type"] = summary_type
    if head.kind in ("classification", "regression"):
        settings["paired"] = head.paired
        n = head_maps.output_count(tensors, outputs_name, axis)
        if head.kind == "regression" and n != 1:
            raise WeightMismatchError(f"{where}: the head has {n} outputs; a regression head "
                                      "has 1 (use --kind=classification).")
        if head.kind == "classification":
            if n < 2:
                raise WeightMismatchError(f"{where}: the head has 1 output; convert it with "
                                          "--kind=regression.")
            settings["label_list"] = _label_list(head.label_list, hf_config, n, where)
    elif head.kind == "race":
        settings["num_choices"] = head.num_choices
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


def _check_tied_copies(tensors, unused):
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
        head = f" with the {report['head']['kind']} head" if "head" in report else ""
        lines.append(
            f"Converted {report['converted']} tensors{head}; skipped {len(report['skipped'])} "
            f"optimizer/step variables; {len(report['unused'])} tensors not converted "
            f"(another head's, or a head without --kind); {len(report['initialized'])} "
            "pretraining-only tensors absent (left initialized).")
        lines += [f"note: {note}" for note in report["notes"]]
    if "architecture" in report:
        lines.append(f"Wrote a HuggingFace {report['architecture']} to {output_dir}.")
    else:
        lines.append(f"Wrote {output_dir}.")
    return "\n".join(lines)


__all__ = ["ForeignCheckpoint", "HeadOptions", "TaskOptions", "describe_report", "fill",
           "huggingface_kind", "read_foreign"]
