"""Token classification (named entities, part-of-speech tags): `TokenClassifier`, the backbone
with one dense layer on every position's hidden state (HuggingFace's
XLNetForTokenClassification: `classifier`, an nn.Linear on the last hidden state, no summary).

The head's weights in HuggingFace's names are `huggingface_head_map` below, beside the layer
they fill, so the conversion floor reads them from the model (`conversion/head_maps.py`).
"""

from __future__ import annotations

from typing import List, Optional

import keras

from xlnet_tf2.conversion.weight_maps import WeightSource, transposed
from xlnet_tf2.models.head_model import HeadModel, token_inputs

TASK = "token_classification"


@keras.saving.register_keras_serializable(package="xlnet_tf2")
class TokenClassifier(HeadModel):
    """One label per position.

    Returns {"logits": float32 [B, L, C] (C = num_labels), "hidden": [B, L, D]}; compile's
    losses and metrics see the logits. Head dropout applies in training only (HuggingFace's
    head has none, so inference matches XLNetForTokenClassification exactly).
    """

    KINDS = (TASK,)
    kind = TASK
    HUGGINGFACE_ARCHITECTURE = "XLNetForTokenClassification"

    def __init__(self, config, num_labels: int, head_dropout: float = 0.1, **kwargs):
        super().__init__(config, **kwargs)
        if num_labels < 1:
            raise ValueError(f"num_labels must be at least 1, got {num_labels}.")
        self.num_labels = num_labels
        self.head_dropout = head_dropout
        self.dropout = keras.layers.Dropout(head_dropout)
        self.classifier = keras.layers.Dense(
            num_labels, kernel_initializer=keras.initializers.TruncatedNormal(
                stddev=self.config.initializer_range), name="classifier")

    def call(self, inputs, training=None):
        tokens = token_inputs(inputs)
        hidden = self._backbone(tokens, training)["hidden"]
        logits = self.classifier(self.dropout(hidden, training=training))
        return {"logits": logits, "hidden": hidden}

    @classmethod
    def from_settings(cls, config, settings: dict, head_dropout: float = 0.1):
        labels = settings.get("label_list") or []
        if not labels:
            raise ValueError(f"a {TASK} task.json needs a label_list, got {labels!r}.")
        return cls(config, len(labels), head_dropout=head_dropout).build_weights()

    def task_settings(self, label_list=None, seq_len: Optional[int] = None) -> dict:
        labels = ([str(i) for i in range(self.num_labels)] if label_list is None
                  else [str(label) for label in label_list])
        if len(labels) != self.num_labels:
            raise ValueError(f"label_list names {len(labels)} labels; the model has "
                             f"{self.num_labels} outputs.")
        return {"task": TASK, "seq_len": seq_len or 128, "layout": "cls_last",
                "label_list": labels}

    def huggingface_head_map(self) -> List[WeightSource]:
        """XLNetForTokenClassification's head: `classifier.{weight [C, D], bias [C]}`."""
        return [transposed("classifier.weight", self.classifier.kernel),
                WeightSource("classifier.bias", self.classifier.bias)]

    def get_config(self):
        return {"config": self.config.to_dict(), "num_labels": self.num_labels,
                "head_dropout": self.head_dropout, "name": self.name}
