"""The attention's narrow paths: the query stream's shift without an index tensor of the score's
size (values, gradients, the compiled program) and the narrow softmax's gradient."""

import re

import keras
import numpy as np
import pytest
import tensorflow as tf

from xlnet_tf2 import XLNetConfig, XLNetLMHeadModel
from xlnet_tf2.layers import gather_relative_scores
from xlnet_tf2.layers.xlnet_block import RelativeAttention, masked_softmax
from xlnet_tf2.layers.step_plan import StepPlan

B, N, P, L, M = 2, 3, 4, 6, 4
K = M + L
POSITIONS = np.array([[0, 2, 5, 3], [1, 4, 2, 5]], np.int32)


def _windows(x, positions, width):
    """Numpy: out[b, n, p, j] = x[b, n, p, L - i_p + j], zero past x's last column."""
    out = np.zeros(x.shape[:3] + (width,), x.dtype)
    for b in range(x.shape[0]):
        for p in range(x.shape[2]):
            start = L - positions[b, p]
            part = x[b, :, p, start:start + width]
            out[b, :, p, :part.shape[-1]] = part
    return out


def _put_back(dy, positions, t_len):
    """Numpy: the gradient of `_windows`: each window's values back at its columns."""
    dx = np.zeros(dy.shape[:3] + (t_len,), dy.dtype)
    for b in range(dy.shape[0]):
        for p in range(dy.shape[2]):
            start = L - positions[b, p]
            visible = min(K, t_len - start)
            dx[b, :, p, start:start + visible] = dy[b, :, p, :visible]
    return dx


@pytest.fixture(params=["window_read", "coordinate_gather"])
def shift_path(request):
    """Both forms of the query stream's shift, each traced for a device that uses it
    (layers/step_plan.py): the window read (GPU, TPU) and the gather with every element's
    coordinates (CPU); the plan that picks it."""
    target = {"window_read": "gpu", "coordinate_gather": "cpu"}
    return StepPlan(device=target[request.param])


@pytest.mark.xla
@pytest.mark.parametrize("t_len", [K + L, K + 1], ids=["bi", "uni"])
@pytest.mark.parametrize("jit", [False, True])
def test_query_stream_shift_values_and_gradient(t_len, jit, shift_path):
    rng = np.random.default_rng(0)
    scores = rng.normal(size=(B, N, P, t_len)).astype(np.float32)
    upstream = rng.normal(size=(B, N, P, K)).astype(np.float32)
    # Entries past T are never visible (masked: no gradient reaches them); their values are
    # left unspecified.
    visible = (L - POSITIONS)[:, None, :, None] + np.arange(K) < t_len  # [B, 1, P, K]
    upstream = np.where(visible, upstream, 0.0).astype(np.float32)

    def run(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            out = gather_relative_scores(x, tf.constant(POSITIONS), q_len=L, k_len=K,
                                         plan=shift_path)
            total = tf.reduce_sum(out * upstream)
        return out, tape.gradient(total, x)

    out, grad = (tf.function(run, jit_compile=True) if jit else run)(tf.constant(scores))
    visible = np.broadcast_to(visible, out.shape)
    np.testing.assert_array_equal(out.numpy()[visible], _windows(scores, POSITIONS, K)[visible])
    np.testing.assert_array_equal(grad.numpy(), _put_back(upstream, POSITIONS, t_len))


def test_query_stream_shift_with_an_unknown_batch(shift_path):
    """A batch unknown when the step is traced (multi-worker input): the index is int64."""
    rng = np.random.default_rng(5)
    scores = rng.normal(size=(B, N, P, K + L)).astype(np.float32)
    upstream = rng.normal(size=(B, N, P, K)).astype(np.float32)

    @tf.function(input_signature=[tf.TensorSpec([None, N, P, K + L], tf.float32),
                                  tf.TensorSpec([None, P], tf.int32)])
    def run(x, positions):
        with tf.GradientTape() as tape:
            tape.watch(x)
            out = gather_relative_scores(x, positions, q_len=L, k_len=K, plan=shift_path)
            total = tf.reduce_sum(out * upstream)
        return out, tape.gradient(total, x)

    out, grad = run(tf.constant(scores), tf.constant(POSITIONS))
    np.testing.assert_array_equal(out.numpy(), _windows(scores, POSITIONS, K))
    np.testing.assert_array_equal(grad.numpy(), _put_back(upstream, POSITIONS, K + L))


def test_query_stream_shift_in_bfloat16_is_exact(shift_path):
    rng = np.random.default_rng(1)
    scores = tf.cast(tf.constant(rng.normal(size=(B, N, P, K + L)), tf.float32), tf.bfloat16)
    out = gather_relative_scores(scores, tf.constant(POSITIONS), q_len=L, k_len=K,
                                 plan=shift_path)
    assert out.dtype == tf.bfloat16
    np.testing.assert_array_equal(tf.cast(out, tf.float32).numpy(),
                                  _windows(tf.cast(scores, tf.float32).numpy(), POSITIONS, K))


def _gathers_and_scatters(hlo):
    """(index shapes of every gather, number of scatters) in HLO text."""
    indices = [tuple(int(d) for d in m.group(1).split(",") if d)
               for m in re.finditer(r" gather\([^)\n]*?, s(?:32|64)\[([\d,]*)\]", hlo)]
    return indices, len(re.findall(r" scatter\(", hlo))


def _two_stream_step_hlo(target):
    """The HLO of a jit-compiled training step (forward and backward) of one two-stream
    RelativeAttention layer, traced for `target`."""
    layer = RelativeAttention(d_model=16, n_head=N, d_head=8, dropatt=0.1)
    rng = np.random.default_rng(2)
    h = tf.constant(rng.normal(size=(B, L, 16)), tf.float32)
    g = tf.constant(rng.normal(size=(B, P, 16)), tf.float32)
    mems = tf.constant(rng.normal(size=(B, M, 16)), tf.float32)
    pos_emb = tf.constant(rng.normal(size=(2, K + L, 16)), tf.float32)
    content_mask = tf.constant(rng.random((B, L, K)) < 0.3)
    query_mask = tf.constant(rng.random((B, P, K)) < 0.3)
    layer(h, pos_emb, g=g, mems=mems, query_positions=tf.constant(POSITIONS),
          query_weights=tf.ones([B, P]))

    @tf.function(jit_compile=True)
    def step(h, g):
        with tf.GradientTape() as tape:
            tape.watch([h, g])
            h_out, g_out = layer(h, pos_emb, g=g, mems=mems, content_mask=content_mask,
                                 query_mask=query_mask, query_positions=tf.constant(POSITIONS),
                                 query_weights=tf.ones([B, P]), training=True,
                                 plan=StepPlan(device=target))
            total = tf.reduce_sum(h_out) + tf.reduce_sum(g_out * g_out)
        return tape.gradient(total, [h, g] + layer.trainable_variables)

    return step.experimental_get_compiler_ir(h, g)(stage="hlo")


@pytest.mark.xla
def test_two_stream_step_compiles_without_score_sized_gather_index():
    """Off a CPU the query stream once gathered with an s32[B, N, P, K, 4] index (batch
    coordinates included) and scattered its gradient back; neither may come back there. On
    a GPU both streams' shifts are one window read of the L + P stacked rows (one index per
    element)."""
    indices, scatters = _gathers_and_scatters(_two_stream_step_hlo("gpu"))
    assert indices, "the GPU's shift should be a gather"
    assert all(len(shape) <= 4 for shape in indices), indices
    assert (B, N, L + P, K) in indices  # the forward window read: one index per element
    assert scatters == 0


@pytest.mark.parametrize("dtype", [tf.bfloat16, tf.float16])
def test_masked_softmax_matches_float32_softmax_and_its_gradient(dtype):
    rng = np.random.default_rng(3)
    scores32 = rng.normal(scale=4.0, size=(B, N, L, K)).astype(np.float32)
    mask = rng.random((B, L, K)) < 0.4
    mask[0, 1] = True  # a fully blocked row: uniform probabilities, no gradient
    mask[1, 2] = False
    upstream = rng.normal(size=(B, N, L, K)).astype(np.float32)
    scale = 0.125
    narrow = tf.cast(tf.constant(scores32), dtype)

    with tf.GradientTape() as tape:
        tape.watch(narrow)
        probs = masked_softmax(narrow, tf.constant(mask), scale)
        total = tf.reduce_sum(tf.cast(probs, tf.float32) * upstream)
    grad = tape.gradient(total, narrow)

    wide = tf.constant(tf.cast(narrow, tf.float32).numpy())  # the same rounded scores
    with tf.GradientTape() as tape:
        tape.watch(wide)
        reference = tf.nn.softmax(tf.where(mask[:, None], -1e30, wide * scale), axis=-1)
        total = tf.reduce_sum(reference * upstream)
    reference_grad = tape.gradient(total, wide).numpy()

    assert probs.dtype == dtype and grad.dtype == dtype
    # Forward: the float32 softmax, rounded once.
    np.testing.assert_array_equal(probs.numpy(), tf.cast(reference, dtype).numpy())
    np.testing.assert_allclose(probs.numpy().astype(np.float32)[0, :, 1], 1.0 / K, rtol=1e-2)
    grad = grad.numpy().astype(np.float32)
    assert np.all(np.isfinite(grad))
    assert np.all(grad[np.broadcast_to(mask[:, None], grad.shape)] == 0)
    # Backward: from the rounded probabilities, into a rounded result: a few units of the
    # narrow dtype's roundoff (2**-9 bfloat16, 2**-12 float16) of the largest gradient.
    # Over four draws of this shape TensorFlow's own gradient (float32 probabilities,
    # rounded result) was off by up to 0.004 (bfloat16) and 0.0005 (float16), this one by up
    # to 0.008 and 0.0007.
    tolerance = 2.0 ** -6 if dtype == tf.bfloat16 else 2.0 ** -9
    error = np.abs(grad - reference_grad).max() / np.abs(reference_grad).max()
    assert error < tolerance, error


@pytest.mark.xla
def test_mixed_bfloat16_loss_and_gradient_track_float32():
    """The accelerator check's criterion at a tiny shape: the first-step loss under
    mixed_bfloat16 within 1% of float32's (the narrow softmax changes only the backward pass,
    so the gradient's norm and direction are checked as well)."""
    config = XLNetConfig.preset("tiny", n_token=101, mem_len=6, reuse_len=4, bi_data=True)
    rng = np.random.default_rng(4)
    b, length, n_predict = 4, 12, 4
    target_mapping = np.zeros((b, n_predict, length), np.float32)
    target_mapping[:, np.arange(n_predict), [1, 4, 7, 10]] = 1.0
    inputs = {"input_ids": rng.integers(0, 101, (b, length)).astype(np.int32),
              "segment_ids": (np.arange(length)[None] >= 7).astype(np.int32).repeat(b, 0),
              "perm_mask": (rng.random((b, length, length)) < 0.4).astype(np.float32),
              "target_mapping": target_mapping,
              "mems": [rng.normal(size=(b, 6, 64)).astype(np.float32) for _ in range(2)]}
    target = tf.constant(rng.integers(0, 101, (b, n_predict)).astype(np.int32))

    def loss_and_grads(policy, weights):
        keras.mixed_precision.set_global_policy(policy)
        try:
            model = XLNetLMHeadModel(config)
            model.build()
        finally:
            keras.mixed_precision.set_global_policy("float32")
        if weights is not None:
            model.set_weights(weights)

        @tf.function(jit_compile=True)
        def step(features):
            with tf.GradientTape() as tape:
                logits = model(features, training=False)["logits"]
                loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
                    labels=target, logits=logits))
            grads = tape.gradient(loss, model.trainable_variables)
            return loss, tf.concat([tf.reshape(tf.cast(g, tf.float32), [-1]) for g in grads], 0)

        loss, grads = step(inputs)
        return model.get_weights(), float(loss), grads.numpy()

    weights, loss32, grads32 = loss_and_grads("float32", None)
    _, loss16, grads16 = loss_and_grads("mixed_bfloat16", weights)
    assert abs(loss16 - loss32) <= 0.01 * abs(loss32), (loss16, loss32)
    norm32, norm16 = np.linalg.norm(grads32), np.linalg.norm(grads16)
    assert abs(norm16 - norm32) <= 0.02 * norm32, (norm16, norm32)
    assert grads16 @ grads32 / (norm16 * norm32) > 0.999
