"""Where each tensor of a released checkpoint goes in our model.

A weight map is a list of `WeightSource(name, variable, extract)`: the external tensor `name`
(a TF1 variable name or a HuggingFace state-dict key), our Keras variable, and a function that
turns the stored array into the variable's value (a transpose, or one layer's slice of a
stacked array). Maps are built from the model's structure, never by pattern-matching names.
The backbone maps here; the task heads' in head_maps.py. The HuggingFace maps also run
backwards (`export`, to_huggingface.py): every extract there is its own inverse.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, List, Mapping, Sequence

import numpy as np

# HuggingFace's activation names -> ours (config.ACTIVATIONS): its "gelu" is the exact erf
# GELU, its "gelu_new" (and "gelu_pytorch_tanh") the tanh form the original XLNet was trained
# with, which the original's xlnet_config.json calls "gelu". Each converts to the function
# HuggingFace computes, so a converted model gives HuggingFace's numbers (and writing one back
# gives the first name here of its function: `huggingface_activation`).
HF_ACTIVATIONS = {"gelu": "gelu_erf", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh",
                  "relu": "relu"}


def huggingface_activation(ff_activation: str) -> str:
    """HuggingFace's name of our activation: the first of HF_ACTIVATIONS that reads as
    it (the tanh GELU is "gelu_new": HuggingFace's "gelu" is the erf form, our "gelu_erf")."""
    return next(hf for hf, ours in HF_ACTIVATIONS.items() if ours == ff_activation)


@dataclasses.dataclass(frozen=True)
class WeightSource:
    """`optional`: tensors only pretraining uses (mask_emb, the LM bias), which fine-tuned
    checkpoints do not hold; when missing, the variable keeps its initial value and is
    reported."""

    name: str
    variable: object  # keras.Variable
    extract: Callable[[np.ndarray], np.ndarray] = lambda array: array
    optional: bool = False
    export: Callable[[np.ndarray], np.ndarray] = lambda array: array  # our value -> stored


class WeightMismatchError(ValueError):
    """A checkpoint lacks a tensor the model needs, or holds one of the wrong shape."""


def _layer_slice(i):
    def extract(array):
        if array.ndim == 0 or array.shape[0] <= i:
            raise WeightMismatchError(f"holds {array.shape[0] if array.ndim else 0} layers, "
                                      f"the model needs layer {i}")
        return array[i]
    return extract


def _transpose(array):
    return np.transpose(array)


def transposed(name: str, variable) -> WeightSource:
    """A PyTorch `nn.Linear` weight [out, in] for a Keras kernel [in, out]."""
    return WeightSource(name, variable, _transpose, export=_transpose)


def huggingface_weight_map(lm_model) -> List[WeightSource]:
    """State-dict keys of HuggingFace's `XLNetLMHeadModel` (PyTorch layout)."""
    return huggingface_backbone_map(lm_model.transformer) + [
        WeightSource("lm_loss.bias", lm_model.lm_bias, optional=True)]


def huggingface_backbone_map(backbone) -> List[WeightSource]:
    """The `transformer.*` keys every HuggingFace XLNet model (LM or task) shares."""
    entries = [
        WeightSource("transformer.word_embedding.weight", backbone.word_embedding.embeddings),
        WeightSource("transformer.mask_emb", backbone.mask_emb, optional=True),
    ]
    for i, block in enumerate(backbone.blocks):
        attn, ff = block.rel_attn, block.ff
        prefix = f"transformer.layer.{i}."
        for name in ("q", "k", "v", "r", "o", "seg_embed"):
            entries.append(WeightSource(prefix + "rel_attn." + name, getattr(attn, name)))
        for name in ("r_w_bias", "r_r_bias", "r_s_bias"):
            # HuggingFace keeps a copy per layer even for untie_r=False; we read layer 0's.
            target = getattr(attn if attn.own_biases else backbone, name)
            if attn.own_biases or i == 0:
                entries.append(WeightSource(prefix + "rel_attn." + name, target))
        entries += [
            WeightSource(prefix + "rel_attn.layer_norm.weight", attn.layer_norm.gamma),
            WeightSource(prefix + "rel_attn.layer_norm.bias", attn.layer_norm.beta),
            transposed(prefix + "ff.layer_1.weight", ff.layer_1.kernel),
            WeightSource(prefix + "ff.layer_1.bias", ff.layer_1.bias),
            transposed(prefix + "ff.layer_2.weight", ff.layer_2.kernel),
            WeightSource(prefix + "ff.layer_2.bias", ff.layer_2.bias),
            WeightSource(prefix + "ff.layer_norm.weight", ff.layer_norm.gamma),
            WeightSource(prefix + "ff.layer_norm.bias", ff.layer_norm.beta),
        ]
    return entries


def original_weight_map(lm_model) -> List[WeightSource]:
    """TF1 variable names of the released zihangdai/xlnet checkpoints (`model/` scope)."""
    return original_backbone_map(lm_model.transformer) + [
        WeightSource("model/lm_loss/bias", lm_model.lm_bias, optional=True)]


def original_backbone_map(backbone) -> List[WeightSource]:
    """The `model/transformer/` variables of every original checkpoint (pretrained or
    fine-tuned)."""
    root = "model/transformer/"
    entries = [
        WeightSource(root + "word_embedding/lookup_table", backbone.word_embedding.embeddings),
        WeightSource(root + "mask_emb/mask_emb", backbone.mask_emb, optional=True),
    ]
    for i, block in enumerate(backbone.blocks):
        attn, ff = block.rel_attn, block.ff
        prefix = f"{root}layer_{i}/"
        for name in ("q", "k", "v", "r", "o"):
            entries.append(WeightSource(f"{prefix}rel_attn/{name}/kernel", getattr(attn, name)))
        entries.append(WeightSource(root + "seg_embed", attn.seg_embed, _layer_slice(i)))
        for name in ("r_w_bias", "r_r_bias", "r_s_bias"):
            if attn.own_biases:
                entries.append(WeightSource(root + name, getattr(attn, name), _layer_slice(i)))
        entries += [
            WeightSource(prefix + "rel_attn/LayerNorm/gamma", attn.layer_norm.gamma),
            WeightSource(prefix + "rel_attn/LayerNorm/beta", attn.layer_norm.beta),
            WeightSource(prefix + "ff/layer_1/kernel", ff.layer_1.kernel),
            WeightSource(prefix + "ff/layer_1/bias", ff.layer_1.bias),
            WeightSource(prefix + "ff/layer_2/kernel", ff.layer_2.kernel),
            WeightSource(prefix + "ff/layer_2/bias", ff.layer_2.bias),
            WeightSource(prefix + "ff/LayerNorm/gamma", ff.layer_norm.gamma),
            WeightSource(prefix + "ff/LayerNorm/beta", ff.layer_norm.beta),
        ]
    if not backbone.config.untie_r:
        for name in ("r_w_bias", "r_r_bias", "r_s_bias"):
            entries.append(WeightSource(root + name, getattr(backbone, name)))
    return entries


@dataclasses.dataclass
class AssignResult:
    unused: List[str]             # checkpoint tensors the model has no place for
    initialized: List[str]        # optional tensors the checkpoint lacks (left as initialized)


def assign_weights(weight_map: Sequence[WeightSource], tensors: Mapping[str, np.ndarray],
                   source: str) -> AssignResult:
    """Assigns every mapped tensor.

    Raises WeightMismatchError naming every missing (non-optional) or misshaped tensor (all
    are checked before anything is assigned, so a failed load leaves the model untouched).
    """
    values = []
    problems = []
    initialized = []
    for entry in weight_map:
        if entry.name not in tensors:
            if entry.optional:
                initialized.append(entry.name)
            else:
                problems.append(f"missing tensor {entry.name!r}")
            continue
        try:
            value = np.asarray(entry.extract(np.asarray(tensors[entry.name])))
        except WeightMismatchError as e:
            problems.append(f"tensor {entry.name!r} {e}")
            continue
        expected = tuple(entry.variable.shape)
        if value.shape != expected:
            problems.append(f"tensor {entry.name!r} gives shape {value.shape}, "
                            f"the model needs {expected}")
            continue
        values.append((entry.variable, value))
    if problems:
        raise WeightMismatchError(f"{source}: " + "; ".join(problems[:5])
                                  + (f" (and {len(problems) - 5} more)" if len(problems) > 5
                                     else "") + ". Check that the config (n_layer, d_model, "
                                  "n_head, d_head, d_inner, n_token) is the checkpoint's.")
    for variable, value in values:
        variable.assign(value.astype(variable.dtype))
    used = {entry.name for entry in weight_map}
    return AssignResult(sorted(name for name in tensors if name not in used), initialized)


def extra_layers(names: Sequence[str], pattern: str, n_layer: int) -> List[int]:
    """Layer indices >= n_layer that tensor names refer to (`pattern` has one group, the
    index): a config with fewer layers than the checkpoint would silently drop them."""
    import re

    regex = re.compile(pattern)
    found = {int(m.group(1)) for m in map(regex.match, names) if m}
    return sorted(i for i in found if i >= n_layer)
