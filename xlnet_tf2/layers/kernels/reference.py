"""The attention op in TensorFlow ops: runs everywhere; the parity tests' numbers.

softmax(scale * (q . k + bias), blocked entries excluded), dropout on the probabilities, then the
weighted sum of values. Under float32 TensorFlow's own softmax and gradient; under mixed
precision `masked_softmax`, which keeps only the narrow probabilities for the backward pass.
"""

from __future__ import annotations

import tensorflow as tf


# Large negative for blocked scores. Scores are masked in float32 (never in float16/bfloat16),
# so the original's 1e30 constant cannot overflow under mixed precision.
BLOCKED_SCORE = -1e30


def masked_softmax(scores: tf.Tensor, mask, scale: float) -> tf.Tensor:
    """softmax(scores * scale, blocked entries -1e30) over the last axis, for narrow scores.

    scores: [B, N, S, K] in float16 / bfloat16; mask: bool [B, S, K] (True = blocked) or None.
    Returns the probabilities in the scores' dtype.

    The softmax runs in float32 (a fusion's registers on a GPU), but the only score-sized
    tensor kept for the backward pass is the narrow result: TensorFlow's own gradient would
    keep the float32 probabilities (twice the bytes, written once and read once per layer and
    stream). The backward pass recomputes in float32 from the narrow probabilities,
    d scores = scale * p * (dp - sum(dp * p)), zero where blocked: the probabilities the
    backward pass sees are the ones the forward pass used (the value product reads them
    narrow too). The blocked value never exists in the narrow dtype (float16 tops out at
    65504).
    """
    narrow = scores.dtype

    @tf.custom_gradient
    def softmax(x):
        wide = tf.cast(x, tf.float32) * scale
        if mask is not None:
            wide = tf.where(mask[:, None], tf.constant(BLOCKED_SCORE, tf.float32), wide)
        probs = tf.cast(tf.nn.softmax(wide, axis=-1), narrow)

        def grad(d_probs):
            p = tf.cast(probs, tf.float32)
            d = tf.cast(d_probs, tf.float32)
            d_wide = (d - tf.reduce_sum(d * p, axis=-1, keepdims=True)) * p
            if mask is not None:
                d_wide = tf.where(mask[:, None], tf.zeros_like(d_wide), d_wide)
            return tf.cast(d_wide * scale, narrow)

        return probs, grad

    return softmax(scores)


def reference_attention(queries, keys, values, bias, blocked, *, scale, dropout, training,
                        dropout_rows=None, plan=None):
    """`attention` in TensorFlow ops. Under float32 TensorFlow's own softmax and gradient (the
    float32 numbers are the parity tests' and must not move); under mixed precision
    `masked_softmax`, which keeps only narrow probabilities for the backward pass."""
    scores = tf.einsum("bnsh,bnkh->bnsk", queries, keys) + bias
    if scores.dtype == tf.float32:
        scores = scores * scale
        if blocked is not None:
            scores = tf.where(blocked[:, None], tf.constant(BLOCKED_SCORE, tf.float32), scores)
        probs = tf.nn.softmax(scores, axis=-1)
    else:
        probs = masked_softmax(scores, blocked, scale)
    probs = dropout(probs, training=training, row_draws=dropout_rows, plan=plan)
    return tf.einsum("bnsk,bnkh->bnsh", probs, values)
