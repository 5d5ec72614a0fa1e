"""HuggingFace PyTorch XLNet workloads for the side-by-side benchmark (benchmark-only code:
the library never imports torch)."""

from __future__ import annotations

import os
import sys
from typing import Optional

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))

from fixtures.hf_reference import hf_config  # noqa: E402


def _torch_inputs(batch, with_two_stream):
    import torch

    kwargs = {"input_ids": torch.tensor(batch["input_ids"], dtype=torch.long),
              "token_type_ids": torch.tensor(batch["segment_ids"], dtype=torch.long)}
    if with_two_stream:
        kwargs["perm_mask"] = torch.tensor(batch["perm_mask"])
        kwargs["target_mapping"] = torch.tensor(batch["target_mapping"])
    if "mems" in batch:
        kwargs["mems"] = [torch.tensor(np.ascontiguousarray(np.transpose(m, (1, 0, 2))))
                          for m in batch["mems"]]
        kwargs["use_mems"] = True
    return kwargs


def hf_pretrain_step(config, batch, clip_norm: float = 1.0, dropout: Optional[float] = None):
    """HF XLNetLMHeadModel: two streams with memory, LM loss, backward, clipping, AdamW
    (`dropout`: HF's dropout rate instead of the reference's 0)."""
    import torch
    import transformers

    hf = hf_config(config)
    if dropout is not None:
        hf.dropout = dropout
    model = transformers.XLNetLMHeadModel(hf).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, eps=1e-6, weight_decay=0.01)
    kwargs = _torch_inputs(batch, with_two_stream=True)
    target = torch.tensor(batch["target"], dtype=torch.long)

    def step():
        optimizer.zero_grad(set_to_none=True)
        logits = model(**kwargs).logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                 target.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
        optimizer.step()
        return float(loss.item())

    return step


def hf_inference(config, batch):
    """HF XLNetModel content-stream features under torch.inference_mode."""
    import torch
    import transformers

    model = transformers.XLNetModel(hf_config(config)).eval()
    kwargs = _torch_inputs({k: batch[k] for k in ("input_ids", "segment_ids")}, False)
    kwargs["use_mems"] = False

    def forward():
        with torch.inference_mode():
            return model(**kwargs).last_hidden_state.numpy()

    return forward
