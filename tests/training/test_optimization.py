"""AdamW variant, schedule and structural weight-decay exemptions (docs/SEMANTICS.md#optimizer)."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from xlnet_tf2.config import XLNetConfig
from xlnet_tf2.models import XLNetLMHeadModel
from xlnet_tf2.training.optimization import (create_optimizer, decay_exempt_variables,
                                             describe_optimizer, resolve_bias_correction,
                                             warmup_warning)
from xlnet_tf2.training.step import (GROUPED_MAX_ELEMENTS, NORM_GROUP_SIZE, UPDATE_GROUP_SIZE,
                                     LinearWarmupLinearDecay, XLNetAdamW, apply_gradients,
                                     global_norm, update_groups)


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


def test_global_norm_on_a_cpu_is_tf_global_norm_and_on_an_accelerator_agrees_to_rounding():
    """The CPU's form is tf.linalg.global_norm bit for bit; an accelerator's (sums of squares of
    concatenations, over more tensors than one concatenation holds) the same to float32
    rounding. None entries are skipped, IndexedSlices count by their values."""
    rng = np.random.RandomState(0)
    shapes = [(3, 5), (7,), (2, 3, 4), (1,)] * (NORM_GROUP_SIZE // 2)
    tensors = [tf.constant(rng.normal(size=s).astype(np.float32)) for s in shapes]
    sliced = tf.IndexedSlices(tf.constant(rng.normal(size=[2, 5]).astype(np.float32)),
                              tf.constant([0, 3]), tf.constant([6, 5]))
    given = tensors + [None, sliced]
    exact = np.sqrt(sum(np.sum(np.square(t.numpy().astype(np.float64)))
                        for t in tensors + [sliced.values]))
    cpu = global_norm(given)
    assert cpu.dtype == tf.float32
    assert float(cpu) == float(tf.linalg.global_norm(tensors + [sliced]))
    accelerator = global_norm(given, grouped=True)
    assert float(global_norm([], grouped=True)) == 0.0
    assert float(accelerator) == pytest.approx(exact, rel=1e-6)
    assert float(accelerator) == pytest.approx(float(cpu), rel=1e-6)


def test_update_groups():
    """Equal-sized variables of rank <= 2 and at most GROUPED_MAX_ELEMENTS elements in groups of
    at most UPDATE_GROUP_SIZE, in order; the others alone."""
    shapes = [(4, 2), (8,), (3,), (2, 4), (8, 1), (3,)] + [(5,)] * (UPDATE_GROUP_SIZE + 1)
    variables = [tf.zeros(s) for s in shapes] + [tf.zeros([8], tf.float64), tf.zeros([2, 2, 2]),
                                                  tf.zeros([GROUPED_MAX_ELEMENTS + 1])]
    fives = list(range(6, 6 + UPDATE_GROUP_SIZE + 1))
    last = len(shapes)
    assert list(update_groups(variables)) == [
        [0, 1, 3, 4], [2, 5], fives[:-1], fives[-1:], [last], [last + 1], [last + 2]]


def _lm_and_optimizer(bias_correction, loss_scaling=False):
    """A tiny LM whose 64-element variables (LayerNorms, dense biases, attention biases) make
    more than one group, with decay exemptions and a learning-rate multiplier per layer."""
    keras.utils.set_random_seed(1)
    model = XLNetLMHeadModel(XLNetConfig.preset("tiny"))
    model.build()
    multipliers = {id(v): 0.5 for v in model.transformer.layer_0.trainable_variables}
    optimizer, _ = create_optimizer(model, learning_rate=0.01, warmup_steps=1, total_steps=10,
                                    weight_decay=0.01, epsilon=1e-6,
                                    bias_correction=bias_correction, loss_scaling=loss_scaling,
                                    lr_multipliers=multipliers)
    return model, optimizer


def _state(model, optimizer):
    return [v.numpy() for v in model.trainable_variables + list(optimizer.variables)]


@pytest.mark.parametrize("bias_correction", [False, True])
def test_an_accelerators_grouped_update_is_the_per_variable_update_bit_for_bit(
        bias_correction, monkeypatch):
    """The update an accelerator traces (gradient terms computed on one concatenation per
    group of equal-sized variables, each variable reading its slice) gives the weights and
    slots of the per-variable update bit for bit, with decay exemptions, lr multipliers and
    bias correction; the CPU traces the per-variable form."""
    grouped_calls = []
    original = XLNetAdamW._grouped_update_step
    monkeypatch.setattr(XLNetAdamW, "_grouped_update_step",
                        lambda self, *a: (grouped_calls.append(1), original(self, *a))[1])
    results = {}
    for target in ("cpu", "gpu"):
        model, optimizer = _lm_and_optimizer(bias_correction)
        groups = list(update_groups(model.trainable_variables))
        assert UPDATE_GROUP_SIZE in [len(g) for g in groups] and sum(len(g) > 1 for g in groups) > 2
        rng = np.random.RandomState(2)
        for _ in range(3):
            grads = [tf.constant(rng.normal(size=v.shape).astype(np.float32))
                     for v in model.trainable_variables]
            apply_gradients(optimizer, grads, model.trainable_variables, target == "gpu")
        results[target] = _state(model, optimizer)
    assert len(grouped_calls) == 3  # the gpu runs only
    for cpu, gpu in zip(results["cpu"], results["gpu"]):
        np.testing.assert_array_equal(gpu, cpu)


def test_grouped_update_under_loss_scaling():
    """mixed_float16's LossScaleOptimizer around the grouped update: a finite step equals the
    per-variable form's bit for bit, an overflowing one is skipped (weights unchanged, scale
    halved) as there."""
    results = {}
    for target in ("cpu", "gpu"):
        model, optimizer = _lm_and_optimizer(False, loss_scaling=True)
        variables = model.trainable_variables
        rng = np.random.RandomState(3)
        scale = float(optimizer.dynamic_scale)
        grads = [tf.constant(rng.normal(size=v.shape).astype(np.float32) * scale)
                 for v in variables]
        apply_gradients(optimizer, grads, variables, target == "gpu")
        finite = [v.numpy() for v in variables]
        apply_gradients(optimizer, [g * float("inf") for g in grads], variables, target == "gpu")
        for before, v in zip(finite, variables):
            np.testing.assert_array_equal(v.numpy(), before)
        assert float(optimizer.dynamic_scale) == scale / 2
        results[target] = finite
    for cpu, gpu in zip(results["cpu"], results["gpu"]):
        np.testing.assert_array_equal(gpu, cpu)


@pytest.mark.xla
def test_grouped_update_compiled_by_xla_is_the_per_variable_update():
    """Both forms of the update inside one XLA computation (jit_compile on this CPU): the same
    weights and slots bit for bit, over groups larger than UPDATE_GROUP_SIZE."""
    shapes = [(4, 3)] * (UPDATE_GROUP_SIZE + 3) + [(12,), (2, 6), (5,)]
    rng = np.random.RandomState(4)
    initial = [rng.normal(size=s).astype(np.float32) for s in shapes]
    grads = [tf.constant(rng.normal(size=s).astype(np.float32)) for s in shapes]
    results = {}
    for target in ("cpu", "gpu"):
        variables = [tf.Variable(w) for w in initial]
        optimizer = XLNetAdamW(learning_rate=0.01, epsilon=1e-6, weight_decay=0.01)
        optimizer.exclude_from_weight_decay(var_list=variables[-2:])
        optimizer.set_lr_multipliers({id(variables[0]): 0.5})
        optimizer.build(variables)
        step = tf.function(lambda g: apply_gradients(optimizer, g, variables, target == "gpu"),
                           jit_compile=True)
        for _ in range(2):
            step(grads)
        results[target] = [v.numpy() for v in variables + list(optimizer.variables)]
    for cpu, gpu in zip(results["cpu"], results["gpu"]):
        np.testing.assert_array_equal(gpu, cpu)
