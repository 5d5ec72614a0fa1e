"""XLNet's pretraining objective end to end: its step part (the two-stream masks, the targets,
the loss) here; the other parts where their floor puts them, in the order a step meets them.

Letters (docs/GLOSSARY.md): B rows of the batch, L seq_len (queries i, keys j), R reuse_len
(the reused half [0, R), the new half [R, L)), P num_predict, V vocabulary.

1. Targets and the factorization order: data/objective_sampling.py (`sample_span_masks`:
   whole-word spans, stored as `target_positions` int [P], ascending, -1 = empty; `perm_rank`
   int [L]: `sample_ranks_batch` at preparation, `online_ranks` in data/pretrain_dataset.py).
2. Two-stream masks (here): `dense_features` / `two_stream_masks` inside the step, perm_mask
   [B, L, L] (1: i may NOT attend to j), target_mapping [B, P, L], target, target_mask [B, P]
   (docs/SEMANTICS.md#masks: the rules).
3. Two-stream attention: layers/relative_position.py (the streams' masks), layers/xlnet_block.py
   (`RelativeAttention`, `XLNetBlock`), models/xlnet_model.py (`XLNetModel`: g starts at the
   target slots; the memory, models/memory.py).
4. Prediction: models/lm_head_model.py `XLNetLMHeadModel`, logits [B, P, V] at the targets.
5. The loss (here): `target_cross_entropy` / `target_count` over the global batch (the step
   all-reduces the count, training/step.py; held-out evaluation, tasks/pretraining_eval.py).
   `PretrainStep.loss` runs 2-5, resetting the memory where a stream starts; tasks/pretraining.py's
   `PretrainTask` is `PretrainStep` with what goes around the loop.
"""

from __future__ import annotations

from typing import List, Optional, Sequence

import tensorflow as tf

from xlnet_tf2 import special_ids
from xlnet_tf2.config import XLNetConfig
from xlnet_tf2.data.objective_sampling import FACTORIZATION_ORDERS
from xlnet_tf2.layers import step_plan
from xlnet_tf2.training.task import Task


def two_stream_masks(input_ids: tf.Tensor, perm_rank: tf.Tensor, target_positions: tf.Tensor,
                     reuse_len: int, order: str = "permutation") -> dict:
    """The pretraining masks of input_ids, perm_rank (the factorization order's ranks) int32
    [B, L], target_positions int32 [B, P] (ascending, -1 padded); `order` "permutation"
    (docs/SEMANTICS.md#masks) or "left_to_right" (rank(i) = i: a causal LM on the same
    targets). Returns perm_mask float32 [B, L, L] (1 = i may not attend to j), target_mapping
    float32 [B, P, L] (all-zero rows when padded), target int32 [B, P] (0 when padded),
    target_mask float32 [B, P] (1 = real)."""
    if order not in FACTORIZATION_ORDERS:
        raise ValueError(f"order must be one of {FACTORIZATION_ORDERS}, got {order!r}.")
    seq_len = input_ids.shape[1]
    target_mapping = tf.one_hot(target_positions, seq_len, dtype=tf.float32)  # [B, P, L]
    is_target = tf.reduce_max(target_mapping, axis=1) > 0.5                    # [B, L]
    if order == "left_to_right":
        perm_rank = tf.broadcast_to(tf.range(seq_len) + step_plan.int_zero(input_ids),
                                    tf.shape(input_ids))                      # [B, L]
        ranked = tf.ones_like(is_target)                                      # [B, L]
    else:
        is_func = tf.logical_or(tf.equal(input_ids, special_ids.SEP_ID),
                                tf.equal(input_ids, special_ids.CLS_ID))      # [B, L]
        ranked = tf.logical_or(is_target, is_func)                            # [B, L]
    rank = tf.where(ranked, perm_rank, -tf.ones_like(perm_rank))              # [B, L]
    # A target's bar is its own rank (sees strictly lower); others' bar is rank + 1.
    bar = tf.where(is_target, rank, rank + 1)                                 # [B, L]
    blocked = tf.logical_and(bar[:, :, None] <= rank[:, None, :],
                             ranked[:, None, :])                              # [B, L, L]
    # Halves: reused rows never see new columns; new rows see every reused column.
    # A run-time zero keeps the [L, L] half patterns in a compiled step, not folded into
    # constants of that size (layers/step_plan.py).
    pos = tf.range(seq_len) + step_plan.int_zero(input_ids)
    row_new = pos[:, None] >= reuse_len                                       # [L, 1]
    col_new = pos[None, :] >= reuse_len                                       # [1, L]
    same_half = tf.equal(row_new, col_new)                                    # [L, L]
    reused_to_new = tf.logical_and(tf.logical_not(row_new), col_new)          # [L, L]
    blocked = tf.logical_or(tf.logical_and(blocked, same_half[None]), reused_to_new[None])
    target_mask = tf.cast(target_positions >= 0, tf.float32)                  # [B, P]
    target = tf.gather(input_ids, tf.maximum(target_positions, 0), batch_dims=1)
    target = target * tf.cast(target_positions >= 0, tf.int32)                # [B, P]
    return {"perm_mask": tf.cast(blocked, tf.float32), "target_mapping": target_mapping,
            "target": target, "target_mask": target_mask}


# What the pretraining pipeline ships per example; the model's and the loss's inputs, built
# from them on the device (`dense_features`).
COMPACT_FEATURES = ("input_ids", "segment_ids", "perm_rank", "target_positions")
MODEL_FEATURES = ("input_ids", "segment_ids", "perm_mask", "target_mapping")
LOSS_FEATURES = ("target", "target_mask")
# Each row's stream and direction: its place in the global batch (its dropout keys).
SLOT_FEATURES = ("stream_id", "direction", "chunk_index")


def dense_features(features: dict, reuse_len: int, order: str = "permutation") -> dict:
    """The model and loss inputs of a batch of compact features (input_ids, segment_ids,
    perm_rank int [B, L] of any integer dtype, target_positions int [B, P]): input_ids and
    segment_ids int32 [B, L] and `two_stream_masks`' outputs."""
    input_ids = tf.cast(features["input_ids"], tf.int32)
    out = two_stream_masks(input_ids, tf.cast(features["perm_rank"], tf.int32),
                           tf.cast(features["target_positions"], tf.int32), reuse_len, order)
    out["input_ids"] = input_ids
    out["segment_ids"] = tf.cast(features["segment_ids"], tf.int32)
    return out


def target_cross_entropy(logits: tf.Tensor, target: tf.Tensor,
                         target_mask: tf.Tensor) -> tf.Tensor:
    """float32 sum over [B, P] of CE(logits [B, P, V], target) * target_mask (1 = real)."""
    ce = tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=tf.cast(target, tf.int32), logits=logits)  # [B, P]
    return tf.reduce_sum(ce * tf.cast(target_mask, tf.float32))


def target_count(target_positions: tf.Tensor) -> tf.Tensor:
    """float32: the real targets (slots not -1) of target_positions int [B, P]."""
    return tf.reduce_sum(tf.cast(target_positions >= 0, tf.float32))


def reset_at_stream_start(mems: Sequence[tf.Tensor], chunk_index: tf.Tensor) -> List[tf.Tensor]:
    """mems n_layer x [B, M, D] ([] as is) zeroed in the rows that start a stream (chunk_index
    int32 [B] 0): a slot that moves to another stream at a block boundary of the data schedule
    must not carry the old text's memory; every stream starts from zero (as the original's)."""
    if not mems:
        return []
    keep = tf.cast(chunk_index > 0, mems[0].dtype)[:, None, None]  # [B, 1, 1]
    return [m * keep for m in mems]


class PretrainStep(Task):
    """The pretraining task inside the training step: the Task protocol's step methods
    (training/task.py) on compact features, for a model of `xlnet_config` (mem_len), data of
    `data_shape` (DataShape: L, R, P, bi_data), `factorization_order` and a global batch G; B,
    the rows per replica, is set by the task's `batch_layout` (`_replica_batch`)."""

    def __init__(self, xlnet_config: XLNetConfig, data_shape, factorization_order: str,
                 global_batch: int):
        self.xlnet_config, self.data_shape = xlnet_config, data_shape
        self.factorization_order, self.global_batch = factorization_order, global_batch
        self._replica_batch = 0

    def replica_features(self, features, b: Optional[int] = None):
        """The features with their per-replica shapes pinned (B rows, default the training
        replica batch): a multi-worker iterator hands out an unknown batch dimension; XLA and
        TPUs need static shapes."""
        b = b or self._replica_batch
        L, P = self.data_shape.seq_len, self.data_shape.num_predict
        shapes = {"input_ids": [b, L], "segment_ids": [b, L], "perm_rank": [b, L],
                  "target_positions": [b, P], "stream_id": [b], "direction": [b],
                  "chunk_index": [b]}
        return {k: tf.ensure_shape(v, shapes[k]) for k, v in features.items()}

    def example_ids(self, features):
        """int32 [rows]: direction * S + stream mod S (S streams per step), the same on any
        number of replicas or micro-batches (stream ids differ across directories by
        multiples of num_streams, a multiple of S)."""
        streams = self.global_batch // (2 if self.data_shape.bi_data else 1)
        return (tf.cast(features["direction"], tf.int32) * streams
                + tf.math.floormod(tf.cast(features["stream_id"], tf.int32), streams))

    def loss_count(self, features):
        """float32: the real targets of a batch of compact features (positions >= 0)."""
        return target_count(features["target_positions"])

    def model_features(self, features):
        """`dense_features` at this run's reuse_len (on the device, inside the step)."""
        return dense_features(features, self.data_shape.reuse_len, self.factorization_order)

    def loss(self, model, features, mems, training: bool = True, plan=None):
        """(summed cross-entropy over this replica's real targets, new memory) of compact
        `features`."""
        chunk_index = features["chunk_index"]
        features = self.model_features(features)
        inputs = {k: features[k] for k in MODEL_FEATURES}
        if self.xlnet_config.mem_len:
            inputs["mems"] = reset_at_stream_start(list(mems), chunk_index)
        outputs = model(inputs, training=training, plan=plan)
        ce_sum = target_cross_entropy(outputs["logits"], features["target"],
                                      features["target_mask"])
        return ce_sum, list(outputs["new_mems"])
