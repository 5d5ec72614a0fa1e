"""The position scores' product with the custom gradient that keeps the score-sized gradient in
one layout (relative_attention.py's `attend` calls it)."""

from __future__ import annotations

import tensorflow as tf


@tf.custom_gradient
def grouped_position_product(queries, k_r):
    """einsum("xbnsh,xtnh->xbnst"): queries [X, B/X, N, S, H], k_r [X, T, N, H].

    The gradient is TensorFlow's, but with k_r's product written as queries^T . d_scores: so
    both backward products read the score-sized gradient in the layout the forward product
    wrote, and a compiler materializes it once (the other order asked for a second, transposed
    copy of it for k_r's product)."""
    def grad(d_scores):
        d_queries = tf.einsum("xbnst,xtnh->xbnsh", d_scores, k_r)
        d_k_r = tf.einsum("xbnsh,xbnst->xnht", queries, d_scores)  # [X, N, H, T]
        return d_queries, tf.transpose(d_k_r, [0, 3, 1, 2])

    return tf.einsum("xbnsh,xtnh->xbnst", queries, k_r), grad

