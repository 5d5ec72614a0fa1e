"""The GPU's and TPU's form of the rel-shift of a query row at an arbitrary position: a window
of the position scores read by a gather with one index per output element, computed in the
program from small ranges (XLA fuses it into the gather), whose gradient is another such gather,
not a scatter (layers/relative_position.py's `gather_relative_scores` calls it).
"""

from __future__ import annotations

import keras
import tensorflow as tf


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


def take_windows(x: tf.Tensor, starts: tf.Tensor, width: int) -> tf.Tensor:
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
