"""The position scores in the layout the Triton kernels read (kernels/triton_attention.py):
layers/xlnet_block.py's `RelativeAttention` calls it where the step runs them (GPU)."""

from __future__ import annotations

import tensorflow as tf


def example_position_product(queries, k_r):
    """einsum("bnsh,bnth->bnst") with example b reading direction group b // (B / X):
    queries [B, N, S, H], k_r [X, T, N, H] -> [B, N, S, T], row-major.

    For a consumer that reads the position scores as a buffer in this layout (the Triton
    kernels, kernels/triton_attention.py): a product batched over (x, n), as
    layers/xlnet_block.py's `grouped_position_product`'s, comes out [X, N, B/X, S, T] and XLA adds a transpose of the
    whole T-wide tensor (forward and backward) to hand it over. Batched over (b, n) instead,
    with k_r repeated for each example of its group ([B, N, T, H], a few MB), the products
    write and read the layout the kernels take; the FLOPs are the same."""
    groups = k_r.shape[0]
    per_example = tf.repeat(tf.transpose(k_r, [0, 2, 1, 3]), queries.shape[0] // groups,
                            axis=0)                                           # [B, N, T, H]
    return tf.einsum("bnsh,bnth->bnst", queries, per_example)
