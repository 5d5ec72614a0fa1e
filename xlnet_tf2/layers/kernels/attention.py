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
  "pallas"     the project's flash Pallas kernels as XLA tpu_custom_calls
               (kernels/pallas_attention.py): only inside an XLA program traced for a TPU, with
               JAX (the tpu extra); both streams in one call, with attention dropout (the
               reference's bits).

"auto" (the default) takes "triton" (GPU) or "pallas" (TPU) wherever it can run, else
"cudnn", and "reference" elsewhere (`chosen_implementation`); the trainer's
--attention_implementation forces one (a forced one that cannot run is one clear error). The
Triton and Pallas kernels read the score's terms before they are assembled into a bias (the
position scores or the position embedding's projection, the segment ids):
relative_attention.py asks `chosen_implementation` first and calls kernels/triton_attention.py
or kernels/pallas_attention.py with the terms, or `attention` with the bias.
"""

from __future__ import annotations

import re
from typing import Optional, Sequence

import tensorflow as tf

from xlnet_tf2.layers.kernels import cudnn, pallas_attention, reference, triton_attention
from xlnet_tf2.layers.step_plan import StepPlan


# The implementations that run only inside an XLA program traced for one kind of device.
IMPLEMENTATION_DEVICE = {"cudnn": "gpu", "triton": "gpu", "pallas": "tpu"}
_FORCED_LINE = re.compile(r"--attention_implementation=\w+ cannot run here: [^\n\x1b]*")


class AttentionImplementationError(ValueError):
    """--attention_implementation=cudnn or triton where that implementation cannot run."""


def attention_implementation_error_line(error: BaseException) -> Optional[str]:
    """The one line of an AttentionImplementationError raised while a step was traced, found
    in `error` or what it was raised from (Keras and AutoGraph re-raise it as their own
    exceptions with the line inside their text); None for any other error."""
    seen = 0
    while error is not None and seen < 8:
        match = _FORCED_LINE.search(str(error))
        if match:
            return match.group(0).strip()
        error, seen = error.__cause__ or error.__context__, seen + 1
    return None


def chosen_implementation(queries: tf.Tensor, keys: tf.Tensor, *, dropout, training,
                          plan: StepPlan, dropout_rows: Optional[Sequence[int]] = None,
                          score_terms: Optional[str] = None) -> str:
    """The implementation ("triton", "pallas", "cudnn" or "reference") that computes this
    attention in the step being traced: the plan's `attention`, or under "auto" the first of
    triton, pallas, cudnn that can run. A forced one that cannot run raises
    AttentionImplementationError (one line naming the flag). `score_terms`: why the caller
    cannot give the score's terms unassembled (triton and pallas need them), or None.
    Arguments as `attention`'s."""
    rate = dropout.rate if training else 0.0
    for name, unavailable in (("triton", triton_attention.triton_unavailable_reason),
                              ("pallas", pallas_attention.pallas_unavailable_reason)):
        if plan.attention not in ("auto", name):
            continue
        why_not = unavailable(queries, keys, dropout_rate=rate, dropout_rows=dropout_rows,
                              plan=plan, score_terms=score_terms)
        if why_not is None:
            return name
        if plan.attention == name:
            raise AttentionImplementationError(
                f"--attention_implementation={name} cannot run here: {why_not}; use "
                "--attention_implementation=auto (or reference).")
    if plan.attention == "reference":
        return "reference"
    reason = cudnn.cudnn_unavailable_reason(queries, keys, rate, plan.device)
    if reason is None:
        return "cudnn"
    if plan.attention == "cudnn":
        raise AttentionImplementationError(
            f"--attention_implementation=cudnn cannot run here: {reason}; use "
            "--attention_implementation=auto (or reference).")
    return "reference"


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
        return reference.reference_attention(queries, keys, values, bias, blocked, scale=scale,
                                             dropout=dropout, training=training,
                                             dropout_rows=dropout_rows, plan=plan)
    if implementation == "cudnn":
        return cudnn.cudnn_attention(queries, keys, values, bias, blocked, scale=scale)
    raise ValueError(f"attention(): implementation {implementation!r} takes an assembled bias "
                     "only as reference or cudnn")
