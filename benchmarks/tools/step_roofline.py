"""The pretraining step's roofline at XLNet-Base, computed analytically (BENCHMARKS.md, "The
pretraining step's roofline at XLNet-Base"). Prints a markdown table of each part's FLOPs and
bytes (forward + backward) and its time floor max(FLOPs / peak, bytes / bandwidth).

  python -m benchmarks.tools.step_roofline [--batch 16] [--vocab 30000]

The byte model is the least traffic of the program's present structure (no attention kernel
that keeps scores on chip): every matmul reads its operands once and writes its result once,
its backward pass reads and writes three times as much (dX = dY W^T, dW = X^T dY); every
element-wise chain between two matmuls is one fusion that reads its inputs and writes its
outputs once; activations and scores in bfloat16 (2 bytes), masks 1 byte per (example, row,
key), shared by the heads; master weights, gradients and AdamW slots in float32. FLOPs as
pretrain_step_flops (xlnet_tf2/training/metrics_logger.py) counts them, plus the element-wise
work it leaves out.
"""

import argparse

PEAK_FLOPS, BANDWIDTH = 989e12, 3.35e12  # H100 SXM: dense bf16, HBM3


def parts(B=16, L=512, M=384, P=85, D=768, N=12, H=64, F=3072, V=30000, layers=12, X=2):
    K, T, NH = M + L, M + 2 * L, N * H
    S = L + P  # query rows of both streams
    a = 2  # bytes per bfloat16 element

    def mm(m, k, n, batch=1, out_bytes=a):
        """FLOPs and bytes of a matmul [m, k] x [k, n] (batch of them), forward + backward."""
        flops = 3 * 2 * batch * m * k * n
        bytes_ = 3 * batch * (a * m * k + a * k * n + out_bytes * m * n)
        return flops, bytes_

    rows = {}

    def add(name, flops, bytes_):
        f, b = rows.get(name, (0, 0))
        rows[name] = (f + flops * layers, b + bytes_ * layers)

    # Projections: q of both streams, k and v over K keys, r over T positions per direction
    # group, o of both streams; weights [D, NH].
    for m in (B * L, B * P, B * K, B * K, B * S):
        add("projections q, k, v, r, o", *mm(m, D, NH))
    add("projections q, k, v, r, o", *mm(X * T, D, NH))
    # Score matmuls, per stream: ac [S, H] x [H, K], bd [S, H] x [H, T] (before the shift),
    # probabilities x values [S, K] x [K, H]; batch B * N.
    for rows_s in (L, P):
        add("AC + BD + AV (score matmuls)", *mm(rows_s, H, K, B * N))
        add("AC + BD + AV (score matmuls)", *mm(rows_s, H, T, B * N))
        add("AC + BD + AV (score matmuls)", *mm(rows_s, K, H, B * N))
    # Mask + softmax + dropout, per score: forward reads ac and the bd window (2 + 2 bytes),
    # the mask, writes the probabilities kept for the backward pass and the dropped ones for
    # the value product (2 + 2); backward reads the probabilities' gradient and the kept
    # probabilities (2 + 2), writes the scores' gradient (2), and puts the bd gradient back
    # into T columns (reads 2 per score, writes 2 per position score). ~12 FLOPs per score
    # forward (scale, mask, max, exp, sum, divide, dropout), ~8 backward, plus the hash.
    scores = B * N * S * K
    position_scores = B * N * S * T
    masks = 2 * B * S * K  # attention mask and segment mismatch, 1 byte each, head-shared
    add("mask + softmax + dropout", 20 * scores, 8 * scores + masks + 8 * scores
        + a * position_scores + masks)
    # Feed-forward of both streams: [B S, D] x [D, F], GELU, [B S, F] x [F, D].
    add("feed-forward (both streams)", *mm(B * S, D, F))
    add("feed-forward (both streams)", *mm(B * S, F, D))
    # GELU: forward reads and writes, backward reads two and writes one.
    add("feed-forward (both streams)", 8 * 3 * B * S * F, a * B * S * F * 5)
    # LayerNorm, residuals and hidden dropouts (2 per stream per layer), on [B S, D].
    add("LayerNorm, residuals, hidden dropout", 3 * 30 * B * S * D, a * B * S * D * 20)
    # LM head over the P predictions (float32 logits), the loss, the tied embedding.
    flops, bytes_ = mm(B * P, D, V, out_bytes=4)
    rows["LM head + loss (85 rows)"] = (flops + 3 * 10 * B * P * V, bytes_ + 3 * 4 * B * P * V)
    # Optimizer: clipping's norm (read gradients), AdamW (read gradient, weight, m, v; write
    # weight, m, v) and the bfloat16 copy of the weights (read 4, write 2), float32 throughout.
    params = layers * (5 * D * NH + 2 * NH * 3 + 2 * NH + 2 * D * F + F + D + 4 * D) + V * D
    rows["optimizer (clipping + AdamW)"] = (20 * params, params * (4 + 28 + 6))
    return rows, dict(B=B, L=L, M=M, K=K, T=T, P=P, scores_per_layer=scores,
                      position_scores_per_layer=position_scores, params=params)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--vocab", type=int, default=30000)
    a = parser.parse_args()
    rows, dims = parts(B=a.batch, V=a.vocab)
    print(dims)
    print("| part | GFLOP | GB | FLOP time ms | byte time ms | floor ms |")
    print("|---|---|---|---|---|---|")
    total_f = total_b = total_floor = 0.0
    for name, (f, b) in rows.items():
        tf_, tb = f / PEAK_FLOPS * 1e3, b / BANDWIDTH * 1e3
        total_f, total_b, total_floor = total_f + f, total_b + b, total_floor + max(tf_, tb)
        print(f"| {name} | {f / 1e9:,.0f} | {b / 1e9:.2f} | {tf_:.2f} | {tb:.2f} | "
              f"{max(tf_, tb):.2f} |")
    print(f"| total | {total_f / 1e9:,.0f} | {total_b / 1e9:.2f} | "
          f"{total_f / PEAK_FLOPS * 1e3:.2f} | {total_b / BANDWIDTH * 1e3:.2f} | "
          f"{total_floor:.2f} |")
    pass_gb = dims["scores_per_layer"] * 12 * 2 / 1e9
    print(f"one bfloat16 pass over every score of the step: {pass_gb:.2f} GB = "
          f"{pass_gb * 1e9 / BANDWIDTH * 1e3:.3f} ms")


if __name__ == "__main__":
    main()
