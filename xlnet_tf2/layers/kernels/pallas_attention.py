"""XLNet's relative attention as the Pallas TPU kernels (kernels/pallas_relative_attention.py)
inside the step's XLA program: two `tpu_custom_call`s (kernels/pallas_call.py), the forward
under a `tf.custom_gradient` whose gradient is the backward call.

Like the Triton implementation, the kernels take the score's terms before they are assembled
into a [B, N, S, K] bias (layers/xlnet_block.py's `attend` asks attention_choice.py's
`chosen_implementation` first):

  queries [B, N, S, H],         the S = L + P rows (the L content rows in order, then the
  r_w, r_r [N, H]               P query-stream rows) and the two biases: the kernels read
                                q + r_w and q + r_r, made here after the rows are padded.
  position_projection k_r       the (dropped-out) position embedding's projection
    [X, T, N, H]                [X, T, D] x r [D, N, H]; row t scores distance K - t (group 1,
                                bi_data's backward half: -(K - t)). The kernels read, for each
                                query tile, the band of it its rows need (no [B, N, S, T]
                                product anywhere).
  query_positions [B, P] int32  each query-stream row's position in the example.
  segment_scores [B, N, S, 2]   (q + r_s) . seg_embed[c], c = same, different; with
  row_segments [B, S],          the rows' and keys' segment ids (memory keys are segment 0):
  key_segments [B, K] int32     the kernels compare the ids.
  blocked [B, S, K]             bit-packed along rows (`row_packed_blocked`).
  dropout                       the Dropout layer's own keys for the content rows' and the
                                query rows' draws (kernels/triton_attention.py's `dropout_keys`:
                                one `_keys` call per row part, as the reference's draw makes
                                them), turned into the hash's key term and mix per example: the
                                kernels hash exactly the reference's bits.

This module lays the operands out as the kernels read them (row parts padded to whole tiles,
keys to whole key tiles, k_r's distances shifted and padded so that every band lies inside it),
runs the calls and takes the padding off: TensorFlow differentiates the layout ops, the custom
gradient covers the kernels. JAX (the optional `tpu` extra) is imported only when this
implementation is traced (kernels/pallas_call.py).
"""

from __future__ import annotations

import importlib.util
from typing import List, Optional, Sequence

import tensorflow as tf
from tensorflow.python.framework import ops
from tensorflow.python.ops import control_flow_util

from xlnet_tf2.layers.kernels import pallas_call
from xlnet_tf2.layers.dropout import KEY_MULTIPLIER, fmix32
from xlnet_tf2.layers.kernels.triton_attention import dropout_keys, score_terms_reason
from xlnet_tf2.layers.step_plan import StepPlan

_DTYPE_NAMES = {tf.bfloat16: "bfloat16", tf.float32: "float32"}
# The kernels' tiles on a TPU: a vreg is 8 sublanes x 128 lanes, the MXU 128 x 128.
BLOCKS = (128, 128)


def pallas_unavailable_reason(queries: tf.Tensor, keys: tf.Tensor, *, dropout_rate: float,
                              dropout_rows: Optional[Sequence[int]], plan: StepPlan,
                              score_terms: Optional[str] = None) -> Optional[str]:
    """Why the Pallas implementation cannot run for these operands in the step being traced,
    or None when it can. Arguments as triton_attention.triton_unavailable_reason's."""
    if plan.device != "tpu":
        return f"the step is traced for a {plan.device.upper()}, not a TPU"
    if not control_flow_util.GraphOrParentsInXlaContext(ops.get_default_graph()):
        return "the step is not compiled by XLA (--jit_compile)"
    if importlib.util.find_spec("jax") is None or importlib.util.find_spec("jaxlib") is None:
        return "JAX is not installed (pip install 'xlnet-tf2[tpu]')"
    if queries.dtype not in _DTYPE_NAMES:
        return f"it needs bfloat16 or float32 operands, not {queries.dtype.name}"
    return score_terms_reason(queries, keys, dropout_rate=dropout_rate,
                              dropout_rows=dropout_rows, plan=plan, score_terms=score_terms)


def row_packed_blocked(blocked: tf.Tensor, block_q: int) -> tf.Tensor:
    """bool [B, S, K] (True = blocked, S a multiple of block_q) -> int32 [B, 8 S / block_q, K]:
    row 8 k + w of query tile t is bit k of word [8 t + w, key] (the kernels' `bits`)."""
    batch, rows, n_keys = blocked.shape
    per_word = block_q // 8
    tiles = tf.reshape(tf.cast(blocked, tf.uint32), [batch, rows // block_q, per_word, 8, n_keys])
    weights = tf.reshape(tf.constant([1 << k for k in range(per_word)], tf.uint32),
                         [1, 1, per_word, 1, 1])
    # Distinct powers of two: their sum is their bitwise or, with no carry.
    words = tf.reduce_sum(tiles * weights, axis=2)                      # [B, S / BQ, 8, K]
    return tf.bitcast(tf.reshape(words, [batch, 8 * rows // block_q, n_keys]), tf.int32)


def hash_keys(dropout, batch: int, dropout_rows, plan: StepPlan) -> tf.Tensor:
    """int32 [4 B]: for the content rows' draw, then the query rows', each example's key term
    k0 * KEY_MULTIPLIER + k1 and key mix fmix32(k1 ^ fmix32(k0)) (layers/kernels/
    dropout.py's hash of element n is fmix32(fmix32(n * GOLDEN + term) ^ mix))."""
    k0s, k1 = dropout_keys(dropout, batch, dropout_rows, plan)
    k0s, k1 = tf.bitcast(k0s, tf.uint32), tf.bitcast(k1, tf.uint32)
    parts = []
    for part in range(2):
        parts.append(k0s[part] * tf.constant(KEY_MULTIPLIER, tf.uint32) + k1)
        parts.append(fmix32(tf.bitwise.bitwise_xor(k1, fmix32(k0s[part]))))
    return tf.bitcast(tf.concat(parts, axis=0), tf.int32)


def _run(geometry, backward: bool, keys: tf.Tensor, operands: List[tf.Tensor]):
    """One kernel call on the operands (`keys` first): the lowered kernel as a
    tpu_custom_call. Returns the results in the kernel's order."""
    kernels = pallas_call.jax_module()
    call = kernels.backward_call(geometry) if backward else kernels.forward_call(geometry)
    arrays = [keys] + list(operands)
    config, results = pallas_call.lowered(call, [(a.shape, a.dtype.name) for a in arrays])
    specs = [tf.TensorSpec(shape, tf.as_dtype(dtype)) for shape, dtype in results]
    return pallas_call.tpu_custom_call(arrays, specs, config)


def pallas_attention(queries, r_w, r_r, keys, values, position_projection, query_positions,
                     blocked, *,
                     seq_len: int, scale: float, dropout, training, plan: StepPlan,
                     segment_scores=None, row_segments=None, key_segments=None,
                     dropout_rows: Optional[Sequence[int]] = None,
                     blocks: Optional[Sequence[int]] = None) -> tf.Tensor:
    """The attention of the L = `seq_len` content rows and the P query-stream rows of
    queries [B, N, L + P, H] (with r_w, r_r [N, H]) over keys, values [B, N, K, H] with the
    score's terms unassembled
    (module docstring): position_projection [X, T, N, H], query_positions int [B, P] (None
    when P = 0), segment_scores [B, N, S, 2] with row_segments [B, S] and key_segments [B, K]
    (or all None: no segment term), blocked bool [B, S, K] or None -> [B, N, L + P', H]:
    the L content rows, the P query-stream rows, then P' - P padding rows where there is a
    query stream and L is a whole number of row tiles (P' = P otherwise): the caller takes
    the streams by slices. `blocks`: (BQ, BK), the kernels' tiles (default BLOCKS). The
    caller has checked `pallas_unavailable_reason`."""
    kernels = pallas_call.jax_module()
    blocks = blocks or BLOCKS
    batch, heads, rows, head_size = queries.shape
    n_keys = keys.shape[2]
    groups, distances = position_projection.shape[:2]
    dtype = queries.dtype
    rate = float(dropout.rate) if training else 0.0
    has_segment = segment_scores is not None
    g = kernels.Geometry(
        batch=batch, heads=heads, head_size=head_size, seq_len=seq_len,
        query_rows=rows - seq_len, keys=n_keys, distances=distances, groups=groups,
        scale=float(scale), dropout_rate=rate, has_segment=has_segment,
        has_mask=blocked is not None, dtype=_DTYPE_NAMES[dtype],
        generation=plan.tpu_generation, block_q=blocks[0], block_k=blocks[1])
    n_query, lp, kp = g.query_rows, g.content_rows, g.padded_keys

    def padded_rows(x, axis: int):
        """[..., L + P, ...] -> [..., Lp + Pp, ...]: each part padded to whole tiles (where L
        is a whole number of tiles, as at XLNet's lengths, one pad at the end: a copy of x
        split and joined again would be a pass of its own over it on a TPU)."""
        pad = [[0, 0]] * len(x.shape)
        if lp == seq_len:
            return tf.pad(x, pad[:axis] + [[0, g.rows - seq_len - n_query]] + pad[axis + 1:])
        content, query = tf.split(x, [seq_len, n_query], axis=axis)
        parts = [tf.pad(content, pad[:axis] + [[0, lp - seq_len]] + pad[axis + 1:])]
        if n_query:
            parts.append(tf.pad(query, pad[:axis] + [[0, g.query_stream_rows - n_query]]
                                + pad[axis + 1:]))
        return tf.concat(parts, axis=axis)

    def padded_keys(x, axis: int):
        pad = [[0, 0]] * len(x.shape)
        return tf.pad(x, pad[:axis] + [[0, kp - n_keys]] + pad[axis + 1:])

    # k_r row u = t + Lp - L: content row r of the tile at `start` reads u = Lp - start - r + j.
    front = lp - seq_len
    k_r = tf.pad(tf.transpose(tf.cast(position_projection, dtype), [0, 2, 1, 3]),
                 [[0, 0], [0, 0], [front, g.padded_distances - front - distances], [0, 0]])
    positions = tf.range(lp, dtype=tf.int32)[None] + tf.zeros([batch, 1], tf.int32)
    if n_query:
        positions = tf.concat([positions, tf.pad(tf.cast(query_positions, tf.int32),
                                                 [[0, 0], [0, g.query_stream_rows - n_query]])],
                              axis=1)
    row_ids = (padded_rows(tf.cast(row_segments, tf.int32), 1) if has_segment
               else tf.zeros_like(positions))
    fixed = {"rows": tf.stack([positions, row_ids], axis=1)}
    if has_segment:
        fixed["key_seg"] = padded_keys(tf.cast(key_segments, tf.int32), 1)[:, None]
    if blocked is not None:
        fixed["bits"] = row_packed_blocked(padded_keys(padded_rows(blocked, 1), 2), g.block_q)
    hashed = (hash_keys(dropout, batch, dropout_rows, plan) if g.has_dropout
              else tf.zeros([4 * batch], tf.int32))
    def unpadded_rows(x):
        """padded_rows(x, 2)'s inverse: [B, N, Lp + Pp, H] -> [B, N, L + P, H]."""
        if lp == seq_len or not n_query:
            return x[:, :, :seq_len + n_query]
        return tf.concat([x[:, :, :seq_len], x[:, :, lp:lp + n_query]], axis=2)

    differentiable = {"queries": queries, "r_w": tf.cast(r_w, dtype),
                      "r_r": tf.cast(r_r, dtype), "k": padded_keys(keys, 2),
                      "v": padded_keys(values, 2), "k_r": k_r}
    if has_segment:
        differentiable["seg"] = padded_rows(
            tf.transpose(tf.cast(segment_scores, tf.float32), [0, 1, 3, 2]), 3)
    names = list(differentiable)

    def run(*inputs):
        operands = dict(fixed, **dict(zip(names, inputs)))
        # The rows padded once, then both biases added (one fused pass on a TPU; padding
        # q + r_w and q + r_r each is a pad of its own, about four times its cycles), and
        # the biases' gradients summed over the real rows only, which XLA joins with the
        # queries' gradient (BENCHMARKS.md, "The TPU step with the Pallas kernels (issue 46)").
        rows_in = padded_rows(operands.pop("queries"), 2)
        operands["q_w"] = rows_in + operands.pop("r_w")[:, None]
        operands["q_r"] = rows_in + operands.pop("r_r")[:, None]
        out, lse = _run(g, False, hashed, [operands[n] for n in kernels.operand_names(g)])

        def grad(d_out):
            saved = dict(operands, out=out, lse=lse, d_out=tf.cast(d_out, dtype))
            results = dict(zip(kernels.result_names(g, backward=True), _run(
                g, True, hashed, [saved[n] for n in kernels.operand_names(g, backward=True)])))
            results["dk_r"] = tf.cast(results["dk_r"], dtype)
            dq_w, dq_r = unpadded_rows(results["dq_w"]), unpadded_rows(results["dq_r"])
            results.update(queries=dq_w + dq_r, r_w=tf.reduce_sum(dq_w, [0, 2]),
                           r_r=tf.reduce_sum(dq_r, [0, 2]))
            return [results[_GRADIENT_OF.get(n, n)] for n in names]

        return out, grad

    out = tf.custom_gradient(run)(*differentiable.values())
    if not n_query:
        return out[:, :, :seq_len]
    if lp == seq_len:
        # The padding rows stay: the gradients of the caller's two slices then fill the padded
        # d_out in one pass, where a slice to L + P here would add a pad of its own to the
        # backward (libtpu, v5e: 3.8 ms of the Base step).
        return out
    return tf.concat([out[:, :, :seq_len], out[:, :, lp:lp + n_query]], axis=2)


# The backward call's result for each differentiable operand.
_GRADIENT_OF = {"k": "dk", "v": "dv", "k_r": "dk_r", "seg": "d_seg"}
