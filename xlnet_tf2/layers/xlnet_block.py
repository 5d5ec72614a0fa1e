"""One XLNet layer: the two-stream relative attention, then the position-wise feed-forward
(D -> d_inner -> D, dropout, residual, LayerNorm) shared by both streams; and the attention op
with its reference implementation in TensorFlow ops.

Letters (docs/GLOSSARY.md):
  B  batch size                       N  attention heads
  L  query length (one example)       H  head size
  M  memory length                    D  model width
  K  key length, K = M + L            P  query-stream rows (predicted positions)
  T  encoded relative positions (relative_position.py)
  X  direction groups (1, or 2 with bi_data: the batch's forward and backward halves)
  S  query rows of one attention: L, P, or L + P (both streams as one, on a GPU and with the
     Pallas kernels on a TPU)

Score from query row i to key j, with biases r_w, r_r, r_s [N, H]:
  ac = (q_i + r_w) . k_j                     content
  bd = (q_i + r_r) . r_(M + i - j)           position
  ef = (q_i + r_s) . seg_embed[s_ij]         segment (s_ij = 1 if different segments)
  score = (ac + bd + ef) / sqrt(H), blocked entries set to -1e30 in float32.

Keys and values come from concat(memory, h) for both streams; queries come from h (content
stream, all L rows) or g (query stream, only the P target rows: computing the other L - P rows
as the original does and discarding them gives the same numbers with more work).

The attention op: softmax(scale * (q . k + bias), blocked entries excluded), dropout on the
probabilities, the weighted sum of values; bias: the position and segment terms. Here in
TensorFlow ops (`reference_attention`); where the plan may take a kernel
(`StepPlan.kernel_attention`), layers/kernels/attention_choice.py picks and runs it.
"""

from __future__ import annotations

from typing import Optional, Sequence

import keras
import tensorflow as tf

from xlnet_tf2.layers.dropout import Dropout
from xlnet_tf2.layers.kernels import attention_choice, cudnn
from xlnet_tf2.layers.kernels.angle_scores import angle_position_scores
from xlnet_tf2.layers.relative_position import (content_positions, content_shift,
                                                gather_relative_scores)
from xlnet_tf2.layers.step_plan import StepPlan, plan_or_default

def gelu_tanh(x):
    """GELU, tanh approximation (the original's; HuggingFace's `gelu_new`)."""
    return keras.activations.gelu(x, approximate=True)


def gelu_erf(x):
    """GELU, exact: x * Phi(x) with the erf (HuggingFace's `gelu`)."""
    return keras.activations.gelu(x, approximate=False)


# config.ACTIVATIONS' functions (XLNetConfig reads the original's "gelu" as "gelu_tanh").
_ACTIVATIONS = {"gelu_tanh": gelu_tanh, "gelu_erf": gelu_erf, "relu": tf.nn.relu}


@keras.saving.register_keras_serializable(package="xlnet_tf2")
class PositionwiseFeedForward(keras.layers.Layer):
    """x [B, L, D] -> LayerNorm(x + dropout(layer_2(dropout(act(layer_1(x))))))."""

    def __init__(self, d_model: int, d_inner: int, activation: str = "gelu_tanh",
                 dropout: float = 0.0, initializer_range: float = 0.02,
                 layer_norm_epsilon: float = 1e-12, **kwargs):
        super().__init__(**kwargs)
        if activation not in _ACTIVATIONS:
            raise ValueError(f"Unsupported ff_activation {activation!r}; use one of {sorted(_ACTIVATIONS)}.")
        self.d_model, self.d_inner, self.activation_name = d_model, d_inner, activation
        self.dropout_rate, self.initializer_range = dropout, initializer_range
        self.layer_norm_epsilon = layer_norm_epsilon
        init = normal_initializer(initializer_range)
        # Sublayers follow this layer's policy: one left on the global policy would cast a
        # mixed-precision layer's activations back to float32.
        policy = self.dtype_policy
        self.layer_1 = keras.layers.Dense(d_inner, kernel_initializer=init, name="layer_1",
                                          dtype=policy)
        self.layer_2 = keras.layers.Dense(d_model, kernel_initializer=init, name="layer_2",
                                          dtype=policy)
        self.dropout = Dropout(dropout, name="dropout", dtype=policy)
        self.layer_norm = keras.layers.LayerNormalization(epsilon=layer_norm_epsilon,
                                                          name="layer_norm", dtype=policy)
        self._activation = _ACTIVATIONS[activation]

    def build(self, input_shape=None):
        self.layer_1.build((None, None, self.d_model))
        self.layer_2.build((None, None, self.d_inner))
        self.layer_norm.build((None, None, self.d_model))
        self.built = True

    def get_config(self):
        config = super().get_config()
        config.update(d_model=self.d_model, d_inner=self.d_inner, activation=self.activation_name,
                      dropout=self.dropout_rate, initializer_range=self.initializer_range,
                      layer_norm_epsilon=self.layer_norm_epsilon)
        return config

    def call(self, x, training=None, plan=None):
        out = self._activation(self.layer_1(x))
        out = self.dropout(out, training=training, plan=plan)
        out = self.layer_2(out)
        out = self.dropout(out, training=training, plan=plan)
        return self.layer_norm(x + out)


@keras.saving.register_keras_serializable(package="xlnet_tf2")
class XLNetBlock(keras.layers.Layer):
    """Post-LayerNorm Transformer-XL layer on the content stream h [B, L, D] and, in
    pretraining, the query stream g [B, P, D], sharing every weight. `layer_index`: its depth,
    for layer-wise learning-rate decay (found structurally, not by variable names)."""

    def __init__(self, d_model: int, n_head: int, d_head: int, d_inner: int,
                 ff_activation: str = "gelu_tanh", dropout: float = 0.0, dropatt: float = 0.0,
                 initializer_range: float = 0.02, own_biases: bool = True, layer_index: int = 0,
                 **kwargs):
        super().__init__(**kwargs)
        self.layer_index = layer_index
        self._config = dict(d_model=d_model, n_head=n_head, d_head=d_head, d_inner=d_inner,
                            ff_activation=ff_activation, dropout=dropout, dropatt=dropatt,
                            initializer_range=initializer_range, own_biases=own_biases,
                            layer_index=layer_index)
        # Sublayers follow this layer's dtype policy (a `dtype=` given to the block alone).
        self.rel_attn = RelativeAttention(d_model, n_head, d_head, dropout=dropout, dropatt=dropatt,
                                          initializer_range=initializer_range,
                                          own_biases=own_biases, name="rel_attn",
                                          dtype=self.dtype_policy)
        self.ff = PositionwiseFeedForward(d_model, d_inner, activation=ff_activation,
                                          dropout=dropout, initializer_range=initializer_range,
                                          name="ff", dtype=self.dtype_policy)

    def build(self, input_shape=None):
        self.rel_attn.build()
        self.ff.build()
        self.built = True

    def get_config(self):
        config = super().get_config()
        config.update(self._config)
        return config

    def call(self, h, pos_emb, g=None, training=None, plan=None, angle_table=None,
             direction_groups: int = 1, **attention_kwargs):
        """(h_out [B, L, D], g_out [B, P, D]) with a query stream g, h_out alone without one;
        the other arguments are RelativeAttention.call's (Keras refuses a **kwargs that mixes
        tensors and Python values: the int `direction_groups` is named)."""
        position = dict(angle_table=angle_table, direction_groups=direction_groups)
        if g is None:
            h = self.rel_attn(h, pos_emb, training=training, plan=plan, **position,
                              **attention_kwargs)
            return self.ff(h, training=training, plan=plan)
        h, g = self.rel_attn(h, pos_emb, g=g, training=training, plan=plan, **position,
                             **attention_kwargs)
        return self.ff(h, training=training, plan=plan), self.ff(g, training=training, plan=plan)


def normal_initializer(stddev: float):
    """The original's initializer: normal(0, stddev), not truncated."""
    return keras.initializers.RandomNormal(mean=0.0, stddev=stddev)


@keras.saving.register_keras_serializable(package="xlnet_tf2")
class RelativeAttention(keras.layers.Layer):
    """Relative multi-head attention of one layer's two streams: the projections q, k, v, r,
    o [D, N, H] (no biases), seg_embed [2, N, H], the LayerNorm and, with `own_biases`
    (untie_r), r_w, r_r, r_s [N, H] (else the model passes its shared biases to `call`)."""

    def __init__(self, d_model: int, n_head: int, d_head: int, dropout: float = 0.0,
                 dropatt: float = 0.0, initializer_range: float = 0.02, own_biases: bool = True,
                 layer_norm_epsilon: float = 1e-12, **kwargs):
        super().__init__(**kwargs)
        self.d_model, self.n_head, self.d_head = d_model, n_head, d_head
        self.dropout_rate, self.dropatt_rate = dropout, dropatt
        self.initializer_range, self.own_biases = initializer_range, own_biases
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

    # Every weight is read cast to the compute dtype (a mixed-precision layer keeps float32
    # variables).
    def _project(self, x, kernel):
        """[B, S, D] x [D, N, H] -> [B, N, S, H]."""
        return tf.einsum("bsd,dnh->bnsh", x, tf.cast(kernel, self.compute_dtype))

    def _post_attention(self, residual, attended, training, plan):
        """Output projection, dropout, residual, LayerNorm: [B, N, S, H] -> [B, S, D]."""
        out = tf.einsum("bnsh,dnh->bsd", attended, tf.cast(self.o, self.compute_dtype))
        out = self.output_dropout(out, training=training, plan=plan)
        return self.layer_norm(residual + out)

    def call(self, h, pos_emb, g=None, mems=None, content_mask=None, query_mask=None,
             segment_mismatch=None, query_segment_mismatch=None, query_positions=None,
             query_weights=None, biases=None, training=None, plan: Optional[StepPlan] = None,
             angle_table=None, direction_groups: int = 1, segment_ids=None):
        """Both streams of one layer: (h_out [B, L, D], g_out [B, P, D]) with a query stream,
        h_out alone without one (a Keras call returns tensors only).

        h [B, L, D]; pos_emb [X, T, D] (dropped out); g [B, P, D], mems [B, M, D] or None;
        content_mask, query_mask, segment_mismatch, query_segment_mismatch bool [B, L or P, K]
        (True = blocked; different segments) or None; segment_ids int [B, K], the keys' ids
        (memory 0), which the kernels compare instead of reading a [B, S, K] matrix;
        query_positions int32 [B, P]; query_weights [B, P], 0 for empty target rows (output
        zero); biases (r_w, r_r, r_s) [N, H] when not owned; angle_table: angle_scores.py's
        [2, K, D/2] with `direction_groups`: the position scores without the shift.
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
            """(q + r_r) . r for every encoded distance, [B, N, S, T] (column t: distance
            K - t); with X = 2 the batch's second half uses group 1 (backward)."""
            batch, n, rows, head = queries.shape
            batch = tf.shape(queries)[0] if batch is None else batch
            rows = tf.shape(queries)[2] if rows is None else rows
            scores = grouped_position_product(
                tf.reshape(queries + r_r, [n_groups, batch // n_groups, n, rows, head]), k_r)
            # T stays static even when the batch is not (multi-worker input): later steps
            # slice by it.
            return tf.reshape(scores, [batch, n, rows, k_r.shape[1]])

        def position_scores(queries, positions):
            """bd [B, N, S, K] of query rows [B, N, S, H] at `positions` [B, S] (None: the L
            content rows in order)."""
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
            """The attention of query rows [B, N, S, H] at `positions` [B, S] (None: the L
            content rows): the op on (q + r_w) . k with the position and segment terms as its
            bias, or the Triton or Pallas kernels on the terms."""
            implementation = "reference"
            if plan.kernel_attention:  # not on the reference path
                implementation = attention_choice.chosen_implementation(
                    queries, keys, dropout=self.attention_dropout, training=training, plan=plan,
                    reference_attention=reference_attention, dropout_rows=dropout_rows,
                    score_terms=attention_choice.why_no_score_terms(angle_table, mismatch,
                                                                    segment_ids))
            if implementation in ("triton", "pallas"):
                if positions is None:
                    positions = content_positions(queries, q_len)
                return attention_choice.run_kernels(
                    implementation, queries, r_w, r_r, keys, values, k_r, positions, blocked,
                    None if mismatch is None else segment_scores(queries), segment_ids,
                    seq_len=q_len, scale=self.scale, dropout=self.attention_dropout,
                    training=training, plan=plan, dropout_rows=dropout_rows)
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
            attended = attend(tf.concat([q_h, q_g], axis=2), positions,
                              _rows(segment_mismatch, query_segment_mismatch, q_len, n_query),
                              _rows(content_mask, query_mask, q_len, n_query),
                              dropout_rows=(q_len, n_query))
            # (The Pallas op may return padding rows after the P query rows.)
            attended_h = attended[:, :, :q_len]
            attended_g = attended[:, :, q_len:q_len + n_query]
        else:
            attended_h = attend(q_h, None, segment_mismatch, content_mask)
            attended_g = attend(q_g, query_positions, query_segment_mismatch, query_mask)
        h_out = self._post_attention(h, attended_h, training, plan)
        attended_g *= tf.cast(query_weights, attended_g.dtype)[:, None, :, None]
        g_out = self._post_attention(g, attended_g, training, plan)
        return h_out, g_out


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


# ---------------------------------------------------------------------------- the attention op
def attention(queries: tf.Tensor, keys: tf.Tensor, values: tf.Tensor, bias: tf.Tensor,
              blocked: Optional[tf.Tensor], *, scale: float, dropout, training, plan: StepPlan,
              dropout_rows: Optional[Sequence[int]] = None,
              implementation: Optional[str] = None) -> tf.Tensor:
    """The attention op with the score's bias assembled: [B, N, S, H] in the compute dtype of
    queries [B, N, S, H], keys, values [B, N, K, H], bias [B, N, S, K] (added to q . k before
    the `scale`), blocked bool [B, S, K] (True: not seen) or None. `dropout`: the
    probabilities' Dropout, with `dropout_rows` its `row_draws` (stacked attentions, each
    with the mask of a call of its own); `implementation`: "reference" or "cudnn" as
    kernels/attention_choice.py chose it, None: chosen here (the Triton and Pallas kernels take
    the score's terms: the caller runs them itself)."""
    if implementation is None:
        implementation = "reference"
        if plan.kernel_attention:
            implementation = attention_choice.chosen_implementation(
                queries, keys, dropout=dropout, training=training, plan=plan,
                reference_attention=reference_attention, dropout_rows=dropout_rows,
                score_terms=("the caller gave the assembled [B, N, S, K] bias, not the "
                             "score's terms"))
    if implementation == "reference":
        return reference_attention(queries, keys, values, bias, blocked, scale=scale,
                                   dropout=dropout, training=training,
                                   dropout_rows=dropout_rows, plan=plan)
    if implementation == "cudnn":
        return cudnn.cudnn_attention(queries, keys, values, bias, blocked, scale=scale)
    raise ValueError(f"attention(): implementation {implementation!r} takes an assembled bias "
                     "only as reference or cudnn")


# Large negative for blocked scores. Scores are masked in float32 (never in float16/bfloat16),
# so the original's 1e30 constant cannot overflow under mixed precision.
BLOCKED_SCORE = -1e30


def reference_attention(queries, keys, values, bias, blocked, *, scale, dropout, training,
                        dropout_rows=None, plan=None):
    """`attention` in TensorFlow ops: in float32 TensorFlow's softmax and gradient (the parity
    tests' numbers), under mixed precision `masked_softmax`."""
    scores = tf.einsum("bnsh,bnkh->bnsk", queries, keys) + bias
    if scores.dtype == tf.float32:
        scores = scores * scale
        if blocked is not None:
            scores = tf.where(blocked[:, None], tf.constant(BLOCKED_SCORE, tf.float32), scores)
        probs = tf.nn.softmax(scores, axis=-1)
    else:
        probs = masked_softmax(scores, blocked, scale)
    probs = dropout(probs, training=training, row_draws=dropout_rows, plan=plan)
    return tf.einsum("bnsk,bnkh->bnsh", probs, values)


def masked_softmax(scores: tf.Tensor, mask, scale: float) -> tf.Tensor:
    """softmax(scores * scale, blocked -1e30) over the last axis of narrow scores [B, N, S, K]
    (float16 / bfloat16; mask bool [B, S, K], True = blocked, or None), in their dtype.

    The softmax runs in float32, but the backward keeps only the narrow result (TensorFlow's
    gradient would keep the float32 probabilities: twice the bytes) and recomputes in float32
    d scores = scale * p * (dp - sum(dp * p)), zero where blocked: it sees the probabilities
    the forward used. The blocked value never exists narrow (float16 tops out at 65504).
    """
    narrow = scores.dtype

    @tf.custom_gradient
    def softmax(x):
        wide = tf.cast(x, tf.float32) * scale
        if mask is not None:
            wide = tf.where(mask[:, None], tf.constant(BLOCKED_SCORE, tf.float32), wide)
        probs = tf.cast(tf.nn.softmax(wide, axis=-1), narrow)

        def grad(d_probs):
            p = tf.cast(probs, tf.float32)
            d = tf.cast(d_probs, tf.float32)
            d_wide = (d - tf.reduce_sum(d * p, axis=-1, keepdims=True)) * p
            if mask is not None:
                d_wide = tf.where(mask[:, None], tf.zeros_like(d_wide), d_wide)
            return tf.cast(d_wide * scale, narrow)

        return probs, grad

    return softmax(scores)


# ---------------------------------------------------------------------------- the position product
@tf.custom_gradient
def grouped_position_product(queries, k_r):
    """einsum("xbnsh,xtnh->xbnst"): queries [X, B/X, N, S, H], k_r [X, T, N, H]. Its gradient
    writes k_r's product as queries^T . d_scores, so both backward products read the
    score-sized gradient in the forward's layout (the other order made a transposed copy)."""
    def grad(d_scores):
        d_queries = tf.einsum("xbnst,xtnh->xbnsh", d_scores, k_r)
        d_k_r = tf.einsum("xbnsh,xbnst->xnht", queries, d_scores)  # [X, N, H, T]
        return d_queries, tf.transpose(d_k_r, [0, 3, 1, 2])

    return tf.einsum("xbnsh,xtnh->xbnst", queries, k_r), grad
