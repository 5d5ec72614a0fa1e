"""Where each query stands relative to each key: whether it may see it (the attention masks),
whether the two lie in different segments (the segment matrix), how far apart they are (the
relative position encoding), and the two ways of aligning position scores with the keys.
The masks, the segment matrix and the encoding are built once per forward pass
(models/xlnet_model.py); every layer aligns its scores (layers/xlnet_block.py's `RelativeAttention`).

Letters (docs/GLOSSARY.md; used in every shape below):
  B  batch size                       N  attention heads
  L  query length (one example)       H  head size
  M  memory length                    D  model width
  K  key length, K = M + L            P  predicted positions (query stream rows)
  T  relative positions encoded: K + L for bidirectional attention (distances K .. -L+1),
     K + 1 for unidirectional attention (distances K .. 0)
  X  direction groups of the batch: 1, or 2 with bi_data (forward half, backward half)

Masks. Every mask here is boolean and True means "query i may NOT attend to key j" (the
original's and HuggingFace's `perm_mask` polarity). Memory keys (the first M columns) are
visible unless the causal mask of unidirectional attention or a `memory_mask` (empty memory
slots, e.g. in generation) hides them.

Distances. Index t of the T axis encodes the relative distance `K - t` (forward) or `-(K - t)`
(the backward half with bi_data). A query at position i of the example and a key at position j
of concat(memory, example) are `M + i - j` apart, which is index `t = L - i + j`.
"""

from __future__ import annotations

from typing import Optional, Tuple

import keras
import tensorflow as tf

from xlnet_tf2.layers.kernels.window_read import take_windows
from xlnet_tf2.layers import step_plan
from xlnet_tf2.layers.step_plan import StepPlan


# ---------------------------------------------------------------------------- masks, segments
def causal_mask(q_len: int, m_len: int, same_length: bool = False,
                zero: Optional[tf.Tensor] = None) -> tf.Tensor:
    """Unidirectional mask; bool [L, K], True = blocked.

    Query i sees the memory keys and the example's keys up to and including itself: key j is
    blocked when j > M + i. With `same_length`, query i additionally loses the keys j < i, so
    every query sees the same number (M + 1) of keys: the window of length K - L + 1 ending at
    itself.
    """
    i, j = _positions(q_len, m_len, zero)
    blocked = j > m_len + i
    if same_length:
        blocked = tf.logical_or(blocked, j < i)
    return blocked


def _positions(q_len: int, m_len: int, zero: Optional[tf.Tensor]):
    """Query positions i [L, 1] and key positions j [1, K]; with `zero` (an int32 0 known only
    at run time, layers/step_plan.py) the [L, K] patterns built from them are computed in the
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
        of being folded into constants of that size (layers/step_plan.py).
    Returns:
      (content_mask, query_mask), each bool [B, L, K] with True = blocked, or (None, None)
      when nothing is masked (bidirectional attention with no padding and no permutation).
      The query stream never sees its own position through perm_mask; the content stream
      always may see itself, so its mask is the query mask with the diagonal (j = M + i)
      cleared.
    """
    zero = None if run_time_input is None else step_plan.int_zero(run_time_input)
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


def key_segment_ids(segment_ids: tf.Tensor, m_len: int) -> tf.Tensor:
    """The keys' segment ids: int32 [B, K], the M memory keys as segment 0, then `segment_ids`
    [B, L] of the example's positions."""
    segment_ids = tf.cast(segment_ids, tf.int32)
    if m_len <= 0:
        return segment_ids
    memory_ids = tf.zeros([tf.shape(segment_ids)[0], m_len], dtype=tf.int32)
    return tf.concat([memory_ids, segment_ids], axis=1)


def segment_matrix(segment_ids: tf.Tensor, m_len: int, query_segment_ids=None) -> tf.Tensor:
    """Whether query and key lie in different segments; bool [B, Lq, K].

    Args:
      segment_ids: int [B, L] of the example's positions. Memory keys count as segment 0.
      m_len: M.
      query_segment_ids: int [B, Lq] of the query rows; defaults to `segment_ids` (content
        stream). The query stream passes the segment ids of its target positions.
    """
    segment_ids = tf.cast(segment_ids, tf.int32)
    if query_segment_ids is None:
        query_segment_ids = segment_ids
    key_ids = key_segment_ids(segment_ids, m_len)
    return tf.not_equal(tf.cast(query_segment_ids, tf.int32)[:, :, None], key_ids[:, None, :])


# ---------------------------------------------------------------------------- distances
def relative_distances(q_len: int, k_len: int, attn_type: str,
                       zero: Optional[tf.Tensor] = None) -> tf.Tensor:
    """Relative distances K, K-1, ..., down to -L+1 ("bi") or 0 ("uni"); float32 [T].
    `zero`: a float32 scalar 0.0 known only at run time, added to the distances (see
    `relative_position_encoding`)."""
    end = -q_len if attn_type == "bi" else -1
    distances = tf.range(k_len, end, -1, dtype=tf.float32)
    return distances if zero is None else distances + zero


def sinusoid_embedding(distances: tf.Tensor, d_model: int) -> tf.Tensor:
    """Sinusoids of `distances` [T]: concat(sin, cos) halves, not interleaved; float32 [T, D]."""
    inv_freq = 1.0 / tf.pow(10000.0, tf.range(0, d_model, 2, dtype=tf.float32) / d_model)
    angles = distances[:, None] * inv_freq[None, :]  # [T, D/2]
    return tf.concat([tf.sin(angles), tf.cos(angles)], axis=-1)


def relative_position_encoding(
    q_len: int, k_len: int, d_model: int, attn_type: str = "bi", bi_data: bool = False,
    clamp_len: int = -1, run_time_input: Optional[tf.Tensor] = None,
) -> tf.Tensor:
    """The relative position embedding shared by all layers; float32 [X, T, D].

    With `bi_data`, group 0 (the batch's forward half) uses distances K .. -L+1 and group 1
    (the backward half, read right to left) the negated distances -K .. L-1. `clamp_len` > 0
    clamps every distance into [-clamp_len, clamp_len].

    `run_time_input`: any non-empty integer tensor known only at run time (the model's input
    ids). The table depends only on the shape, so TensorFlow would fold it into a literal of
    X * T * D floats (8.6 MB at XLNet-Base with bi_data) that a compiled step reads from
    memory at every step; with the distances offset by a zero derived from this tensor, which
    no compiler sees through (`layers/step_plan.py`), the step computes the table instead
    (X * T * D / 2 sines and cosines). Adding +0.0 changes no distance, so the values are
    those of the formula (up to the sine's implementation, a few ulp).
    """
    zero = None if run_time_input is None else step_plan.zero(run_time_input)
    forward = relative_distances(q_len, k_len, attn_type, zero)
    groups = [forward, -forward] if bi_data else [forward]
    if clamp_len > 0:
        groups = [tf.clip_by_value(d, -float(clamp_len), float(clamp_len)) for d in groups]
    return tf.stack([sinusoid_embedding(d, d_model) for d in groups], axis=0)


def rel_shift(scores: tf.Tensor, k_len: int) -> tf.Tensor:
    """Aligns position scores of every query row with its keys (Transformer-XL trick).

    Args:
      scores: [B, N, L, T], column t scoring relative distance K - t.
      k_len: K.
    Returns:
      [B, N, L, K] where entry (i, j) scores distance M + i - j, i.e. column t = L - i + j of
      the input. Entries whose distance lies outside the encoded range (keys in the future of
      a unidirectional query) hold unrelated values; the attention mask must hide them.

    Viewing the row-major [L, T] block as [T, L] and dropping its first row shifts row i left
    by L - i; reading the rest back as [L, T - 1] and keeping K columns finishes the shift.
    Pure reshapes and a slice: static shapes, no gather, cheap under XLA.
    """
    b, n, q_len, t_len = keras.ops.shape(scores)
    x = tf.reshape(scores, [b, n, t_len, q_len])
    x = x[:, :, 1:, :]
    x = tf.reshape(x, [b, n, q_len, t_len - 1])
    return x[:, :, :, :k_len]


def gather_relative_scores(scores: tf.Tensor, query_positions: tf.Tensor, q_len: int,
                           k_len: int, plan: StepPlan) -> tf.Tensor:
    """Like `rel_shift`, for query rows at any positions of the example (the query stream).

    Args:
      scores: [B, N, P, T], column t scoring relative distance K - t.
      query_positions: int32 [B, P], each query row's position i in the example.
      q_len: L.  k_len: K.
    Returns:
      [B, N, P, K]: entry (p, j) scores distance M + i_p - j, column t = L - i_p + j. Entries
      whose column lies beyond T (future keys of a unidirectional query) hold unrelated
      values; the attention mask must hide them.

    Row p needs the K columns starting at L - i_p: a window whose start depends on the row,
    which no reshape can express. Its form is the plan's (layers/step_plan.py):
      gpu, tpu  `take_windows` (layers/kernels/window_read.py): a gather with one index per
           output element, computed in the program; its gradient is another gather;
      cpu  `tf.gather(batch_dims=3)` (`plan.coordinate_gather`), whose index holds all four
           coordinates of every element and whose gradient is a scatter-add.
    """
    t_len = scores.shape[-1]
    if t_len is None:
        raise ValueError("gather_relative_scores needs a static number of encoded positions T.")
    starts = q_len - tf.cast(query_positions, tf.int32)  # [B, P], each in [1, L]
    if plan.coordinate_gather:
        columns = starts[:, :, None] + tf.range(k_len, dtype=tf.int32)[None, None]
        columns = tf.minimum(columns, t_len - 1)  # [B, P, K]
        b, n, p, _ = keras.ops.shape(scores)
        columns = tf.broadcast_to(columns[:, None], [b, n, p, k_len])
        return tf.gather(scores, columns, batch_dims=3)
    width = q_len + k_len
    if t_len < width:  # unidirectional: T = K + 1; the columns past T are never visible
        scores = tf.pad(scores, [[0, 0], [0, 0], [0, 0], [0, width - t_len]])
    return take_windows(scores, starts, k_len)


def content_shift(scores: tf.Tensor, k_len: int, plan: StepPlan) -> tf.Tensor:
    """`rel_shift` of the content rows (row i at position i of the example), in the plan's
    form: with `plan.content_window_read` (GPU) the window read of `gather_relative_scores` with
    positions 0 .. L - 1, an elementwise read that XLA fuses with the bias's sum, where the
    reshapes of `rel_shift` are a data movement of their own, forward and backward; else
    `rel_shift`."""
    if not plan.content_window_read:
        return rel_shift(scores, k_len)
    q_len = scores.shape[2]
    return gather_relative_scores(scores, content_positions(scores, q_len), q_len, k_len, plan)


def content_positions(like: tf.Tensor, q_len: int) -> tf.Tensor:
    """int32 [B, L]: the content rows' positions in the example, 0 .. L - 1, for every row of
    `like` [B, ...]."""
    return tf.broadcast_to(tf.range(q_len, dtype=tf.int32)[None], [tf.shape(like)[0], q_len])
