"""The attention op as cuDNN's flash attention (forward and backward): the XLA custom calls that
XLA GPU compiles (`__cudnn$fmhaScaleBiasSoftmax[Backward]`, the calls
`jax.nn.dot_product_attention(implementation="cudnn")` lowers to). The scores and probabilities
stay in the kernel's registers and shared memory: only the bias (written once, read forward and
backward) and its gradient are score-sized in memory. Only inside an XLA program traced for a
GPU, in bfloat16 / float16, without attention dropout (`cudnn_unavailable_reason` says why not).
"""

from __future__ import annotations

import json
from typing import Optional

import tensorflow as tf
from tensorflow.compiler.tf2xla.python import xla as tf2xla
from tensorflow.python.framework import ops
from tensorflow.python.ops import control_flow_util


def cudnn_refusal_before_tracing(device: str, xla: bool, dtype: tf.DType) -> Optional[str]:
    """Why the cuDNN implementation cannot run in a step traced for `device`, compiled by XLA
    or not (`xla`), in compute dtype `dtype`: what is known before the step is traced; None
    when none of it refuses."""
    if device != "gpu":
        return f"the step is traced for a {device.upper()}, not a GPU"
    if not xla:
        return "the step is not compiled by XLA (--jit_compile)"
    if dtype not in (tf.bfloat16, tf.float16):
        return f"it needs bfloat16 or float16 operands, not {dtype.name} (--precision)"
    return None


def cudnn_unavailable_reason(queries: tf.Tensor, keys: tf.Tensor, dropout_rate: float,
                             device: str) -> Optional[str]:
    """Why the cuDNN implementation cannot run for these operands in the step being traced,
    or None when it can. `dropout_rate`: the probabilities' dropout in this call (0 when not
    training)."""
    if dropout_rate > 0:
        # XLA's cuDNN attention with dropout stopped the process on an H200 (jaxlib 0.11.2:
        # "Check failed: local_device_ordinal.has_value()" in cuda_dnn.cc), and its masks
        # would come from cuDNN's generator, not from the keys that make a run's masks a pure
        # function of (seed, step, example) (layers/dropout.py).
        return f"attention dropout is on (rate {dropout_rate:g}; --dropatt)"
    # The custom calls have no TensorFlow kernel: only an XLA program can hold them. A private
    # API (tensorflow.python): TensorFlow has no public way to ask whether the function being
    # traced is compiled with jit_compile=True.
    reason = cudnn_refusal_before_tracing(
        device, control_flow_util.GraphOrParentsInXlaContext(ops.get_default_graph()),
        queries.dtype)
    if reason is not None:
        return reason
    head = queries.shape[-1]
    if head is None or head % 8 or head > 256:
        return f"the head size must be a multiple of 8 up to 256, not {head}"
    if None in queries.shape or None in keys.shape:
        return "it needs static shapes"
    if keys.shape[2] % 2:
        return f"the number of keys must be even, not {keys.shape[2]}"
    return None


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
