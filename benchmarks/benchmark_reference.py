"""HuggingFace PyTorch XLNet workloads for the side-by-side benchmark (benchmark-only code:
the library never imports torch)."""

from __future__ import annotations

import os
import sys
from typing import Optional

import _paths  # noqa: E402,F401  (the checkout's root on sys.path)

import numpy as np


from benchmarks.tools.hf_reference import hf_config  # noqa: E402
from benchmarks.tools.loop_benchmark import time_loops  # noqa: E402  (TensorFlow-free)


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


def hf_pretrain_loop(spec, learning_rate: float = 1e-4, clip_norm: float = 1.0) -> dict:
    """A plain HuggingFace PyTorch pretraining loop on the loop benchmark's batches
    (benchmarks/tools/loop_benchmark.py): XLNetLMHeadModel at dropout 0.1, the loss averaged over the real
    targets, backward, global-norm clipping, torch AdamW; the memory (HF's `mems`, [M, B, D]
    per layer) carried from step to step, zero at the start and for rows that start a stream
    (chunk 0), as the real loop. Returns `contender_result` of its loops of
    `spec.steps_per_loop` steps (the first, warm-up, not timed)."""
    import torch
    import transformers

    torch.set_num_threads(spec.threads or os.cpu_count())
    torch.manual_seed(0)
    config = spec.xlnet_config()
    hf = hf_config(config)
    hf.dropout = config.dropout
    model = transformers.XLNetLMHeadModel(hf).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate, eps=1e-6,
                                  weight_decay=0.01)
    with np.load(spec.dense_batches_path) as f:
        batches = {k: torch.from_numpy(f[k]) for k in f.files}
    num_batches = batches["input_ids"].shape[0]
    mems = [torch.zeros(config.mem_len, spec.batch_size, config.d_model)
            for _ in range(config.n_layer)]
    state = {"step": 0, "mems": mems, "loss": None}

    def train_step():
        i = state["step"] % num_batches
        keep = (batches["chunk_index"][i] > 0).float()[None, :, None]  # [1, B, 1]
        optimizer.zero_grad(set_to_none=True)
        outputs = model(input_ids=batches["input_ids"][i].long(),
                        token_type_ids=batches["segment_ids"][i].long(),
                        perm_mask=batches["perm_mask"][i].float(),
                        target_mapping=batches["target_mapping"][i].float(),
                        mems=[m * keep for m in state["mems"]], use_mems=True)
        logits = outputs.logits  # [B, P, V]
        ce = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                               batches["target"][i].reshape(-1).long(),
                                               reduction="none")
        mask = batches["target_mask"][i].reshape(-1)
        loss = (ce * mask).sum() / mask.sum().clamp(min=1.0)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
        optimizer.step()
        state["mems"] = [m.detach() for m in outputs.mems]
        state["step"] += 1
        state["loss"] = float(loss.item())

    def run_steps(n):
        for _ in range(n):
            train_step()

    result = time_loops(run_steps, spec.steps, spec.steps_per_loop)
    return dict(result, last_loss=state["loss"])


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
