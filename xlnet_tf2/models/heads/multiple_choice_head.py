"""Multiple-choice head (RACE): one score per option, softmax over the options."""

from __future__ import annotations

import keras
import tensorflow as tf

from xlnet_tf2.models.heads.classification_head import ClassificationHead


@keras.saving.register_keras_serializable(package="xlnet_tf2")
class MultipleChoiceHead(ClassificationHead):
    """hidden [Q*C, L, D] of C options per question -> float32 logits [Q, C].

    A one-output classification head scores each option's summary; the scores of a
    question's C consecutive rows are its logits.
    """

    def __init__(self, d_model: int, num_choices: int, summary_type: str = "last",
                 n_head: int = 1, dropout: float = 0.1, initializer_range: float = 0.02,
                 **kwargs):
        super().__init__(d_model, 1, summary_type, n_head=n_head, dropout=dropout,
                         initializer_range=initializer_range, **kwargs)
        self.num_choices = num_choices

    def get_config(self):
        config = super().get_config()
        del config["num_outputs"]
        config["num_choices"] = self.num_choices
        return config

    def call(self, hidden, attention_mask=None, training=None, plan=None):
        scores, _ = super().call(hidden, attention_mask=attention_mask, training=training,
                                 plan=plan)                                          # [Q*C, 1]
        return tf.reshape(scores, [-1, self.num_choices])                                   # [Q, C]
