"""Which implementation computes the attention op (layers/xlnet_block.py's `attention`) in a
step whose plan may take another than the reference (`StepPlan.kernel_attention`: a GPU's or a
TPU's step under "auto", or an implementation forced), the refusal of a forced one that cannot
run, and the Triton or Pallas kernels' call with the score's terms (`run_kernels`). The
reference path (a CPU's step under "auto") never enters this module.

  "reference"  TensorFlow ops (xlnet_block.py's `reference_attention`). Runs everywhere; the
               parity tests' numbers.
  "cudnn"      cuDNN's flash attention as XLA custom calls (cudnn.py): only inside an XLA
               program traced for a GPU, in bfloat16 / float16, without attention dropout.
  "triton"     the project's flash Triton kernels as XLA custom calls (triton_attention.py):
               only inside an XLA program traced for a GPU, with the `triton` package (the gpu
               extra); with attention dropout (the reference's bits).
  "pallas"     the project's flash Pallas kernels as XLA tpu_custom_calls (pallas_attention.py):
               only inside an XLA program traced for a TPU, with JAX (the tpu extra); both
               streams in one call, with attention dropout (the reference's bits).

"auto" takes "triton" wherever it can run and the kernels pass their check on the device
(triton_attention.py's `device_check`: once, against the reference; the reference after one
warning line where they fail it), "pallas" wherever it can run, else "cudnn", else
"reference". --attention_implementation forces one: one that cannot run is one line,
`AttentionImplementationError`, raised before the step is traced where the fact is known then
(`refusal_before_tracing`, the trainer's), else while it is traced.
"""

from __future__ import annotations

from typing import Optional, Sequence

import tensorflow as tf
from absl import logging

from xlnet_tf2.layers.kernels import cudnn, pallas_attention, triton_attention
from xlnet_tf2.layers.step_plan import StepPlan

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


def why_no_score_terms(angle_table, mismatch, segment_ids) -> Optional[str]:
    """Why a layer call cannot give the Triton and Pallas kernels the score's terms
    unassembled, or None."""
    if angle_table is not None:
        return "the position scores are the angle form's (--position_scores=angles)"
    if mismatch is not None and segment_ids is None:
        return "the segment term was given without the segment ids (segment_ids)"
    return None


def chosen_implementation(queries: tf.Tensor, keys: tf.Tensor, *, dropout, training,
                          plan: StepPlan, reference_attention,
                          dropout_rows: Optional[Sequence[int]] = None,
                          score_terms: Optional[str] = None) -> str:
    """The implementation ("triton", "pallas", "cudnn" or "reference") that computes this
    attention in the step being traced (module docstring). A forced one that cannot run raises
    AttentionImplementationError. `reference_attention`: the reference op, which the Triton
    kernels' check compares with; `score_terms`: why the caller cannot give the score's terms
    unassembled (triton and pallas need them), or None. The other arguments as the op's."""
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


def run_kernels(implementation: str, queries, r_w, r_r, keys, values, k_r, positions, blocked,
                segment_scores, segment_ids, *, seq_len: int, scale: float, dropout, training,
                plan: StepPlan, dropout_rows=None) -> tf.Tensor:
    """The attention of query rows [B, N, S, H] at `positions` int32 [B, S] of the example by
    the Triton or Pallas kernels (`implementation`), from the score's terms: r_w, r_r [N, 1, H],
    keys, values [B, N, K, H], k_r [X, T, N, H], blocked bool [B, S, K] or None, and the
    segment term's (q + r_s) . seg_embed `segment_scores` [B, N, S, 2] with the keys'
    segment_ids int32 [B, K], or None. Returns [B, N, S, H], or with the Pallas kernels, for
    both streams stacked, padding rows after the S rows (the caller slices them off)."""
    segments = {}
    if segment_scores is not None:
        k_len = keys.shape[2]
        segments = dict(segment_scores=segment_scores, key_segments=segment_ids,
                        row_segments=tf.gather(segment_ids, positions + (k_len - seq_len),
                                               batch_dims=1))
    common = dict(seq_len=seq_len, scale=scale, dropout=dropout, training=training, plan=plan,
                  dropout_rows=dropout_rows, **segments)
    if implementation == "pallas":
        # The content rows first (both streams stacked, or the content stream alone); the
        # kernels read the projection k_r itself, band by band.
        query_positions = positions[:, seq_len:] if queries.shape[2] > seq_len else None
        return pallas_attention.pallas_attention(queries, r_w[:, 0], r_r[:, 0], keys, values,
                                                 k_r, query_positions, blocked, **common)
    return triton_attention.triton_attention(queries, r_w[:, 0], r_r[:, 0], keys, values, k_r,
                                             positions, blocked, **common)


_SAID: set = set()


def _say_once(line: str) -> None:
    """`line` as a warning, once per process (every layer of every trace asks)."""
    if line not in _SAID:
        _SAID.add(line)
        logging.warning(line)
