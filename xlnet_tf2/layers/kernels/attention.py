"""The attention op: softmax(scale * (q . k + bias), blocked entries excluded), dropout on the
probabilities, then the weighted sum of values, where the `bias` is the part of a score that is
not a product of a query row and a key row (the aligned position scores and the segment term).

Its implementations, one module each, chosen by the step's plan (layers/step_plan.py):

  "reference"  TensorFlow ops (kernels/reference.py). Runs everywhere; the parity tests'
               numbers.
  "cudnn"      cuDNN's flash attention as XLA custom calls (kernels/cudnn.py): only inside an
               XLA program traced for a GPU, in bfloat16 / float16, without attention dropout.

"auto" (the default) takes "cudnn" wherever it can run and "reference" elsewhere; the trainer's
--attention_implementation forces one (a forced one that cannot run is one clear error).
"""

from __future__ import annotations

from typing import Optional, Sequence

import tensorflow as tf

from xlnet_tf2.layers.kernels import cudnn, reference
from xlnet_tf2.layers.step_plan import StepPlan


class AttentionImplementationError(ValueError):
    """--attention_implementation=cudnn where cuDNN's attention cannot run."""


def attention(queries: tf.Tensor, keys: tf.Tensor, values: tf.Tensor, bias: tf.Tensor,
              blocked: Optional[tf.Tensor], *, scale: float, dropout, training, plan: StepPlan,
              dropout_rows: Optional[Sequence[int]] = None) -> tf.Tensor:
    """The attention op.

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
    Returns:
      [B, N, S, H] in the compute dtype.

    The implementation is the plan's: the one asked for, or under "auto" "cudnn" wherever it
    can run (module docstring).
    """
    reason = cudnn.cudnn_unavailable_reason(queries, keys, dropout.rate if training else 0.0,
                                            plan.device)
    if plan.attention == "cudnn" and reason is not None:
        raise AttentionImplementationError(
            f"--attention_implementation=cudnn cannot run here: {reason}; use "
            "--attention_implementation=auto (or reference).")
    if plan.attention == "reference" or reason is not None:
        return reference.reference_attention(queries, keys, values, bias, blocked, scale=scale,
                                             dropout=dropout, training=training,
                                             dropout_rows=dropout_rows, plan=plan)
    return cudnn.cudnn_attention(queries, keys, values, bias, blocked, scale=scale)
