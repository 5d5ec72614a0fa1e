"""`XLNetMultipleChoice`: RACE-style multiple choice, keras-hub style.

    chooser = xlnet_tf2.XLNetMultipleChoice.from_preset("converted/base", num_choices=4)
    x = {"article": articles, "question": questions, "options": options}   # options [Q, 4]
    chooser.fit(x, answers, epochs=2)                                        # answers: 0..3
    chooser.predict(x)                                                       # logits [Q, 4]
"""

from __future__ import annotations

import keras

from xlnet_tf2.keras_tasks.xlnet_classifier import resolve_config
from xlnet_tf2.keras_tasks.xlnet_task import XLNetTask
from xlnet_tf2.models.multiple_choice_model import MultipleChoiceModel
from xlnet_tf2.tokenizers.xlnet_multiple_choice_preprocessor import (
    XLNetMultipleChoicePreprocessor)


@keras.saving.register_keras_serializable(package="xlnet_tf2")
class XLNetMultipleChoice(XLNetTask):
    """Every option its own sequence, one score each: token dicts [Q, C, L] -> logits [Q, C]
    (MultipleChoiceModel). preprocessor: an XLNetMultipleChoicePreprocessor (article,
    question, options strings -> [Q, C, L]), or None."""

    TASK = "race"
    CONFIG_KEYS = ("num_choices", "summary_type", "head_dropout")

    def __init__(self, config, num_choices: int = 4, preprocessor=None,
                 summary_type: str = "last", head_dropout: float = 0.1, **kwargs):
        self.num_choices = num_choices
        self.summary_type = summary_type
        self.head_dropout = head_dropout
        task_model = MultipleChoiceModel(resolve_config(config), num_choices, summary_type,
                                         head_dropout=head_dropout, name="multiple_choice")
        super().__init__(task_model, preprocessor, **kwargs)
        self._finish_init()

    def task_settings(self) -> dict:
        settings = super().task_settings()
        settings.update(summary_type=self.summary_type, num_choices=self.num_choices)
        if self.preprocessor is not None:
            settings["max_qa_length"] = self.preprocessor.max_qa_length
        return settings

    @classmethod
    def from_task_settings(cls, config, settings: dict, preprocessor, **overrides):
        values = dict(num_choices=settings.get("num_choices", 4),
                      summary_type=settings.get("summary_type", "last"))
        return cls(config, preprocessor=preprocessor, **{**values, **overrides})

    @classmethod
    def make_preprocessor(cls, spm_model: str, settings: dict):
        return XLNetMultipleChoicePreprocessor(
            spm_model, settings["seq_len"], num_choices=settings.get("num_choices", 4),
            max_qa_length=settings.get("max_qa_length", 128), lower=settings.get("lower", False))
