"""`XLNetClassifier`: text (or text-pair) classification, keras-hub style.

    classifier = xlnet_tf2.XLNetClassifier.from_preset("converted/base", num_classes=2)
    classifier.fit(texts, labels, batch_size=16, epochs=2)    # labels: class ids
    classifier.predict(["a new text"])                         # logits [E, num_classes]
    classifier.fit((texts, pairs), labels)                     # text pairs
"""

from __future__ import annotations

from typing import Optional, Sequence

import keras

from xlnet_tf2.config import XLNetConfig
from xlnet_tf2.keras_tasks.xlnet_task import XLNetTask
from xlnet_tf2.models.sequence_classifier import SequenceClassifier
from xlnet_tf2.tokenizers.xlnet_preprocessor import XLNetPreprocessor


def resolve_config(config) -> XLNetConfig:
    """An XLNetConfig, its dict, or a preset name ("tiny", "base", "large")."""
    return XLNetConfig.resolve(config) if isinstance(config, str) else XLNetConfig.coerce(config)


@keras.saving.register_keras_serializable(package="xlnet_tf2")
class XLNetClassifier(XLNetTask):
    """Backbone + sequence summary + dense -> logits [B, num_classes] (SequenceClassifier).

    Args:
      config: the backbone's XLNetConfig (or a preset name); from_preset fills it in.
      num_classes: the classes (default: len(label_list)).
      preprocessor: an XLNetPreprocessor (strings or (text, pair) -> token dicts), or None.
      summary_type: "last" (XLNet's <cls>), "first", "mean" or "attn".
      head_dropout: dropout on the summary.
      label_list: class names in id order (kept in task.json and HuggingFace's id2label).
    """

    TASK = "classification"
    CONFIG_KEYS = ("num_classes", "summary_type", "head_dropout", "label_list")

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
        self.num_classes = num_classes
        self.summary_type = summary_type
        self.head_dropout = head_dropout
        self.label_list = None if label_list is None else list(label_list)
        super().__init__(self._head_model(resolve_config(config)), preprocessor, **kwargs)
        self._finish_init()

    def _head_model(self, config):
        return SequenceClassifier(config, self.num_classes, self.summary_type,
                                  head_dropout=self.head_dropout, name="sequence_classifier")

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
