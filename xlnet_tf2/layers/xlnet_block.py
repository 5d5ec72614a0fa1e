"""One XLNet layer: the two-stream relative attention, then the position-wise feed-forward
(D -> d_inner -> D, dropout, residual, LayerNorm) shared by both streams; and the attention op
with its reference implementation in TensorFlow ops.

Letters (docs/GLOSSARY.md):
  B  batch size                       N  attention heads
  L  query length (one example)       H  head size
  M  memory length                    D  model width
  K  key length, K = M + L            P  query-stream rows (predicted positions)
  T  encoded relative positions (see relative_position.py)
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
probabilities, then the weighted sum of values, where the `bias` is the part of a score that is
not a product of a query row and a key row (the aligned position scores and the segment term).
Its implementations, chosen by the step's plan (layers/step_plan.py), passed down from where
the step is traced:

  "reference"  TensorFlow ops (`reference_attention`, here). Runs everywhere; the parity tests'
               numbers.
  "cudnn"      cuDNN's flash attention as XLA custom calls (kernels/cudnn.py): only inside an
               XLA program traced for a GPU, in bfloat16 / float16, without attention dropout.
  "triton"     the project's flash Triton kernels as XLA custom calls (kernels/triton_attention.py):
               only inside an XLA program traced for a GPU, with the `triton` package (the gpu
               extra); with attention dropout (the reference's bits).
  "pallas"     the project's flash Pallas kernels as XLA tpu_custom_calls
               (kernels/pallas_attention.py): only inside an XLA program traced for a TPU, with
               JAX (the tpu extra); both streams in one call, with attention dropout (the
               reference's bits).

"auto" (the default) takes "triton" (GPU) wherever it can run and the kernels pass their check
on the device (kernels/triton_attention.py `device_check`: once, against `reference_attention`;
the reference after one warning line where they fail it), "pallas" (TPU) wherever it can run,
else "cudnn", and "reference" elsewhere (`chosen_implementation`); the trainer's
--attention_implementation forces one (a forced one that cannot run is one clear error,
`AttentionImplementationError`; what is known before the step is traced refuses it then,
`refusal_before_tracing`). The Triton and Pallas kernels read the score's terms before they are
assembled into a bias (the queries and the position embedding's projection k_r, from which
they make the position scores tile by tile, and the segment ids): `RelativeAttention`'s
`attend` asks `chosen_implementation` first and calls kernels/triton_attention.py or
kernels/pallas_attention.py with the terms, or `attention` with the bias.
"""

from __future__ import annotations

from typing import Optional, Sequence

import keras
import tensorflow as tf
from absl import logging

from xlnet_tf2.layers.dropout import Dropout
from xlnet_tf2.layers.kernels import cudnn, pallas_attention, triton_attention
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
        self.d_model = d_model
        self.d_inner = d_inner
        self.activation_name = activation
        self.dropout_rate = dropout
        self.initializer_range = initializer_range
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
    """Post-LayerNorm Transformer-XL layer applied to the content stream h [B, L, D] and,
    in pretraining, the query stream g [B, P, D]. Both streams share every weight.

    The layer index (`layer_index`) is stored so that layer-wise learning-rate decay can find
    a layer's depth structurally rather than by matching variable names.
    """

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
        """Returns (h_out [B, L, D], g_out [B, P, D]) with a query stream g, h_out alone
        without one (as RelativeAttention.call, which takes the other arguments). `plan`: the
        step's (layers/step_plan.py)."""
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
            mismatches were made, or None: the Triton and Pallas kernels compare ids instead of reading a
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
            if implementation in ("triton", "pallas"):
                if positions is None:
                    positions = content_positions(queries, q_len)
                segments = {}
                if mismatch is not None:
                    segments = dict(
                        segment_scores=segment_scores(queries), key_segments=segment_ids,
                        row_segments=tf.gather(segment_ids, positions + (k_len - q_len),
                                               batch_dims=1))
                common = dict(seq_len=q_len, scale=self.scale, dropout=self.attention_dropout,
                              training=training, plan=plan, dropout_rows=dropout_rows,
                              **segments)
                if implementation == "pallas":
                    # The content rows first (both streams stacked, or the content stream
                    # alone); the kernels read the projection k_r itself, band by band.
                    query_positions = positions[:, q_len:] if queries.shape[2] > q_len else None
                    return pallas_attention.pallas_attention(
                        queries, r_w[:, 0], r_r[:, 0], keys, values, k_r, query_positions,
                        blocked, **common)
                return triton_attention.triton_attention(
                    queries, r_w[:, 0], r_r[:, 0], keys, values, k_r, positions, blocked,
                    **common)
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


# ---------------------------------------------------------------------------- the attention op
# The implementations that run only inside an XLA program traced for one kind of device.
IMPLEMENTATION_DEVICE = {"cudnn": "gpu", "triton": "gpu", "pallas": "tpu"}


class AttentionImplementationError(ValueError):
    """--attention_implementation=cudnn, triton or pallas where that implementation cannot
    run; its message is one line naming the flag."""


def refusal(implementation: str, reason: str) -> str:
    """The one line refusing a forced `implementation` for `reason`."""
    return (f"--attention_implementation={implementation} cannot run here: {reason}; use "
            "--attention_implementation=auto (or reference).")


def refusal_before_tracing(plan: StepPlan, *, jit_compile: bool,
                           dtype: tf.DType) -> Optional[str]:
    """The line refusing the plan's forced GPU-only implementation from what is known before
    the step is traced (the device, XLA, the installed packages, the compute dtype), or None
    (the trace checks the rest: shapes, the score's form, the dropout's keys)."""
    if plan.attention == "triton":
        reason = triton_attention.triton_refusal_before_tracing(plan.device, jit_compile,
                                                                dtype)
    elif plan.attention == "cudnn":
        reason = cudnn.cudnn_refusal_before_tracing(plan.device, jit_compile, dtype)
    else:
        return None
    return None if reason is None else refusal(plan.attention, reason)


def raised_while_tracing(error: BaseException) -> Optional[AttentionImplementationError]:
    """The AttentionImplementationError that `error` is or was raised from, or None. Raised
    while a step is traced, it comes back wrapped: Keras raises a copy of its type whose
    message adds the layer's arguments, AutoGraph its own StagingError, each with the error
    before it as its context; the first one raised, the deepest, has the one line."""
    found, seen = None, 0
    while error is not None and seen < 8:
        if isinstance(error, AttentionImplementationError):
            found = error
        error, seen = error.__cause__ or error.__context__, seen + 1
    return found


def chosen_implementation(queries: tf.Tensor, keys: tf.Tensor, *, dropout, training,
                          plan: StepPlan, dropout_rows: Optional[Sequence[int]] = None,
                          score_terms: Optional[str] = None) -> str:
    """The implementation ("triton", "pallas", "cudnn" or "reference") that computes this
    attention in the step being traced: the plan's `attention`, or under "auto" the first of
    triton, pallas, cudnn that can run, the Triton kernels once they pass their check on the
    device (the reference after one warning line where they fail it). A forced one that cannot
    run raises AttentionImplementationError (one line naming the flag). `score_terms`: why the
    caller cannot give the score's terms unassembled (triton and pallas need them), or None.
    Arguments as `attention`'s."""
    if plan.attention == "reference" or (
            plan.attention == "auto" and plan.device not in IMPLEMENTATION_DEVICE.values()):
        return "reference"  # the others run only in a step traced for a GPU or a TPU
    rate = dropout.rate if training else 0.0
    for name, unavailable in (("triton", triton_attention.triton_unavailable_reason),
                              ("pallas", pallas_attention.pallas_unavailable_reason)):
        if plan.attention not in ("auto", name):
            continue
        why_not = unavailable(queries, keys, dropout_rate=rate, dropout_rows=dropout_rows,
                              plan=plan, score_terms=score_terms)
        if why_not is None:
            if name == "pallas":
                return name
            # Forced, the Triton kernels only have to compile and run; "auto" also compares
            # them with the reference op.
            try:
                triton_attention.device_check(queries.dtype, queries.shape[-1],
                                              plan.gpu_generation,
                                              compare=plan.attention == "auto",
                                              reference_attention=reference_attention)
                return "triton"
            except triton_attention.TritonKernelsFailed as failed:
                why_not = f"the Triton attention kernels failed their check: {failed}"
                if plan.attention == "auto":  # kernels that fail here: the safe path
                    _say_once(f"--attention_implementation=auto: {why_not}; the step uses the "
                              "reference attention.")
                    return "reference"
        if plan.attention == name:
            raise AttentionImplementationError(refusal(name, why_not))
    reason = cudnn.cudnn_unavailable_reason(queries, keys, rate, plan.device)
    if reason is None:
        return "cudnn"
    if plan.attention == "cudnn":
        raise AttentionImplementationError(refusal("cudnn", reason))
    return "reference"


_SAID: set = set()


def _say_once(line: str) -> None:
    """`line` as a warning, once per process (every layer of every trace asks)."""
    if line not in _SAID:
        _SAID.add(line)
        logging.warning(line)


def attention(queries: tf.Tensor, keys: tf.Tensor, values: tf.Tensor, bias: tf.Tensor,
              blocked: Optional[tf.Tensor], *, scale: float, dropout, training, plan: StepPlan,
              dropout_rows: Optional[Sequence[int]] = None,
              implementation: Optional[str] = None) -> tf.Tensor:
    """The attention op with the score's bias assembled.

    Args:
      queries: [B, N, S, H]; keys, values: [B, N, K, H]; bias: [B, N, S, K] (added to q . k
        before scaling), all in the compute dtype.
      blocked: bool [B, S, K], True where a query row must not see a key, or None.
      scale: the scores' factor (1 / sqrt(H)).
      dropout: the probabilities' dropout (a layers/dropout.py Dropout, called with
        `training`).
      plan: the step's plan (layers/step_plan.py): its device and `attention`, the
        implementation asked for.
      dropout_rows: the Dropout's `row_draws` (query rows that stack several attentions, each
        to get the mask of a call of its own), or None.
      implementation: "reference" or "cudnn", as `chosen_implementation` returned it; None:
        chosen here. (The Triton and Pallas kernels take the score's terms unassembled: the
        caller runs kernels/triton_attention.py or kernels/pallas_attention.py itself when
        `chosen_implementation` says "triton" or "pallas".)
    Returns:
      [B, N, S, H] in the compute dtype.
    """
    if implementation is None:
        implementation = chosen_implementation(
            queries, keys, dropout=dropout, training=training, plan=plan,
            dropout_rows=dropout_rows,
            score_terms="the caller gave the assembled [B, N, S, K] bias, not the score's terms")
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
    """`attention` in TensorFlow ops. Under float32 TensorFlow's own softmax and gradient (the
    float32 numbers are the parity tests' and must not move); under mixed precision
    `masked_softmax`, which keeps only narrow probabilities for the backward pass."""
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
    """softmax(scores * scale, blocked entries -1e30) over the last axis, for narrow scores.

    scores: [B, N, S, K] in float16 / bfloat16; mask: bool [B, S, K] (True = blocked) or None.
    Returns the probabilities in the scores' dtype.

    The softmax runs in float32 (a fusion's registers on a GPU), but the only score-sized
    tensor kept for the backward pass is the narrow result: TensorFlow's own gradient would
    keep the float32 probabilities (twice the bytes, written once and read once per layer and
    stream). The backward pass recomputes in float32 from the narrow probabilities,
    d scores = scale * p * (dp - sum(dp * p)), zero where blocked: the probabilities the
    backward pass sees are the ones the forward pass used (the value product reads them
    narrow too). The blocked value never exists in the narrow dtype (float16 tops out at
    65504).
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
    """einsum("xbnsh,xtnh->xbnst"): queries [X, B/X, N, S, H], k_r [X, T, N, H].

    The gradient is TensorFlow's, but with k_r's product written as queries^T . d_scores: so
    both backward products read the score-sized gradient in the layout the forward product
    wrote, and a compiler materializes it once (the other order asked for a second, transposed
    copy of it for k_r's product)."""
    def grad(d_scores):
        d_queries = tf.einsum("xbnst,xtnh->xbnsh", d_scores, k_r)
        d_k_r = tf.einsum("xbnsh,xbnst->xnht", queries, d_scores)  # [X, N, H, T]
        return d_queries, tf.transpose(d_k_r, [0, 3, 1, 2])

    return tf.einsum("xbnsh,xtnh->xbnst", queries, k_r), grad
