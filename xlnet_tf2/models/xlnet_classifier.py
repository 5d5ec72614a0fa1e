"""Text (and text-pair) classification and regression: `SequenceClassifier`, the backbone
with a sequence summary and dense logits (HuggingFace's XLNetForSequenceClassification), and
the keras-hub-style `XLNetClassifier` / `XLNetRegressor` around it, which add the
preprocessor (raw strings in, xlnet_tf2/tokenizers/xlnet_preprocessor.py) and the task's
loss and metrics. The head is models/heads/classification_head.py.

    classifier = xlnet_tf2.XLNetClassifier.from_preset("converted/base", num_classes=2)
    classifier.fit(texts, labels, batch_size=16, epochs=2)    # labels: class ids
    classifier.predict(["a new text"])                         # logits [E, num_classes]
    classifier.fit((texts, pairs), labels)                     # text pairs

    regressor = xlnet_tf2.XLNetRegressor.from_preset("converted/base")
    regressor.fit((texts, pairs), scores, epochs=2)
    regressor.predict((["a text"], ["its pair"]))              # scores [E]
"""

from __future__ import annotations

from typing import Optional, Sequence

import keras

from xlnet_tf2.models.head_model import HeadModel, token_inputs
from xlnet_tf2.models.heads import ClassificationHead
from xlnet_tf2.models.model_with_preprocessor import (ModelWithPreprocessor, head_setting,
                                                      resolve_config)
from xlnet_tf2.tokenizers.xlnet_preprocessor import XLNetPreprocessor


@keras.saving.register_keras_serializable(package="xlnet_tf2")
class SequenceClassifier(HeadModel):
    """Classification (num_outputs = classes) or regression (num_outputs = 1).

    Returns {"logits": float32 [B, num_outputs], "pooled": [B, D], "hidden": [B, L, D]};
    compile's losses and metrics see the logits (HeadModel.MAIN_OUTPUT).
    """

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
        kind = settings.get("kind")
        labels = settings.get("label_list") or []
        if kind == "classification" and len(labels) < 2:
            raise ValueError(f"a classification task.json needs a label_list of at least 2 "
                             f"labels, got {labels!r}.")
        return cls(config, 1 if kind == "regression" else len(labels),
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

    def call(self, inputs, training=None, plan=None):
        inputs = token_inputs(inputs)
        hidden = self._backbone(inputs, training, plan)["hidden"]
        logits, pooled = self.head(hidden, attention_mask=inputs["attention_mask"],
                                   training=training, plan=plan)
        return {"logits": logits, "pooled": pooled, "hidden": hidden}


@keras.saving.register_keras_serializable(package="xlnet_tf2")
class XLNetClassifier(ModelWithPreprocessor):
    """Backbone + sequence summary + dense -> logits [B, num_classes] (SequenceClassifier).

    Args:
      config: the backbone's XLNetConfig (or a preset name); from_preset fills it in.
      num_classes: the classes (default: len(label_list)).
      preprocessor: an XLNetPreprocessor (strings or (text, pair) -> token dicts), or None.
      summary_type: "last" (XLNet's <cls>), "first", "mean" or "attn".
      head_dropout: dropout on the summary.
      label_list: class names in id order (kept in task.json and HuggingFace's id2label).
    """

    CONFIG_KEYS = ("num_classes", "summary_type", "head_dropout", "label_list")
    num_classes = head_setting("num_classes", held_as="num_outputs")
    summary_type = head_setting("summary_type")
    head_dropout = head_setting("head_dropout")

    def __init__(self, config, num_classes: Optional[int] = None, preprocessor=None,
                 summary_type: str = "last", head_dropout: float = 0.1,
                 label_list: Optional[Sequence[str]] = None, **kwargs):
        if num_classes is None and label_list is None:
            raise ValueError("XLNetClassifier needs num_classes (or label_list).")
        num_classes = len(label_list) if num_classes is None else num_classes
        if label_list is not None and len(label_list) != num_classes:
            raise ValueError(f"label_list has {len(label_list)} names for {num_classes} classes.")
        if num_classes < 2:
            raise ValueError(f"num_classes must be at least 2, got {num_classes} (one output "
                             "is XLNetRegressor).")
        self.label_list = None if label_list is None else list(label_list)
        task_model = SequenceClassifier(resolve_config(config), num_classes, summary_type,
                                        head_dropout=head_dropout, name="sequence_classifier")
        super().__init__(task_model, preprocessor, **kwargs)
        self._finish_init()

    def task_settings(self) -> dict:
        settings = super().task_settings()
        settings.update(summary_type=self.summary_type,
                        label_list=self.label_list or [str(i) for i in range(self.num_classes)])
        return settings

    @classmethod
    def from_task_settings(cls, config, settings: dict, preprocessor, **overrides):
        values = dict(label_list=settings["label_list"],
                      summary_type=settings.get("summary_type", "last"))
        return cls(config, preprocessor=preprocessor, **{**values, **overrides})

    @classmethod
    def make_preprocessor(cls, spm_model: str, settings: dict):
        return text_preprocessor(spm_model, settings)


def text_preprocessor(spm_model: str, settings: dict) -> XLNetPreprocessor:
    """The single-text / text-pair preprocessor task.json `settings` describe."""
    return XLNetPreprocessor(spm_model, settings["seq_len"],
                             layout=settings.get("layout", "cls_last"),
                             lower=settings.get("lower", False))


@keras.saving.register_keras_serializable(package="xlnet_tf2")
class XLNetRegressor(ModelWithPreprocessor):
    """Backbone + sequence summary + dense -> scores float32 [B] (a one-output
    SequenceClassifier); loss mean squared error. preprocessor: an XLNetPreprocessor, or
    None; summary_type and head_dropout as XLNetClassifier's."""

    CONFIG_KEYS = ("summary_type", "head_dropout")
    summary_type = head_setting("summary_type")
    head_dropout = head_setting("head_dropout")

    def __init__(self, config, preprocessor=None, summary_type: str = "last",
                 head_dropout: float = 0.1, **kwargs):
        task_model = SequenceClassifier(resolve_config(config), 1, summary_type,
                                        head_dropout=head_dropout, name="sequence_regressor")
        super().__init__(task_model, preprocessor, **kwargs)
        self._finish_init()

    def main_output(self, outputs: dict):
        return outputs["logits"][:, 0]

    def default_loss(self):
        return keras.losses.MeanSquaredError()

    def default_metrics(self):
        return [keras.metrics.MeanAbsoluteError(name="mae")]

    def task_settings(self) -> dict:
        settings = super().task_settings()
        settings["summary_type"] = self.summary_type
        return settings

    @classmethod
    def from_task_settings(cls, config, settings: dict, preprocessor, **overrides):
        values = dict(summary_type=settings.get("summary_type", "last"))
        return cls(config, preprocessor=preprocessor, **{**values, **overrides})

    @classmethod
    def make_preprocessor(cls, spm_model: str, settings: dict):
        return text_preprocessor(spm_model, settings)
