"""Token and pooled features of texts: shared by the `features` SavedModel export and
experiments/extract_features.py, so both compute the same numbers.

Layout: each text alone, `text <sep> <cls>`, LEFT padded to seq_len (the classification
layout, xlnet_tf2/tokenizers/packing.py); a text longer than seq_len - 2 tokens keeps its
first seq_len - 2. pooled = mean of the last layer's hidden states over the real tokens
(<sep> and <cls> included, padding excluded).
"""

from __future__ import annotations

from typing import Dict, Sequence

import numpy as np
import tensorflow as tf

from xlnet_tf2.tokenizers.packing import encode_sequence_pair
from xlnet_tf2.training.inference import batched_outputs

LAYOUT = "cls_last"


def mean_pool(hidden: tf.Tensor, attention_mask: tf.Tensor) -> tf.Tensor:
    """hidden [B, L, D], attention_mask [B, L] (1 = real) -> float32 [B, D]."""
    hidden = tf.cast(hidden, tf.float32)
    mask = tf.cast(attention_mask, tf.float32)
    return tf.einsum("bld,bl->bd", hidden, mask) / tf.maximum(
        tf.reduce_sum(mask, axis=1, keepdims=True), 1.0)


def feature_outputs(backbone, inputs: Dict[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
    """token_features [B, L, D] float32, pooled [B, D], and the input_ids / attention_mask that
    say which positions are real. `backbone`: an XLNetModel (its `hidden`)."""
    hidden = backbone({k: inputs[k] for k in ("input_ids", "segment_ids", "attention_mask")},
                      training=False)["hidden"]
    return {"token_features": tf.cast(hidden, tf.float32),
            "pooled": mean_pool(hidden, inputs["attention_mask"]),
            "input_ids": inputs["input_ids"], "attention_mask": inputs["attention_mask"]}


def encode_texts(texts: Sequence[str], tokenizer, seq_len: int) -> Dict[str, np.ndarray]:
    rows = [encode_sequence_pair(tokenizer.encode_ids(t), None, seq_len, LAYOUT) for t in texts]
    return {k: np.stack([r[k] for r in rows]) for k in ("input_ids", "segment_ids",
                                                         "attention_mask")}


def extract(backbone, tokenizer, texts: Sequence[str], seq_len: int,
            batch_size: int = 32) -> Dict[str, np.ndarray]:
    """Features of `texts` from `backbone` (an XLNetModel) in fixed-size batches (the last
    padded, so shapes stay static): token_features [E, L, D], pooled [E, D], input_ids /
    attention_mask [E, L]."""
    inputs = encode_texts(texts, tokenizer, seq_len)
    return batched_outputs(lambda batch: feature_outputs(backbone, batch), inputs, batch_size,
                           label="extracting features", unit="texts")
