"""layers/xlnet_block.py: the attention op's implementations and how one is chosen.

The cuDNN implementation runs only on a GPU; here its program is traced for one (the custom
calls, their shapes and backend configs), and the choice is checked everywhere it is made.
Its numbers against the reference were measured on a GPU (benchmarks/gpu/attention_op_check.py,
BENCHMARKS.md)."""

import json
import re

import numpy as np
import pytest
import tensorflow as tf

from xlnet_tf2.layers.dropout import Dropout
from xlnet_tf2.layers.kernels.attention_choice import AttentionImplementationError
from xlnet_tf2.layers.xlnet_block import attention
from xlnet_tf2.layers.kernels.cudnn import CUDNN_BACKWARD, CUDNN_FORWARD
from xlnet_tf2.layers.step_plan import StepPlan

B, N, S, K, H = 2, 2, 7, 16, 8  # an odd number of query rows: cuDNN's needs a padded row


def _operands(dtype=tf.bfloat16, head=H):
    rng = np.random.default_rng(0)
    make = lambda *shape: tf.constant(rng.standard_normal(shape), dtype)
    return (make(B, N, S, head), make(B, N, K, head), make(B, N, K, head), make(B, N, S, K),
            tf.constant(rng.random((B, S, K)) < 0.3))


def _program(rate=0.0, training=True, jit=True, policy="mixed_bfloat16", target="gpu",
             implementation="auto"):
    dropout = Dropout(rate, dtype=policy)
    plan = StepPlan(device=target, attention=implementation)

    @tf.function(jit_compile=jit, autograph=False)
    def program(queries, keys, values, bias, blocked):
        with tf.GradientTape() as tape:
            tape.watch([queries, keys, values, bias])
            out = attention(queries, keys, values, bias, blocked, scale=0.3, dropout=dropout,
                            training=training, plan=plan)
            loss = tf.reduce_sum(tf.cast(out, tf.float32))
        return [out] + tape.gradient(loss, [queries, keys, values, bias])

    return program


def _hlo(program, operands):
    return program.experimental_get_compiler_ir(*operands)(stage="hlo")


def _custom_calls(hlo):
    return re.findall(r'custom_call_target="([^"]+)"', hlo)


@pytest.mark.xla
def test_traced_for_a_gpu_under_xla_the_op_is_cudnns_forward_and_backward_call():
    hlo = _hlo(_program(), _operands())
    assert _custom_calls(hlo) == [CUDNN_FORWARD,
                                  CUDNN_BACKWARD]
    forward = next(l for l in hlo.splitlines() if CUDNN_FORWARD + '"' in l)
    # S = 7 query rows padded to 8; outputs: [B, N, S, H], softmax statistics, workspace.
    assert forward.lstrip().split(" = ")[1].startswith(
        "(bf16[2,2,8,8]{3,2,1,0}, f32[2,2,8]{2,1,0}, u8[0]{0}) custom-call(")
    config, _ = json.JSONDecoder().raw_decode(forward.split("backend_config=", 1)[1])
    fmha = config["cudnn_fmha_backend_config"]
    assert fmha["fmha_scale"] == pytest.approx(0.3) and fmha["dropout_rate"] == 0.0
    assert fmha["intermediate_tensor_shape"]["dimensions"] == ["2", "2", "8", "16"]
    assert fmha["bmm1_dot_dimension_numbers"]["lhs_contracting_dimensions"] == ["3"]
    backward = next(l for l in hlo.splitlines() if CUDNN_BACKWARD + '"' in l)
    # d queries, d keys, d values, d bias (the bias has a gradient: the position scores'),
    # then the workspace.
    assert backward.lstrip().split(" = ")[1].startswith(
        "(bf16[2,2,8,8]{3,2,1,0}, bf16[2,2,16,8]{3,2,1,0}, bf16[2,2,16,8]{3,2,1,0}, "
        "bf16[2,2,8,16]{3,2,1,0}, u8[0]{0}) custom-call(")


@pytest.mark.parametrize("case, reason", [
    ("cpu", "traced for a CPU"),
    ("tpu", "traced for a TPU"),
    ("no_xla", "not compiled by XLA (--jit_compile)"),
    ("float32", "bfloat16 or float16"),
    ("dropout", "attention dropout is on (rate 0.1; --dropatt)"),
    ("head", "head size must be a multiple of 8"),
])
@pytest.mark.xla
def test_auto_takes_the_reference_where_cudnn_cannot_run_and_forcing_cudnn_says_why(case,
                                                                                     reason):
    operands = _operands(tf.float32 if case == "float32" else tf.bfloat16,
                         head=12 if case == "head" else H)
    # A new function per trace: tf.function keeps a trace per input signature, whatever
    # the target or implementation it was traced with.
    target = case if case in ("cpu", "tpu") else "gpu"
    program = lambda implementation: _program(
        rate=0.1 if case == "dropout" else 0.0, jit=case != "no_xla",
        policy="float32" if case == "float32" else "mixed_bfloat16", target=target,
        implementation=implementation)
    if case == "no_xla":  # no custom call can be traced without XLA: the graph is read instead
        graph = program("auto").get_concrete_function(*operands).graph
        assert "XlaCustomCallV2" not in {op.type for op in graph.get_operations()}
    else:
        assert _custom_calls(_hlo(program("auto"), operands)) == []
    with pytest.raises(AttentionImplementationError,
                       match=re.escape("--attention_implementation=cudnn cannot run here: ")
                       + ".*" + re.escape(reason)):
        program("cudnn").get_concrete_function(*operands)


@pytest.mark.xla
def test_dropout_off_at_inference_lets_cudnn_run():
    assert _custom_calls(_hlo(_program(rate=0.1, training=False), _operands())) == [
        CUDNN_FORWARD, CUDNN_BACKWARD]


@pytest.mark.xla
def test_forcing_the_reference_on_a_gpu_keeps_tensorflows_ops():
    assert _custom_calls(_hlo(_program(implementation="reference"), _operands())) == []


def test_the_reference_is_softmax_of_scaled_scores_plus_bias_with_blocked_keys_excluded():
    queries, keys, values, bias, blocked = (np.asarray(t, np.float64) for t in
                                            _operands(tf.float32))
    out = attention(*(tf.constant(t, tf.float32) for t in (queries, keys, values, bias)),
                    tf.constant(blocked.astype(bool)), scale=0.3, dropout=Dropout(0.1),
                    training=False, plan=StepPlan())
    scores = 0.3 * (np.einsum("bnsh,bnkh->bnsk", queries, keys) + bias)
    scores = np.where(blocked[:, None].astype(bool), -np.inf, scores)
    probs = np.exp(scores - scores.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    np.testing.assert_allclose(out.numpy(), np.einsum("bnsk,bnkh->bnsh", probs, values),
                               rtol=1e-5, atol=1e-6)


def test_an_unknown_implementation_is_refused_by_name():
    with pytest.raises(ValueError, match="Unknown attention implementation 'flash'"):
        StepPlan(attention="flash")


def test_an_unknown_device_is_refused_by_name():
    with pytest.raises(ValueError, match="Unknown device 'npu'"):
        StepPlan(device="npu")
