"""Readers for released checkpoints: the original TF1 release and HuggingFace directories.

Each reader returns `(config_values, tensors)`: a dict for `XLNetConfig` and a dict of numpy
arrays keyed by the source's own tensor names.
"""

from __future__ import annotations

import os
from typing import Dict, Optional, Tuple

import numpy as np
import tensorflow as tf

from xlnet_tf2 import fileio
from xlnet_tf2.conversion.weight_maps import HF_ACTIVATIONS

# Variables of a TF1 training checkpoint that are not model weights.
_OPTIMIZER_MARKERS = ("/adam_m", "/adam_v", "/Adam", "/Adam_1", "/Momentum", "/LAMB")
_SKIPPED_NAMES = ("global_step",)


class CheckpointReadError(ValueError):
    """A checkpoint or its config cannot be read; the message names the file."""


def read_json(path: str) -> dict:
    return fileio.read_json_object(path, CheckpointReadError, "the model's config file")


def read_original_checkpoint(checkpoint: str, config_path: Optional[str] = None
                             ) -> Tuple[dict, Dict[str, np.ndarray], list]:
    """Reads a zihangdai/xlnet TF1 checkpoint (e.g. `xlnet_model.ckpt`).

    Returns (config values from `xlnet_config.json`, model tensors, skipped names). Optimizer
    slots and `global_step` are skipped and listed.
    """
    if config_path is None:
        config_path = os.path.join(os.path.dirname(checkpoint), "xlnet_config.json")
    config_values = read_json(config_path)
    try:
        reader = tf.train.load_checkpoint(checkpoint)
    except (tf.errors.OpError, ValueError, RuntimeError) as e:  # missing, or a damaged .index
        raise CheckpointReadError(
            f"Cannot read TF1 checkpoint {checkpoint!r} (give the prefix, e.g. "
            f".../xlnet_model.ckpt, without .index; a damaged .index cannot be read either): "
            f"{' '.join(str(e).split())[:300]}") from None
    tensors, skipped = {}, []
    for name in sorted(reader.get_variable_to_shape_map()):
        if name in _SKIPPED_NAMES or any(marker in name for marker in _OPTIMIZER_MARKERS):
            skipped.append(name)
            continue
        try:
            tensors[name] = reader.get_tensor(name)
        except (tf.errors.OpError, ValueError, IndexError) as e:  # IndexError: short read
            raise CheckpointReadError(
                f"TF1 checkpoint {checkpoint!r} is truncated or corrupt: tensor {name!r} cannot "
                f"be read ({type(e).__name__}: {str(e).splitlines()[0][:200]}). Download or "
                "copy the checkpoint again.") from None
    return config_values, tensors, skipped


# HuggingFace config keys -> ours: the architecture, and run-time settings (reported by the
# converter, never stored with the converted architecture). Keys not listed are HuggingFace-only
# (task heads, generation).
_HF_CONFIG_KEYS = {
    "vocab_size": "n_token", "d_model": "d_model", "n_layer": "n_layer", "n_head": "n_head",
    "d_head": "d_head", "d_inner": "d_inner", "ff_activation": "ff_activation",
    "untie_r": "untie_r",
}
_HF_RUNTIME_KEYS = {
    "mem_len": "mem_len", "reuse_len": "reuse_len", "attn_type": "attn_type",
    "bi_data": "bi_data", "clamp_len": "clamp_len", "same_length": "same_length",
    "dropout": "dropout",
}


def read_huggingface_config(directory: str) -> Tuple[dict, dict]:
    """A `save_pretrained` directory's config.json in our names: (architecture values,
    run-time settings the config sets)."""
    hf = read_json(os.path.join(directory, "config.json"))
    config_values = {}
    for hf_key, our_key in _HF_CONFIG_KEYS.items():
        if hf_key in hf and hf[hf_key] is not None:
            config_values[our_key] = hf[hf_key]
    if "d_head" not in config_values and "d_model" in config_values and "n_head" in config_values:
        config_values["d_head"] = config_values["d_model"] // config_values["n_head"]
    activation = config_values.get("ff_activation", "gelu")  # transformers' default
    if activation not in HF_ACTIVATIONS:
        raise CheckpointReadError(f"{directory}/config.json: ff_activation {activation!r} has "
                                  f"no counterpart here (known: {sorted(HF_ACTIVATIONS)}).")
    config_values["ff_activation"] = HF_ACTIVATIONS[activation]
    runtime = {our_key: hf[hf_key] for hf_key, our_key in _HF_RUNTIME_KEYS.items()
               if hf.get(hf_key) is not None}
    return config_values, runtime


def read_huggingface_directory(directory: str) -> Tuple[dict, dict, Dict[str, np.ndarray]]:
    """Reads a `save_pretrained` directory: config.json (read_huggingface_config) plus
    model.safetensors (read without torch) or pytorch_model.bin (needs torch).

    Returns (architecture values, run-time settings the config sets, tensors keyed like
    XLNetLMHeadModel's state dict).
    """
    config_values, runtime = read_huggingface_config(directory)
    safetensors_path = os.path.join(directory, "model.safetensors")
    bin_path = os.path.join(directory, "pytorch_model.bin")
    if tf.io.gfile.exists(safetensors_path):
        from safetensors.numpy import load_file

        try:
            tensors = load_file(safetensors_path)
        except Exception as e:  # safetensors raises its own error types
            raise CheckpointReadError(f"Cannot read {safetensors_path!r}: {e}") from e
    elif tf.io.gfile.exists(bin_path):
        try:
            import torch
        except ImportError as e:
            raise CheckpointReadError(
                f"{bin_path!r} is a PyTorch pickle and needs torch to read; install torch or "
                "re-save the model with safe_serialization=True (model.safetensors).") from e
        state = torch.load(bin_path, map_location="cpu", weights_only=True)
        tensors = {k: v.float().numpy() for k, v in state.items()}
    else:
        raise CheckpointReadError(
            f"{directory!r} holds neither model.safetensors nor pytorch_model.bin.")
    # A bare XLNetModel is saved without the "transformer." prefix.
    if not any(k.startswith("transformer.") for k in tensors):
        tensors = {("transformer." + k): v for k, v in tensors.items()}
    return config_values, runtime, {k: np.asarray(v, np.float32) for k, v in tensors.items()}
