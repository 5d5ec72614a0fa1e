"""Multiple choice (RACE): `MultipleChoiceModel`, every option its own sequence through the
backbone and one score each (HuggingFace's XLNetForMultipleChoice), and the keras-hub-style
`XLNetMultipleChoice` around it, which adds the preprocessor (article, question and option
strings in, xlnet_tf2/tokenizers/xlnet_multiple_choice_preprocessor.py) and the loss
(cross-entropy over the options). The head is models/heads/multiple_choice_head.py.

    chooser = xlnet_tf2.XLNetMultipleChoice.from_preset("converted/base", num_choices=4)
    x = {"article": articles, "question": questions, "options": options}   # options [Q, 4]
    chooser.fit(x, answers, epochs=2)                                        # answers: 0..3
    chooser.predict(x)                                                       # logits [Q, 4]
"""

from __future__ import annotations

import keras
import tensorflow as tf

from xlnet_tf2.models.head_model import HeadModel, token_inputs
from xlnet_tf2.models.heads import MultipleChoiceHead
from xlnet_tf2.models.model_with_preprocessor import (ModelWithPreprocessor, head_setting,
                                                      resolve_config)
from xlnet_tf2.tokenizers.xlnet_multiple_choice_preprocessor import (
    XLNetMultipleChoicePreprocessor)


@keras.saving.register_keras_serializable(package="xlnet_tf2")
class MultipleChoiceModel(HeadModel):
    """C options per question, each its own sequence: inputs [Q, C, L] -> logits [Q, C]."""

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

    def call(self, inputs, training=None, plan=None):
        inputs = token_inputs(inputs)
        seq_len = inputs["input_ids"].shape[-1]
        flat = {k: tf.reshape(v, [-1, seq_len]) for k, v in inputs.items()}  # [Q*C, L]
        hidden = self._backbone(flat, training, plan)["hidden"]
        logits = self.head(hidden, attention_mask=flat["attention_mask"], training=training,
                           plan=plan)
        return {"logits": logits}


@keras.saving.register_keras_serializable(package="xlnet_tf2")
class XLNetMultipleChoice(ModelWithPreprocessor):
    """Every option its own sequence, one score each: token dicts [Q, C, L] -> logits [Q, C]
    (MultipleChoiceModel). preprocessor: an XLNetMultipleChoicePreprocessor (article,
    question, options strings -> [Q, C, L]), or None."""

    CONFIG_KEYS = ("num_choices", "summary_type", "head_dropout")
    num_choices = head_setting("num_choices")
    summary_type = head_setting("summary_type")
    head_dropout = head_setting("head_dropout")

    def __init__(self, config, num_choices: int = 4, preprocessor=None,
                 summary_type: str = "last", head_dropout: float = 0.1, **kwargs):
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
