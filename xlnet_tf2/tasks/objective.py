"""XLNet's pretraining objective end to end, and the home of its loss.

The parts live on the floor each needs; a pretraining step meets them in this order:

1. Targets (partial prediction): prep/span_sampling.py `sample_span_masks` picks whole-word
   spans in each half; prep/examples.py `build_examples` stores them as `target_positions`
   int [P] (ascending, -1 = an empty slot). docs/SEMANTICS.md#span-sampling.
2. Factorization order: data/permutation.py, one rank per position (`sample_ranks_batch` at
   preparation, `online_ranks` when data/pretrain_dataset.py draws it per epoch).
3. Two-stream masks: data/masks.py `two_stream_masks`, expanded inside the step by
   `dense_features`: perm_mask [B, L, L], target_mapping [B, P, L], target [B, P],
   target_mask [B, P]. docs/SEMANTICS.md#masks.
4. Two-stream attention: layers/relative_attention.py `RelativeAttention` (content stream h,
   query stream g), one layer in layers/xlnet_block.py `XLNetBlock`; models/xlnet_model.py
   `XLNetModel` starts g at the target slots and carries the memory (models/memory.py).
5. Prediction: models/lm_head_model.py `XLNetLMHeadModel`, logits [B, P, V] at the targets.
6. The loss (here): `target_cross_entropy` / `target_count` over the global batch; the
   trainer all-reduces the count (training/trainer.py), held-out evaluation sums both
   (tasks/pretraining_eval.py). tasks/pretraining.py `PretrainTask.loss` runs 3-6 in a step.
"""

from __future__ import annotations

import tensorflow as tf


def target_cross_entropy(logits: tf.Tensor, target: tf.Tensor,
                         target_mask: tf.Tensor) -> tf.Tensor:
    """Summed cross-entropy over the real targets: sum over [B, P] of
    CE(logits, target) * target_mask; float32 scalar.

    logits float32 [B, P, V]; target int [B, P]; target_mask [B, P], 1 = a real target."""
    ce = tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=tf.cast(target, tf.int32), logits=logits)  # [B, P]
    return tf.reduce_sum(ce * tf.cast(target_mask, tf.float32))


def target_count(target_positions: tf.Tensor) -> tf.Tensor:
    """The number of real targets of a batch (slots not -1 in target_positions int [B, P]);
    float32 scalar. The loss is target_cross_entropy / target_count, each summed over the
    global batch."""
    return tf.reduce_sum(tf.cast(target_positions >= 0, tf.float32))
