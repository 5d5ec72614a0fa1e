"""AdamW variant, schedule and structural weight-decay exemptions (XLNET_REFERENCE.md §5)."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from xlnet_tf2.config import XLNetConfig
from xlnet_tf2.models import XLNetLMHeadModel
from xlnet_tf2.training.optimization import (LinearWarmupLinearDecay, XLNetAdamW,
                                             create_optimizer, decay_exempt_variables)


def test_schedule_hand_values():
    s = LinearWarmupLinearDecay(1.0, warmup_steps=4, total_steps=12)
    got = [float(s(i)) for i in (0, 1, 2, 4, 8, 12, 20)]
    assert got == pytest.approx([0.0, 0.25, 0.5, 1.0, 0.5, 0.0, 0.0])
    no_warmup = LinearWarmupLinearDecay(2.0, warmup_steps=0, total_steps=4)
    assert [float(no_warmup(i)) for i in (0, 2, 4)] == pytest.approx([2.0, 1.0, 0.0])


def _numpy_adamw(w, grads, lr, wd, eps, decay, bias_correction):
    m = np.zeros_like(w)
    v = np.zeros_like(w)
    for t, g in enumerate(grads, start=1):
        if decay:
            w = w - lr * wd * w
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        mh, vh = (m / (1 - 0.9 ** t), v / (1 - 0.999 ** t)) if bias_correction else (m, v)
        w = w - lr * mh / (np.sqrt(vh) + eps)
    return w


@pytest.mark.parametrize("bias_correction", [False, True])
def test_adamw_matches_hand_computation(bias_correction):
    w0 = np.array([0.5, -1.0, 2.0], np.float32)
    b0 = np.array([0.3, 0.1], np.float32)
    grads = [np.array([0.1, -0.2, 0.3], np.float32), np.array([-0.05, 0.4, 0.0], np.float32)]
    bgrads = [np.array([1.0, -1.0], np.float32), np.array([0.5, 0.5], np.float32)]
    w, b = tf.Variable(w0), tf.Variable(b0)
    opt = XLNetAdamW(learning_rate=0.1, epsilon=1e-6, weight_decay=0.01,
                     bias_correction=bias_correction)
    opt.exclude_from_weight_decay(var_list=[b])
    opt.build([w, b])
    for g, bg in zip(grads, bgrads):
        opt.apply([tf.constant(g), tf.constant(bg)], [w, b])
    np.testing.assert_allclose(w.numpy(), _numpy_adamw(w0, grads, 0.1, 0.01, 1e-6, True,
                                                       bias_correction), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(b.numpy(), _numpy_adamw(b0, bgrads, 0.1, 0.01, 1e-6, False,
                                                       bias_correction), rtol=1e-5, atol=1e-5)


def test_bias_corrected_variant_equals_keras_adamw():
    w0 = np.linspace(-1, 1, 6).astype(np.float32)
    grads = [np.sin(np.arange(6) + k).astype(np.float32) for k in range(3)]
    ours, theirs = tf.Variable(w0), tf.Variable(w0)
    a = XLNetAdamW(learning_rate=0.01, epsilon=1e-7, weight_decay=0.1, bias_correction=True)
    k = keras.optimizers.AdamW(learning_rate=0.01, epsilon=1e-7, weight_decay=0.1)
    for g in grads:
        a.apply([tf.constant(g)], [ours])
        k.apply([tf.constant(g)], [theirs])
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-5, atol=1e-7)


def test_decay_exemptions_are_structural():
    model = XLNetLMHeadModel(XLNetConfig.preset("tiny"))
    model.build()
    exempt = {id(v) for v in decay_exempt_variables(model)}
    block = model.transformer.layer_0
    expected_exempt = [block.rel_attn.layer_norm.gamma, block.rel_attn.layer_norm.beta,
                       block.ff.layer_norm.gamma, block.ff.layer_norm.beta,
                       block.ff.layer_1.bias, block.ff.layer_2.bias, model.lm_bias]
    expected_decayed = [block.rel_attn.q, block.rel_attn.r_w_bias, block.rel_attn.r_r_bias,
                        block.rel_attn.r_s_bias, block.rel_attn.seg_embed,
                        block.ff.layer_1.kernel, model.transformer.word_embedding.embeddings,
                        model.transformer.mask_emb]
    assert all(id(v) in exempt for v in expected_exempt)
    assert not any(id(v) in exempt for v in expected_decayed)
    # 2 layers x (2 LayerNorms x 2 + 2 dense biases) + lm_bias
    assert len(exempt) == 2 * 6 + 1


def test_weight_decay_only_moves_decayed_variables():
    """With zero gradients only weight decay acts: exempt variables must not change."""
    model = XLNetLMHeadModel(XLNetConfig.preset("tiny"))
    model.build()
    model.lm_bias.assign(tf.ones_like(model.lm_bias))
    opt, _ = create_optimizer(model, learning_rate=0.1, warmup_steps=0, total_steps=10,
                              weight_decay=0.5, epsilon=1e-6)
    before = [v.numpy() for v in model.trainable_variables]
    opt.apply([tf.zeros_like(v) for v in model.trainable_variables], model.trainable_variables)
    exempt = {id(v) for v in decay_exempt_variables(model)}
    for v, old in zip(model.trainable_variables, before):
        if id(v) in exempt:
            np.testing.assert_array_equal(v.numpy(), old)
        else:
            np.testing.assert_allclose(v.numpy(), old * (1 - 0.1 * 0.5), rtol=1e-6)
