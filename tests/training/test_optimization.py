"""AdamW variant, schedule and structural weight-decay exemptions (docs/SEMANTICS.md#optimizer)."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from xlnet_tf2.config import XLNetConfig
from xlnet_tf2.models import XLNetLMHeadModel
from xlnet_tf2.training.optimization import (LinearWarmupLinearDecay, XLNetAdamW,
                                             create_optimizer, decay_exempt_variables,
                                             describe_optimizer, resolve_bias_correction,
                                             warmup_warning)


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
        # tf.train.AdamOptimizer's form when corrected: lr_t = lr sqrt(1 - b2^t) / (1 - b1^t)
        step = lr * np.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t) if bias_correction else lr
        w = w - step * m / (np.sqrt(v) + eps)
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
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("weight_decay, override, expected", [
    (0.01, None, False),   # the original's AdamWeightDecayOptimizer: no correction
    (0.0, None, True),     # the original's tf.train.AdamOptimizer at weight decay 0
    (0.01, True, True),    # --adam_bias_correction=true
    (0.0, False, False),   # --adam_bias_correction=false
])
def test_bias_correction_follows_the_original_rule_and_sizes_the_first_update(
        weight_decay, override, expected):
    """get_train_op's rule, and what it means on step 1: Adam's first update of a variable
    exempt from decay is lr * g / |g| with bias correction and 0.1 / sqrt(0.001) = 3.16 times
    that without."""
    assert resolve_bias_correction(override, weight_decay) is expected
    line = describe_optimizer(override, weight_decay)
    assert f"bias correction {'on' if expected else 'off'}" in line
    model = keras.Sequential([keras.Input([2]), keras.layers.Dense(1)])
    optimizer, _ = create_optimizer(model, learning_rate=1e-3, warmup_steps=0, total_steps=10,
                                    weight_decay=weight_decay, epsilon=1e-6,
                                    bias_correction=override)
    assert optimizer.bias_correction is expected
    bias = model.layers[0].bias  # exempt from decay: the step is Adam's alone
    before = bias.numpy().copy()
    grads = [tf.zeros_like(model.layers[0].kernel), tf.constant([0.25])]
    optimizer.apply(grads, [model.layers[0].kernel, bias])
    first_update = float(before[0] - bias.numpy()[0])
    g, eps = 0.25, 1e-6
    uncorrected = 1e-3 * 0.1 * g / (np.sqrt(0.001) * g + eps)      # about 3.16e-3
    corrected = uncorrected * np.sqrt(0.001) / 0.1                     # about 1e-3
    assert first_update == pytest.approx(corrected if expected else uncorrected, rel=1e-5)
    assert uncorrected / corrected == pytest.approx(3.1623, rel=1e-4)


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


def test_a_warmup_longer_than_the_run_is_said_in_one_line():
    """The paper's 1000 warmup steps in a 300-step run: the rate never gets past 5e-4 x 299 /
    1000 (what left a small fine-tuning run at the majority class)."""
    line = warmup_warning(5e-4, 1000, 300)
    assert "\n" not in line
    assert line.startswith("warning: --warmup_steps=1000 is not below --train_steps=300")
    assert "to 0.00015 at the last step" in line and "--learning_rate=0.0005" in line
    assert warmup_warning(5e-4, 300, 300) is not None
    assert warmup_warning(5e-4, 30, 300) is None
    assert warmup_warning(5e-4, 0, 1) is None
