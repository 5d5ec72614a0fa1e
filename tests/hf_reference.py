"""Test helper: HuggingFace's PyTorch XLNet as the independent reference implementation.

Only tests and benchmarks import this module; the library never depends on torch.
"""

from __future__ import annotations

import numpy as np

import xlnet_tf2
from xlnet_tf2.conversion import assign_weights, huggingface_weight_map


def hf_config(config: xlnet_tf2.XLNetConfig):
    import transformers

    return transformers.XLNetConfig(
        vocab_size=config.n_token, d_model=config.d_model, n_layer=config.n_layer,
        n_head=config.n_head, d_head=config.d_head, d_inner=config.d_inner,
        ff_activation="gelu_new" if config.ff_activation == "gelu" else "relu",
        untie_r=config.untie_r, attn_type=config.attn_type, bi_data=config.bi_data,
        clamp_len=config.clamp_len, same_length=config.same_length,
        mem_len=config.mem_len or None, reuse_len=config.reuse_len or None, dropout=0.0,
        layer_norm_eps=1e-12)


def random_hf_model(config: xlnet_tf2.XLNetConfig, seed: int = 0, architecture: str = "XLNetLMHeadModel",
                    **hf_overrides):
    """An HF XLNet model (`architecture`: XLNetLMHeadModel or a task class such as
    XLNetForSequenceClassification) with every parameter random (LayerNorms and biases
    included, so a swapped gamma/beta or a missing bias changes the outputs).
    `hf_overrides` set HF config fields (num_labels, summary_type, start_n_top, ...)."""
    import torch
    import transformers

    torch.manual_seed(seed)
    hf_cfg = hf_config(config)
    for key, value in hf_overrides.items():
        setattr(hf_cfg, key, value)
    model = getattr(transformers, architecture)(hf_cfg).eval()
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            noise = torch.randn(param.shape, generator=generator) * 0.1
            if name.endswith(("layer_norm.weight", "LayerNorm.weight")):
                param.copy_(1.0 + noise)
            else:
                param.copy_(noise)
        if not config.untie_r:  # one shared bias set: copy layer 0's into every layer
            first = model.transformer.layer[0].rel_attn
            for layer in model.transformer.layer[1:]:
                for name in ("r_w_bias", "r_r_bias", "r_s_bias"):
                    getattr(layer.rel_attn, name).copy_(getattr(first, name))
    return model


def hf_state_numpy(hf_model) -> dict:
    return {k: v.detach().cpu().numpy() for k, v in hf_model.state_dict().items()}


def ours_from_hf(hf_model, config: xlnet_tf2.XLNetConfig):
    model = xlnet_tf2.XLNetLMHeadModel(config)
    model.build()
    result = assign_weights(huggingface_weight_map(model), hf_state_numpy(hf_model), "test")
    unused = result.unused
    assert result.initialized == []
    # lm_loss.weight is tied to the embedding; with untie_r=False only layer 0's bias copy is read.
    expected_unused = {"lm_loss.weight"} | {
        f"transformer.layer.{i}.rel_attn.{name}" for i in range(1, config.n_layer)
        for name in ("r_w_bias", "r_r_bias", "r_s_bias") if not config.untie_r}
    assert set(unused) == expected_unused, unused
    return model


def run_hf(hf_model, inputs: dict):
    """Runs the HF model on our batch-major numpy inputs; returns numpy outputs in our layout."""
    import torch

    kwargs = {"input_ids": torch.tensor(inputs["input_ids"], dtype=torch.long), "use_mems": True}
    if "segment_ids" in inputs:
        kwargs["token_type_ids"] = torch.tensor(inputs["segment_ids"], dtype=torch.long)
    if "attention_mask" in inputs:
        kwargs["attention_mask"] = torch.tensor(inputs["attention_mask"], dtype=torch.float32)
    if "perm_mask" in inputs:
        kwargs["perm_mask"] = torch.tensor(inputs["perm_mask"], dtype=torch.float32)
    if "target_mapping" in inputs:
        kwargs["target_mapping"] = torch.tensor(inputs["target_mapping"], dtype=torch.float32)
    if "mems" in inputs:
        kwargs["mems"] = [torch.tensor(np.transpose(m, (1, 0, 2))) for m in inputs["mems"]]
    with torch.no_grad():
        out = hf_model(**kwargs, output_hidden_states=True)
    return {
        "logits": out.logits.numpy(),
        "hidden": out.hidden_states[-1].numpy(),
        "new_mems": [np.transpose(m.numpy(), (1, 0, 2)) for m in out.mems],
    }
