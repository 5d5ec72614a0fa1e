"""One vector per sequence from the hidden states: `last`, `first`, `mean` or `attn`.

Letters (docs/GLOSSARY.md): B batch, L sequence length, D model width.

Which token the summary reads depends on the input layout (xlnet_tf2/tokenizers/packing.py):
the original XLNet layout `A <sep> B <sep> <cls>` is LEFT-padded, so the last position is
always `<cls>` and `last` reads it. `first` goes with the `<cls> A <sep> B <sep>` right-padded
layout. `mean` averages the real tokens only (the original also averaged padding) and `attn`
pools with one learned query attending over the real tokens.
"""

from __future__ import annotations

import keras
import tensorflow as tf

from xlnet_tf2.layers.dropout import Dropout
from xlnet_tf2.layers.xlnet_block import normal_initializer

SUMMARY_TYPES = ("last", "first", "mean", "attn")


@keras.saving.register_keras_serializable(package="xlnet_tf2")
class SequenceSummary(keras.layers.Layer):
    """hidden [B, L, D] (+ attention_mask [B, L], 1 = real) -> summary [B, D].

    The pooled vector goes through dense(D, tanh) and dropout, as the original's
    `summarize_sequence(use_proj=True)`.
    """

    def __init__(self, d_model: int, summary_type: str = "last", n_head: int = 1,
                 dropout: float = 0.1, initializer_range: float = 0.02, **kwargs):
        super().__init__(**kwargs)
        if summary_type not in SUMMARY_TYPES:
            raise ValueError(f"summary_type must be one of {SUMMARY_TYPES}, got {summary_type!r}.")
        if d_model % n_head:
            raise ValueError(f"d_model={d_model} must be divisible by n_head={n_head}.")
        self.d_model = d_model
        self.summary_type = summary_type
        self.n_head = n_head
        self.dropout_rate = dropout
        self.initializer_range = initializer_range
        init = normal_initializer(initializer_range)
        # Sublayers follow this layer's dtype policy (a `dtype=` given to the layer alone).
        policy = self.dtype_policy
        if summary_type == "attn":
            self.attention = keras.layers.MultiHeadAttention(
                n_head, d_model // n_head, kernel_initializer=init, name="attention", dtype=policy)
        self.proj = keras.layers.Dense(d_model, activation="tanh", kernel_initializer=init,
                                       name="summary", dtype=policy)
        self.dropout = Dropout(dropout, dtype=policy)

    def build(self, input_shape=None):
        d = self.d_model
        if self.summary_type == "attn":
            init = normal_initializer(self.initializer_range)
            self.query = self.add_weight(name="query", shape=(1, 1, d), initializer=init)
            self.attention.build((None, 1, d), (None, None, d))
        self.proj.build((None, d))
        self.built = True

    def get_config(self):
        config = super().get_config()
        config.update(d_model=self.d_model, summary_type=self.summary_type, n_head=self.n_head,
                      dropout=self.dropout_rate, initializer_range=self.initializer_range)
        return config

    def call(self, hidden, attention_mask=None, training=None, plan=None):
        if self.summary_type == "last":
            pooled = hidden[:, -1]                                        # [B, D]
        elif self.summary_type == "first":
            pooled = hidden[:, 0]                                         # [B, D]
        else:
            if attention_mask is None:
                attention_mask = tf.ones(tf.shape(hidden)[:2], hidden.dtype)
            mask = tf.cast(attention_mask, hidden.dtype)                  # [B, L]
            if self.summary_type == "mean":
                total = tf.einsum("bld,bl->bd", hidden, mask)             # [B, D]
                pooled = total / tf.maximum(tf.reduce_sum(mask, axis=1, keepdims=True), 1.0)
            else:
                batch = tf.shape(hidden)[0]
                query = tf.broadcast_to(tf.cast(self.query, hidden.dtype), [batch, 1, self.d_model])
                pooled = self.attention(query, hidden, attention_mask=tf.cast(
                    mask[:, None, :], tf.bool), training=training)[:, 0]  # [B, D]
        return self.dropout(self.proj(pooled), training=training, plan=plan)
