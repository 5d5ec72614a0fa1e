"""The attention op of the model: softmax(scale * (q . k + bias), blocked entries excluded),
dropout on the probabilities, then the weighted sum of values.

Letters (docs/GLOSSARY.md): B batch, N heads, S query rows, K keys, H head size.

XLNet's relative attention (layers/relative_attention.py) gives every score a content part
q . k and a part that is not a product of a query row and a key row (the shifted position
scores and the segment term): that part is the `bias`. Whatever computes the op must produce
the same probabilities; `attention` is the one entry point, so an implementation that fuses
the whole op into one kernel can replace the reference without touching the layers.
"""

from __future__ import annotations

from typing import Optional

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


def attention(queries: tf.Tensor, keys: tf.Tensor, values: tf.Tensor, bias: tf.Tensor,
              blocked: Optional[tf.Tensor], *, scale: float, dropout, training) -> tf.Tensor:
    """The attention op.

    Args:
      queries: [B, N, S, H]; keys, values: [B, N, K, H]; bias: [B, N, S, K] (added to q . k
        before scaling), all in the compute dtype.
      blocked: bool [B, S, K], True where a query row must not see a key, or None.
      scale: the scores' factor (1 / sqrt(H)).
      dropout: the probabilities' dropout (a layers/dropout.py Dropout, called with
        `training`).
    Returns:
      [B, N, S, H] in the compute dtype.

    Under float32 TensorFlow's own softmax and gradient (the float32 numbers are the parity
    tests' and must not move); under mixed precision `masked_softmax`, which keeps only
    narrow probabilities for the backward pass.
    """
    scores = tf.einsum("bnsh,bnkh->bnsk", queries, keys) + bias
    if scores.dtype == tf.float32:
        scores = scores * scale
        if blocked is not None:
            scores = tf.where(blocked[:, None], tf.constant(BLOCKED_SCORE, tf.float32), scores)
        probs = tf.nn.softmax(scores, axis=-1)
    else:
        probs = masked_softmax(scores, blocked, scale)
    probs = dropout(probs, training=training)
    return tf.einsum("bnsk,bnkh->bnsh", probs, values)
