"""The training step's update against a closed form: a least-squares task whose gradient is
written out in NumPy below, run through the real Trainer (training/trainer.py) for a few
steps; each step's loss and gradient norm and the weights after the last step equal the
NumPy run's to 1e-6.

The NumPy run is the original's arithmetic (its AdamWeightDecayOptimizer and
tf.train.AdamOptimizer), written from docs/SEMANTICS.md#optimizer, not from optimization.py:
  loss     = sum over real targets of (prediction - target)^2 / 2, divided by their count
             (`loss_count`: a mask, so neither the batch size nor the number of targets)
  gradient = d loss, clipped to the global norm `clip_norm` (tf.clip_by_global_norm's rule)
  rate     = linear warmup from 0 over `warmup_steps`, then linear decay to 0 at
             `train_steps`, of the count of updates applied before this one
  update   = AdamWeightDecayOptimizer's m / (sqrt(v) + eps), plus wd * weight for the
             decayed weights, times the rate; with bias correction (tf.train.AdamOptimizer,
             the original at weight decay 0) the Adam term's rate is
             rate * sqrt(1 - beta_2^t) / (1 - beta_1^t)
  exempt   = LayerNorm's gamma and beta, a Dense bias and an `lm_bias`; a weight named
             like a bias but of a score (`r_w_bias`) is decayed

Each case checks its own premise on the NumPy side (the clip binds or not, the mask's count
differs from the batch and from each micro-batch), so it proves what its name says.
"""

import dataclasses

import keras
import numpy as np
import pytest
import tensorflow as tf

from xlnet_tf2 import config_flags
from xlnet_tf2.training.run_config import LoopConfig, OptimizerConfig
from xlnet_tf2.training.task import Task
from xlnet_tf2.training.trainer import Trainer

from fixtures.toy_task import ToyConfig

B, F, T = 8, 4, 3          # batch, input features, targets per example
LN_EPSILON = 1e-3          # keras.layers.LayerNormalization's default
# Adam's betas as the step holds them, float32: 1 - 0.999 in float32 is 1.3e-5 off 0.001, which
# moves every update by 6e-6 of its size (sqrt(1 - beta_2) divides it), above the tolerance.
BETA_1, BETA_2 = float(np.float32(0.9)), float(np.float32(0.999))


class Offsets(keras.layers.Layer):
    """y + lm_bias + r_w_bias: two [T] weights of the same gradient, one exempt from weight
    decay by attribute (the LM head's output bias), one decayed although its name says bias
    (as the attention's score biases are)."""

    def build(self, input_shape):
        self.lm_bias = self.add_weight(shape=[T], initializer="zeros", name="lm_bias")
        self.score_bias = self.add_weight(shape=[T], initializer="zeros", name="r_w_bias")

    def call(self, y):
        return y + self.lm_bias + self.score_bias


# The model's weights in order (model.weights): LayerNorm gamma [F], beta [F], Dense kernel
# [F, T], bias [T], Offsets' lm_bias [T], r_w_bias [T]; decayed or not.
NAMES = ("gamma", "beta", "kernel", "bias", "lm_bias", "r_w_bias")
DECAYED = {"kernel": True, "r_w_bias": True}


def initial_weights():
    rng = np.random.RandomState(7)
    return {"gamma": 1.0 + 0.3 * rng.normal(size=[F]), "beta": 0.5 * rng.normal(size=[F]),
            "kernel": rng.normal(size=[F, T]), "bias": 0.5 * rng.normal(size=[T]),
            "lm_bias": 0.5 * rng.normal(size=[T]), "r_w_bias": 0.5 * rng.normal(size=[T])}


def batches(steps):
    """Per step: x [B, F], y [B, T], mask [B, T] (1: a real target). Each batch's count of
    real targets differs from B * T, from B and between its two halves (the micro-batches of
    grad_accum_steps=2)."""
    rng = np.random.RandomState(11)
    x = rng.normal(size=[steps, B, F]) * np.array([1.0, 2.0, 0.5, 3.0]) + 0.3
    y = 2.0 * rng.normal(size=[steps, B, T])
    mask = (rng.uniform(size=[steps, B, T]) < 0.6).astype(np.float64)
    mask[:, :B // 2, 0] = 1.0  # the first half holds more real targets than the second
    mask[:, B // 2:, 0] = 0.0
    return {"x": x, "y": y, "mask": mask}


class LeastSquares(Task):
    """LayerNorm(x) -> Dense(T) -> Offsets, trained on the mean of the masked half squared
    errors; batch `step` of `batches` at each step."""

    def __init__(self, config, data, weights):
        self.config, self.data, self.weights = config, data, weights

    def build_model(self):
        x = keras.Input([F])
        y = keras.layers.Dense(T)(keras.layers.LayerNormalization(epsilon=LN_EPSILON)(x))
        model = keras.Model(x, Offsets()(y))
        model.set_weights([self.weights[name].astype(np.float32) for name in NAMES])
        return model

    def build_inputs(self, input_context, start_step):
        data = {k: v.astype(np.float32) for k, v in self.data.items()}
        return tf.data.Dataset.from_tensor_slices(data).skip(start_step)

    def loss_count(self, features):
        return tf.reduce_sum(features["mask"])

    def loss(self, model, features, state, training=True, plan=None):
        error = model(features["x"]) - features["y"]
        return 0.5 * tf.reduce_sum(features["mask"] * tf.square(error)), state


# ------------------------------------------------------------------------ the closed form
def loss_and_gradients(w, x, y, mask):
    """The mean over real targets of the half squared error and its gradient, float64."""
    mean = x.mean(axis=1, keepdims=True)
    normed = (x - mean) / np.sqrt(x.var(axis=1, keepdims=True) + LN_EPSILON)   # [B, F]
    z = w["gamma"] * normed + w["beta"]
    prediction = z @ w["kernel"] + w["bias"] + w["lm_bias"] + w["r_w_bias"]   # [B, T]
    count = max(mask.sum(), 1.0)
    residual = mask * (prediction - y) / count        # d loss / d prediction
    dz = residual @ w["kernel"].T
    grads = {"gamma": (dz * normed).sum(0), "beta": dz.sum(0), "kernel": z.T @ residual,
             "bias": residual.sum(0), "lm_bias": residual.sum(0), "r_w_bias": residual.sum(0)}
    loss = 0.5 * (mask * (prediction - y) ** 2).sum() / count
    return loss, grads


def learning_rate(peak, warmup, total, applied):
    """The rate of the update after `applied` updates."""
    if applied < warmup:
        return peak * applied / warmup
    return peak * max(0.0, 1.0 - (applied - warmup) / max(total - warmup, 1))


def numpy_run(steps, *, lr, warmup, wd, eps, clip, bias_correction):
    """Per step (loss, gradient norm, rate), and the weights after `steps` steps."""
    w = initial_weights()
    m = {k: np.zeros_like(v) for k, v in w.items()}
    v = {k: np.zeros_like(v) for k, v in w.items()}
    data = batches(steps)
    records = []
    for t in range(steps):
        loss, g = loss_and_gradients(w, data["x"][t], data["y"][t], data["mask"][t])
        norm = np.sqrt(sum((gi ** 2).sum() for gi in g.values()))
        g = {k: gi * clip / max(norm, clip) for k, gi in g.items()}
        rate = learning_rate(lr, warmup, steps, t)
        adam_rate = (rate * np.sqrt(1 - BETA_2 ** (t + 1)) / (1 - BETA_1 ** (t + 1))
                     if bias_correction else rate)
        for k in w:
            m[k] = BETA_1 * m[k] + (1 - BETA_1) * g[k]
            v[k] = BETA_2 * v[k] + (1 - BETA_2) * g[k] ** 2
            decay = wd * w[k] if DECAYED.get(k) else 0.0
            w[k] = w[k] - adam_rate * m[k] / (np.sqrt(v[k]) + eps) - rate * decay
        records.append((loss, norm, rate))
    return records, w


def trainer_run(tmp_path, steps, *, lr, warmup, wd, eps, clip, bias_correction, accum=1,
                jit=False):
    loop = config_flags.from_flat(LoopConfig, dict(
        model_dir=str(tmp_path / "run"), train_steps=steps, train_batch_size=B,
        grad_accum_steps=accum, steps_per_loop=steps, log_steps=steps, save_steps=steps,
        peak_tflops=1.0, jit_compile=jit))
    optimizer = OptimizerConfig(learning_rate=lr, warmup_steps=warmup, weight_decay=wd,
                                adam_epsilon=eps, clip_norm=clip,
                                adam_bias_correction=bias_correction)
    trainer = Trainer(LeastSquares(ToyConfig(loop, optimizer), batches(steps),
                                   initial_weights()))
    result = trainer.train()
    weights = dict(zip(NAMES, (v.numpy() for v in trainer.model.weights)))
    return result.steps, weights


# name: (steps, settings). bias_correction None is the original's rule: off with weight
# decay, on at weight decay 0.
CASES = {
    "clip_binds_no_bias_correction": (3, dict(lr=0.05, warmup=0, wd=0.1, eps=1e-6, clip=0.5,
                                              bias_correction=None)),
    "clip_does_not_bind": (2, dict(lr=0.05, warmup=0, wd=0.1, eps=1e-6, clip=100.0,
                                   bias_correction=None)),
    "warmup_then_decay": (4, dict(lr=0.1, warmup=2, wd=0.1, eps=1e-6, clip=0.5,
                                  bias_correction=None)),
    "bias_correction_at_weight_decay_0": (2, dict(lr=0.05, warmup=0, wd=0.0, eps=1e-6,
                                                  clip=0.5, bias_correction=None)),
    "bias_correction_with_weight_decay": (2, dict(lr=0.05, warmup=0, wd=0.1, eps=1e-6,
                                                  clip=100.0, bias_correction=True)),
}


def check_premise(name, steps, settings, records):
    norms = [norm for _, norm, _ in records]
    clip = settings["clip"]
    if name.startswith("clip_binds") or name == "warmup_then_decay":
        # Binding at every step, by different factors: the moments then mix the steps'
        # gradients in other proportions than unclipped ones would.
        assert min(norms) > 1.5 * clip and max(norms) > 1.2 * min(norms), norms
    if clip == 100.0:
        assert max(norms) < clip, norms
    mask = batches(steps)["mask"]
    counts = mask.sum(axis=(1, 2))
    assert all(0 < c < B * T and c != B for c in counts)
    halves = mask[:, :B // 2].sum(axis=(1, 2)), mask[:, B // 2:].sum(axis=(1, 2))
    assert all(a != b for a, b in zip(*halves))


def assert_same_run(got_steps, got_weights, records, weights):
    assert [s["step"] for s in got_steps] == list(range(1, len(records) + 1))
    for got, (loss, norm, rate) in zip(got_steps, records):
        assert got["loss"] == pytest.approx(loss, rel=1e-6), got
        assert got["grad_norm"] == pytest.approx(norm, rel=1e-6), got
        assert got["learning_rate"] == pytest.approx(rate, rel=1e-6, abs=1e-12), got
    for name in NAMES:
        np.testing.assert_allclose(got_weights[name], weights[name], rtol=1e-6, atol=1e-6,
                                   err_msg=name)


@pytest.mark.parametrize("name", list(CASES))
def test_steps_equal_the_closed_form(name, tmp_path):
    steps, settings = CASES[name]
    bias_correction = (settings["wd"] == 0 if settings["bias_correction"] is None
                       else settings["bias_correction"])
    records, weights = numpy_run(steps, **{**settings, "bias_correction": bias_correction})
    check_premise(name, steps, settings, records)
    assert_same_run(*trainer_run(tmp_path, steps, **settings), records, weights)


@pytest.mark.parametrize("jit", [pytest.param(True, marks=pytest.mark.xla), False],
                         ids=["jit", "eager"])
def test_accumulated_micro_batches_equal_the_closed_form(jit, tmp_path):
    """grad_accum_steps=2: two micro-batches of unequal counts of real targets, each
    gradient of its loss over the whole batch's count, summed: the one-batch closed form.
    Compiled, the whole step (accumulation, clipping, update) is one XLA program."""
    steps, settings = CASES["clip_binds_no_bias_correction"]
    records, weights = numpy_run(steps, **{**settings, "bias_correction": False})
    check_premise("clip_binds", steps, settings, records)
    assert_same_run(*trainer_run(tmp_path, steps, accum=2, jit=jit, **settings),
                    records, weights)


def test_the_closed_form_tells_the_settings_apart():
    """The NumPy run is not blind to what the cases vary: each setting changes its weights
    by far more than the tolerance."""
    steps, base = CASES["clip_binds_no_bias_correction"]
    _, reference = numpy_run(steps, **{**base, "bias_correction": False})
    for change in (dict(clip=100.0), dict(wd=0.0), dict(bias_correction=True),
                   dict(warmup=1), dict(eps=1e-2)):
        _, other = numpy_run(steps, **{**base, "bias_correction": False, **change})
        gap = max(np.abs(other[k] - reference[k]).max() for k in NAMES)
        assert gap > 1e-4, (change, gap)
