"""Extractive question answering (SQuAD 1.1/2.0): backbone + start/end/answer-class head."""

from __future__ import annotations

import keras
import tensorflow as tf

from xlnet_tf2.models.heads import SquadHead
from xlnet_tf2.models.xlnet_model import ModelInputError
from xlnet_tf2.models.task_model import TaskModel, token_inputs


@keras.saving.register_keras_serializable(package="xlnet_tf2")
class SquadModel(TaskModel):
    """SQuAD 1.1/2.0; see `xlnet_tf2.models.heads.SquadHead` for the outputs (several
    logits, no one main output: compile's losses and metrics take labels keyed by output)."""

    MAIN_OUTPUT = None
    KINDS = ("squad",)
    kind = "squad"

    def __init__(self, config, start_n_top: int = 5, end_n_top: int = 5,
                 head_dropout: float = 0.1, **kwargs):
        super().__init__(config, **kwargs)
        self.start_n_top = start_n_top
        self.end_n_top = end_n_top
        self.head_dropout = head_dropout
        c = self.config
        self.head = SquadHead(c.d_model, start_n_top, end_n_top, dropout=head_dropout,
                              initializer_range=c.initializer_range, name="squad_head")

    @classmethod
    def from_settings(cls, config, settings: dict, head_dropout: float = 0.1):
        n_top = settings.get("n_best_size", 5)
        return cls(config, n_top, n_top, head_dropout=head_dropout).build_weights()

    def task_settings(self, label_list=None, seq_len=None) -> dict:
        if self.start_n_top != self.end_n_top:
            raise ValueError(f"start_n_top={self.start_n_top} and end_n_top={self.end_n_top} "
                             "differ; task.json keeps one beam width (n_best_size) for both.")
        return dict(super().task_settings(label_list, seq_len), n_best_size=self.start_n_top)

    def dummy_length(self) -> int:
        return max(8, self.start_n_top, self.end_n_top)  # the beam needs n_top positions

    def get_config(self):
        return {"config": self.config.to_dict(), "start_n_top": self.start_n_top,
                "end_n_top": self.end_n_top, "head_dropout": self.head_dropout, "name": self.name}

    def dummy_inputs(self, seq_len: int, batch_size: int = 1):
        inputs = super().dummy_inputs(seq_len, batch_size)
        inputs.update(p_mask=tf.zeros([batch_size, seq_len], tf.int32),
                      cls_index=tf.fill([batch_size], seq_len - 1))
        return inputs

    def call(self, inputs, training=None):
        missing = sorted({"p_mask", "cls_index"} - set(inputs if isinstance(inputs, dict) else ()))
        if missing:
            raise ModelInputError(f"SquadModel needs {missing} besides the token inputs: p_mask "
                                  "[B, L] (1 = not part of an answer) and cls_index [B] (where "
                                  "<cls> is), as the SQuAD features hold them.")
        hidden = self._backbone(token_inputs(inputs), training)["hidden"]
        return self.head(hidden, inputs["p_mask"], inputs["cls_index"],
                         start_positions=inputs.get("start_positions"), training=training)
