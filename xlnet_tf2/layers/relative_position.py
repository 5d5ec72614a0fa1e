"""Relative position encoding and the two ways of aligning scores with it.

Letters (docs/GLOSSARY.md; used in every shape below):
  B  batch size                       N  attention heads
  L  query length (current segment)   H  head size
  M  memory length                    D  model width
  K  key length, K = M + L            P  predicted positions (query stream rows)
  T  relative positions encoded: K + L for bidirectional attention (distances K .. -L+1),
     K + 1 for unidirectional attention (distances K .. 0)
  X  direction groups of the batch: 1, or 2 with bi_data (forward half, backward half)

Index t of the T axis encodes the relative distance `K - t` (forward) or `-(K - t)` (the
backward half with bi_data). A query at position i of the segment and a key at position j of
concat(memory, segment) are `M + i - j` apart, which is index `t = L - i + j`.
"""

from __future__ import annotations

from typing import Optional

import keras
import tensorflow as tf

from xlnet_tf2.layers import run_time


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
    no compiler sees through (`layers/run_time.py`), the step computes the table instead
    (X * T * D / 2 sines and cosines). Adding +0.0 changes no distance, so the values are
    those of the formula (up to the sine's implementation, a few ulp).
    """
    zero = None if run_time_input is None else run_time.zero(run_time_input)
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
                           k_len: int) -> tf.Tensor:
    """Like `rel_shift`, for query rows at arbitrary segment positions (the query stream).

    Args:
      scores: [B, N, P, T], column t scoring relative distance K - t.
      query_positions: int32 [B, P], the segment position i of each query row.
      q_len: L.  k_len: K.
    Returns:
      [B, N, P, K]: entry (p, j) scores distance M + i_p - j, column t = L - i_p + j. Entries
      whose column lies beyond T (future keys of a unidirectional query) hold unrelated
      values; the attention mask must hide them.

    Row p needs the K columns starting at L - i_p: a window whose start depends on the row,
    which no reshape can express. Its form depends on the device the step is traced for
    (layers/run_time.py):
      gpu, tpu  `_take_windows`: a gather over the flattened scores with one index per
           output element, computed in the program from small ranges (XLA fuses it into the
           gather); its gradient is another such gather, not a scatter;
      cpu  `tf.gather(batch_dims=3)` (`coordinate_gather_here`), whose index holds all four
           coordinates of every element ([B, N, P, K, 4]: 234 MB per layer at XLNet-Base with
           batch 16) and whose gradient is a scatter-add.
    """
    t_len = scores.shape[-1]
    if t_len is None:
        raise ValueError("gather_relative_scores needs a static number of encoded positions T.")
    starts = q_len - tf.cast(query_positions, tf.int32)  # [B, P], each in [1, L]
    if coordinate_gather_here():
        columns = starts[:, :, None] + tf.range(k_len, dtype=tf.int32)[None, None]
        columns = tf.minimum(columns, t_len - 1)  # [B, P, K]
        b, n, p, _ = keras.ops.shape(scores)
        columns = tf.broadcast_to(columns[:, None], [b, n, p, k_len])
        return tf.gather(scores, columns, batch_dims=3)
    width = q_len + k_len
    if t_len < width:  # unidirectional: T = K + 1; the columns past T are never visible
        scores = tf.pad(scores, [[0, 0], [0, 0], [0, 0], [0, width - t_len]])
    return _take_windows(scores, starts, k_len)


def content_shift(scores: tf.Tensor, k_len: int) -> tf.Tensor:
    """`rel_shift` of the content rows (row i at segment position i), in the form of the
    device the step is traced for (layers/run_time.py): on a GPU the window read of
    `gather_relative_scores` with positions 0 .. L - 1, an elementwise read that XLA fuses with
    the bias's sum, where the reshapes of `rel_shift` are a data movement of their own, forward
    and backward; elsewhere `rel_shift`."""
    if run_time.kind() != "gpu":
        return rel_shift(scores, k_len)
    q_len = scores.shape[2]
    return gather_relative_scores(scores, segment_positions(scores, q_len), q_len, k_len)


def segment_positions(like: tf.Tensor, q_len: int) -> tf.Tensor:
    """int32 [B, L]: the content rows' positions 0 .. L - 1, for every row of `like` [B, ...]."""
    return tf.broadcast_to(tf.range(q_len, dtype=tf.int32)[None], [tf.shape(like)[0], q_len])


def coordinate_gather_here() -> bool:
    """Whether the query stream's shift is `tf.gather(batch_dims=3)`: only in a step traced
    for a CPU (layers/run_time.py). On the 2-core build machine the window read was not
    faster in the pretraining step (BENCHMARKS.md): XLA's CPU fusion puts the element-wise
    chain producing the incoming gradient (the softmax's and dropout's backward) inside the
    gradient's gather, recomputing it per read element, and a CPU has no memory traffic to
    save here."""
    return run_time.kind() == "cpu"


def _flat_index(b, n, p, row_len, columns: tf.Tensor) -> tf.Tensor:
    """Index into a flattened [B, N, P, row_len] tensor of elements (b, n, p, columns[b, p, c]):
    [B, N, P, C]. The row starts are three 1-D ranges broadcast-added onto the run-time
    `columns` one at a time: no op has only constant inputs of the rows' size, which
    TensorFlow would fold into a literal (of [B, N, P] int32 per layer and direction) that the
    compiled step reads from memory; XLA fuses the sums into the gather reading them. int32
    unless the tensor is too large for it (or of unknown size)."""
    known = all(isinstance(d, int) for d in (b, n, p))
    dtype = tf.int32 if known and b * n * p * row_len < 2 ** 31 else tf.int64
    index = tf.cast(columns, dtype)[:, None]                                  # [B, 1, P, C]
    stride = row_len
    for axis, size in reversed(list(enumerate((b, n, p)))):
        shape = [1, 1, 1, 1]
        shape[axis] = -1
        index += tf.reshape(tf.range(size, dtype=dtype) * tf.cast(stride, dtype), shape)
        stride = stride * size
    return index


def _take_windows(x: tf.Tensor, starts: tf.Tensor, width: int) -> tf.Tensor:
    """x [B, N, P, W] (W static), starts int32 [B, P] with 0 <= starts <= W - width ->
    [B, N, P, width], out[b, n, p, j] = x[b, n, p, starts[b, p] + j].

    Gradient: the windows put back in place and zeros elsewhere, itself a gather from the
    incoming gradient (TensorFlow's gradient of a gather is a scatter-add: on a GPU atomic
    read-modify-writes into a zeroed tensor, where a gather writes each element once).
    """
    b, n, p, w = keras.ops.shape(x)

    @tf.custom_gradient
    def take(x_in):
        columns = starts[:, :, None] + tf.range(width)[None, None]  # [B, P, width]
        out = tf.gather(tf.reshape(x_in, [-1]), _flat_index(b, n, p, w, columns))

        def grad(dy):
            offset = tf.range(w)[None, None] - starts[:, :, None]  # [B, P, W]: dy's column
            inside = (offset >= 0) & (offset < width)
            read = tf.gather(tf.reshape(dy, [-1]),
                             _flat_index(b, n, p, width, tf.clip_by_value(offset, 0, width - 1)))
            return tf.where(inside[:, None], read, tf.zeros_like(read))

        return out, grad

    return take(x)
