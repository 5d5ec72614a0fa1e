"""Two-stream relative multi-head attention (Transformer-XL scores, XLNet query stream).

Letters (docs/GLOSSARY.md):
  B  batch size                       N  attention heads
  L  query length (current segment)   H  head size
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

The attention op (`attention`, at the end of this module): softmax(scale * (q . k + bias),
blocked entries excluded), dropout on the probabilities, then the weighted sum of values,
where the `bias` is the part of a score that is not a product of a query row and a key row
(the aligned position scores and the segment term). It has two implementations, chosen while
the step is traced:

  "reference"  TensorFlow ops: scores, a float32 softmax, the project's keyed dropout, the
               value product. Runs everywhere; the parity tests' numbers.
  "cudnn"      cuDNN's flash attention (forward and backward) as the XLA custom calls that XLA
               GPU compiles (`__cudnn$fmhaScaleBiasSoftmax[Backward]`, the calls
               `jax.nn.dot_product_attention(implementation="cudnn")` lowers to). The scores
               and probabilities stay in the kernel's registers and shared memory: only the
               bias (written once, read forward and backward) and its gradient are score-sized
               in memory. Only inside an XLA program traced for a GPU, in bfloat16 / float16,
               without attention dropout (`cudnn_unavailable_reason` says why not).

"auto" (the default) takes "cudnn" wherever it can run and "reference" elsewhere;
`implementation(name)` forces either while a step is traced (the trainer's
--attention_implementation).
"""

from __future__ import annotations

import contextlib
import json
from typing import Iterator, Optional, Sequence

import keras
import tensorflow as tf
from tensorflow.compiler.tf2xla.python import xla as tf2xla
from tensorflow.python.framework import ops
from tensorflow.python.ops import control_flow_util

from xlnet_tf2.config import ATTENTION_IMPLEMENTATIONS
from xlnet_tf2.layers import run_time
from xlnet_tf2.layers.dropout import Dropout
from xlnet_tf2.layers.relative_position import (content_shift, gather_relative_scores,
                                                segment_positions)


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

    def _post_attention(self, residual, attended, training):
        """Output projection, dropout, residual and LayerNorm; attended [B, N, S, H] -> [B, S, D]."""
        out = tf.einsum("bnsh,dnh->bsd", attended, tf.cast(self.o, self.compute_dtype))
        out = self.output_dropout(out, training=training)
        return self.layer_norm(residual + out)

    # ------------------------------------------------------------------ call
    def call(self, h, pos_emb, g=None, mems=None, content_mask=None, query_mask=None,
             segment_mismatch=None, query_segment_mismatch=None, query_positions=None,
             query_weights=None, biases=None, training=None):
        """Runs both streams of one layer.

        Args:
          h: content stream [B, L, D].
          pos_emb: relative position embedding [X, T, D] (already dropped out).
          g: query stream [B, P, D] or None.
          mems: memory [B, M, D] or None.
          content_mask, query_mask: bool [B, L, K] and [B, P, K], True = blocked, or None.
          segment_mismatch: bool [B, L, K] (content rows) or None for no segment term.
          query_segment_mismatch: bool [B, P, K] (query rows) or None.
          query_positions: int32 [B, P], the segment position of each query-stream row.
          query_weights: [B, P], 1 for real target rows, 0 for empty ones (their attention
            output is zero, as when the original maps rows through an all-zero target_mapping).
          biases: (r_w, r_r, r_s) shared [N, H] tensors when the layer does not own them.
        Returns:
          (h_out [B, L, D], g_out [B, P, D]) with a query stream; h_out alone without one (a
          Keras call returns tensors only, so the layer works in a functional model).
        """
        if self.own_biases:
            biases = (self.r_w_bias, self.r_r_bias, self.r_s_bias)
        r_w, r_r, r_s = (tf.cast(b, self.compute_dtype)[:, None, :] for b in biases)  # [N, 1, H]

        q_len = h.shape[1]
        keys_in = h if mems is None else tf.concat([tf.cast(mems, h.dtype), h], axis=1)  # [B, K, D]
        k_len = keys_in.shape[1]
        keys = self._project(keys_in, self.k)  # [B, N, K, H]
        values = self._project(keys_in, self.v)  # [B, N, K, H]
        k_r = tf.einsum("xtd,dnh->xtnh", tf.cast(pos_emb, self.compute_dtype),
                        tf.cast(self.r, self.compute_dtype))
        n_groups = pos_emb.shape[0]

        def attend(queries, positions, mismatch, blocked, dropout_rows=None):
            """The attention of query rows [B, N, S, H] at segment positions `positions`
            ([B, S], None for the L content rows in order): the content part (q + r_w) . k by
            the op, the aligned position scores and the segment term as its bias."""
            # (q + r_r) . r for every encoded distance, [B, N, S, T]; with X = 2 the first
            # half of the batch uses group 0 (forward) and the second half group 1 (backward).
            batch, n, rows, head = queries.shape
            batch = tf.shape(queries)[0] if batch is None else batch
            rows = tf.shape(queries)[2] if rows is None else rows
            scores = _grouped_position_product(
                tf.reshape(queries + r_r, [n_groups, batch // n_groups, n, rows, head]), k_r)
            # T stays static even when the batch is not (multi-worker input): later steps
            # slice by it.
            scores = tf.reshape(scores, [batch, n, rows, k_r.shape[1]])
            if positions is None:
                bias = content_shift(scores, k_len)
            else:
                bias = gather_relative_scores(scores, positions, q_len, k_len)
            if mismatch is not None:  # (q + r_s) . seg_embed[s_ij], s_ij: mismatch [B, S, K]
                per_class = tf.einsum("bnsh,cnh->bnsc", queries + r_s,
                                      tf.cast(self.seg_embed, self.compute_dtype))  # [B, N, S, 2]
                bias += tf.where(mismatch[:, None], per_class[..., 1:], per_class[..., :1])
            return attention(queries + r_w, keys, values, bias, blocked, scale=self.scale,
                             dropout=self.attention_dropout, training=training,
                             dropout_rows=dropout_rows)  # [B, N, S, H]

        q_h = self._project(h, self.q)  # [B, N, L, H]
        if g is None:
            attended_h = attend(q_h, None, segment_mismatch, content_mask)
            return self._post_attention(h, attended_h, training)
        if (segment_mismatch is None) != (query_segment_mismatch is None):
            raise ValueError("RelativeAttention takes the segment term for both streams or for "
                             "neither: give segment_mismatch and query_segment_mismatch together.")
        q_g = self._project(g, self.q)  # [B, N, P, H]
        n_query = g.shape[1]
        if one_attention_here():
            # Both streams as one attention of L + P rows, the content rows first: one score
            # product, one softmax, one value product, no concatenation of score-sized tensors.
            # Each stream's probabilities keep the dropout mask of a call of their own.
            positions = tf.concat([segment_positions(query_positions, q_len),
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
        h_out = self._post_attention(h, attended_h, training)
        attended_g *= tf.cast(query_weights, attended_g.dtype)[:, None, :, None]
        g_out = self._post_attention(g, attended_g, training)
        return h_out, g_out


def one_attention_here() -> bool:
    """Whether the two streams run as one attention of L + P query rows: only in a step traced
    for a GPU (layers/run_time.py). There XLA merges the two streams' products anyway and
    then concatenates their probabilities; one attention has one softmax and nothing to
    concatenate. A CPU's step was slower with it (the stacked rows are copies its fused loops
    do not need), and so was a TPU's, which makes every slice of a stacked score-sized tensor
    (backward included) a pass of its own (BENCHMARKS.md)."""
    return run_time.kind() == "gpu"


@tf.custom_gradient
def _grouped_position_product(queries, k_r):
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
# Large negative for blocked scores. Scores are masked in float32 (never in float16/bfloat16),
# so the original's 1e30 constant cannot overflow under mixed precision.
BLOCKED_SCORE = -1e30


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


IMPLEMENTATIONS = ATTENTION_IMPLEMENTATIONS

# Process-wide, like layers/run_time.py: MirroredStrategy traces each replica's step in a
# thread of its own.
_chosen = "auto"


@contextlib.contextmanager
def implementation(name: str) -> Iterator[None]:
    """Traces `attention` inside the block with implementation `name` (one of
    IMPLEMENTATIONS)."""
    global _chosen
    if name not in IMPLEMENTATIONS:
        raise ValueError(f"Unknown attention implementation {name!r}; expected one of "
                         f"{', '.join(IMPLEMENTATIONS)}.")
    previous, _chosen = _chosen, name
    try:
        yield
    finally:
        _chosen = previous


class AttentionImplementationError(ValueError):
    """--attention_implementation=cudnn where cuDNN's attention cannot run."""


def cudnn_unavailable_reason(queries: tf.Tensor, keys: tf.Tensor,
                             dropout_rate: float = 0.0) -> Optional[str]:
    """Why the cuDNN implementation cannot run for these operands in the step being traced,
    or None when it can. `dropout_rate`: the probabilities' dropout in this call (0 when not
    training)."""
    if dropout_rate > 0:
        # XLA's cuDNN attention with dropout stopped the process on an H200 (jaxlib 0.11.2:
        # "Check failed: local_device_ordinal.has_value()" in cuda_dnn.cc), and its masks
        # would come from cuDNN's generator, not from the keys that make a run's masks a pure
        # function of (seed, step, example) (layers/dropout.py).
        return f"attention dropout is on (rate {dropout_rate:g}; --dropatt)"
    if run_time.kind() != "gpu":
        return f"the step is traced for a {run_time.kind().upper()}, not a GPU"
    # The custom calls have no TensorFlow kernel: only an XLA program can hold them. A private
    # API (tensorflow.python): TensorFlow has no public way to ask whether the function being
    # traced is compiled with jit_compile=True.
    if not control_flow_util.GraphOrParentsInXlaContext(ops.get_default_graph()):
        return "the step is not compiled by XLA (--jit_compile)"
    if queries.dtype not in (tf.bfloat16, tf.float16):
        return f"it needs bfloat16 or float16 operands, not {queries.dtype.name} (--precision)"
    head = queries.shape[-1]
    if head is None or head % 8 or head > 256:
        return f"the head size must be a multiple of 8 up to 256, not {head}"
    if None in queries.shape or None in keys.shape:
        return "it needs static shapes"
    if keys.shape[2] % 2:
        return f"the number of keys must be even, not {keys.shape[2]}"
    return None


def attention(queries: tf.Tensor, keys: tf.Tensor, values: tf.Tensor, bias: tf.Tensor,
              blocked: Optional[tf.Tensor], *, scale: float, dropout, training,
              dropout_rows: Optional[Sequence[int]] = None) -> tf.Tensor:
    """The attention op.

    Args:
      queries: [B, N, S, H]; keys, values: [B, N, K, H]; bias: [B, N, S, K] (added to q . k
        before scaling), all in the compute dtype.
      blocked: bool [B, S, K], True where a query row must not see a key, or None.
      scale: the scores' factor (1 / sqrt(H)).
      dropout: the probabilities' dropout (a layers/dropout.py Dropout, called with
        `training`).
      dropout_rows: the Dropout's `row_draws` (query rows that stack several attentions, each
        to get the mask of a call of its own), or None.
    Returns:
      [B, N, S, H] in the compute dtype.

    The implementation is chosen while tracing (module docstring): the forced one, or under
    "auto" "cudnn" wherever it can run.
    """
    reason = cudnn_unavailable_reason(queries, keys, dropout.rate if training else 0.0)
    if _chosen == "cudnn" and reason is not None:
        raise AttentionImplementationError(
            f"--attention_implementation=cudnn cannot run here: {reason}; use "
            "--attention_implementation=auto (or reference).")
    if _chosen == "reference" or reason is not None:
        return reference_attention(queries, keys, values, bias, blocked, scale=scale,
                                   dropout=dropout, training=training,
                                   dropout_rows=dropout_rows)
    return cudnn_attention(queries, keys, values, bias, blocked, scale=scale)


def reference_attention(queries, keys, values, bias, blocked, *, scale, dropout, training,
                        dropout_rows=None):
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
    probs = dropout(probs, training=training, row_draws=dropout_rows)
    return tf.einsum("bnsk,bnkh->bnsh", probs, values)


# ---------------------------------------------------------------------------- cuDNN
# cuDNN computes softmax(fmha_scale * q.k + bias): the bias is added after the scale. Blocked
# entries get a large negative bias in the narrow dtype; not the dtype's minimum, since cuDNN
# subtracts two such values in its online softmax (jax's cuDNN wrapper uses the same values).
_CUDNN_BLOCKED = {tf.bfloat16: -2.0 ** 41, tf.float16: -2.0 ** 15}


def _dimension_numbers(lhs_contracting: int, rhs_contracting: int) -> dict:
    return {"lhs_contracting_dimensions": [str(lhs_contracting)],
            "rhs_contracting_dimensions": [str(rhs_contracting)],
            "lhs_batch_dimensions": ["0", "1"], "rhs_batch_dimensions": ["0", "1"]}


def cudnn_backend_config(b: int, n: int, s: int, k: int, dtype: tf.DType, scale: float,
                         backward: bool) -> str:
    """XLA GPU's backend config (a CudnnfMHABackendConfig, as JSON) of the forward or backward
    flash-attention call on [B, N, S, H] queries and [B, N, K, H] keys and values, in XLA's
    default layouts (row-major B, N, S, H). The dot dimension numbers name the products:
    forward q.k^T (S x K) and p.v; backward dp = do.v^T, dq = ds.k, dk = ds^T.q, dv = p^T.do."""
    if backward:
        dots = {"bmm1_grad_gemm1_dot_dimension_numbers": _dimension_numbers(2, 2),
                "bmm1_grad_gemm2_dot_dimension_numbers": _dimension_numbers(3, 2),
                "bmm2_grad_gemm1_dot_dimension_numbers": _dimension_numbers(2, 2),
                "bmm2_grad_gemm2_dot_dimension_numbers": _dimension_numbers(3, 3)}
    else:
        dots = {"bmm1_dot_dimension_numbers": _dimension_numbers(3, 3),
                "bmm2_dot_dimension_numbers": _dimension_numbers(3, 2)}
    config = {
        "algorithm": {"algo_id": "0", "math_type": "TENSOR_OP_MATH",
                      "tuning_knobs": {"17": "1", "24": "0"}, "is_cudnn_frontend": True,
                      "workspace_size": "0"},
        "fmha_scale": float(scale),
        "intermediate_tensor_shape": {
            "element_type": "BF16" if dtype == tf.bfloat16 else "F16",
            "dimensions": [str(d) for d in (b, n, s, k)],
            "layout": {"minor_to_major": ["3", "2", "1", "0"]},
            "is_dynamic_dimension": [False] * 4},
        "is_flash_attention": True,
        "mask_type": "NO_MASK",
        **dots,
        "dropout_rate": 0.0,
        "seed": 0,
        "sliding_window_length": 0,
        "max_seg_per_batch": 1,
        "is_paged_attention": False,
    }
    return json.dumps({"operation_queue_id": "0", "cudnn_fmha_backend_config": config})


CUDNN_FORWARD = "__cudnn$fmhaScaleBiasSoftmax"
CUDNN_BACKWARD = "__cudnn$fmhaScaleBiasSoftmaxBackward"


def cudnn_attention(queries, keys, values, bias, blocked, *, scale: float) -> tf.Tensor:
    """`attention` as cuDNN's flash attention (module docstring), without dropout; same
    arguments otherwise. Only inside an XLA program for a GPU.

    cuDNN's bias-gradient kernel needs an even number of query rows: an odd S is padded by
    one row (zero query, zero bias) whose output is dropped.
    """
    b, n, s, h = queries.shape.as_list()
    k = keys.shape[2]
    dtype = queries.dtype
    biased = tf.cast(bias, tf.float32) * scale
    if blocked is not None:
        biased = tf.where(blocked[:, None], tf.constant(_CUDNN_BLOCKED[dtype], tf.float32),
                          biased)
    biased = tf.cast(biased, dtype)
    rows = s + s % 2
    if rows != s:
        queries = tf.pad(queries, [[0, 0], [0, 0], [0, 1], [0, 0]])
        biased = tf.pad(biased, [[0, 0], [0, 0], [0, 1], [0, 0]])
    forward_config = cudnn_backend_config(b, n, rows, k, dtype, scale, backward=False)
    backward_config = cudnn_backend_config(b, n, rows, k, dtype, scale, backward=True)

    @tf.custom_gradient
    def fused(q, k_in, v, bias_in):
        out, stats, _ = tf2xla.custom_call_v2(
            CUDNN_FORWARD, [q, k_in, v, bias_in],
            [tf.TensorSpec(q.shape, dtype), tf.TensorSpec([b, n, rows], tf.float32),
             tf.TensorSpec([0], tf.uint8)],
            backend_config=forward_config)

        def grad(d_out):
            dq, dk, dv, d_bias, _ = tf2xla.custom_call_v2(
                CUDNN_BACKWARD, [q, k_in, v, stats, tf.cast(d_out, dtype), bias_in, out],
                [tf.TensorSpec(q.shape, dtype), tf.TensorSpec(k_in.shape, dtype),
                 tf.TensorSpec(v.shape, dtype), tf.TensorSpec(bias_in.shape, dtype),
                 tf.TensorSpec([0], tf.uint8)],
                backend_config=backward_config)
            return dq, dk, dv, d_bias

        return out, grad

    out = fused(queries, keys, values, biased)
    return out[:, :, :s] if rows != s else out
