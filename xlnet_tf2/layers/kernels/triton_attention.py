"""XLNet's relative attention as the flash Triton kernels (kernels/flash_relative_attention.py)
inside the step's XLA program: three `__gpu$xla.gpu.triton` custom calls (kernels/triton_call.py),
the forward under a `tf.custom_gradient` whose gradient is the two backward calls.

Unlike the other implementations of the attention op, the kernels take the score's terms before
they are assembled into a [B, N, S, K] bias (relative_attention.py's `attend` asks
kernels/attention.py `chosen_implementation` first, and builds that bias only for the others):

  queries_r [B, N, S, H],       q + r_r and the projected position embedding of each direction
  k_r [X, T, N, H]              group: the kernels make each tile's position scores
                                (q + r_r) . k_r[L - row_positions[s] + j] themselves, from the
                                band of k_r rows the tile needs, and return the gradients of
                                both (no [B, N, S, T] tensor is made, forward or backward).
  row_positions [B, S] int32    each row's position i in the example; the kernels take the rows
                                in position order (`row_order`, a stable argsort).
  segment_scores [B, N, S, 2]   (q + r_s) . seg_embed[c] for c = same, different; with
  row_segments [B, S],          the rows' and keys' segment ids (memory keys are segment 0):
  key_segments [B, K] int32     the kernel compares the ids, no [B, S, K] matrix is read.
  blocked [B, S, K]             bit-packed: blocked_bits [B, S, W] int32, W = ceil(K / 32),
                                bit j % 32 of word j // 32 set where blocked.
  dropout                       the Dropout layer's own keys (`Dropout._keys`, one call per row
                                part of `dropout_rows`, as the reference's draw calls it, so the
                                layer's counter advances identically): k0s [2] (the parts' k0)
                                and k1 [B] (each example's key), bit-cast to int32. The kernels
                                hash exactly the reference's bits
                                (layers/kernels/dropout_masks.py `hashed_bits`).

`triton` (the optional `gpu` extra) is imported only when this implementation is traced.
"""

from __future__ import annotations

import importlib.util
from typing import Optional, Sequence

import tensorflow as tf
from tensorflow.python.framework import ops
from tensorflow.python.ops import control_flow_util

from xlnet_tf2.layers.kernels import flash_relative_attention as flash
from xlnet_tf2.layers.kernels import triton_call
from xlnet_tf2.layers.step_plan import StepPlan

_DTYPE_NAMES = {tf.bfloat16: "bfloat16", tf.float16: "float16", tf.float32: "float32"}
# The kernels' pointers whose element type is not the operands' float dtype.
_FIXED_POINTER_TYPES = {"row_pos": "*i32", "row_order": "*i32", "row_seg": "*i32",
                        "key_seg": "*i32", "blocked_bits": "*i32", "k0s": "*i32", "k1": "*i32",
                        "lse": "*fp32", "dk_r": "*fp32"}


def triton_unavailable_reason(queries: tf.Tensor, keys: tf.Tensor, *, dropout_rate: float,
                              dropout_rows: Optional[Sequence[int]], plan: StepPlan,
                              score_terms: Optional[str] = None) -> Optional[str]:
    """Why the Triton implementation cannot run for these operands in the step being traced,
    or None when it can. `dropout_rate`: the probabilities' dropout in this call (0 when not
    training); `score_terms`: why the caller cannot give the score's terms unassembled (the
    angle form's scores, a segment term without segment ids), or None."""
    if plan.device != "gpu":
        return f"the step is traced for a {plan.device.upper()}, not a GPU"
    # A private API, as for cuDNN (kernels/cudnn.py): the custom calls run only in XLA.
    if not control_flow_util.GraphOrParentsInXlaContext(ops.get_default_graph()):
        return "the step is not compiled by XLA (--jit_compile)"
    if importlib.util.find_spec("triton") is None:
        return "the triton package is not installed (pip install 'xlnet-tf2[gpu]')"
    if queries.dtype not in _DTYPE_NAMES:
        return f"it needs bfloat16, float16 or float32 operands, not {queries.dtype.name}"
    head = queries.shape[-1]
    if head is None or head < 16 or head & (head - 1):
        return f"the head size must be a power of two >= 16, not {head}"
    if None in queries.shape or None in keys.shape:
        return "it needs static shapes"
    if score_terms is not None:
        return score_terms
    if dropout_rate > 0:
        if dropout_rows is not None and len(dropout_rows) > 2:
            return f"the dropout draws {len(dropout_rows)} row parts (the kernels take two)"
        scope = plan.dropout_keys
        if scope is None or scope.example_k1 is None or scope.example_k1.shape[0] != \
                queries.shape[0]:
            return ("attention dropout needs one key per example (the training step's "
                    "dropout keys)")
    return None


def bit_packed_blocked(blocked: tf.Tensor) -> tf.Tensor:
    """bool [B, S, K] (True = blocked) -> int32 [B, S, W], W = ceil(K / 32): bit j % 32 of word
    j // 32 set where key j is blocked."""
    batch, rows, n_keys = blocked.shape
    words = -(-n_keys // 32)
    padded = tf.pad(tf.cast(blocked, tf.uint32), [[0, 0], [0, 0], [0, words * 32 - n_keys]])
    bits = tf.reshape(padded, [batch, rows, words, 32]) * tf.reshape(
        tf.constant([1 << i for i in range(32)], tf.uint32), [1, 1, 1, 32])
    # Distinct powers of two: their sum is their bitwise or, with no carry.
    return tf.bitcast(tf.reduce_sum(bits, axis=-1), tf.int32)


def dropout_keys(dropout, batch: int, dropout_rows: Optional[Sequence[int]], plan: StepPlan):
    """(k0s int32 [2], k1 int32 [B]) of the Dropout's draw over these probabilities: one
    `_keys` call per row part, as the reference's call makes them (a single part repeats its
    k0)."""
    parts = len(dropout_rows) if dropout_rows is not None else 1
    drawn = [dropout._keys(False, batch, plan) for _ in range(parts)]
    k0s = tf.stack([drawn[0][0], drawn[-1][0]])
    return tf.bitcast(k0s, tf.int32), tf.bitcast(drawn[0][1], tf.int32)


def _calls(shapes: dict, dtype: tf.DType, generation: str):
    """The three kernels' launches and TTIR for these shapes."""
    out = {}
    for name in flash.KERNEL_NAMES:
        launch = flash.launch(name, dtype=_DTYPE_NAMES[dtype], generation=generation, **shapes)
        pointer = triton_call.POINTER_TYPES[dtype]
        types = {p + "_ptr": _FIXED_POINTER_TYPES.get(p, pointer)
                 for p in launch.operands + launch.results}
        ir = triton_call.ttir(launch.kernel, types, launch.constexprs, generation=generation,
                              num_warps=launch.num_warps, num_stages=launch.num_stages)
        out[name] = (launch, ir)
    return out


def _call(launch, ir, buffers: dict, specs: dict):
    results = triton_call.triton_call(
        [buffers[p] for p in launch.operands], [specs[p] for p in launch.results], ir=ir,
        name=launch.name, grid=launch.grid, num_warps=launch.num_warps,
        num_stages=launch.num_stages)
    return dict(zip(launch.results, results))


def triton_attention(queries_w, queries_r, keys, values, k_r, row_positions, blocked, *,
                     seq_len: int, scale: float, dropout, training, plan: StepPlan,
                     segment_scores=None, row_segments=None, key_segments=None,
                     dropout_rows: Optional[Sequence[int]] = None) -> tf.Tensor:
    """The attention of query rows [B, N, S, H] (queries_w = q + r_w, queries_r = q + r_r) over
    keys, values [B, N, K, H] with the score's terms unassembled (module docstring): k_r
    [X, T, N, H], row_positions int32 [B, S] (`seq_len` = L), segment_scores [B, N, S, 2] with
    row_segments [B, S] and key_segments [B, K] (or all None: no segment term), blocked bool
    [B, S, K] or None -> [B, N, S, H]. The caller has checked `triton_unavailable_reason`."""
    batch, heads, rows, head_size = queries_w.shape
    n_keys = keys.shape[2]
    groups, distances = k_r.shape[0], k_r.shape[1]
    dtype = queries_w.dtype
    rate = float(dropout.rate) if training else 0.0
    split = dropout_rows[0] if dropout_rows is not None and len(dropout_rows) == 2 else None
    has_segment = segment_scores is not None
    shapes = dict(batch=batch, heads=heads, rows=rows, keys=n_keys, head_size=head_size,
                  distances=distances, seq_len=seq_len, groups=groups, split=split,
                  scale=scale, dropout_rate=rate, has_segment=has_segment,
                  has_mask=blocked is not None)
    calls = _calls(shapes, dtype, plan.gpu_generation)
    row_positions = tf.cast(row_positions, tf.int32)
    fixed = {"row_pos": row_positions,
             "row_order": tf.argsort(row_positions, axis=1, stable=True)}
    if has_segment:
        fixed["row_seg"] = tf.cast(row_segments, tf.int32)
        fixed["key_seg"] = tf.cast(key_segments, tf.int32)
    if blocked is not None:
        fixed["blocked_bits"] = bit_packed_blocked(blocked)
    if rate > 0:
        fixed["k0s"], fixed["k1"] = dropout_keys(dropout, batch, dropout_rows, plan)
    q_spec = tf.TensorSpec([batch, heads, rows, head_size], dtype)
    k_spec = tf.TensorSpec([batch, heads, n_keys, head_size], dtype)
    specs = {"out": q_spec, "lse": tf.TensorSpec([batch, heads, rows], tf.float32),
             "dq_w": q_spec, "dq_r": q_spec, "dk": k_spec, "dv": k_spec,
             "dk_r": tf.TensorSpec([batch, heads, distances, head_size], tf.float32),
             "d_seg": tf.TensorSpec([batch, heads, rows, 2], dtype)}

    def run(q_w, q_r, k, v, k_r_heads, seg):
        buffers = dict(fixed, q_w=q_w, q_r=q_r, k=k, v=v, k_r=k_r_heads)
        if has_segment:
            buffers["seg"] = seg
        forward = _call(*calls["flash_fwd"], buffers, specs)

        def grad(d_out):
            saved = dict(buffers, out=forward["out"], lse=forward["lse"],
                         d_out=tf.cast(d_out, dtype))
            dkdv = _call(*calls["flash_bwd_dkdv"], saved, specs)
            dq = _call(*calls["flash_bwd_dq"], saved, specs)
            # Each example's gradient of its group's k_r, summed over the group's examples.
            d_k_r = tf.reduce_sum(tf.reshape(dq["dk_r"], [groups, batch // groups, heads,
                                                          distances, head_size]), axis=1)
            d_seg = dq["d_seg"] if has_segment else tf.zeros_like(seg)
            return (dq["dq_w"], dq["dq_r"], dkdv["dk"], dkdv["dv"], tf.cast(d_k_r, dtype),
                    d_seg)

        return forward["out"], grad

    # Without a segment term the kernels take no seg operand; a zero [1] stands in for it in
    # the custom gradient's signature and gets a zero gradient.
    seg = (tf.cast(segment_scores, dtype) if has_segment else tf.zeros([1], dtype))
    k_r_heads = tf.transpose(tf.cast(k_r, dtype), [0, 2, 1, 3])                 # [X, N, T, H]
    return tf.custom_gradient(run)(queries_w, queries_r, keys, values, k_r_heads, seg)
