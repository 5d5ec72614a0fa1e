"""Converts a released checkpoint (original TF1 or HuggingFace) into our format."""

from __future__ import annotations

import logging
from typing import Optional

from xlnet_tf2.config import XLNetConfig
from xlnet_tf2.models.saving import save_pretrained
from xlnet_tf2.conversion.convert_config import SOURCES
from xlnet_tf2.conversion.readers import read_huggingface_directory, read_original_checkpoint
from xlnet_tf2.conversion.weight_maps import (WeightMismatchError, assign_weights, extra_layers,
                                              huggingface_weight_map, original_weight_map)
from xlnet_tf2.models import XLNetLMHeadModel

# Why a tensor a fine-tuned checkpoint lacks does not matter, for the report.
_OPTIONAL_REASON = {
    "mask_emb": "the query stream's mask embedding, used only by pretraining",
    "lm_loss": "the LM output bias, used only by pretraining and generation",
}
_LAYER_PATTERNS = {"original": r"model/transformer/layer_(\d+)/",
                   "huggingface": r"transformer\.layer\.(\d+)\."}


def convert_checkpoint(source: str, checkpoint: str, output_dir: str,
                       config_path: Optional[str] = None, spm_model: Optional[str] = None,
                       log=logging.info) -> dict:
    """Converts and writes; returns a report {"converted", "skipped", "unused", "initialized",
    "runtime_settings", "notes"}.

    source "original": `checkpoint` is the TF1 prefix, `config_path` its xlnet_config.json
    (default: beside the checkpoint). source "huggingface": `checkpoint` is a save_pretrained
    directory (config.json inside; `config_path` is ignored).

    Fine-tuned checkpoints convert too: their backbone is converted; mask_emb and the LM bias
    (pretraining only), when absent, keep their initial values and are listed in
    "initialized"; task-head tensors (e.g. `model/sequnece_summary/...`, classification
    layers) are listed in "unused". Run-time settings of a HuggingFace config (mem_len,
    reuse_len, bi_data, ...) are not part of the converted architecture: they are returned in
    "runtime_settings" and logged, to be passed when loading (load_pretrained(dir, mem_len=...)).
    """
    runtime = {}
    if source == "original":
        config_values, tensors, skipped = read_original_checkpoint(checkpoint, config_path)
        notes = []
    elif source == "huggingface":
        config_values, runtime, tensors, notes = read_huggingface_directory(checkpoint)
        skipped = []
    else:
        raise ValueError(f"--source must be one of {SOURCES}, got {source!r}.")
    config = XLNetConfig.from_architecture(config_values)
    extra = extra_layers(sorted(tensors), _LAYER_PATTERNS[source], config.n_layer)
    if extra:
        raise WeightMismatchError(
            f"{source} checkpoint {checkpoint} has layers up to {extra[-1]} but the config says "
            f"n_layer={config.n_layer}; converting would silently drop layers "
            f"{config.n_layer}..{extra[-1]}. Use the checkpoint's own config.")
    model = XLNetLMHeadModel(config)
    model.build()
    weight_map = (original_weight_map if source == "original" else huggingface_weight_map)(model)
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
    save_pretrained(model, output_dir, spm_model)
    log(f"wrote {len(weight_map)} tensors to {output_dir}")
    return {"converted": len(weight_map) - len(initialized), "skipped": skipped,
            "unused": unused, "initialized": initialized, "runtime_settings": runtime,
            "notes": notes}


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
    lines = [f"Converted {report['converted']} tensors into {output_dir}; skipped "
             f"{len(report['skipped'])} optimizer/step variables; {len(report['unused'])} "
             f"task-head tensors not converted; {len(report['initialized'])} pretraining-only "
             "tensors absent (left initialized)."]
    lines += [f"note: {note}" for note in report["notes"]]
    return "\n".join(lines)
