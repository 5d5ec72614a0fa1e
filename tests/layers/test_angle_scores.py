"""layers/kernels/angle_scores.py: the position scores as a product with an angle table (the
TPU's form, no rel-shift) against the shift form, the reference, in float32."""

import re

import numpy as np
import pytest
import tensorflow as tf

from xlnet_tf2 import XLNetConfig, XLNetLMHeadModel
from xlnet_tf2.layers import RelativeAttention, build_attention_masks, segment_matrix
from xlnet_tf2.layers.dropout import assign_dropout_salts
from xlnet_tf2.layers.step_plan import keyed_plan
from xlnet_tf2.layers.kernels.angle_scores import angle_table
from xlnet_tf2.layers.relative_position import relative_position_encoding
from xlnet_tf2.layers.step_plan import StepPlan

B, L, M, P, D, N, H = 4, 6, 5, 3, 16, 2, 8
K = M + L
POSITIONS = np.array([[0, 2, 5], [1, 4, 3], [5, 0, 2], [3, 1, 4]], np.int32)


def _relative(a, b):
    """max |a - b| over max |b|."""
    return float(np.abs(a - b).max() / np.abs(b).max())


@pytest.mark.parametrize("bi_data", [False, True])
def test_a_two_stream_layer_with_memory_gives_the_shift_forms_values_and_gradients(bi_data):
    rng = np.random.default_rng(0)
    layer = RelativeAttention(d_model=D, n_head=N, d_head=H)
    segment_ids = np.array([[0, 0, 0, 1, 1, 1]] * B, np.int32)
    content_mask, query_mask = build_attention_masks(
        batch_size=B, q_len=L, m_len=M, attn_type="bi", same_length=False,
        perm_mask=(rng.random((B, L, L)) < 0.4).astype(np.float32))
    inputs = dict(
        h=tf.constant(rng.normal(size=(B, L, D)), tf.float32),
        g=tf.constant(rng.normal(size=(B, P, D)), tf.float32),
        mems=tf.constant(rng.normal(size=(B, M, D)), tf.float32),
        content_mask=content_mask, query_mask=tf.gather(query_mask, POSITIONS, batch_dims=1),
        segment_mismatch=segment_matrix(segment_ids, M),
        query_segment_mismatch=segment_matrix(
            segment_ids, M, query_segment_ids=np.take_along_axis(segment_ids, POSITIONS, 1)),
        query_positions=tf.constant(POSITIONS), query_weights=tf.ones([B, P]))
    pos_emb = relative_position_encoding(L, K, D, "bi", bi_data)
    layer(pos_emb=pos_emb, **inputs)
    for variable in layer.weights:  # scores of a few units, as in a trained model
        variable.assign(rng.normal(scale=0.5, size=variable.shape))

    def run(**position):
        with tf.GradientTape() as tape:
            tape.watch([inputs["h"], inputs["g"]])
            h_out, g_out = layer(**inputs, **position)
            total = tf.reduce_sum(h_out * h_out) + tf.reduce_sum(tf.sin(g_out))
        grads = tape.gradient(total, [inputs["h"], inputs["g"]] + layer.trainable_variables)
        return [h_out.numpy(), g_out.numpy()] + [np.asarray(g) for g in grads]

    shift = run(pos_emb=pos_emb)
    angles = run(pos_emb=None, angle_table=angle_table(K, D),
                 direction_groups=2 if bi_data else 1)
    for got, want in zip(angles, shift):
        assert _relative(got, want) < 1e-5


def _lm_inputs(config, rng, two_streams=True):
    inputs = {"input_ids": rng.integers(9, config.n_token, (B, L)).astype(np.int32),
              "segment_ids": np.array([[0, 0, 0, 1, 1, 1]] * B, np.int32),
              "mems": [rng.normal(size=(B, M, config.d_model)).astype(np.float32)]
              * config.n_layer}
    if two_streams:
        mapping = np.zeros((B, P, L), np.float32)
        for b in range(B):
            mapping[b, np.arange(P), POSITIONS[b]] = 1.0
        inputs.update(perm_mask=(rng.random((B, L, L)) < 0.4).astype(np.float32),
                      target_mapping=mapping)
    return inputs


@pytest.mark.parametrize("settings", [
    dict(bi_data=True), dict(bi_data=False), dict(attn_type="uni"),
    dict(attn_type="uni", same_length=True)], ids=["bi_data", "forward", "uni", "same_length"])
def test_the_lm_with_the_angle_form_forced_on_a_cpu_gives_the_shift_forms_logits(settings):
    """Both streams, memory, segments; unidirectional attention too (its future keys read
    unrelated values in the shift form and true ones here: both masked)."""
    config = XLNetConfig.preset("tiny", n_token=60, n_layer=2, mem_len=M, reuse_len=3,
                                **settings)
    model = XLNetLMHeadModel(config)
    model.build()
    inputs = _lm_inputs(config, np.random.default_rng(1))
    shift = model(inputs, plan=StepPlan(position_scores="shift"))
    angles = model(inputs, plan=StepPlan(position_scores="angles"))
    assert _relative(angles["logits"].numpy(), shift["logits"].numpy()) < 1e-5
    for got, want in zip(angles["new_mems"], shift["new_mems"]):
        assert _relative(got.numpy(), want.numpy()) < 1e-5


def _training_step(model, inputs, plan):
    @tf.function(jit_compile=True)
    def step(inputs, global_step):
        keyed = keyed_plan(seed=2, step=global_step, example_ids=tf.range(B),
                           examples_per_step=B, plan=plan)
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(model(inputs, training=True, plan=keyed)["logits"] ** 2)
        return [loss] + tape.gradient(loss, model.trainable_variables)
    return step, (inputs, tf.constant(3, tf.int64))


@pytest.mark.xla
def test_the_shift_stays_where_the_table_is_not_the_embedding():
    """clamp_len, and training with dropout (on the position embedding too): a TPU's plan then
    traces the shift, the same program as a plan that asks for it."""
    rng = np.random.default_rng(2)
    for settings in (dict(clamp_len=3), dict(dropout=0.1)):
        config = XLNetConfig.preset("tiny", n_token=60, n_layer=1, mem_len=M, **settings)
        model = XLNetLMHeadModel(config)
        model.build()
        assign_dropout_salts(model)
        inputs = _lm_inputs(config, rng)
        programs = []
        for form in ("auto", "shift"):
            step, args = _training_step(model, inputs, StepPlan(device="tpu",
                                                                position_scores=form))
            text = step.experimental_get_compiler_ir(*args)(stage="hlo")
            programs.append(sorted(re.findall(r"= (\S+\[[\d,]*\])\S* (\w+)\(", text)))
        assert programs[0] == programs[1], settings


@pytest.mark.xla
def test_a_tpus_training_step_without_dropout_has_no_t_wide_scores_and_the_same_gradients():
    """The TPU's plan takes the angle form: no [B, N, rows, T] position scores in its program,
    and the step (loss and every gradient) is the shift form's."""
    config = XLNetConfig.preset("tiny", n_token=60, n_layer=2, mem_len=M, bi_data=True,
                                dropout=0.0, dropatt=0.1)
    model = XLNetLMHeadModel(config)
    model.build()
    assign_dropout_salts(model)
    inputs = _lm_inputs(config, np.random.default_rng(3))
    results, texts = {}, {}
    for form in ("auto", "shift"):
        step, args = _training_step(model, inputs, StepPlan(device="tpu", position_scores=form))
        results[form] = [np.asarray(t) for t in step(*args)]
        texts[form] = step.experimental_get_compiler_ir(*args)(stage="hlo")
    t_wide = rf"\[{B},{config.n_head},(?:{L}|{P}),{K + L}\]"
    assert re.search(t_wide, texts["shift"]) and not re.search(t_wide, texts["auto"])
    for got, want in zip(results["auto"], results["shift"]):
        assert _relative(got, want) < 1e-5
