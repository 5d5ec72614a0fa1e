"""Attention masks and the relative segment matrix, built once per forward pass.

Letters (docs/GLOSSARY.md): B batch, L query length, M memory length, K = M + L keys, P predicted
positions. Polarity: every mask here is boolean and True means "query i may NOT attend to
key j" (the original's and HuggingFace's `perm_mask` polarity). Memory keys (the first M
columns) are visible unless the causal mask of unidirectional attention or a `memory_mask`
(empty memory slots, e.g. in generation) hides them.
"""

from __future__ import annotations

from typing import Optional, Tuple

import tensorflow as tf

from xlnet_tf2.layers import run_time


def causal_mask(q_len: int, m_len: int, same_length: bool = False,
                zero: Optional[tf.Tensor] = None) -> tf.Tensor:
    """Unidirectional mask; bool [L, K], True = blocked.

    Query i sees memory and segment keys up to and including itself: key j is blocked when
    j > M + i. With `same_length`, query i additionally loses the keys j < i, so every query
    sees the same number (M + 1) of keys: the window of length K - L + 1 ending at itself.
    """
    i, j = _positions(q_len, m_len, zero)
    blocked = j > m_len + i
    if same_length:
        blocked = tf.logical_or(blocked, j < i)
    return blocked


def _positions(q_len: int, m_len: int, zero: Optional[tf.Tensor]):
    """Query positions i [L, 1] and key positions j [1, K]; with `zero` (an int32 0 known only
    at run time, layers/run_time.py) the [L, K] patterns built from them are computed in the
    compiled program instead of being folded into constants of that size."""
    i, j = tf.range(q_len), tf.range(m_len + q_len)
    if zero is not None:
        i, j = i + zero, j + zero
    return i[:, None], j[None, :]


def build_attention_masks(
    *, batch_size, q_len: int, m_len: int, attn_type: str, same_length: bool,
    attention_mask: Optional[tf.Tensor] = None, perm_mask: Optional[tf.Tensor] = None,
    memory_mask: Optional[tf.Tensor] = None, run_time_input: Optional[tf.Tensor] = None,
) -> Tuple[Optional[tf.Tensor], Optional[tf.Tensor]]:
    """The content-stream and query-stream masks.

    Args:
      batch_size: B (int or scalar tensor).
      attention_mask: [B, L], 1 = real token, 0 = padding; padding keys are blocked.
      perm_mask: [B, L, L], 1 = query i may not attend to key j (factorization order).
      memory_mask: [B, M], 1 = a real memory entry, 0 = an empty slot no query may see
        (same polarity as attention_mask).
      run_time_input: any integer tensor known only at run time (the model's input ids):
        the [L, K] patterns (diagonal, causal) are then computed in a compiled program instead
        of being folded into constants of that size (layers/run_time.py).
    Returns:
      (content_mask, query_mask), each bool [B, L, K] with True = blocked, or (None, None)
      when nothing is masked (bidirectional attention with no padding and no permutation).
      The query stream never sees its own position through perm_mask; the content stream
      always may see itself, so its mask is the query mask with the diagonal (j = M + i)
      cleared.
    """
    zero = None if run_time_input is None else run_time.int_zero(run_time_input)
    blocked = None
    if attn_type == "uni":
        blocked = tf.broadcast_to(causal_mask(q_len, m_len, same_length, zero)[None],
                                  [batch_size, q_len, m_len + q_len])
    data_blocked = None
    if attention_mask is not None:
        padding = tf.equal(tf.cast(attention_mask, tf.int32), 0)[:, None, :]  # [B, 1, L]
        data_blocked = tf.broadcast_to(padding, [batch_size, q_len, q_len])
    if perm_mask is not None:
        perm = tf.cast(perm_mask, tf.float32) > 0.0
        data_blocked = perm if data_blocked is None else tf.logical_or(data_blocked, perm)
    if memory_mask is not None and data_blocked is None:
        data_blocked = tf.zeros([batch_size, q_len, q_len], dtype=tf.bool)
    if data_blocked is not None:
        if memory_mask is None:
            memory_blocked = tf.zeros([batch_size, q_len, m_len], dtype=tf.bool)
        else:
            empty = tf.equal(tf.cast(memory_mask, tf.int32), 0)[:, None, :]  # [B, 1, M]
            memory_blocked = tf.broadcast_to(empty, [batch_size, q_len, m_len])
        data_blocked = tf.concat([memory_blocked, data_blocked], axis=2)  # [B, L, K]
        blocked = data_blocked if blocked is None else tf.logical_or(blocked, data_blocked)
    if blocked is None:
        return None, None
    i, j = _positions(q_len, m_len, zero)
    self_key = tf.equal(j, m_len + i)                                        # [L, K]
    content_mask = tf.logical_and(blocked, tf.logical_not(self_key)[None])
    return content_mask, blocked


def segment_matrix(segment_ids: tf.Tensor, m_len: int, query_segment_ids=None) -> tf.Tensor:
    """Whether query and key lie in different segments; bool [B, Lq, K].

    Args:
      segment_ids: int [B, L] of the current segment. Memory keys count as segment 0.
      m_len: M.
      query_segment_ids: int [B, Lq] of the query rows; defaults to `segment_ids` (content
        stream). The query stream passes the segment ids of its target positions.
    """
    segment_ids = tf.cast(segment_ids, tf.int32)
    if query_segment_ids is None:
        query_segment_ids = segment_ids
    key_ids = segment_ids
    if m_len > 0:
        memory_ids = tf.zeros([tf.shape(segment_ids)[0], m_len], dtype=tf.int32)
        key_ids = tf.concat([memory_ids, segment_ids], axis=1)
    return tf.not_equal(tf.cast(query_segment_ids, tf.int32)[:, :, None], key_ids[:, None, :])
