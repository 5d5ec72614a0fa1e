"""Writing a model in HuggingFace's layout: config.json + model.safetensors (+ spiece.model),
which `transformers`' `from_pretrained` loads (`save_huggingface`; no torch: safetensors
writes numpy arrays). Which class becomes which and what HuggingFace computes differently:
`save_huggingface`.
"""

from __future__ import annotations

import json
import os
import uuid
from typing import Dict, List, Optional, Sequence, Union

import numpy as np
import tensorflow as tf

from xlnet_tf2 import fileio, run_dir, task_registry
from xlnet_tf2 import special_ids as sid
from xlnet_tf2.conversion.head_maps import huggingface_head_map
from xlnet_tf2.conversion.weight_maps import (huggingface_activation, huggingface_backbone_map,
                                              huggingface_weight_map)

# transformers' class of each model kind: the backbone, the LM model, and each declared
# task's huggingface_architecture (task_registry.py).
ARCHITECTURES = {"lm": "XLNetLMHeadModel", "backbone": "XLNetModel",
                 **{d.name: d.huggingface_architecture for d in task_registry.declared_tasks()}}
HF_CONFIG = "config.json"
HF_WEIGHTS = "model.safetensors"
_TIED_BIASES = ("r_w_bias", "r_r_bias", "r_s_bias")


def huggingface_state(model) -> Dict[str, np.ndarray]:
    """HuggingFace's state dict of `model` (built), as float32 numpy arrays."""
    kind = model.kind  # one of ARCHITECTURES' keys
    backbone = model if kind == "backbone" else model.transformer
    if not backbone.built:
        raise ValueError("build the model (call it once) before writing it.")
    if kind == "lm":
        entries = huggingface_weight_map(model)
    else:
        entries = huggingface_backbone_map(backbone)
        if kind != "backbone":
            entries += huggingface_head_map(model)
    state = {e.name: np.ascontiguousarray(e.export(np.asarray(e.variable.numpy(), np.float32)))
             for e in entries}
    if not backbone.config.untie_r:
        # HuggingFace keeps a copy of the shared biases in every layer.
        for i in range(1, backbone.config.n_layer):
            for name in _TIED_BIASES:
                state[f"transformer.layer.{i}.rel_attn.{name}"] = \
                    state[f"transformer.layer.0.rel_attn.{name}"].copy()
    if kind == "backbone":  # a bare XLNetModel's keys have no prefix
        state = {k[len("transformer."):]: v for k, v in state.items()}
    return state


def huggingface_config(model, label_list: Optional[Sequence[str]] = None) -> dict:
    """config.json of `model` for transformers' XLNetConfig."""
    kind = model.kind
    c = model.config
    values = {
        "architectures": [ARCHITECTURES[kind]], "model_type": "xlnet",
        "vocab_size": c.n_token, "d_model": c.d_model, "n_layer": c.n_layer,
        "n_head": c.n_head, "d_head": c.d_head, "d_inner": c.d_inner,
        "ff_activation": huggingface_activation(c.ff_activation), "untie_r": c.untie_r,
        "attn_type": c.attn_type, "bi_data": c.bi_data, "clamp_len": c.clamp_len,
        "same_length": c.same_length, "mem_len": c.mem_len or None,
        "reuse_len": c.reuse_len or None, "dropout": c.dropout,
        "initializer_range": c.initializer_range, "layer_norm_eps": 1e-12,
        "pad_token_id": sid.PAD_ID, "bos_token_id": sid.BOS_ID, "eos_token_id": sid.EOS_ID,
        "tie_word_embeddings": True, "dtype": "float32",
    }
    if kind in task_registry.names() and task_registry.declared(kind).summary:
        head = model.head
        # summary_proj_to_labels False: the summary keeps width d_model, logits_proj maps it.
        values.update(summary_type=head.summary_type, summary_use_proj=True,
                      summary_activation="tanh", summary_last_dropout=head.dropout_rate,
                      summary_proj_to_labels=False)
    if kind == "classification" or hasattr(model, "num_labels"):  # num_labels: per token
        count = getattr(model, "num_labels", None) or model.num_outputs
        labels = list(label_list) if label_list else [f"LABEL_{i}" for i in range(count)]
        if len(labels) != count:
            raise ValueError(f"label_list has {len(labels)} labels, the model {count} outputs.")
        values.update(id2label={str(i): label for i, label in enumerate(labels)},
                      label2id={label: i for i, label in enumerate(labels)})
        if kind == "classification":
            values.update(problem_type="single_label_classification")
    elif kind == "regression":
        values.update(id2label={"0": "LABEL_0"}, label2id={"LABEL_0": 0},
                      problem_type="regression")
    elif kind == "squad":
        values.update(start_n_top=model.start_n_top, end_n_top=model.end_n_top)
    return values


def save_huggingface(model, output_dir: str, spm_model: Union[str, bytes, None] = None,
                     label_list: Optional[Sequence[str]] = None) -> List[str]:
    """Writes config.json, model.safetensors and (given a path or the model's bytes)
    spiece.model into `output_dir`; each file under a staging name first, so a failure leaves
    an existing directory as it was. Returns the paths written.

      XLNetLMHeadModel                         -> XLNetLMHeadModel
      XLNetModel                               -> XLNetModel
      SequenceClassifier (classification)      -> XLNetForSequenceClassification (id2label
                                                  from label_list)
      SequenceClassifier (1 output, regression)-> XLNetForSequenceClassification,
                                                  num_labels 1, problem_type "regression"
      MultipleChoiceModel                      -> XLNetForMultipleChoice
      SquadModel                               -> XLNetForQuestionAnswering

    The weights are those of the HuggingFace weight maps (weight_maps.py, head_maps.py) run
    backwards, so HF -> ours -> HF gives every tensor back bit for bit. The activation is
    the same function under HuggingFace's name: our "gelu_tanh" (the original's) is
    "gelu_new", our "gelu_erf" is HuggingFace's "gelu".

    What HuggingFace computes differently on the same weights (checked in
    tests/conversion/test_to_huggingface.py):
    - Sequence summaries "mean" and "attn" do not map (head_maps.py); such models raise.
    - XLNetForQuestionAnswering: start/end/answer-class logits are ours. Its inference outputs
      differ in form only: `start_top_log_probs` / `end_top_log_probs` hold probabilities (a
      softmax, not a log-softmax: exp of ours), and `end_top_*` are flattened [B, e * k] from
      [B, e, k] (end rank major) where ours are [B, k, e]. In training HuggingFace feeds the
      answer-class layer the gold start's hidden state, where the original (and we) feed the
      start-probability-weighted one, and it has no dropout inside that layer; a model
      trained further in PyTorch therefore learns a slightly different answer-class input.
    """
    from safetensors.numpy import save as safetensors_bytes

    state = huggingface_state(model)
    config = huggingface_config(model, label_list)
    if isinstance(spm_model, str):
        if not tf.io.gfile.exists(spm_model):
            raise FileNotFoundError(f"spm_model {spm_model!r} does not exist.")
        with tf.io.gfile.GFile(spm_model, "rb") as f:
            spm_model = f.read()
    staging = os.path.join(output_dir, f".staging-{uuid.uuid4().hex[:8]}")
    fileio.makedirs(staging)
    try:
        files = {HF_WEIGHTS: safetensors_bytes(state, metadata={"format": "pt"}),
                 HF_CONFIG: (json.dumps(config, indent=2, sort_keys=True) + "\n").encode()}
        if spm_model:
            files[run_dir.SPM_FILE] = spm_model
        for name, data in files.items():
            with fileio.open_file(os.path.join(staging, name), "wb") as f:
                f.write(data)
    except BaseException:
        fileio.rmtree(staging)
        raise
    fileio.publish_directory(staging, output_dir, last=(HF_CONFIG,))
    return [os.path.join(output_dir, name) for name in sorted(files)]
