"""Where each query stands relative to each key: whether it may see it (the attention masks),
whether the two lie in different segments (the segment matrix), how far apart they are (the
relative position encoding), built once per forward pass (models/xlnet_model.py), and the
alignment of position scores with the keys, in every layer (layers/xlnet_block.py).

Letters as layers/xlnet_block.py's (docs/GLOSSARY.md); T, the relative positions encoded:
K + L for bidirectional attention (distances K .. -L+1), K + 1 for unidirectional (K .. 0).

Masks are boolean, True = "query i may NOT attend to key j" (`perm_mask`'s polarity); memory
keys (the first M columns) are visible unless the causal mask or a `memory_mask` (empty slots)
hides them. Index t of the T axis encodes distance K - t (forward) or -(K - t) (the backward
half with bi_data); query i and key j of concat(memory, example) are M + i - j apart: index
t = L - i + j.
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
    """Unidirectional mask, bool [L, K], True = blocked: key j is blocked when j > M + i; with
    `same_length` also when j < i (every query sees the M + 1 keys ending at itself)."""
    i, j = _positions(q_len, m_len, zero)
    blocked = j > m_len + i
    if same_length:
        blocked = tf.logical_or(blocked, j < i)
    return blocked


def _positions(q_len: int, m_len: int, zero: Optional[tf.Tensor]):
    """Query positions i [L, 1] and key positions j [1, K], offset by `zero` (an int32 0 known
    at run time only, step_plan.py: the [L, K] patterns stay computed, not folded)."""
    i, j = tf.range(q_len), tf.range(m_len + q_len)
    if zero is not None:
        i, j = i + zero, j + zero
    return i[:, None], j[None, :]


def build_attention_masks(
    *, batch_size, q_len: int, m_len: int, attn_type: str, same_length: bool,
    attention_mask: Optional[tf.Tensor] = None, perm_mask: Optional[tf.Tensor] = None,
    memory_mask: Optional[tf.Tensor] = None, run_time_input: Optional[tf.Tensor] = None,
) -> Tuple[Optional[tf.Tensor], Optional[tf.Tensor]]:
    """(content_mask, query_mask) bool [B, L, K], True = blocked (None, None: nothing is); the
    content mask opens the diagonal j = M + i. attention_mask [B, L] (0 = padding), perm_mask
    [B, L, L] (1 = i may not see j), memory_mask [B, M] (0 = empty); `run_time_input`: the
    input ids, so the [L, K] patterns stay computed in the program (step_plan.py)."""
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
    """bool [B, Lq, K]: query and key in different segments, from segment_ids int [B, L]
    (memory keys segment 0) and the query rows' `query_segment_ids` int [B, Lq] (default
    `segment_ids`: the content stream; the query stream's are its targets')."""
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
    """The relative position embedding shared by all layers, float32 [X, T, D]: with `bi_data`
    group 1 (the backward half) takes the negated distances; `clamp_len` > 0 clamps them.

    `run_time_input`: a non-empty integer tensor known at run time only (the input ids). The
    table depends on the shape only: TensorFlow would fold it into a literal of X * T * D
    floats (8.6 MB at XLNet-Base with bi_data) read at every step; offset by a run-time zero
    (step_plan.py), the step computes it (X * T * D / 2 sines and cosines; +0.0 moves no
    distance)."""
    zero = None if run_time_input is None else step_plan.zero(run_time_input)
    forward = relative_distances(q_len, k_len, attn_type, zero)
    groups = [forward, -forward] if bi_data else [forward]
    if clamp_len > 0:
        groups = [tf.clip_by_value(d, -float(clamp_len), float(clamp_len)) for d in groups]
    return tf.stack([sinusoid_embedding(d, d_model) for d in groups], axis=0)


def rel_shift(scores: tf.Tensor, k_len: int) -> tf.Tensor:
    """scores [B, N, L, T] (column t: distance K - t) aligned with the keys (Transformer-XL's
    trick): [B, N, L, K], entry (i, j) column t = L - i + j. Entries beyond the encoded range
    (a unidirectional query's future keys) hold unrelated values: the mask hides them.

    The row-major [L, T] block viewed as [T, L] without its first row shifts row i left by
    L - i; read back as [L, T - 1], its first K columns finish the shift. Reshapes and a slice.
    """
    b, n, q_len, t_len = keras.ops.shape(scores)
    x = tf.reshape(scores, [b, n, t_len, q_len])
    x = x[:, :, 1:, :]
    x = tf.reshape(x, [b, n, q_len, t_len - 1])
    return x[:, :, :, :k_len]


def gather_relative_scores(scores: tf.Tensor, query_positions: tf.Tensor, q_len: int,
                           k_len: int, plan: StepPlan) -> tf.Tensor:
    """`rel_shift` for query rows at positions `query_positions` int32 [B, P] (the query
    stream): scores [B, N, P, T] -> [B, N, P, K], entry (p, j) column t = L - i_p + j (beyond
    T: unrelated values, masked). Row p's window starts at L - i_p, which no reshape expresses:
    on a GPU or TPU `take_windows` (kernels/window_read.py: one index per output element, its
    gradient another gather); on a CPU (`plan.coordinate_gather`) `tf.gather(batch_dims=3)`,
    whose gradient is a scatter-add."""
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
    """`rel_shift` of the content rows, or with `plan.content_window_read` (GPU) the window
    read of `gather_relative_scores` at positions 0 .. L - 1, which XLA fuses with the bias's
    sum (the reshapes are a data movement of their own, forward and backward)."""
    if not plan.content_window_read:
        return rel_shift(scores, k_len)
    q_len = scores.shape[2]
    return gather_relative_scores(scores, content_positions(scores, q_len), q_len, k_len, plan)


def content_positions(like: tf.Tensor, q_len: int) -> tf.Tensor:
    """int32 [B, L]: the content rows' positions in the example, 0 .. L - 1, for every row of
    `like` [B, ...]."""
    return tf.broadcast_to(tf.range(q_len, dtype=tf.int32)[None], [tf.shape(like)[0], q_len])
