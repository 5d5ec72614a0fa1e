"""The attention op: softmax(scale * (q . k + bias), blocked entries excluded), dropout on the
probabilities, then the weighted sum of values, where the `bias` is the part of a score that is
not a product of a query row and a key row (the aligned position scores and the segment term).

Its implementations, one module each, chosen by the step's plan (layers/step_plan.py):

  "reference"  TensorFlow ops (kernels/reference.py). Runs everywhere; the parity tests'
               numbers.
  "cudnn"      cuDNN's flash attention as XLA custom calls (kernels/cudnn.py): only inside an
               XLA program traced for a GPU, in bfloat16 / float16, without attention dropout.
  "triton"     the project's flash Triton kernels as XLA custom calls (kernels/triton_attention.py):
               only inside an XLA program traced for a GPU, with the `triton` package (the gpu
               extra); with attention dropout (the reference's bits).

"auto" (the default) takes "triton" wherever it can run and the kernels pass their check on
the device (kernels/triton_attention.py `device_check`: once, against the reference op), else
"cudnn", and "reference" elsewhere (`chosen_implementation`); the trainer's
--attention_implementation forces one (a forced one that cannot run is one clear error,
`AttentionImplementationError`; what is known before the step is traced is checked then,
`refusal_before_tracing`). The Triton kernels read the position scores
before their shift and the segment ids, not an assembled bias: relative_attention.py asks
`chosen_implementation` first and calls kernels/triton_attention.py with the score's terms, or
`attention` with the bias.
"""

from __future__ import annotations

from typing import Optional, Sequence

import tensorflow as tf
from absl import logging

from xlnet_tf2.layers.kernels import cudnn, reference, triton_attention
from xlnet_tf2.layers.step_plan import StepPlan


# The implementations that run only inside an XLA program traced for a GPU.
GPU_ONLY_IMPLEMENTATIONS = ("cudnn", "triton")


class AttentionImplementationError(ValueError):
    """--attention_implementation=cudnn or triton where that implementation cannot run; its
    message is one line naming the flag."""


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
    """The implementation ("triton", "cudnn" or "reference") that computes this attention in
    the step being traced: the plan's `attention`, or under "auto" the first of triton, cudnn
    that can run, the Triton kernels once they pass their check on the device (the reference
    after one warning line where they fail it). A forced one that cannot run raises
    AttentionImplementationError (one line naming the flag). `score_terms`: why the caller cannot give the score's terms unassembled
    (triton needs them), or None. Arguments as `attention`'s."""
    rate = dropout.rate if training else 0.0
    if plan.attention in ("auto", "triton"):
        why_not = triton_attention.triton_unavailable_reason(
            queries, keys, dropout_rate=rate, dropout_rows=dropout_rows, plan=plan,
            score_terms=score_terms)
        if why_not is None:
            # Forced, the kernels only have to compile and run; "auto" also compares them
            # with the reference op.
            try:
                triton_attention.device_check(queries.dtype, queries.shape[-1],
                                              plan.gpu_generation,
                                              compare=plan.attention == "auto")
                return "triton"
            except triton_attention.TritonKernelsFailed as failed:
                why_not = f"the Triton attention kernels failed their check: {failed}"
                if plan.attention == "auto":  # kernels that fail here: the safe path
                    _say_once(f"--attention_implementation=auto: {why_not}; the step uses the "
                              "reference attention.")
                    return "reference"
        if plan.attention == "triton":
            raise AttentionImplementationError(refusal("triton", why_not))
    if plan.attention == "reference":
        return "reference"
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
        chosen here. (The Triton kernels take the score's terms unassembled: the caller runs
        kernels/triton_attention.py itself when `chosen_implementation` says "triton".)
    Returns:
      [B, N, S, H] in the compute dtype.
    """
    if implementation is None:
        implementation = chosen_implementation(
            queries, keys, dropout=dropout, training=training, plan=plan,
            dropout_rows=dropout_rows,
            score_terms="the caller gave the assembled [B, N, S, K] bias, not the score's terms")
    if implementation == "reference":
        return reference.reference_attention(queries, keys, values, bias, blocked, scale=scale,
                                             dropout=dropout, training=training,
                                             dropout_rows=dropout_rows, plan=plan)
    if implementation == "cudnn":
        return cudnn.cudnn_attention(queries, keys, values, bias, blocked, scale=scale)
    raise ValueError(f"attention(): implementation {implementation!r} takes an assembled bias "
                     "only as reference or cudnn")
