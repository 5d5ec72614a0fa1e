"""Multiple-choice head (RACE): one score per option, softmax over the options."""

from __future__ import annotations

import keras
import tensorflow as tf

from xlnet_tf2.heads.sequence_summary import SequenceSummary
from xlnet_tf2.layers.relative_attention import normal_initializer


@keras.saving.register_keras_serializable(package="xlnet_tf2")
class MultipleChoiceHead(keras.layers.Layer):
    """hidden [B*C, L, D] of C options per question -> float32 logits [B, C]."""

    def __init__(self, d_model: int, num_choices: int, summary_type: str = "last",
                 n_head: int = 1, dropout: float = 0.1, initializer_range: float = 0.02,
                 **kwargs):
        super().__init__(**kwargs)
        self.d_model = d_model
        self.num_choices = num_choices
        self.summary_type = summary_type
        self.n_head = n_head
        self.dropout_rate = dropout
        self.initializer_range = initializer_range
        self.summary = SequenceSummary(d_model, summary_type, n_head=n_head, dropout=dropout,
                                       initializer_range=initializer_range, name="sequence_summary")
        self.score = keras.layers.Dense(1, kernel_initializer=normal_initializer(initializer_range),
                                        name="logit")

    def build(self, input_shape=None):
        self.summary.build()
        self.score.build((None, self.d_model))
        self.built = True

    def get_config(self):
        config = super().get_config()
        config.update(d_model=self.d_model, num_choices=self.num_choices,
                      summary_type=self.summary_type, n_head=self.n_head,
                      dropout=self.dropout_rate, initializer_range=self.initializer_range)
        return config

    def call(self, hidden, attention_mask=None, training=None):
        pooled = self.summary(hidden, attention_mask=attention_mask, training=training)  # [B*C, D]
        scores = tf.cast(self.score(pooled), tf.float32)                                  # [B*C, 1]
        return tf.reshape(scores, [-1, self.num_choices])                                 # [B, C]
