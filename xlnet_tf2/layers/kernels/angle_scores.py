"""The position scores without the rel-shift: XLNet's relative position embedding is sinusoidal,
so a query row's score against key j is a plain product with a table indexed by j.

With u = W_r,h (q_i + r_r) (d_model wide: [u_s, u_c], the halves that meet the sines and the
cosines of pe = concat(sin, cos)), a_i = M + i the query row's place among the K keys, j the
key's and f the frequencies, the score of distance a_i - j is

    bd[i, j] = u . pe(a_i - j) = Q'_i . K'_j,
    Q'_i = [u_s sin(a_i f) + u_c cos(a_i f),  u_c sin(a_i f) - u_s cos(a_i f)]
    K'_j = [cos(j f), sin(j f)]

by the angle-difference identities; the backward half of a bi_data batch reads negated
distances, pe(-d) = [-sin(d f), cos(d f)], i.e. u_s negated. One [K, D] table serves every
head, example and layer, and a query-stream row is just a row at its own a_i: no shift, no
T-wide scores, no window read. It is exact for the sinusoid table only: not with clamp_len (a
clamped distance is no angle difference) nor with dropout on the position embedding (its mask
is per distance); the model keeps the shift there (models/xlnet_model.py).

The angles n * f (n < K) are computed in float32 in the program, as the shift form's distances
are (layers/relative_position.py): the same rounding of the argument.
"""

from __future__ import annotations

from typing import Optional

import tensorflow as tf

from xlnet_tf2.layers import step_plan


def angle_table(k_len: int, d_model: int, run_time_input: Optional[tf.Tensor] = None
                ) -> tf.Tensor:
    """float32 [2, K, D/2]: cos(n f) and sin(n f) for n = 0 .. K - 1 and the D/2 frequencies of
    the sinusoid embedding. `run_time_input`: an integer tensor known only at run time, so the
    table is computed in the program rather than folded into a constant (layers/step_plan.py)."""
    inv_freq = 1.0 / tf.pow(10000.0, tf.range(0, d_model, 2, dtype=tf.float32) / d_model)
    n = tf.range(k_len, dtype=tf.float32)
    if run_time_input is not None:
        n = n + step_plan.zero(run_time_input)
    angles = n[:, None] * inv_freq[None, :]                               # [K, D/2]
    return tf.stack([tf.cos(angles), tf.sin(angles)], axis=0)


def angle_position_scores(u: tf.Tensor, row_places: tf.Tensor, table: tf.Tensor,
                          direction_groups: int) -> tf.Tensor:
    """bd [B, N, S, K] in u's dtype: the position scores of query rows at places `row_places`
    (int32 [B, S], a_i = M + the row's position in the example) against the K keys.

    u: [B, N, S, D], W_r,h (q + r_r) per head. table: `angle_table` [2, K, D/2].
    direction_groups: 1, or 2 with bi_data (the batch's second half reads negated distances).
    """
    half = u.shape[-1] // 2
    u_s, u_c = u[..., :half], u[..., half:]
    if direction_groups == 2:
        batch = tf.shape(u)[0]
        sign = tf.concat([tf.ones([batch // 2]), -tf.ones([batch - batch // 2])], 0)
        u_s = u_s * tf.cast(sign, u.dtype)[:, None, None, None]
    cos_a = tf.cast(tf.gather(table[0], row_places), u.dtype)[:, None]   # [B, 1, S, D/2]
    sin_a = tf.cast(tf.gather(table[1], row_places), u.dtype)[:, None]
    q_rows = tf.concat([u_s * sin_a + u_c * cos_a, u_c * sin_a - u_s * cos_a], -1)  # [B,N,S,D]
    k_rows = tf.cast(tf.concat([table[0], table[1]], -1), u.dtype)       # [K, D]
    return tf.einsum("bnsd,kd->bnsk", q_rows, k_rows)
