"""Task models: the XLNet backbone (attribute `transformer`, so pretraining checkpoints and
converted releases restore into it by the same object path) plus one head; and their losses.

All inputs are batch-major dicts of int32 tensors with a static sequence length L:
  input_ids, segment_ids, attention_mask (1 = real token)    [B, L]
  SQuAD adds p_mask (1 = cannot be in an answer) [B, L], cls_index [B];
  multiple choice takes [B, C, L] for each of the three.
"""

from __future__ import annotations

from typing import Dict

import keras
import tensorflow as tf

from xlnet_tf2.config import XLNetConfig
from xlnet_tf2.heads import ClassificationHead, MultipleChoiceHead, SquadHead
from xlnet_tf2.models import XLNetModel

BACKBONE_INPUTS = ("input_ids", "segment_ids", "attention_mask")


def _config_of(config) -> XLNetConfig:
    return config if isinstance(config, XLNetConfig) else XLNetConfig.from_dict(config)


class _TaskModel(keras.Model):
    """Shared plumbing: config echo, backbone call on the three standard inputs."""

    def __init__(self, config, **kwargs):
        super().__init__(**kwargs)
        self.config = _config_of(config)
        self.transformer = XLNetModel(self.config)

    def _backbone(self, inputs, training):
        return self.transformer({k: inputs[k] for k in BACKBONE_INPUTS}, training=training)

    def dummy_inputs(self, seq_len: int, batch_size: int = 1) -> Dict[str, tf.Tensor]:
        ids = tf.fill([batch_size, seq_len], 5)
        return {"input_ids": ids, "segment_ids": tf.zeros_like(ids),
                "attention_mask": tf.ones_like(ids)}


@keras.saving.register_keras_serializable(package="xlnet_tf2")
class SequenceClassifier(_TaskModel):
    """Classification (num_outputs = classes) or regression (num_outputs = 1).

    Returns {"logits": float32 [B, num_outputs], "pooled": [B, D], "hidden": [B, L, D]}.
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

    def get_config(self):
        return {"config": self.config.to_dict(), "num_outputs": self.num_outputs,
                "summary_type": self.summary_type, "head_dropout": self.head_dropout,
                "name": self.name}

    def call(self, inputs, training=None):
        hidden = self._backbone(inputs, training)["hidden"]
        logits, pooled = self.head(hidden, attention_mask=inputs["attention_mask"],
                                   training=training)
        return {"logits": logits, "pooled": pooled, "hidden": hidden}


@keras.saving.register_keras_serializable(package="xlnet_tf2")
class SquadModel(_TaskModel):
    """SQuAD 1.1/2.0; see `xlnet_tf2.heads.SquadHead` for the outputs."""

    def __init__(self, config, start_n_top: int = 5, end_n_top: int = 5,
                 head_dropout: float = 0.1, **kwargs):
        super().__init__(config, **kwargs)
        self.start_n_top = start_n_top
        self.end_n_top = end_n_top
        self.head_dropout = head_dropout
        c = self.config
        self.head = SquadHead(c.d_model, start_n_top, end_n_top, dropout=head_dropout,
                              initializer_range=c.initializer_range, name="squad_head")

    def get_config(self):
        return {"config": self.config.to_dict(), "start_n_top": self.start_n_top,
                "end_n_top": self.end_n_top, "head_dropout": self.head_dropout, "name": self.name}

    def dummy_inputs(self, seq_len: int, batch_size: int = 1):
        inputs = super().dummy_inputs(seq_len, batch_size)
        inputs.update(p_mask=tf.zeros([batch_size, seq_len], tf.int32),
                      cls_index=tf.fill([batch_size], seq_len - 1))
        return inputs

    def call(self, inputs, training=None):
        hidden = self._backbone(inputs, training)["hidden"]
        return self.head(hidden, inputs["p_mask"], inputs["cls_index"],
                         start_positions=inputs.get("start_positions"), training=training)


@keras.saving.register_keras_serializable(package="xlnet_tf2")
class MultipleChoiceModel(_TaskModel):
    """C options per question, each its own sequence: inputs [B, C, L] -> logits [B, C]."""

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

    def get_config(self):
        return {"config": self.config.to_dict(), "num_choices": self.num_choices,
                "summary_type": self.summary_type, "head_dropout": self.head_dropout,
                "name": self.name}

    def dummy_inputs(self, seq_len: int, batch_size: int = 1):
        flat = super().dummy_inputs(seq_len, batch_size * self.num_choices)
        return {k: tf.reshape(v, [batch_size, self.num_choices, seq_len]) for k, v in flat.items()}

    def call(self, inputs, training=None):
        seq_len = inputs["input_ids"].shape[-1]
        flat = {k: tf.reshape(inputs[k], [-1, seq_len]) for k in BACKBONE_INPUTS}  # [B*C, L]
        hidden = self._backbone(flat, training)["hidden"]
        logits = self.head(hidden, attention_mask=flat["attention_mask"], training=training)
        return {"logits": logits}


# ---------------------------------------------------------------------------- losses
# Each returns the per-example loss [B] (float32); the trainer averages over the global batch.

def classification_loss(outputs, features):
    return tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=tf.cast(features["label"], tf.int32), logits=outputs["logits"])


def regression_loss(outputs, features):
    return tf.square(outputs["logits"][:, 0] - tf.cast(features["label"], tf.float32))


def squad_loss(outputs, features):
    """(CE_start + CE_end) / 2 + BCE(is_impossible) / 2 (XLNET_REFERENCE.md §6)."""
    ce_start = tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=features["start_positions"], logits=outputs["start_logits"])
    ce_end = tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=features["end_positions"], logits=outputs["end_logits"])
    bce = tf.nn.sigmoid_cross_entropy_with_logits(
        labels=tf.cast(features["is_impossible"], tf.float32), logits=outputs["cls_logits"])
    return 0.5 * (ce_start + ce_end) + 0.5 * bce


def multiple_choice_loss(outputs, features):
    return tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=tf.cast(features["label"], tf.int32), logits=outputs["logits"])
