"""The attention's program for each device (layers/step_plan.py): one attention of L + P rows
with window reads on a GPU, two attentions elsewhere. Every form computes the same values,
gradients and dropout masks, and the GPU's program keeps the structure that is its reason to
exist. These are the reference implementation's forms, forced in the GPU plans (under "auto" a
GPU step with triton installed runs the Triton kernels: tests/layers/kernels/
test_triton_attention.py)."""

import re

import numpy as np
import pytest
import tensorflow as tf

from fixtures.layer_harness import global_policy
from xlnet_tf2 import XLNetConfig, XLNetLMHeadModel
from xlnet_tf2.layers import RelativeAttention, build_attention_masks, segment_matrix
from xlnet_tf2.layers.dropout import assign_dropout_salts
from xlnet_tf2.layers.step_plan import keyed_plan
from xlnet_tf2.layers.step_plan import StepPlan

B, L, M, P, D, N, H = 4, 6, 4, 3, 16, 2, 8
K = M + L
POSITIONS = np.array([[0, 2, 5], [1, 4, 3], [5, 0, 2], [3, 1, 4]], np.int32)


def _inputs(rng):
    perm_mask = (rng.random((B, L, L)) < 0.4).astype(np.float32)
    segment_ids = np.array([[0, 0, 0, 1, 1, 1]] * B, np.int32)
    content_mask, query_mask = build_attention_masks(
        batch_size=B, q_len=L, m_len=M, attn_type="bi", same_length=False, perm_mask=perm_mask)
    weights = np.ones((B, P), np.float32)
    weights[3, 2] = 0.0  # an empty prediction row
    return dict(
        h=tf.constant(rng.normal(size=(B, L, D)), tf.float32),
        g=tf.constant(rng.normal(size=(B, P, D)), tf.float32),
        pos_emb=tf.constant(rng.normal(size=(2, K + L, D)), tf.float32),
        mems=tf.constant(rng.normal(size=(B, M, D)), tf.float32),
        content_mask=content_mask,
        query_mask=tf.gather(query_mask, POSITIONS, batch_dims=1),
        segment_mismatch=segment_matrix(segment_ids, M),
        query_segment_mismatch=segment_matrix(
            segment_ids, M, query_segment_ids=np.take_along_axis(segment_ids, POSITIONS, 1)),
        query_positions=tf.constant(POSITIONS),
        query_weights=tf.constant(weights))


def _layer_step(target: str, seed: int = 3, jit: bool = True):
    """Outputs and gradients (inputs and weights) of one two-stream layer with dropout 0.3 on
    the probabilities and the output, inside the training loop's key scope, traced for
    `target`."""
    layer = RelativeAttention(d_model=D, n_head=N, d_head=H, dropout=0.3, dropatt=0.3)
    inputs = _inputs(np.random.default_rng(0))
    layer(**inputs)  # builds the weights
    for variable, value in zip(layer.weights, _weights(layer)):
        variable.assign(value)
    assign_dropout_salts(layer)

    def step(h, g, global_step):
        plan = keyed_plan(seed=seed, step=global_step, example_ids=tf.range(B),
                          examples_per_step=B,
                          plan=StepPlan(device=target, attention="reference"))
        with tf.GradientTape() as tape:
            tape.watch([h, g])
            h_out, g_out = layer(**dict(inputs, h=h, g=g), training=True, plan=plan)
            total = tf.reduce_sum(h_out * h_out) + tf.reduce_sum(tf.sin(g_out))
        return [h_out, g_out] + tape.gradient(total, [h, g] + layer.trainable_variables)

    fn = tf.function(step, jit_compile=True) if jit else step
    return [t.numpy() for t in fn(inputs["h"], inputs["g"], tf.constant(5, tf.int64))]


def _weights(layer):
    rng = np.random.default_rng(1)
    return [rng.normal(scale=0.3, size=v.shape).astype(np.float32) for v in layer.weights]


@pytest.fixture(scope="module")
def cpu_step():
    return _layer_step("cpu")


@pytest.mark.xla
def test_other_dropout_keys_move_the_outputs_far_beyond_rounding(cpu_step):
    other = _layer_step("cpu", seed=4, jit=False)
    assert np.abs(other[1] - cpu_step[1]).max() > 0.1


@pytest.mark.xla
@pytest.mark.parametrize("target", ["gpu", "tpu"])
def test_every_devices_form_computes_what_the_cpus_does(target, cpu_step):
    """Values and gradients of both streams, dropout included: a different dropout mask or a
    misaligned score would move them by far more than rounding (test above)."""
    # The forms under test are the reference attention's (a TPU's Pallas kernels, which stack
    # the streams too, have tests of their own: layers/kernels/test_pallas_attention.py).
    forms = StepPlan(device=target, attention="reference")
    assert forms.one_attention_for_both_streams == (target == "gpu")
    for got, want in zip(_layer_step(target), cpu_step):
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)


def _step_hlo(target: str, precision: str = "float32") -> str:
    """The HLO of a jit-compiled training step of a 2-layer pretraining model (two streams,
    memory, bi_data, dropout) traced for `target`."""
    config = XLNetConfig.preset("tiny", n_token=50, n_layer=2, mem_len=M, reuse_len=3,
                                bi_data=True, dropout=0.1, dropatt=0.1)
    rng = np.random.default_rng(4)
    mapping = np.zeros((B, P, L), np.float32)
    for b in range(B):
        mapping[b, np.arange(P), POSITIONS[b]] = 1.0
    features = {"input_ids": rng.integers(9, 50, (B, L)).astype(np.int32),
                "segment_ids": np.array([[0, 0, 0, 1, 1, 1]] * B, np.int32),
                "perm_mask": (rng.random((B, L, L)) < 0.4).astype(np.float32),
                "target_mapping": mapping,
                "mems": [rng.normal(size=(B, M, config.d_model)).astype(np.float32)] * 2}
    with global_policy(precision):
        model = XLNetLMHeadModel(config)
        model.build()
    assign_dropout_salts(model)

    @tf.function(jit_compile=True)
    def step(features, global_step):  # a run-time step: else the masks fold into constants
        plan = keyed_plan(seed=1, step=global_step, example_ids=tf.range(B),
                          examples_per_step=B,
                          plan=StepPlan(device=target, attention="reference"))
        with tf.GradientTape() as tape:
            logits = model(features, training=True, plan=plan)["logits"]
            loss = tf.reduce_mean(tf.cast(logits, tf.float32) ** 2)
        return tape.gradient(loss, model.trainable_variables)

    return step.experimental_get_compiler_ir(features, tf.constant(2, tf.int64))(stage="hlo")


def _ops_of_shape(hlo: str, opcode: str, dims) -> int:
    """How many `opcode` instructions of the HLO text have an output of shape `dims`."""
    shape = ",".join(str(d) for d in dims)
    return len(re.findall(rf"= \w+\[{shape}\]\S* {opcode}\(", hlo))


@pytest.mark.xla
def test_a_gpus_program_has_one_attention_per_layer():
    """Per layer, one softmax and two score-sized products (the scores forward, the
    probabilities' gradient backward) over the L + P stacked rows, and none of either stream
    alone: the compiler then has no probabilities of two streams to concatenate. The CPU's
    program keeps them per stream."""
    n_head, layers = XLNetConfig.preset("tiny").n_head, 2
    gpu, cpu = _step_hlo("gpu"), _step_hlo("cpu")
    stacked, content, query = ((B, n_head, rows, K) for rows in (L + P, L, P))
    assert _ops_of_shape(gpu, "exponential", stacked) == layers
    assert _ops_of_shape(gpu, "dot", stacked) == 2 * layers
    for one_stream in (content, query):
        assert _ops_of_shape(gpu, "exponential", one_stream) == 0
        assert _ops_of_shape(gpu, "dot", one_stream) == 0
        assert _ops_of_shape(cpu, "exponential", one_stream) == layers
        assert _ops_of_shape(cpu, "dot", one_stream) > layers
    assert _ops_of_shape(cpu, "dot", stacked) == 0


@pytest.mark.xla
def test_a_gpus_program_stores_the_probabilities_mask_bit_packed():
    """The probabilities' keep mask reaches the softmax as one int16 per score position and
    example (the heads' bits), not as a byte per score; a CPU's keeps it behind a
    conditional, a TPU's recomputes it."""
    gpu = _step_hlo("gpu", "mixed_bfloat16")
    # The heads' sum as int16 words, one per layer.
    packed = re.findall(rf"= s16\[{B},{L + P},{K}\]\S* convert\(s32\[{B},{L + P},{K}\]", gpu)
    assert len(packed) == 2
    assert " conditional(" not in gpu and " conditional(" in _step_hlo("cpu")
    assert not re.search(rf"s16\[{B},1,", _step_hlo("tpu", "mixed_bfloat16"))


@pytest.mark.xla
def test_a_gpus_window_reads_fold_no_index_into_a_constant():
    """The window read's row starts are built from 1-D ranges added onto run-time values: a
    [B, N, L + P] index folded into a literal (per layer, forward and backward) would be read
    from memory at every step and grow with the shape (tests/training/test_program_constants.py
    checks the CPU's program)."""
    from benchmarks.tools.program_constants import constant_sizes

    n_head = XLNetConfig.preset("tiny").n_head
    for _, shape in constant_sizes(_step_hlo("gpu", "mixed_bfloat16")):
        elements = np.prod([int(d) for d in re.findall(r"\d+", shape.split("[")[1])])
        assert elements < B * n_head * (L + P), shape


def test_the_position_products_gradient_is_the_einsums():
    """`grouped_position_product` changes only the order of the backward products."""
    from xlnet_tf2.layers.xlnet_block import grouped_position_product

    rng = np.random.default_rng(6)
    queries = tf.constant(rng.normal(size=(2, 3, N, 5, H)))           # [X, B/X, N, S, H]
    k_r = tf.constant(rng.normal(size=(2, 7, N, H)))                  # [X, T, N, H]
    upstream = tf.constant(rng.normal(size=(2, 3, N, 5, 7)))
    grads = []
    for product in (grouped_position_product,
                    lambda q, k: tf.einsum("xbnsh,xtnh->xbnst", q, k)):
        with tf.GradientTape() as tape:
            tape.watch([queries, k_r])
            total = tf.reduce_sum(product(queries, k_r) * upstream)
        grads.append([g.numpy() for g in tape.gradient(total, [queries, k_r])])
    for ours, theirs in zip(*grads):
        np.testing.assert_allclose(ours, theirs, rtol=1e-12)
