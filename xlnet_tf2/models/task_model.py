"""The base of the task models: the XLNet backbone (attribute `transformer`, so pretraining
checkpoints and converted releases restore into it by the same object path) plus one head.

All inputs are batch-major dicts of int32 tensors with a static sequence length L:
  input_ids, segment_ids, attention_mask (1 = real token)    [B, L]
SQuAD adds p_mask (1 = cannot be in an answer) [B, L] and cls_index [B]; multiple choice takes
[B, C, L] for each of the three. The losses of each task are in xlnet_tf2/tasks/losses.py.
"""

from __future__ import annotations

from typing import Dict

import keras
import tensorflow as tf

from xlnet_tf2.config import XLNetConfig
from xlnet_tf2.models.xlnet_model import XLNetModel

BACKBONE_INPUTS = ("input_ids", "segment_ids", "attention_mask")


class TaskModel(keras.Model):
    """Shared plumbing: config echo, backbone call on the three standard inputs."""

    def __init__(self, config, **kwargs):
        super().__init__(**kwargs)
        self.config = XLNetConfig.coerce(config)
        self.transformer = XLNetModel(self.config)

    def _backbone(self, inputs, training):
        return self.transformer({k: inputs[k] for k in BACKBONE_INPUTS}, training=training)

    def dummy_inputs(self, seq_len: int, batch_size: int = 1) -> Dict[str, tf.Tensor]:
        ids = tf.fill([batch_size, seq_len], 5)
        return {"input_ids": ids, "segment_ids": tf.zeros_like(ids),
                "attention_mask": tf.ones_like(ids)}
