"""Typed, strict model configuration: the architecture apart from the run-time settings.

`XLNetConfig` is what a model is built from: the architecture (the original
`xlnet_config.json` keys: n_layer, d_model, n_head, d_head, d_inner, ff_activation, untie_r,
n_token) plus the run-time settings of one use of it (dropout, memory, bi_data, clamp, attention
type). Only the architecture belongs to a model: `xlnet_config.json` files are written with the
architecture keys alone, and run-time keys found in one (older model_dirs wrote them) are
ignored with a note, so that pretraining's data layout (bi_data, reuse_len, mem_len) never
leaks into fine-tuning, extraction or export. Each stage sets the run-time fields from its own
run configuration (xlnet_tf2/training/run_config.py, xlnet_tf2/tasks/finetune_config.py).
Unknown keys raise: a typo must never silently fall back to a default.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Mapping

from absl import logging

from xlnet_tf2 import fileio

# How the attention op is computed (layers/xlnet_block.py, chosen by the step's plan): "auto" picks the flash
# Triton kernels (GPU) or Pallas kernels (TPU), else cuDNN's flash attention, where they can run and TensorFlow ops
# elsewhere; the others force one.
ATTENTION_IMPLEMENTATIONS = ("auto", "reference", "cudnn", "triton", "pallas")
# The position scores' form (layers/step_plan.py): with the rel-shift of the T-wide scores
# ("shift"), or as a product with an angle table ("angles", layers/kernels/angle_scores.py);
# "auto": angles in a program traced for a TPU.
POSITION_SCORE_FORMS = ("auto", "shift", "angles")
# The devices a step is traced for (layers/step_plan.py), and the GPU and TPU generations its
# kernels are built for: v5e and newer TPUs rotate each row of a tile by its own amount in one
# instruction (a strided rotate), v4 by rotates and selects.
DEVICES = ("cpu", "gpu", "tpu")
GPU_GENERATIONS = ("sm_90", "sm_80")
TPU_GENERATIONS = ("v5e", "v5p", "v6e", "v4")

# The feed-forward's activation, each name one function: "gelu_tanh" the tanh approximation
# of GELU (the original XLNet's; HuggingFace's "gelu_new"), "gelu_erf" the exact erf GELU
# (HuggingFace's "gelu"), "relu". The original's xlnet_config.json says "gelu" for the tanh
# form, so "gelu" reads as "gelu_tanh" (ACTIVATION_ALIASES) and is never written; HuggingFace's
# names map onto these in conversion (conversion/readers.py, conversion/to_huggingface.py).
ACTIVATIONS = ("gelu_tanh", "gelu_erf", "relu")
ACTIVATION_ALIASES = {"gelu": "gelu_tanh"}
_ATTN_TYPES = ("bi", "uni")


class ConfigError(ValueError):
    """A configuration value or key is invalid; the message says which and what to do."""


# The keys of the original xlnet_config.json: what a checkpoint's weights depend on.
ARCHITECTURE_KEYS = ("n_layer", "d_model", "n_head", "d_head", "d_inner", "ff_activation",
                     "untie_r", "n_token")
# Settings of one use of a model (set by each stage's run configuration, never stored with it).
RUNTIME_KEYS = ("dropout", "dropatt", "mem_len", "reuse_len", "bi_data", "clamp_len",
                "attn_type", "same_length", "initializer_range")


@dataclasses.dataclass(frozen=True)
class XLNetConfig:
    """Architecture and run-time settings of an XLNet model.

    Architecture (the original `xlnet_config.json` keys):
      n_layer: number of Transformer-XL layers.
      d_model: model width D.
      n_head: attention heads N.
      d_head: size H of each head.
      d_inner: inner width of the position-wise feed-forward network.
      ff_activation: "gelu_tanh" (GELU's tanh approximation, the original's, which its
        xlnet_config.json calls "gelu": that name reads as this one), "gelu_erf" (the exact
        erf GELU, HuggingFace's "gelu") or "relu".
      untie_r: one set of relative biases (r_w, r_r, r_s) per layer (True, as all released
        models) or one set shared by all layers (False).
      n_token: vocabulary size.

    Run-time:
      dropout: dropout rate on embeddings, attention output and feed-forward.
      dropatt: dropout rate on attention probabilities.
      mem_len: number M of cached memory positions per layer (0 disables memory).
      reuse_len: number R of leading positions of each example cached as memory (0 = all).
      bi_data: the batch's first half is read forward, its second half backward; the relative
        position encoding of the second half is negated.
      clamp_len: clamp relative distances to [-clamp_len, clamp_len] (-1 disables).
      attn_type: "bi" (bidirectional, XLNet) or "uni" (causal, Transformer-XL).
      same_length: with attn_type "uni", every query sees the same number of keys.
      initializer_range: standard deviation of the normal initializer.
    """

    n_layer: int = 12
    d_model: int = 768
    n_head: int = 12
    d_head: int = 64
    d_inner: int = 3072
    ff_activation: str = "gelu_tanh"
    untie_r: bool = True
    n_token: int = 32000
    dropout: float = 0.1
    dropatt: float = 0.1
    mem_len: int = 0
    reuse_len: int = 0
    bi_data: bool = False
    clamp_len: int = -1
    attn_type: str = "bi"
    same_length: bool = False
    initializer_range: float = 0.02

    def __post_init__(self):
        for name in ("n_layer", "d_model", "n_head", "d_head", "d_inner", "n_token"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ConfigError(f"XLNetConfig.{name} must be a positive integer, got {value!r}.")
        for name in ("mem_len", "reuse_len"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ConfigError(f"XLNetConfig.{name} must be an integer >= 0, got {value!r}.")
        if not isinstance(self.clamp_len, int) or isinstance(self.clamp_len, bool):
            raise ConfigError(f"XLNetConfig.clamp_len must be an integer, got {self.clamp_len!r}.")
        activation = ACTIVATION_ALIASES.get(self.ff_activation, self.ff_activation)
        if activation not in ACTIVATIONS:
            raise ConfigError(f"XLNetConfig.ff_activation must be one of {ACTIVATIONS} (or the "
                              f"original's \"gelu\", read as \"gelu_tanh\"), got "
                              f"{self.ff_activation!r}.")
        object.__setattr__(self, "ff_activation", activation)  # one name per function
        if self.attn_type not in _ATTN_TYPES:
            raise ConfigError(f"XLNetConfig.attn_type must be one of {_ATTN_TYPES}, got {self.attn_type!r}.")
        for name in ("dropout", "dropatt"):
            value = getattr(self, name)
            if not 0.0 <= float(value) < 1.0:
                raise ConfigError(f"XLNetConfig.{name} must be in [0, 1), got {value!r}.")
        if self.d_model % 2:
            raise ConfigError(f"XLNetConfig.d_model must be even (sin/cos halves), got {self.d_model}.")
        for name in ("untie_r", "bi_data", "same_length"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"XLNetConfig.{name} must be true or false, got {getattr(self, name)!r}.")

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> "XLNetConfig":
        """Builds a config; unknown keys raise `ConfigError` naming them."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ConfigError(
                f"Unknown XLNetConfig key(s) {unknown}; valid keys are {sorted(known)}."
            )
        return cls(**dict(values))

    @classmethod
    def from_architecture(cls, values: Mapping[str, Any], **runtime) -> "XLNetConfig":
        """Architecture keys from `values` (run-time keys there are ignored) + `runtime`."""
        arch = {k: v for k, v in values.items() if k not in RUNTIME_KEYS}
        return cls.from_dict({**arch, **runtime})

    @classmethod
    def from_json_file(cls, path: str, **overrides) -> "XLNetConfig":
        """Reads an `xlnet_config.json` (original or ours): its architecture keys, with
        `overrides` setting run-time fields (defaults otherwise). Run-time keys found in the
        file (written by older versions of this project) are ignored with a note."""
        values = fileio.read_json_object(path, ConfigError, "a model config file")
        stored_runtime = sorted(k for k in values if k in RUNTIME_KEYS)
        if stored_runtime:
            logging.info("%s holds run-time setting(s) %s (written by an older version); they "
                         "are ignored: each stage sets them from its own flags.", path,
                         stored_runtime)
        try:
            return cls.from_architecture(values, **overrides)
        except ConfigError as e:
            raise ConfigError(f"{path}: {e}") from e

    @classmethod
    def coerce(cls, config) -> "XLNetConfig":
        """`config` itself, or the XLNetConfig of its `to_dict()` form (Keras `from_config`)."""
        return config if isinstance(config, cls) else cls.from_dict(config)

    @classmethod
    def preset(cls, name: str, **overrides) -> "XLNetConfig":
        """A named preset: "base", "large" (the released cased models) or "tiny" (tests)."""
        if name not in PRESETS:
            raise ConfigError(f"Unknown model preset {name!r}; choose one of {sorted(PRESETS)}.")
        values = dict(PRESETS[name])
        values.update(overrides)
        return cls.from_dict(values)

    @classmethod
    def resolve(cls, name_or_path: str, **overrides) -> "XLNetConfig":
        """A preset name or a JSON file path."""
        if name_or_path in PRESETS:
            return cls.preset(name_or_path, **overrides)
        return cls.from_json_file(name_or_path, **overrides)

    def replace(self, **changes) -> "XLNetConfig":
        return dataclasses.replace(self, **changes)

    # ------------------------------------------------------------------ serialization
    def to_dict(self) -> dict:
        """Every field, architecture and run-time (Keras `get_config`)."""
        return dataclasses.asdict(self)

    def architecture(self) -> dict:
        """The architecture keys alone (what `xlnet_config.json` holds)."""
        return {k: getattr(self, k) for k in ARCHITECTURE_KEYS}

    def to_json_string(self) -> str:
        """`xlnet_config.json` text: the architecture keys alone, as the original release."""
        return json.dumps(self.architecture(), indent=2, sort_keys=True) + "\n"

    def to_json_file(self, path: str) -> None:
        """Writes `to_json_string()` to `path` atomically (a temporary name, then a rename)."""
        fileio.makedirs(os.path.dirname(path) or ".")
        fileio.write_atomically(path, self.to_json_string().encode())


PRESETS = {
    "large": dict(n_layer=24, d_model=1024, n_head=16, d_head=64, d_inner=4096,
                  ff_activation="gelu_tanh", untie_r=True, n_token=32000),
    "base": dict(n_layer=12, d_model=768, n_head=12, d_head=64, d_inner=3072,
                 ff_activation="gelu_tanh", untie_r=True, n_token=32000),
    "tiny": dict(n_layer=2, d_model=64, n_head=4, d_head=16, d_inner=128,
                 ff_activation="gelu_tanh", untie_r=True, n_token=1000),
}
# Presets are architectures only: run-time settings (dropout included) come from each stage.
