"""The fine-tuning losses, every task's here. Each returns the per-example loss, float32 [B];
the training loop averages it over the global batch (xlnet_tf2/training/trainer.py)."""

from __future__ import annotations

import tensorflow as tf

from xlnet_tf2.models.xlnet_token_classifier import IGNORE


def classification_loss(outputs, features):
    """Softmax cross-entropy of `logits` [B, C] against the int `label` [B]: classification
    over C classes, and multiple choice over C options (RACE) alike."""
    return tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=tf.cast(features["label"], tf.int32), logits=outputs["logits"])


def regression_loss(outputs, features):
    """Squared error of the single output `logits[:, 0]` against the float `label` [B]."""
    return tf.square(outputs["logits"][:, 0] - tf.cast(features["label"], tf.float32))


def squad_loss(outputs, features):
    """(CE_start + CE_end) / 2 + BCE(is_impossible) / 2 (docs/SEMANTICS.md#fine-tuning-formats)."""
    ce_start = tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=features["start_positions"], logits=outputs["start_logits"])
    ce_end = tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=features["end_positions"], logits=outputs["end_logits"])
    bce = tf.nn.sigmoid_cross_entropy_with_logits(
        labels=tf.cast(features["is_impossible"], tf.float32), logits=outputs["cls_logits"])
    return 0.5 * (ce_start + ce_end) + 0.5 * bce


def token_classification_loss(outputs, features):
    """Per sentence [B]: the mean softmax cross-entropy of its labeled positions' logits
    [B, L, C] (label != IGNORE); 0 for a sentence with none."""
    labels = tf.cast(features["label"], tf.int32)
    keep = tf.cast(labels != IGNORE, tf.float32)
    losses = tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=tf.maximum(labels, 0), logits=outputs["logits"])
    return tf.reduce_sum(losses * keep, -1) / tf.maximum(tf.reduce_sum(keep, -1), 1.0)
