"""Classification / regression head: sequence summary -> logits [B, num_outputs]."""

from __future__ import annotations

import keras
import tensorflow as tf

from xlnet_tf2.models.heads.sequence_summary import SequenceSummary
from xlnet_tf2.layers.xlnet_block import normal_initializer


@keras.saving.register_keras_serializable(package="xlnet_tf2")
class ClassificationHead(keras.layers.Layer):
    """hidden [B, L, D] -> float32 logits [B, num_outputs] (num_outputs = 1: a regression score).

    summary = dense(D, tanh) over the summarized token, dropout, then a dense layer to the
    outputs (docs/SEMANTICS.md#fine-tuning-formats).
    """

    def __init__(self, d_model: int, num_outputs: int, summary_type: str = "last",
                 n_head: int = 1, dropout: float = 0.1, initializer_range: float = 0.02,
                 **kwargs):
        super().__init__(**kwargs)
        self.d_model = d_model
        self.num_outputs = num_outputs
        self.summary_type = summary_type
        self.n_head = n_head
        self.dropout_rate = dropout
        self.initializer_range = initializer_range
        # Sublayers follow this layer's dtype policy (a `dtype=` given to the head alone).
        self.summary = SequenceSummary(d_model, summary_type, n_head=n_head, dropout=dropout,
                                       initializer_range=initializer_range, name="sequence_summary",
                                       dtype=self.dtype_policy)
        self.logits = keras.layers.Dense(num_outputs, kernel_initializer=normal_initializer(
            initializer_range), name="logit", dtype=self.dtype_policy)

    def build(self, input_shape=None):
        self.summary.build()
        self.logits.build((None, self.d_model))
        self.built = True

    def get_config(self):
        config = super().get_config()
        config.update(d_model=self.d_model, num_outputs=self.num_outputs,
                      summary_type=self.summary_type, n_head=self.n_head,
                      dropout=self.dropout_rate, initializer_range=self.initializer_range)
        return config

    def call(self, hidden, attention_mask=None, training=None, plan=None):
        pooled = self.summary(hidden, attention_mask=attention_mask, training=training, plan=plan)
        return tf.cast(self.logits(pooled), tf.float32), pooled
