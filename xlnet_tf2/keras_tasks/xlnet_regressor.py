"""`XLNetRegressor`: one score per text (or text pair), keras-hub style (STS-B-like tasks).

    regressor = xlnet_tf2.XLNetRegressor.from_preset("converted/base")
    regressor.fit((texts, pairs), scores, epochs=2)
    regressor.predict((["a text"], ["its pair"]))           # scores [E]
"""

from __future__ import annotations

import keras

from xlnet_tf2.keras_tasks.xlnet_classifier import resolve_config, text_preprocessor
from xlnet_tf2.keras_tasks.xlnet_task import XLNetTask
from xlnet_tf2.models.sequence_classifier import SequenceClassifier


@keras.saving.register_keras_serializable(package="xlnet_tf2")
class XLNetRegressor(XLNetTask):
    """Backbone + sequence summary + dense -> scores float32 [B] (a one-output
    SequenceClassifier); loss mean squared error. preprocessor: an XLNetPreprocessor, or
    None; summary_type and head_dropout as XLNetClassifier's."""

    TASK = "regression"
    CONFIG_KEYS = ("summary_type", "head_dropout")

    def __init__(self, config, preprocessor=None, summary_type: str = "last",
                 head_dropout: float = 0.1, **kwargs):
        self.summary_type = summary_type
        self.head_dropout = head_dropout
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
