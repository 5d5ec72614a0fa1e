"""Model inputs built in-graph from ragged token ids, exactly as xlnet_tf2/finetuning/features.py
builds them offline (a test compares the two on real text).

Dimension glossary: B batch, T ragged tokens, L seq_len.
"""

from __future__ import annotations

from typing import Dict, Optional

import tensorflow as tf

from xlnet_tf2 import special_ids as sid


def _keep_first(ids: tf.RaggedTensor, keep: tf.Tensor) -> tf.RaggedTensor:
    """Row b keeps its first keep[b] tokens."""
    positions = tf.ragged.range(ids.row_lengths())
    return tf.ragged.boolean_mask(ids, positions < tf.cast(keep, positions.dtype)[:, None])


def truncated_lengths(len_a: tf.Tensor, len_b: Optional[tf.Tensor], seq_len: int):
    """In-graph `features.truncated_lengths` (int64 [B] each)."""
    if len_b is None:
        return tf.minimum(len_a, seq_len - 2), None
    budget = tf.constant(seq_len - 3, len_a.dtype)
    fits = len_a + len_b <= budget
    keep_a = tf.minimum(len_a, tf.maximum((budget + 1) // 2, budget - len_b))
    return (tf.where(fits, len_a, keep_a), tf.where(fits, len_b, budget - keep_a))


def _constant_rows(batch, value):
    return tf.RaggedTensor.from_tensor(tf.fill([batch, 1], tf.constant(value, tf.int32)))


def encode_sequence_pair(ids_a: tf.RaggedTensor, ids_b: Optional[tf.RaggedTensor], seq_len: int,
                         layout: str = "cls_last") -> Dict[str, tf.Tensor]:
    """input_ids, segment_ids, attention_mask: int32 [B, seq_len]."""
    batch = ids_a.nrows()
    keep_a, keep_b = truncated_lengths(ids_a.row_lengths(),
                                       None if ids_b is None else ids_b.row_lengths(), seq_len)
    a = _keep_first(ids_a, keep_a)
    parts = [a, _constant_rows(batch, sid.SEP_ID)]
    segs = [tf.zeros_like(a) + sid.SEG_ID_A, _constant_rows(batch, sid.SEG_ID_A)]
    if ids_b is not None:
        b = _keep_first(ids_b, keep_b)
        parts += [b, _constant_rows(batch, sid.SEP_ID)]
        segs += [tf.zeros_like(b) + sid.SEG_ID_B, _constant_rows(batch, sid.SEG_ID_B)]
    if layout == "cls_last":
        parts.append(_constant_rows(batch, sid.CLS_ID))
        segs.append(_constant_rows(batch, sid.SEG_ID_CLS))
    else:
        parts.insert(0, _constant_rows(batch, sid.CLS_ID))
        segs.insert(0, _constant_rows(batch, sid.SEG_ID_CLS))
    tokens = tf.concat(parts, axis=1)                                # [B, (T)]
    segments = tf.concat(segs, axis=1)
    mask = tf.ones_like(tokens)
    return {k: _pad(v, seq_len, pad, left=(layout == "cls_last"))
            for k, v, pad in (("input_ids", tokens, sid.PAD_ID),
                              ("segment_ids", segments, sid.SEG_ID_PAD),
                              ("attention_mask", mask, 0))}


def _pad(rows: tf.RaggedTensor, seq_len: int, value: int, left: bool) -> tf.Tensor:
    """Ragged [B, (T <= L)] -> dense [B, L], padded on the left or the right."""
    if left:
        rows = tf.reverse(rows, axis=[1])
    dense = rows.to_tensor(default_value=value, shape=[None, seq_len])
    return tf.reverse(dense, axis=[1]) if left else dense


def encode_squad(context_ids: tf.RaggedTensor, question_ids: tf.RaggedTensor, seq_len: int,
                 max_query_length: int) -> Dict[str, tf.Tensor]:
    """The first SQuAD window, as xlnet_tf2/finetuning/squad_data.py builds it offline:
    context <sep> question <sep> <cls>, right padded; the question keeps its first
    max_query_length tokens, the context its first seq_len - 3 - len(question).
    Returns input_ids, segment_ids, attention_mask: int32 [B, seq_len]."""
    batch = context_ids.nrows()
    question = _keep_first(question_ids, tf.fill([batch], tf.cast(max_query_length, tf.int64)))
    context = _keep_first(context_ids, tf.maximum(seq_len - 3 - question.row_lengths(), 0))
    tokens = tf.concat([context, _constant_rows(batch, sid.SEP_ID), question,
                        _constant_rows(batch, sid.SEP_ID), _constant_rows(batch, sid.CLS_ID)],
                       axis=1)                                       # [B, (T)]
    segments = tf.concat([tf.zeros_like(context) + sid.SEG_ID_A, _constant_rows(batch, sid.SEG_ID_A),
                          tf.zeros_like(question) + sid.SEG_ID_B,
                          _constant_rows(batch, sid.SEG_ID_B),
                          _constant_rows(batch, sid.SEG_ID_CLS)], axis=1)
    return {k: _pad(v, seq_len, pad, left=False)
            for k, v, pad in (("input_ids", tokens, sid.PAD_ID),
                              ("segment_ids", segments, sid.SEG_ID_PAD),
                              ("attention_mask", tf.ones_like(tokens), 0))}


def squad_answer_inputs(input_ids: tf.Tensor, segment_ids: tf.Tensor,
                        attention_mask: tf.Tensor) -> Dict[str, tf.Tensor]:
    """p_mask [B, L] and cls_index [B] of a SQuAD layout, derived from the ids: document
    tokens (segment A, not <sep>) and <cls> may be predicted (p_mask 0), all else not.
    Also doc_length [B], the number of document tokens (they are positions 0..doc_length-1)."""
    doc = ((segment_ids == sid.SEG_ID_A) & (input_ids != sid.SEP_ID) & (attention_mask > 0))
    cls = input_ids == sid.CLS_ID
    return {"p_mask": tf.cast(~(doc | cls), tf.int32),
            "cls_index": tf.argmax(tf.cast(cls, tf.int32), axis=1, output_type=tf.int32),
            "doc_length": tf.reduce_sum(tf.cast(doc, tf.int32), axis=1)}
