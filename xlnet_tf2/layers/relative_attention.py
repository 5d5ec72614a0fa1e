"""Two-stream relative multi-head attention (Transformer-XL scores, XLNet query stream).

Letters (docs/GLOSSARY.md):
  B  batch size                       N  attention heads
  L  query length (one example)       H  head size
  M  memory length                    D  model width
  K  key length, K = M + L            P  query-stream rows (predicted positions)
  T  encoded relative positions (see relative_position.py)
  X  direction groups (1, or 2 with bi_data: the batch's forward and backward halves)
  S  query rows of one attention: L, P, or L + P (both streams as one, on a GPU)

Score from query row i to key j, with biases r_w, r_r, r_s [N, H]:
  ac = (q_i + r_w) . k_j                     content
  bd = (q_i + r_r) . r_(M + i - j)           position
  ef = (q_i + r_s) . seg_embed[s_ij]         segment (s_ij = 1 if different segments)
  score = (ac + bd + ef) / sqrt(H), blocked entries set to -1e30 in float32.

Keys and values come from concat(memory, h) for both streams; queries come from h (content
stream, all L rows) or g (query stream, only the P target rows: computing the other L - P rows
as the original does and discarding them gives the same numbers with more work).

The attention itself (softmax, dropout, values) is one call, whose implementations (TensorFlow
ops, cuDNN, the project's Triton kernels) live in layers/kernels/ and are chosen by the step's
plan (layers/step_plan.py), passed down from where the step is traced: `kernels.attention`
with the position and segment terms assembled into one [B, N, S, K] bias, or, for the Triton
kernels, `kernels.triton_attention` with the terms as they are made (the queries and their
biases, the projected position embedding k_r, the segment ids), which the kernels combine tile
by tile.
"""

from __future__ import annotations

from typing import Optional

import keras
import tensorflow as tf

from xlnet_tf2.layers.dropout import Dropout
from xlnet_tf2.layers.kernels.angle_scores import angle_position_scores
from xlnet_tf2.layers.kernels.attention import attention, chosen_implementation
from xlnet_tf2.layers.kernels.position_product import grouped_position_product
from xlnet_tf2.layers.relative_position import (content_positions, content_shift,
                                                gather_relative_scores)
from xlnet_tf2.layers.kernels.triton_attention import triton_attention
from xlnet_tf2.layers.step_plan import StepPlan, plan_or_default


def normal_initializer(stddev: float):
    """The original's initializer: normal(0, stddev), not truncated."""
    return keras.initializers.RandomNormal(mean=0.0, stddev=stddev)


@keras.saving.register_keras_serializable(package="xlnet_tf2")
class RelativeAttention(keras.layers.Layer):
    """Relative multi-head attention shared by the content and query streams of one layer.

    Owns the projections q, k, v, r, o [D, N, H] (no biases), the segment embedding
    seg_embed [2, N, H], the post-attention LayerNorm and, when `own_biases` (untie_r), the
    biases r_w, r_r, r_s [N, H]; otherwise the model passes its shared biases to `call`.
    """

    def __init__(self, d_model: int, n_head: int, d_head: int, dropout: float = 0.0,
                 dropatt: float = 0.0, initializer_range: float = 0.02, own_biases: bool = True,
                 layer_norm_epsilon: float = 1e-12, **kwargs):
        super().__init__(**kwargs)
        self.d_model = d_model
        self.n_head = n_head
        self.d_head = d_head
        self.dropout_rate = dropout
        self.dropatt_rate = dropatt
        self.initializer_range = initializer_range
        self.own_biases = own_biases
        self.layer_norm_epsilon = layer_norm_epsilon
        self.scale = 1.0 / (d_head ** 0.5)
        self.output_dropout = Dropout(dropout, name="dropout", dtype=self.dtype_policy)
        # The probabilities' mask is read by several fusions of the backward pass: stored on a
        # CPU instead of recomputed in each (layers/dropout.py).
        self.attention_dropout = Dropout(dropatt, name="dropatt", store_mask=True,
                                         dtype=self.dtype_policy)
        # Sublayers follow this layer's dtype policy (a `dtype=` given to the layer alone).
        self.layer_norm = keras.layers.LayerNormalization(epsilon=layer_norm_epsilon,
                                                          name="layer_norm",
                                                          dtype=self.dtype_policy)

    def build(self, input_shape=None):
        init = normal_initializer(self.initializer_range)
        shape = (self.d_model, self.n_head, self.d_head)
        self.q = self.add_weight(name="q", shape=shape, initializer=init)
        self.k = self.add_weight(name="k", shape=shape, initializer=init)
        self.v = self.add_weight(name="v", shape=shape, initializer=init)
        self.r = self.add_weight(name="r", shape=shape, initializer=init)
        self.o = self.add_weight(name="o", shape=shape, initializer=init)
        self.seg_embed = self.add_weight(name="seg_embed", shape=(2, self.n_head, self.d_head),
                                         initializer=init)
        if self.own_biases:
            bias_shape = (self.n_head, self.d_head)
            self.r_w_bias = self.add_weight(name="r_w_bias", shape=bias_shape, initializer=init)
            self.r_r_bias = self.add_weight(name="r_r_bias", shape=bias_shape, initializer=init)
            self.r_s_bias = self.add_weight(name="r_s_bias", shape=bias_shape, initializer=init)
        self.layer_norm.build((None, None, self.d_model))
        self.built = True

    def get_config(self):
        config = super().get_config()
        config.update(d_model=self.d_model, n_head=self.n_head, d_head=self.d_head,
                      dropout=self.dropout_rate, dropatt=self.dropatt_rate,
                      initializer_range=self.initializer_range, own_biases=self.own_biases,
                      layer_norm_epsilon=self.layer_norm_epsilon)
        return config

    # ------------------------------------------------------------------ helpers
    # Every weight is read cast to the compute dtype (a mixed-precision layer keeps float32
    # variables).
    def _project(self, x, kernel):
        """[B, S, D] x [D, N, H] -> [B, N, S, H]."""
        return tf.einsum("bsd,dnh->bnsh", x, tf.cast(kernel, self.compute_dtype))

    def _post_attention(self, residual, attended, training, plan):
        """Output projection, dropout, residual and LayerNorm; attended [B, N, S, H] -> [B, S, D]."""
        out = tf.einsum("bnsh,dnh->bsd", attended, tf.cast(self.o, self.compute_dtype))
        out = self.output_dropout(out, training=training, plan=plan)
        return self.layer_norm(residual + out)

    # ------------------------------------------------------------------ call
    def call(self, h, pos_emb, g=None, mems=None, content_mask=None, query_mask=None,
             segment_mismatch=None, query_segment_mismatch=None, query_positions=None,
             query_weights=None, biases=None, training=None, plan: Optional[StepPlan] = None,
             angle_table=None, direction_groups: int = 1, segment_ids=None):
        """Runs both streams of one layer.

        Args:
          h: content stream [B, L, D].
          pos_emb: relative position embedding [X, T, D] (already dropped out).
          g: query stream [B, P, D] or None.
          mems: memory [B, M, D] or None.
          content_mask, query_mask: bool [B, L, K] and [B, P, K], True = blocked, or None.
          segment_mismatch: bool [B, L, K] (content rows) or None for no segment term.
          query_segment_mismatch: bool [B, P, K] (query rows) or None.
          segment_ids: int [B, K], the keys' segment ids (memory keys 0), from which the
            mismatches were made, or None: the Triton kernels compare ids instead of reading a
            [B, S, K] matrix (a row's id is its key's, M + its position in the example).
          query_positions: int32 [B, P], each query-stream row's position in the example.
          query_weights: [B, P], 1 for real target rows, 0 for empty ones (their attention
            output is zero, as when the original maps rows through an all-zero target_mapping).
          biases: (r_w, r_r, r_s) shared [N, H] tensors when the layer does not own them.
          plan: the step's plan (layers/step_plan.py); None: this machine's.
          angle_table: layers/kernels/angle_scores.py's table [2, K, D/2], for the position
            scores without the shift (then `pos_emb` is unused), with `direction_groups` (1, or
            2 with bi_data); None: the shift form from `pos_emb`.
        Returns:
          (h_out [B, L, D], g_out [B, P, D]) with a query stream; h_out alone without one (a
          Keras call returns tensors only, so the layer works in a functional model).
        """
        plan = plan_or_default(plan)
        if self.own_biases:
            biases = (self.r_w_bias, self.r_r_bias, self.r_s_bias)
        r_w, r_r, r_s = (tf.cast(b, self.compute_dtype)[:, None, :] for b in biases)  # [N, 1, H]

        q_len = h.shape[1]
        keys_in = h if mems is None else tf.concat([tf.cast(mems, h.dtype), h], axis=1)  # [B, K, D]
        k_len = keys_in.shape[1]
        keys = self._project(keys_in, self.k)  # [B, N, K, H]
        values = self._project(keys_in, self.v)  # [B, N, K, H]
        if angle_table is None:
            k_r = tf.einsum("xtd,dnh->xtnh", tf.cast(pos_emb, self.compute_dtype),
                            tf.cast(self.r, self.compute_dtype))
            n_groups = pos_emb.shape[0]
        if segment_ids is not None:
            segment_ids = tf.cast(segment_ids, tf.int32)

        def unshifted_scores(queries):
            """(q + r_r) . r for every encoded distance: [B, N, S, T], column t scoring
            distance K - t. With X = 2 the first half of the batch uses group 0 (forward) and
            the second half group 1 (backward)."""
            batch, n, rows, head = queries.shape
            batch = tf.shape(queries)[0] if batch is None else batch
            rows = tf.shape(queries)[2] if rows is None else rows
            scores = grouped_position_product(
                tf.reshape(queries + r_r, [n_groups, batch // n_groups, n, rows, head]), k_r)
            # T stays static even when the batch is not (multi-worker input): later steps
            # slice by it.
            return tf.reshape(scores, [batch, n, rows, k_r.shape[1]])

        def position_scores(queries, positions):
            """bd = (q + r_r) . r at the distance of each query row [B, N, S, H] (at
            positions `positions` [B, S] of the example, None for the L content rows in order)
            and key: [B, N, S, K]."""
            if angle_table is not None:  # without the shift (layers/kernels/angle_scores.py)
                u = tf.einsum("bnsh,dnh->bnsd", queries + r_r,
                              tf.cast(self.r, self.compute_dtype))             # [B, N, S, D]
                if positions is None:
                    positions = content_positions(queries, q_len)
                places = tf.cast(positions, tf.int32) + (k_len - q_len)          # M + i
                return angle_position_scores(u, places, angle_table, direction_groups)
            scores = unshifted_scores(queries)
            if positions is None:
                return content_shift(scores, k_len, plan)
            return gather_relative_scores(scores, positions, q_len, k_len, plan)

        def segment_scores(queries):
            """(q + r_s) . seg_embed[c] for c = 0 (same segment), 1 (different): [B, N, S, 2]."""
            return tf.einsum("bnsh,cnh->bnsc", queries + r_s,
                             tf.cast(self.seg_embed, self.compute_dtype))

        def attend(queries, positions, mismatch, blocked, dropout_rows=None):
            """The attention of query rows [B, N, S, H] at positions `positions` of the
            example ([B, S], None for the L content rows in order): the content part
            (q + r_w) . k by the op, the aligned position scores and the segment term as its
            bias; or, where the step runs the Triton kernels, the terms unassembled
            (layers/kernels/triton_attention.py)."""
            implementation = chosen_implementation(
                queries, keys, dropout=self.attention_dropout, training=training, plan=plan,
                dropout_rows=dropout_rows, score_terms=_why_no_score_terms(
                    angle_table, mismatch, segment_ids))
            if implementation == "triton":
                if positions is None:
                    positions = content_positions(queries, q_len)
                segments = {}
                if mismatch is not None:
                    segments = dict(
                        segment_scores=segment_scores(queries), key_segments=segment_ids,
                        row_segments=tf.gather(segment_ids, positions + (k_len - q_len),
                                               batch_dims=1))
                return triton_attention(
                    queries, r_w[:, 0], r_r[:, 0], keys, values, k_r, positions, blocked,
                    seq_len=q_len, scale=self.scale, dropout=self.attention_dropout,
                    training=training, plan=plan, dropout_rows=dropout_rows, **segments)
            bias = position_scores(queries, positions)
            if mismatch is not None:  # (q + r_s) . seg_embed[s_ij], s_ij: mismatch [B, S, K]
                per_class = segment_scores(queries)                               # [B, N, S, 2]
                bias += tf.where(mismatch[:, None], per_class[..., 1:], per_class[..., :1])
            return attention(queries + r_w, keys, values, bias, blocked, scale=self.scale,
                             dropout=self.attention_dropout, training=training, plan=plan,
                             dropout_rows=dropout_rows,
                             implementation=implementation)  # [B, N, S, H]

        q_h = self._project(h, self.q)  # [B, N, L, H]
        if g is None:
            attended_h = attend(q_h, None, segment_mismatch, content_mask)
            return self._post_attention(h, attended_h, training, plan)
        if (segment_mismatch is None) != (query_segment_mismatch is None):
            raise ValueError("RelativeAttention takes the segment term for both streams or for "
                             "neither: give segment_mismatch and query_segment_mismatch together.")
        q_g = self._project(g, self.q)  # [B, N, P, H]
        n_query = g.shape[1]
        if plan.one_attention_for_both_streams:
            # Both streams as one attention of L + P rows, the content rows first: one score
            # product, one softmax, one value product, no concatenation of score-sized tensors.
            # Each stream's probabilities keep the dropout mask of a call of their own.
            positions = tf.concat([content_positions(query_positions, q_len),
                                   tf.cast(query_positions, tf.int32)], axis=1)  # [B, L + P]
            attended = attend(
                tf.concat([q_h, q_g], axis=2), positions,
                _rows(segment_mismatch, query_segment_mismatch, q_len, n_query),
                _rows(content_mask, query_mask, q_len, n_query),
                dropout_rows=(q_len, n_query))
            attended_h, attended_g = attended[:, :, :q_len], attended[:, :, q_len:]
        else:
            attended_h = attend(q_h, None, segment_mismatch, content_mask)
            attended_g = attend(q_g, query_positions, query_segment_mismatch, query_mask)
        h_out = self._post_attention(h, attended_h, training, plan)
        attended_g *= tf.cast(query_weights, attended_g.dtype)[:, None, :, None]
        g_out = self._post_attention(g, attended_g, training, plan)
        return h_out, g_out


def _why_no_score_terms(angle_table, mismatch, segment_ids) -> Optional[str]:
    """Why this layer call cannot give the Triton kernels the score's terms unassembled, or
    None."""
    if angle_table is not None:
        return "the position scores are the angle form's (--position_scores=angles)"
    if mismatch is not None and segment_ids is None:
        return "the segment term was given without the segment ids (segment_ids)"
    return None


def _rows(content, query, q_len: int, n_query):
    """The content rows' bool [B, L, K] and the query rows' bool [B, P, K] stacked into
    [B, L + P, K] (`n_query` = P, or None without a query stream: `content` alone). None when
    neither is given; a part not given is all False (nothing blocked, or the same segment)."""
    if n_query is None or (content is None and query is None):
        return content
    given = content if content is not None else query
    batch, k_len = tf.shape(given)[0], tf.shape(given)[2]
    if content is None:
        content = tf.zeros([batch, q_len, k_len], tf.bool)
    if query is None:
        query = tf.zeros([batch, n_query, k_len], tf.bool)
    return tf.concat([content, query], axis=1)
