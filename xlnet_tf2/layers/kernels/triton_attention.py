"""XLNet's relative attention as the flash Triton kernels (kernels/flash_relative_attention.py)
inside the step's XLA program: three `__gpu$xla.gpu.triton` custom calls (kernels/triton_call.py),
the forward under a `tf.custom_gradient` whose gradient is the two backward calls.

Unlike the other implementations of the attention op, the kernels take the score's terms before
they are assembled into a [B, N, S, K] bias (xlnet_block.py's `attend` asks
attention_choice.py's `chosen_implementation` first, and builds that bias only for the others):

  queries [B, N, S, H],         the queries without their biases, r_w and r_r [N, H] (the
  r_w, r_r [N, H],              kernels add them as they load a tile), and the projected
  k_r [X, T, N, H]              position embedding of each direction group: the kernels make
                                each tile's position scores (q + r_r) . k_r[L - row_positions[s]
                                + j] themselves, from the band of k_r rows the tile needs, and
                                return the gradients of all (no [B, N, S, T] tensor is made,
                                forward or backward). The queries, keys, values and output
                                travel as [B, S, N, H] (transposes XLA folds into the
                                projections' products).
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
                                (layers/dropout.py `hashed_bits`).

`triton` (the optional `gpu` extra) is imported only when this implementation is traced.
"""

from __future__ import annotations

import concurrent.futures
import importlib.util
from typing import Optional, Sequence

import numpy as np
import tensorflow as tf
from tensorflow.python.framework import ops
from tensorflow.python.ops import control_flow_util

from xlnet_tf2.layers.dropout import Dropout
from xlnet_tf2.layers.kernels import flash_relative_attention as flash
from xlnet_tf2.layers.kernels import triton_call
from xlnet_tf2.layers.step_plan import DropoutKeys, StepPlan

_DTYPE_NAMES = {tf.bfloat16: "bfloat16", tf.float16: "float16", tf.float32: "float32"}
# The kernels' pointers whose element type is not the operands' float dtype.
_FIXED_POINTER_TYPES = {"row_pos": "*i32", "row_order": "*i32", "row_seg": "*i32",
                        "key_seg": "*i32", "blocked_bits": "*i32", "k0s": "*i32", "k1": "*i32",
                        "lse": "*fp32", "d_r_w": "*fp32", "d_r_r": "*fp32", "dk_r": "*fp32"}


def triton_refusal_before_tracing(device: str, xla: bool, dtype: tf.DType) -> Optional[str]:
    """Why the Triton implementation cannot run in a step traced for `device`, compiled by XLA
    or not (`xla`), in compute dtype `dtype`: what is known before the step is traced; None
    when none of it refuses (`triton_unavailable_reason` checks the rest at the trace)."""
    if device != "gpu":
        return f"the step is traced for a {device.upper()}, not a GPU"
    if not xla:
        return "the step is not compiled by XLA (--jit_compile)"
    if importlib.util.find_spec("triton") is None:
        return "the triton package is not installed (pip install 'xlnet-tf2[gpu]')"
    if dtype not in _DTYPE_NAMES:
        return f"it needs bfloat16, float16 or float32 operands, not {dtype.name}"
    return None


def triton_unavailable_reason(queries: tf.Tensor, keys: tf.Tensor, *, dropout_rate: float,
                              dropout_rows: Optional[Sequence[int]], plan: StepPlan,
                              score_terms: Optional[str] = None) -> Optional[str]:
    """Why the Triton implementation cannot run for these operands in the step being traced,
    or None when it can. `dropout_rate`: the probabilities' dropout in this call (0 when not
    training); `score_terms`: why the caller cannot give the score's terms unassembled (the
    angle form's scores, a segment term without segment ids), or None."""
    # A private API, as for cuDNN (kernels/cudnn.py): the custom calls run only in XLA.
    reason = triton_refusal_before_tracing(
        plan.device, control_flow_util.GraphOrParentsInXlaContext(ops.get_default_graph()),
        queries.dtype)
    if reason is not None:
        return reason
    head = queries.shape[-1]
    if head is None or head < 16 or head & (head - 1):
        return f"the head size must be a power of two >= 16, not {head}"
    return score_terms_reason(queries, keys, dropout_rate=dropout_rate,
                              dropout_rows=dropout_rows, plan=plan, score_terms=score_terms)


def score_terms_reason(queries: tf.Tensor, keys: tf.Tensor, *, dropout_rate: float,
                       dropout_rows: Optional[Sequence[int]], plan: StepPlan,
                       score_terms: Optional[str] = None) -> Optional[str]:
    """Why kernels that take the score's terms unassembled and hash the dropout bits from the
    Dropout's keys (the Triton and the Pallas kernels) cannot take these operands, or None:
    static shapes, the terms given (`score_terms`: why not), at most two dropout row parts,
    one dropout key per example."""
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


def triton_attention(queries, r_w, r_r, keys, values, k_r, row_positions, blocked, *,
                     seq_len: int, scale: float, dropout, training, plan: StepPlan,
                     segment_scores=None, row_segments=None, key_segments=None,
                     dropout_rows: Optional[Sequence[int]] = None) -> tf.Tensor:
    """The attention of query rows [B, N, S, H] (without their biases r_w, r_r [N, H]) over
    keys, values [B, N, K, H] with the score's terms unassembled (module docstring): k_r
    [X, T, N, H], row_positions int32 [B, S] (`seq_len` = L), segment_scores [B, N, S, 2] with
    row_segments [B, S] and key_segments [B, K] (or all None: no segment term), blocked bool
    [B, S, K] or None -> [B, N, S, H]. The caller has checked `triton_unavailable_reason`."""
    batch, heads, rows, head_size = queries.shape
    n_keys = keys.shape[2]
    groups, distances = k_r.shape[0], k_r.shape[1]
    dtype = queries.dtype
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
    q_spec = tf.TensorSpec([batch, rows, heads, head_size], dtype)
    k_spec = tf.TensorSpec([batch, n_keys, heads, head_size], dtype)
    per_head = tf.TensorSpec([batch, heads, head_size], tf.float32)
    specs = {"out": q_spec, "lse": tf.TensorSpec([batch, heads, rows], tf.float32),
             "dq": q_spec, "d_r_w": per_head, "d_r_r": per_head, "dk": k_spec, "dv": k_spec,
             "dk_r": tf.TensorSpec([batch, heads, distances, head_size], tf.float32),
             "d_seg": tf.TensorSpec([batch, heads, rows, 2], dtype)}

    def run(q, bias_w, bias_r, k, v, k_r_heads, seg):
        buffers = dict(fixed, q=q, r_w=bias_w, r_r=bias_r, k=k, v=v, k_r=k_r_heads)
        if has_segment:
            buffers["seg"] = seg
        forward = _call(*calls["flash_fwd"], buffers, specs)

        def grad(d_out):
            saved = dict(buffers, out=forward["out"], lse=forward["lse"],
                         d_out=tf.cast(d_out, dtype))
            dkdv = _call(*calls["flash_bwd_dkdv"], saved, specs)
            dq = _call(*calls["flash_bwd_dq"], saved, specs)
            # Each example's sums, summed over the examples (of a direction group, for k_r).
            d_k_r = tf.reduce_sum(tf.reshape(dq["dk_r"], [groups, batch // groups, heads,
                                                          distances, head_size]), axis=1)
            d_seg = dq["d_seg"] if has_segment else tf.zeros_like(seg)
            return (dq["dq"], tf.cast(tf.reduce_sum(dq["d_r_w"], 0), dtype),
                    tf.cast(tf.reduce_sum(dq["d_r_r"], 0), dtype), dkdv["dk"], dkdv["dv"],
                    tf.cast(d_k_r, dtype), d_seg)

        return forward["out"], grad

    # Without a segment term the kernels take no seg operand; a zero [1] stands in for it in
    # the custom gradient's signature and gets a zero gradient.
    seg = (tf.cast(segment_scores, dtype) if has_segment else tf.zeros([1], dtype))
    k_r_heads = tf.transpose(tf.cast(k_r, dtype), [0, 2, 1, 3])                 # [X, N, T, H]
    rows_major = lambda x: tf.transpose(x, [0, 2, 1, 3])  # noqa: E731 - [B, N, S, H] <-> [B, S, N, H]
    out = tf.custom_gradient(run)(rows_major(queries), tf.cast(r_w, dtype), tf.cast(r_r, dtype),
                                  rows_major(keys), rows_major(values), k_r_heads, seg)
    return rows_major(out)


# ---------------------------------------------------------------- the check on the device
# The kernels have run on no GPU of a project session yet, and a GPU's XLA may lower their TTIR
# differently from the Triton they were written against: before "auto" takes them, one small
# attention of every feature the step uses runs through them and through the reference op, on
# the device the step runs on, in the step's dtype with the step's tiles (`device_check`).
# Its shape: two direction groups, memory, both streams (two row tiles, two key tiles at
# 64-row tiles), a row that sees nothing, three segment ids, attention dropout.
_CHECK_SHAPE = dict(batch=4, groups=2, heads=2, seq_len=64, memory=64, predictions=13)
_CHECK_DROPOUT = 0.1
# Largest |kernels - reference| / |reference| (L2 over a tensor) accepted: the reference op
# rounds each product to the narrow dtype where the kernels keep float32, a few parts in a
# thousand; a wrong tile, shift or mask is tens of percent.
CHECK_TOLERANCE = {tf.bfloat16: 5e-2, tf.float16: 5e-2, tf.float32: 1e-4}
_CHECKED: dict = {}


class TritonKernelsFailed(RuntimeError):
    """The device check found the Triton kernels failing on this device (its message says
    how: they did not compile or run, or disagree with the reference op)."""


def device_check(dtype: tf.DType, head_size: int, generation: str, compare: bool,
                 reference_attention) -> None:
    """Runs the Triton kernels' forward and backward on the device once per process and
    (dtype, head size, generation, `compare`); with `compare`, against the reference op
    (`reference_attention`: layers/xlnet_block.py's, which calls this module).
    Raises TritonKernelsFailed (the same again on a later call) when they fail. Called while a
    step is traced: it runs in a thread of its own, outside the trace (TensorFlow keeps the
    graph being traced, the gradient tapes and the distribution strategy per thread;
    tf.init_scope would leave the trace but pause the check's own tapes). On a machine without
    a GPU (a step traced for a GPU to be exported, benchmarks/tools/step_export.py) there is
    nothing to run them on: no check, and the step takes the kernels as a GPU that passes the
    check would."""
    if not _gpu_present():
        return
    key = (dtype.name, head_size, generation, compare)
    if key not in _CHECKED:
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            _CHECKED[key] = pool.submit(_check, dtype, head_size, generation, compare,
                                        reference_attention).result()
    if _CHECKED[key] is not None:
        raise TritonKernelsFailed(_CHECKED[key])


def _gpu_present() -> bool:
    return bool(tf.config.list_logical_devices("GPU"))


def _run_compiled(fn, *args):
    """fn(*args) as one XLA program on this machine's device: the custom calls run only
    there."""
    return tf.function(fn, jit_compile=True)(*args)


def _check(dtype: tf.DType, head_size: int, generation: str, compare: bool,
           reference_attention) -> Optional[str]:
    """Why the kernels fail the check, or None."""
    inputs = _check_inputs(dtype, head_size)
    dropout = Dropout(_CHECK_DROPOUT, dtype=dtype.name)

    def program(q, r_w, r_r, k, v, k_r, seg, d_out):
        leaves = [q, r_w, r_r, k, v, k_r, seg]
        results = {}
        for implementation in ("triton", "reference") if compare else ("triton",):
            with tf.GradientTape() as tape:
                tape.watch(leaves)
                out = _check_attention(implementation, *leaves, inputs, dropout, generation,
                                       reference_attention)
            grads = tape.gradient(out, leaves, output_gradients=d_out)
            results[implementation] = [out] + grads
        return results

    try:
        results = _run_compiled(program, *(inputs[x] for x in _CHECK_LEAVES))
    except Exception as e:  # noqa: BLE001 - whatever stops the check's own program
        said = (str(e).strip().splitlines() or [""])[0][:200]
        return f"they did not compile or run on this device ({type(e).__name__}: {said})"
    if not compare:
        return None
    for name, got, want in zip(("output",) + tuple(f"gradient of {x}" for x in _CHECK_LEAVES),
                               results["triton"], results["reference"]):
        got, want = tf.cast(got, tf.float64), tf.cast(want, tf.float64)
        error = float(tf.norm(got - want) / tf.maximum(tf.norm(want), 1e-30))
        if not error <= CHECK_TOLERANCE[dtype]:  # a NaN fails too
            return (f"their {name} differs from the reference op's by {error:.3g} (relative, "
                    f"at most {CHECK_TOLERANCE[dtype]:g} accepted)")
    return None


_CHECK_LEAVES = ("q", "r_w", "r_r", "k", "v", "k_r", "seg", "d_out")


def _check_inputs(dtype: tf.DType, head_size: int) -> dict:
    """The check's attention: random operands (fixed seed) and its positions, segments and
    mask."""
    c = _CHECK_SHAPE
    batch, heads, seq_len, predictions = c["batch"], c["heads"], c["seq_len"], c["predictions"]
    keys, rows = c["memory"] + seq_len, seq_len + predictions
    distances = keys + seq_len
    rng = np.random.default_rng(0)
    normal = lambda *shape: tf.constant(rng.normal(size=shape), dtype)  # noqa: E731
    positions = np.concatenate([np.tile(np.arange(seq_len), (batch, 1)), np.stack(
        [rng.permutation(seq_len)[:predictions] for _ in range(batch)])], axis=1)
    segments = rng.integers(0, 3, (batch, seq_len))
    key_segments = np.concatenate([np.zeros((batch, c["memory"]), int), segments], axis=1)
    blocked = rng.random((batch, rows, keys)) < 0.2
    blocked[1, 3, :] = True                                        # a row that sees nothing
    return dict(
        q=normal(batch, heads, rows, head_size), r_w=normal(heads, head_size),
        r_r=normal(heads, head_size),
        k=normal(batch, heads, keys, head_size), v=normal(batch, heads, keys, head_size),
        k_r=normal(c["groups"], distances, heads, head_size), seg=normal(batch, heads, rows, 2),
        d_out=normal(batch, heads, rows, head_size),
        positions=tf.constant(positions, tf.int32), blocked=tf.constant(blocked),
        row_segments=tf.constant(np.take_along_axis(segments, positions, 1), tf.int32),
        key_segments=tf.constant(key_segments, tf.int32))


def _check_attention(implementation, q, r_w, r_r, k, v, k_r, seg, inputs, dropout, generation,
                     reference_attention):
    """The check's attention by `implementation` ("triton", or "reference":
    `reference_attention`), its dropout keyed as a training step's."""
    c = _CHECK_SHAPE
    batch, seq_len = c["batch"], c["seq_len"]
    rows = dict(dropout_rows=(seq_len, c["predictions"]))
    plan = StepPlan(device="gpu", attention="triton", gpu_generation=generation
                    ).with_dropout_keys(DropoutKeys.of(7, tf.constant(3), tf.range(batch), batch))
    scale = 1.0 / float(q.shape[-1]) ** 0.5
    if implementation == "triton":
        return triton_attention(
            q, r_w, r_r, k, v, k_r, inputs["positions"], inputs["blocked"], seq_len=seq_len,
            scale=scale, dropout=dropout, training=True, plan=plan, segment_scores=seg,
            row_segments=inputs["row_segments"], key_segments=inputs["key_segments"], **rows)
    # The reference: the same terms assembled into the [B, N, S, K] bias.
    n_keys = k.shape[2]
    per_example = tf.repeat(tf.transpose(k_r, [0, 2, 1, 3]), batch // c["groups"], axis=0)
    every = tf.einsum("bnsh,bnth->bnst", q + r_r[:, None], per_example)        # [B, N, S, T]
    columns = seq_len - inputs["positions"][:, :, None] + tf.range(n_keys)[None, None]
    columns = tf.broadcast_to(columns[:, None], q.shape[:3] + [n_keys])
    differ = inputs["row_segments"][:, :, None] != inputs["key_segments"][:, None, :]
    bias = tf.gather(every, columns, batch_dims=3) + tf.where(
        differ[:, None], seg[..., 1:], seg[..., :1])
    return reference_attention(q + r_w[:, None], k, v, bias, inputs["blocked"], scale=scale,
                               dropout=dropout, training=True, plan=plan, **rows)
