"""Converts a released checkpoint (original TF1 or HuggingFace) into our format."""

from __future__ import annotations

import logging
from typing import Optional

from xlnet_tf2.config import XLNetConfig
from xlnet_tf2.conversion.pretrained import save_pretrained
from xlnet_tf2.conversion.readers import read_huggingface_directory, read_original_checkpoint
from xlnet_tf2.conversion.weight_maps import (assign_weights, huggingface_weight_map,
                                              original_weight_map)

SOURCES = ("original", "huggingface")


def convert_checkpoint(source: str, checkpoint: str, output_dir: str,
                       config_path: Optional[str] = None, spm_model: Optional[str] = None,
                       log=logging.info) -> dict:
    """Converts and writes; returns a report {"converted", "skipped", "unused", "notes"}.

    source "original": `checkpoint` is the TF1 prefix, `config_path` its xlnet_config.json
    (default: beside the checkpoint). source "huggingface": `checkpoint` is a save_pretrained
    directory (config.json inside; `config_path` is ignored).
    """
    from xlnet_tf2.models import XLNetLMHeadModel

    if source == "original":
        config_values, tensors, skipped = read_original_checkpoint(checkpoint, config_path)
        notes = []
    elif source == "huggingface":
        config_values, tensors, notes = read_huggingface_directory(checkpoint)
        skipped = []
    else:
        raise ValueError(f"--source must be one of {SOURCES}, got {source!r}.")
    config = XLNetConfig.from_dict(config_values)
    model = XLNetLMHeadModel(config)
    model.build()
    weight_map = (original_weight_map if source == "original" else huggingface_weight_map)(model)
    if source == "huggingface" and "lm_loss.bias" not in tensors:
        notes.append("no lm_loss.bias in the checkpoint (a bare XLNetModel): the LM bias stays zero.")
        weight_map = [w for w in weight_map if w.name != "lm_loss.bias"]
    unused = assign_weights(weight_map, tensors, f"{source} checkpoint {checkpoint}")
    if source == "huggingface":
        # lm_loss.weight is the tied embedding; per-layer copies of tied biases are redundant.
        unused = [n for n in unused if n != "lm_loss.weight"]
        if not config.untie_r:
            _check_tied_copies(tensors, config, unused)
            unused = [n for n in unused if not _is_bias_copy(n)]
    for name in unused:
        log(f"skipping checkpoint tensor not used by the LM model (a task head?): {name}")
    for note in notes:
        log(note)
    save_pretrained(model, output_dir, spm_model)
    log(f"wrote {len(weight_map)} tensors to {output_dir}")
    return {"converted": len(weight_map), "skipped": skipped, "unused": unused, "notes": notes}


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
