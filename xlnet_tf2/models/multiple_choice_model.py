"""Multiple choice (RACE): every option its own sequence, one score each."""

from __future__ import annotations

import keras
import tensorflow as tf

from xlnet_tf2.models.heads import MultipleChoiceHead
from xlnet_tf2.models.task_model import TaskModel, token_inputs


@keras.saving.register_keras_serializable(package="xlnet_tf2")
class MultipleChoiceModel(TaskModel):
    """C options per question, each its own sequence: inputs [Q, C, L] -> logits [Q, C]."""

    KINDS = ("race",)
    kind = "race"

    def __init__(self, config, num_choices: int = 4, summary_type: str = "last",
                 head_dropout: float = 0.1, **kwargs):
        super().__init__(config, **kwargs)
        self.num_choices = num_choices
        self.summary_type = summary_type
        self.head_dropout = head_dropout
        c = self.config
        self.head = MultipleChoiceHead(c.d_model, num_choices, summary_type, n_head=c.n_head,
                                       dropout=head_dropout, initializer_range=c.initializer_range,
                                       name="multiple_choice_head")

    @classmethod
    def from_settings(cls, config, settings: dict, head_dropout: float = 0.1):
        return cls(config, settings.get("num_choices", 4), settings.get("summary_type", "last"),
                   head_dropout=head_dropout).build_weights()

    def task_settings(self, label_list=None, seq_len=None) -> dict:
        return dict(super().task_settings(label_list, seq_len), summary_type=self.summary_type,
                    num_choices=self.num_choices)

    def get_config(self):
        return {"config": self.config.to_dict(), "num_choices": self.num_choices,
                "summary_type": self.summary_type, "head_dropout": self.head_dropout,
                "name": self.name}

    def dummy_inputs(self, seq_len: int, batch_size: int = 1):
        flat = super().dummy_inputs(seq_len, batch_size * self.num_choices)
        return {k: tf.reshape(v, [batch_size, self.num_choices, seq_len]) for k, v in flat.items()}

    def call(self, inputs, training=None):
        inputs = token_inputs(inputs)
        seq_len = inputs["input_ids"].shape[-1]
        flat = {k: tf.reshape(v, [-1, seq_len]) for k, v in inputs.items()}  # [Q*C, L]
        hidden = self._backbone(flat, training)["hidden"]
        logits = self.head(hidden, attention_mask=flat["attention_mask"], training=training)
        return {"logits": logits}
