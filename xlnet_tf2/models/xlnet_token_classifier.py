"""Token classification (named entities, part-of-speech tags): `TokenClassifier`, the backbone
with one dense layer on every position's hidden state (HuggingFace's
XLNetForTokenClassification: `classifier`, an nn.Linear on the last hidden state, no summary),
and the keras-hub-style `XLNetTokenClassifier` around it, which fits on raw word lists:

    tagger = xlnet_tf2.XLNetTokenClassifier.from_preset("converted/base",
                                                         label_list=["O", "B-PER", "I-PER"])
    tagger.fit([["Peter", "Blackburn", "spoke"]], [[1, 2, 0]], epochs=3)  # a tag id per word
    tagger.predict_tags([["Anna", "spoke"]])                              # [["B-PER", "O"]]

Labels sit on each word's first piece; the other pieces, the special tokens and the padding
carry IGNORE, which the loss and the token accuracy skip.

The head's weights in HuggingFace's names are `huggingface_head_map` below, beside the layer
they fill, so the conversion floor reads them from the model (`conversion/head_maps.py`).
"""

from __future__ import annotations

from typing import List, Optional, Sequence

import keras
import numpy as np
import tensorflow as tf

from xlnet_tf2.conversion.weight_maps import WeightSource, transposed
from xlnet_tf2.models.head_model import HeadModel, token_inputs
from xlnet_tf2.models.model_with_preprocessor import (ModelWithPreprocessor, head_setting,
                                                      resolve_config)
from xlnet_tf2.tokenizers.xlnet_word_preprocessor import FIRST_PIECE, XLNetWordPreprocessor

IGNORE = -1  # the label of positions the loss, the metrics and the predictions skip


@keras.saving.register_keras_serializable(package="xlnet_tf2")
class TokenClassifier(HeadModel):
    """One label per position.

    Returns {"logits": float32 [B, L, C] (C = num_labels), "hidden": [B, L, D]}; compile's
    losses and metrics see the logits. Head dropout applies in training only (HuggingFace's
    head has none, so inference matches XLNetForTokenClassification exactly).
    """

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

    def call(self, inputs, training=None, plan=None):
        """`plan`: the step's (layers/step_plan.py); None: this machine's."""
        tokens = token_inputs(inputs)
        hidden = self._backbone(tokens, training, plan)["hidden"]
        logits = self.classifier(self.dropout(hidden, training=training))
        return {"logits": logits, "hidden": hidden}

    @classmethod
    def from_settings(cls, config, settings: dict, head_dropout: float = 0.1):
        labels = settings.get("label_list") or []
        if not labels:
            raise ValueError(f"a {cls.KINDS[0]} task.json needs a label_list, got {labels!r}.")
        return cls(config, len(labels), head_dropout=head_dropout).build_weights()

    def task_settings(self, label_list=None, seq_len: Optional[int] = None) -> dict:
        labels = ([str(i) for i in range(self.num_labels)] if label_list is None
                  else [str(label) for label in label_list])
        if len(labels) != self.num_labels:
            raise ValueError(f"label_list names {len(labels)} labels; the model has "
                             f"{self.num_labels} outputs.")
        return dict(super().task_settings(label_list, seq_len), label_list=labels)

    def huggingface_head_map(self) -> List[WeightSource]:
        """XLNetForTokenClassification's head: `classifier.{weight [C, D], bias [C]}`."""
        return [transposed("classifier.weight", self.classifier.kernel),
                WeightSource("classifier.bias", self.classifier.bias)]

    def get_config(self):
        return {"config": self.config.to_dict(), "num_labels": self.num_labels,
                "head_dropout": self.head_dropout, "name": self.name}


@keras.saving.register_keras_serializable(package="xlnet_tf2")
class TokenAccuracy(keras.metrics.Mean):
    """The share of labeled positions (label != IGNORE) whose argmax is the label."""

    def __init__(self, name="token_accuracy", **kwargs):
        super().__init__(name=name, **kwargs)

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_true = tf.cast(y_true, tf.int32)
        correct = tf.cast(tf.argmax(y_pred, -1, output_type=tf.int32) == y_true, tf.float32)
        return super().update_state(correct, sample_weight=tf.cast(y_true != IGNORE, tf.float32))


def _ragged(values):
    """A list of per-example lists as a ragged tensor; anything else as given."""
    return tf.ragged.constant(values) if isinstance(values, list) else values


@keras.saving.register_keras_serializable(package="xlnet_tf2")
class XLNetTokenClassifier(ModelWithPreprocessor):
    """Backbone + dense on every position -> logits [B, L, num_labels] (TokenClassifier).

    x: word lists (or sentences, split on whitespace); y: a tag id per word (ragged, or
    lists). Args: config (or a preset name); num_labels (default len(label_list));
    preprocessor: an XLNetWordPreprocessor or None; head_dropout; label_list: tag names in
    id order (task.json's, HuggingFace's id2label)."""

    CONFIG_KEYS = ("num_labels", "head_dropout", "label_list")
    num_labels = head_setting("num_labels")
    head_dropout = head_setting("head_dropout")

    def __init__(self, config, num_labels: Optional[int] = None, preprocessor=None,
                 head_dropout: float = 0.1, label_list: Optional[Sequence[str]] = None,
                 **kwargs):
        if num_labels is None and label_list is None:
            raise ValueError("XLNetTokenClassifier needs num_labels (or label_list).")
        num_labels = len(label_list) if num_labels is None else num_labels
        if label_list is not None and len(label_list) != num_labels:
            raise ValueError(f"label_list has {len(label_list)} names for {num_labels} labels.")
        self.label_list = None if label_list is None else list(label_list)
        task_model = TokenClassifier(resolve_config(config), num_labels,
                                     head_dropout=head_dropout, name="token_classifier")
        super().__init__(task_model, preprocessor, **kwargs)
        self._finish_init()

    def default_loss(self):
        return keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=IGNORE)

    def default_metrics(self):
        return [TokenAccuracy()]

    def prepare_labels(self, x, inputs: dict, y):
        """Word tag ids [B, (W)] -> position labels int32 [B, L] (IGNORE off first pieces)."""
        inputs = dict(inputs)
        first = inputs.pop(FIRST_PIECE, None)
        if y is None or first is None:
            return inputs, y
        y = y if isinstance(y, tf.RaggedTensor) else tf.RaggedTensor.from_tensor(y)
        kept = first.flat_values >= 0
        where = tf.stack([tf.cast(first.value_rowids(), tf.int32), first.flat_values], 1)
        labels = tf.tensor_scatter_nd_update(
            tf.fill(tf.shape(inputs["input_ids"]), IGNORE), tf.boolean_mask(where, kept),
            tf.boolean_mask(tf.cast(y.flat_values, tf.int32), kept))
        return inputs, labels

    def _dataset(self, x, y=None, sample_weight=None, batch_size=None, shuffle=False):
        return super()._dataset(_ragged(x), _ragged(y), sample_weight, batch_size, shuffle)

    def predict_tags(self, words, batch_size: int = 32) -> List[List[str]]:
        """Each example's tag names (or ids without a label_list), one per word; a word past
        seq_len gets the first label ("O" for a tag set that starts with it)."""
        names = self.label_list or [str(i) for i in range(self.num_labels)]
        words = list(words)
        out = []
        for start in range(0, len(words), batch_size):
            inputs = self.preprocess(_ragged(words[start:start + batch_size]))
            first = inputs.pop(FIRST_PIECE)
            best = np.argmax(self.task_model(inputs, training=False)["logits"].numpy(), -1)
            for row, positions in enumerate(first.to_list()):
                out.append([names[best[row, p]] if p >= 0 else names[0] for p in positions])
        return out

    def task_settings(self) -> dict:
        settings = super().task_settings()
        settings["label_list"] = self.label_list or [str(i) for i in range(self.num_labels)]
        return settings

    @classmethod
    def from_task_settings(cls, config, settings: dict, preprocessor, **overrides):
        return cls(config, preprocessor=preprocessor,
                   **{"label_list": settings["label_list"], **overrides})

    @classmethod
    def make_preprocessor(cls, spm_model: str, settings: dict):
        return XLNetWordPreprocessor(spm_model, settings["seq_len"],
                                     lower=settings.get("lower", False))
