"""HuggingFace's PyTorch XLNet pretraining step (the permutation LM objective) at the project's
Base step's shape on one GPU, timed: the baseline of benchmarks/gpu/step_comparison.py. One JSON
line: step ms, tokens/s, peak memory.

    python benchmarks/gpu/hf_xlnet_step.py [--compile] [--batch 16] [--steps 10] [--tiny]

XLNetLMHeadModel (12 layers, width 768, 12 heads, inner 3072, gelu_new, untied biases), memory
--mem, bf16 autocast, AdamW (fused on a GPU), global-norm clipping at 1; a batch as the
original's pretraining draws it: --predict targets in the second half that see neither
themselves nor later targets (perm_mask), target_mapping and labels. HuggingFace runs the query
stream over all positions (the project's step over the targets only), so it does more work per
token than the project counts. --tiny: 2 layers of width 64 on a short sequence (a rehearsal on
a CPU).
"""
import argparse
import json
import time

import torch
from transformers import XLNetConfig, XLNetLMHeadModel


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--mem", type=int, default=384)
    p.add_argument("--reuse", type=int, default=256)
    p.add_argument("--predict", type=int, default=85)
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--compile", action="store_true", help="the step under torch.compile")
    p.add_argument("--tiny", action="store_true", help="a tiny model and shape (rehearsal)")
    return p.parse_args()


def main():
    a = parse_args()
    if a.tiny:
        a.batch, a.seq, a.mem, a.reuse, a.predict, a.vocab = 4, 32, 16, 16, 5, 300
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    layers, width, heads, inner = (2, 64, 4, 128) if a.tiny else (12, 768, 12, 3072)
    config = XLNetConfig(vocab_size=a.vocab, d_model=width, n_layer=layers, n_head=heads,
                         d_inner=inner, ff_activation="gelu_new", untie_r=True, attn_type="bi",
                         mem_len=a.mem, reuse_len=a.reuse, bi_data=False, clamp_len=-1,
                         same_length=False, dropout=0.1)
    model = XLNetLMHeadModel(config).to(device).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, eps=1e-6,
                                  fused=device == "cuda")

    def batch():
        ids = torch.randint(10, a.vocab, (a.batch, a.seq), device=device)
        segments = torch.zeros(a.batch, a.seq, dtype=torch.long, device=device)
        segments[:, a.seq // 2:] = 1
        perm = torch.zeros(a.batch, a.seq, a.seq, device=device)
        mapping = torch.zeros(a.batch, a.predict, a.seq, device=device)
        labels = torch.empty(a.batch, a.predict, dtype=torch.long, device=device)
        for b in range(a.batch):
            targets = torch.randperm(a.seq - a.reuse, device=device)[:a.predict] + a.reuse
            perm[b, :, targets] = 1.0                   # no row sees a target ...
            for i, t in enumerate(targets):
                perm[b, t, targets[:i]] = 0.0           # ... but a target sees earlier ones
                mapping[b, i, t] = 1.0
                labels[b, i] = ids[b, t]
        return ids, segments, perm, mapping, labels

    batches = [batch() for _ in range(2)]
    autocast = torch.autocast(device_type=device, dtype=torch.bfloat16)

    def step(ids, segments, perm, mapping, labels, mems):
        with autocast:
            out = model(input_ids=ids, token_type_ids=segments, perm_mask=perm,
                        target_mapping=mapping, labels=labels, mems=mems, use_mems=True)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return out.loss.detach(), [m.detach() for m in out.mems]

    run = torch.compile(step) if a.compile else step
    mems = None
    start = time.perf_counter()
    for i in range(3):  # warm-up (and compilation)
        loss, mems = run(*batches[i % 2], mems)
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    warm_s = time.perf_counter() - start
    start = time.perf_counter()
    for i in range(a.steps):
        loss, mems = run(*batches[i % 2], mems)
    if device == "cuda":
        torch.cuda.synchronize()
    seconds = (time.perf_counter() - start) / a.steps
    print(json.dumps(dict(
        program="huggingface", mode="torch.compile" if a.compile else "eager",
        device=torch.cuda.get_device_name() if device == "cuda" else "cpu",
        torch=torch.__version__, batch=a.batch, seq=a.seq, mem=a.mem, layers=layers,
        warmup_s=round(warm_s, 1), step_ms=round(seconds * 1e3, 2),
        tokens_per_s=round(a.batch * a.seq / seconds), loss=float(loss),
        peak_memory_gb=round(torch.cuda.max_memory_allocated() / 1e9, 2)
        if device == "cuda" else None)), flush=True)


if __name__ == "__main__":
    main()
