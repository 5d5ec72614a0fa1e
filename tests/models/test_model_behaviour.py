"""Model behaviour beyond parity: config, XLA, mixed precision, serialization, errors."""

import json

import keras
import numpy as np
import pytest
import tensorflow as tf

import xlnet_tf2
from xlnet_tf2 import ConfigError, XLNetConfig, XLNetLMHeadModel

B, L, P, M = 2, 8, 3, 6


def _config(**overrides):
    return XLNetConfig.preset("tiny", n_token=101, mem_len=M, reuse_len=4, **overrides)


def _inputs(rng, n_layer=2, d_model=64):
    perm_mask = (rng.random((B, L, L)) < 0.4).astype(np.float32)
    target_mapping = np.zeros((B, P, L), np.float32)
    target_mapping[:, [0, 1, 2], [2, 5, 7]] = 1.0
    return {"input_ids": rng.integers(0, 101, (B, L)).astype(np.int32),
            "segment_ids": (np.arange(L)[None] >= 5).astype(np.int32).repeat(B, 0),
            "perm_mask": perm_mask, "target_mapping": target_mapping,
            "mems": [rng.normal(size=(B, M, d_model)).astype(np.float32) for _ in range(n_layer)]}


def _built(config):
    model = XLNetLMHeadModel(config)
    model.build()
    return model


def test_config_accepts_original_keys_and_rejects_unknown(tmp_path):
    original = {"n_layer": 24, "d_model": 1024, "n_head": 16, "d_head": 64, "d_inner": 4096,
                "ff_activation": "gelu", "untie_r": True, "n_token": 32000}
    path = tmp_path / "xlnet_config.json"
    path.write_text(json.dumps(original))
    config = XLNetConfig.from_json_file(str(path))
    assert config == XLNetConfig.preset("large")
    config.to_json_file(str(tmp_path / "round.json"))
    assert XLNetConfig.from_json_file(str(tmp_path / "round.json")) == config
    path.write_text(json.dumps({**original, "n_layers": 3}))
    with pytest.raises(ConfigError, match=r"Unknown XLNetConfig key\(s\) \['n_layers'\]"):
        XLNetConfig.from_json_file(str(path))
    with pytest.raises(ConfigError, match="attn_type"):
        XLNetConfig.preset("tiny", attn_type="left")
    with pytest.raises(ConfigError, match="Unknown model preset"):
        XLNetConfig.preset("huge")
    assert XLNetConfig.preset("base").n_layer == 12


def test_query_stream_output_depends_on_visible_tokens_only():
    """Changing a token that every query row must not see leaves the query stream unchanged;
    changing a visible one changes it (a polarity check independent of the reference)."""
    model = _built(_config())
    rng = np.random.default_rng(0)
    inputs = _inputs(rng)
    inputs["perm_mask"][:] = 0.0
    inputs["perm_mask"][:, :, 3] = 1.0  # nobody may see token 3 (its content is hidden)
    base = model(inputs)["hidden"].numpy()
    changed = dict(inputs, input_ids=inputs["input_ids"].copy())
    changed["input_ids"][:, 3] = (changed["input_ids"][:, 3] + 1) % 101
    np.testing.assert_allclose(model(changed)["hidden"].numpy(), base, atol=1e-6)
    changed["input_ids"][:, 4] = (changed["input_ids"][:, 4] + 1) % 101
    assert np.max(np.abs(model(changed)["hidden"].numpy() - base)) > 1e-3


@pytest.mark.xla
def test_xla_compiled_forward_and_gradient_match_eager():
    model = _built(_config())
    inputs = _inputs(np.random.default_rng(1))
    inputs = {k: (v if k != "mems" else [tf.constant(m) for m in v]) for k, v in inputs.items()}

    def loss_and_grads(batch):
        with tf.GradientTape() as tape:
            out = model(batch, training=False)
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
                labels=tf.zeros([B, P], tf.int32), logits=out["logits"]))
        return loss, tape.gradient(loss, model.trainable_variables), out["new_mems"]

    eager = loss_and_grads(inputs)
    compiled = tf.function(loss_and_grads, jit_compile=True)(inputs)
    np.testing.assert_allclose(compiled[0].numpy(), eager[0].numpy(), atol=1e-5)
    for a, b in zip(compiled[1], eager[1]):
        np.testing.assert_allclose(np.asarray(tf.convert_to_tensor(a)),
                                   np.asarray(tf.convert_to_tensor(b)), atol=1e-5)
    for a, b in zip(compiled[2], eager[2]):
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-5)


@pytest.mark.xla
@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_mixed_precision_is_finite_with_float32_logits(policy):
    reference = _built(_config())
    inputs = _inputs(np.random.default_rng(2))
    expected = reference(inputs)["logits"].numpy()
    keras.mixed_precision.set_global_policy(policy)
    try:
        model = _built(_config())
        model.set_weights(reference.get_weights())
        out = tf.function(lambda x: model(x), jit_compile=True)(inputs)
    finally:
        keras.mixed_precision.set_global_policy("float32")
    logits = out["logits"]
    assert logits.dtype == tf.float32
    assert np.all(np.isfinite(logits.numpy()))
    assert all(np.all(np.isfinite(m.numpy().astype(np.float32))) for m in out["new_mems"])
    # Half precision tracks float32 loosely but clearly (random logits span a few units).
    assert np.max(np.abs(logits.numpy() - expected)) < 0.25


def test_rebuild_from_config_and_keras_file_round_trip(tmp_path):
    model = _built(_config(bi_data=True, clamp_len=5))
    inputs = _inputs(np.random.default_rng(3))
    expected = model(inputs)["logits"].numpy()

    clone = XLNetLMHeadModel.from_config(model.get_config())
    clone.build()
    clone.set_weights(model.get_weights())
    np.testing.assert_array_equal(clone(inputs)["logits"].numpy(), expected)

    path = str(tmp_path / "model.keras")
    model.save(path)
    loaded = keras.models.load_model(path)
    assert loaded.config == model.config
    np.testing.assert_array_equal(loaded(inputs)["logits"].numpy(), expected)


def test_every_layer_has_a_config_that_rebuilds_it():
    model = _built(_config())
    for layer in [model.transformer] + model.transformer.blocks + [
            model.transformer.layer_0.rel_attn, model.transformer.layer_0.ff]:
        config = layer.get_config()
        rebuilt = type(layer).from_config(config)
        assert rebuilt.get_config() == config


def test_tf_checkpoint_saves_every_variable(tmp_path):
    model = _built(_config(untie_r=False))
    prefix = xlnet_tf2.save_pretrained(model, str(tmp_path / "out"))
    saved = {name for name, _ in tf.train.list_variables(prefix)}
    weights = [n for n in saved if n.endswith("VARIABLE_VALUE")]
    assert len(weights) == len(model.weights)
    loaded = xlnet_tf2.from_pretrained(str(tmp_path / "out"))
    for a, b in zip(model.weights, loaded.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    # A bare backbone loads from the same LM directory, through the same loader.
    backbone = xlnet_tf2.XLNetModel.from_pretrained(str(tmp_path / "out"))
    np.testing.assert_array_equal(backbone.layer_1.rel_attn.q.numpy(),
                                  model.transformer.layer_1.rel_attn.q.numpy())
    # The old names still work, each with one DeprecationWarning naming its replacement.
    with pytest.warns(DeprecationWarning, match="use xlnet_tf2.from_pretrained"):
        old = xlnet_tf2.load_pretrained(str(tmp_path / "out"))
    np.testing.assert_array_equal(old.lm_bias.numpy(), loaded.lm_bias.numpy())
    bare = xlnet_tf2.XLNetModel(model.config)
    with pytest.warns(DeprecationWarning, match="XLNetModel.from_pretrained"):
        xlnet_tf2.restore_weights(bare, str(tmp_path / "out"))
    np.testing.assert_array_equal(bare.layer_1.rel_attn.q.numpy(),
                                  model.transformer.layer_1.rel_attn.q.numpy())


def test_dropout_is_active_only_in_training():
    model = _built(_config(dropout=0.3, dropatt=0.3))
    inputs = _inputs(np.random.default_rng(4))
    a = model(inputs, training=False)["logits"].numpy()
    np.testing.assert_array_equal(a, model(inputs, training=False)["logits"].numpy())
    assert np.max(np.abs(model(inputs, training=True)["logits"].numpy() - a)) > 1e-3


def test_memory_keeps_reused_prefix_and_stops_gradient():
    model = _built(_config())
    inputs = _inputs(np.random.default_rng(5))
    inputs["mems"] = [tf.constant(m) for m in inputs["mems"]]
    with tf.GradientTape(persistent=True) as tape:
        out = model(inputs)
    # Layer 0 memory = last M of concat(old memory, embeddings of the first reuse_len tokens).
    embeddings = tf.gather(model.transformer.word_embedding.embeddings, inputs["input_ids"][:, :4])
    expected = np.concatenate([inputs["mems"][0].numpy(), embeddings.numpy()], axis=1)[:, -M:]
    np.testing.assert_allclose(out["new_mems"][0].numpy(), expected, atol=1e-6)
    assert tape.gradient(out["new_mems"][1], model.trainable_variables[0]) is None


def test_bad_inputs_get_clear_errors():
    model = _built(_config(bi_data=True))
    with pytest.raises(ValueError, match="even batch"):
        model({"input_ids": np.zeros((3, L), np.int32)})
    with pytest.raises(ValueError, match="unknown input key"):
        model({"input_ids": np.zeros((2, L), np.int32), "position_ids": np.zeros((2, L))})
    with pytest.raises(ValueError, match="one tensor per layer"):
        model({"input_ids": np.zeros((2, L), np.int32), "mems": [np.zeros((2, M, 64))]})


def test_unknown_batch_dimension_with_bi_data_and_memory():
    """Multi-worker input pipelines can hide the batch size; the graph must still build."""
    config = _config(bi_data=True)
    model = _built(config)
    inputs = _inputs(np.random.default_rng(6))
    expected = model(inputs)["logits"].numpy()
    spec = {k: tf.TensorSpec([None] + list(np.shape(v)[1:]), tf.as_dtype(np.asarray(v).dtype))
            for k, v in inputs.items() if k != "mems"}
    spec["mems"] = [tf.TensorSpec([None, M, 64], tf.float32)] * 2
    fn = tf.function(lambda x: model(x)["logits"], input_signature=[spec])
    np.testing.assert_allclose(fn(inputs).numpy(), expected, atol=1e-5)
