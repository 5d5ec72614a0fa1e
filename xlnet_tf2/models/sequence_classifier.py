"""Sequence classification and regression: backbone + sequence summary + logits."""

from __future__ import annotations

import keras
from xlnet_tf2.models.heads import ClassificationHead
from xlnet_tf2.models.task_model import TaskModel, token_inputs


@keras.saving.register_keras_serializable(package="xlnet_tf2")
class SequenceClassifier(TaskModel):
    """Classification (num_outputs = classes) or regression (num_outputs = 1).

    Returns {"logits": float32 [B, num_outputs], "pooled": [B, D], "hidden": [B, L, D]};
    compile's losses and metrics see the logits (TaskModel.MAIN_OUTPUT).
    """

    KINDS = ("classification", "regression")

    def __init__(self, config, num_outputs: int, summary_type: str = "last",
                 head_dropout: float = 0.1, **kwargs):
        super().__init__(config, **kwargs)
        self.num_outputs = num_outputs
        self.summary_type = summary_type
        self.head_dropout = head_dropout
        c = self.config
        self.head = ClassificationHead(c.d_model, num_outputs, summary_type, n_head=c.n_head,
                                       dropout=head_dropout, initializer_range=c.initializer_range,
                                       name="classification_head")

    @property
    def kind(self) -> str:
        return "regression" if self.num_outputs == 1 else "classification"

    @classmethod
    def from_settings(cls, config, settings: dict, head_dropout: float = 0.1):
        task = settings.get("task")
        labels = settings.get("label_list") or []
        if task == "classification" and len(labels) < 2:
            raise ValueError(f"a classification task.json needs a label_list of at least 2 "
                             f"labels, got {labels!r}.")
        return cls(config, 1 if task == "regression" else len(labels),
                   settings.get("summary_type", "last"), head_dropout=head_dropout).build_weights()

    def task_settings(self, label_list=None, seq_len=None) -> dict:
        settings = dict(super().task_settings(label_list, seq_len),
                        summary_type=self.summary_type, paired=False)
        if self.kind == "classification":
            labels = ([str(i) for i in range(self.num_outputs)] if label_list is None
                      else [str(label) for label in label_list])
            if len(labels) != self.num_outputs:
                raise ValueError(f"label_list names {len(labels)} labels; the model has "
                                 f"{self.num_outputs} outputs.")
            settings["label_list"] = labels
        return settings

    def get_config(self):
        return {"config": self.config.to_dict(), "num_outputs": self.num_outputs,
                "summary_type": self.summary_type, "head_dropout": self.head_dropout,
                "name": self.name}

    def call(self, inputs, training=None):
        inputs = token_inputs(inputs)
        hidden = self._backbone(inputs, training)["hidden"]
        logits, pooled = self.head(hidden, attention_mask=inputs["attention_mask"],
                                   training=training)
        return {"logits": logits, "pooled": pooled, "hidden": hidden}
