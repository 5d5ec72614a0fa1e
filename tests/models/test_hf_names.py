"""The inputs and outputs HuggingFace users type: token_type_ids, last_hidden_state, mems,
output_hidden_states (checked against HuggingFace's PyTorch XLNet on identical weights), under
jit_compile and through a SavedModel; and memory_mask (empty memory slots are invisible)."""

import numpy as np
import pytest
import tensorflow as tf

import xlnet_tf2

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from benchmarks.tools.hf_reference import ours_from_hf, random_hf_model  # noqa: E402

B, L, P, V = 2, 9, 3, 97


def _config(**overrides):
    values = dict(n_layer=2, d_model=32, n_head=4, d_head=8, d_inner=64, n_token=V,
                  dropout=0.0, dropatt=0.0, mem_len=5)
    values.update(overrides)
    return xlnet_tf2.XLNetConfig.from_dict(values)


def _inputs(rng, with_query_stream):
    inputs = {"input_ids": rng.integers(0, V, size=(B, L)).astype(np.int32),
              "token_type_ids": (np.arange(L)[None] >= 5).astype(np.int32).repeat(B, 0),
              "attention_mask": np.concatenate([np.zeros((B, 2)), np.ones((B, L - 2))],
                                               1).astype(np.float32)}
    if with_query_stream:
        perm_mask = np.zeros((B, L, L), np.float32)
        perm_mask[:, :, [3, 6, 8]] = 1.0
        target_mapping = np.zeros((B, P, L), np.float32)
        target_mapping[:, [0, 1, 2], [3, 6, 8]] = 1.0
        inputs.update(perm_mask=perm_mask, target_mapping=target_mapping)
    return inputs


def _hf_hidden_states(hf_model, inputs, mems):
    kwargs = {"input_ids": torch.tensor(inputs["input_ids"]).long(),
              "token_type_ids": torch.tensor(inputs["token_type_ids"]).long(),
              "attention_mask": torch.tensor(inputs["attention_mask"]),
              "mems": [torch.tensor(np.transpose(m, (1, 0, 2))) for m in mems],
              "use_mems": True, "output_hidden_states": True}
    for key in ("perm_mask", "target_mapping"):
        if key in inputs:
            kwargs[key] = torch.tensor(inputs[key])
    with torch.no_grad():
        out = hf_model(**kwargs)
    return ([h.numpy() for h in out.hidden_states], out.logits.numpy(),
            [np.transpose(m.numpy(), (1, 0, 2)) for m in out.mems])


@pytest.mark.parametrize("with_query_stream", [False, True])
def test_hidden_states_match_huggingface(with_query_stream):
    config = _config()
    hf = random_hf_model(config, seed=21)
    model = ours_from_hf(hf, config)
    rng = np.random.default_rng(4)
    inputs = _inputs(rng, with_query_stream)
    mems = [rng.normal(size=(B, 4, 32)).astype(np.float32) for _ in range(2)]
    ours = model({**inputs, "mems": mems}, output_hidden_states=True)
    theirs, logits, new_mems = _hf_hidden_states(hf, inputs, mems)
    np.testing.assert_allclose(ours["logits"].numpy(), logits, atol=1e-4)
    content = ours["hidden_states"]
    assert len(content) == config.n_layer + 1
    if with_query_stream:  # HuggingFace interleaves the streams: h0, g0, h1, g1, ...
        query = ours["query_hidden_states"]
        assert len(query) == config.n_layer + 1
        assert query[0].shape == (B, P, 32)
        for i in range(config.n_layer + 1):
            np.testing.assert_allclose(content[i].numpy(), theirs[2 * i], atol=1e-4)
            np.testing.assert_allclose(query[i].numpy(), theirs[2 * i + 1], atol=1e-4)
    else:
        assert "query_hidden_states" not in ours
        for i in range(config.n_layer + 1):
            np.testing.assert_allclose(content[i].numpy(), theirs[i], atol=1e-4)
    # the memory a layer caches is the hidden state entering it (the last mem_len of it)
    for i, memory in enumerate(ours["mems"]):
        np.testing.assert_allclose(memory.numpy(), new_mems[i][:, -5:], atol=1e-4)
        expected = np.concatenate([mems[i], content[i].numpy()], 1)[:, -5:]
        np.testing.assert_allclose(memory.numpy(), expected, atol=1e-6)


def test_aliases_and_their_errors():
    model = ours_from_hf(random_hf_model(_config(), seed=22), _config())
    rng = np.random.default_rng(0)
    inputs = _inputs(rng, with_query_stream=False)
    out = model(inputs)
    assert out["last_hidden_state"] is out["hidden"]
    assert out["mems"] is out["new_mems"] and len(out["mems"]) == 2
    assert "hidden_states" not in out
    segments = dict(inputs)
    segments["segment_ids"] = segments.pop("token_type_ids")
    np.testing.assert_array_equal(model(segments)["logits"].numpy(), out["logits"].numpy())
    # the alias really reaches the segment term
    other = dict(inputs, token_type_ids=np.zeros((B, L), np.int32))
    assert np.abs(model(other)["logits"].numpy() - out["logits"].numpy()).max() > 1e-4
    with pytest.raises(ValueError, match="not both"):
        model({**inputs, "segment_ids": segments["segment_ids"]})
    with pytest.raises(ValueError, match="memory_mask was given without mems"):
        model({**inputs, "memory_mask": np.ones((B, 3), np.int32)})


def test_memory_mask_hides_empty_slots():
    """Memory slots marked empty change nothing: the same as passing only the real ones."""
    config = _config(mem_len=0)
    model = xlnet_tf2.XLNetLMHeadModel(config)
    rng = np.random.default_rng(1)
    ids = rng.integers(0, V, size=(B, L)).astype(np.int32)
    real = [rng.normal(size=(B, 3, 32)).astype(np.float32) for _ in range(2)]
    junk = [rng.normal(size=(B, 4, 32)).astype(np.float32) * 10 for _ in range(2)]
    padded = [np.concatenate([j, r], 1) for j, r in zip(junk, real)]  # empty slots first
    mask = np.concatenate([np.zeros((B, 4)), np.ones((B, 3))], 1).astype(np.int32)
    # the real entries keep their distance to the example, so the numbers are the same
    want = model({"input_ids": ids, "mems": real})["logits"].numpy()
    got = model({"input_ids": ids, "mems": padded, "memory_mask": mask})["logits"].numpy()
    np.testing.assert_allclose(got, want, atol=1e-5)
    unmasked = model({"input_ids": ids, "mems": padded})["logits"].numpy()
    assert np.abs(unmasked - want).max() > 1e-3


@pytest.mark.xla
def test_hidden_states_under_jit_compile_and_in_a_saved_model(tmp_path):
    config = _config()
    model = xlnet_tf2.XLNetLMHeadModel(config)
    rng = np.random.default_rng(2)
    inputs = {k: tf.constant(v) for k, v in _inputs(rng, with_query_stream=False).items()}
    eager = model(inputs, output_hidden_states=True)

    @tf.function(jit_compile=True)
    def compiled(batch):
        out = model(batch, output_hidden_states=True)
        return out["hidden_states"], out["last_hidden_state"]

    states, last = compiled(inputs)
    for a, b in zip(states, eager["hidden_states"]):
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-5)
    np.testing.assert_allclose(last.numpy(), eager["last_hidden_state"].numpy(), atol=1e-5)

    # The default path traces exactly the ops of the hidden-states path: nothing extra is
    # computed when the hidden states are not asked for, and nothing when they are.
    def op_counts(flag):
        fn = tf.function(lambda batch: model(batch, output_hidden_states=flag)["logits"])
        graph = fn.get_concrete_function(inputs).graph
        return sorted(op.type for op in graph.get_operations() if op.type != "Identity")
    assert op_counts(False) == op_counts(True)

    module = tf.Module()
    module.model = model
    module.variables_ = [v.value for v in model.variables]
    spec = {k: tf.TensorSpec([None, L], v.dtype, name=k) for k, v in inputs.items()}

    @tf.function(input_signature=[spec])
    def serve(batch):
        out = model(batch, output_hidden_states=True)
        return {"last_hidden_state": out["last_hidden_state"],
                **{f"hidden_state_{i}": h for i, h in enumerate(out["hidden_states"])}}

    tf.saved_model.save(module, str(tmp_path / "saved"), signatures={"serving_default": serve})
    loaded = tf.saved_model.load(str(tmp_path / "saved")).signatures["serving_default"](**inputs)
    for i, h in enumerate(eager["hidden_states"]):
        np.testing.assert_allclose(loaded[f"hidden_state_{i}"].numpy(), h.numpy(), atol=1e-5)
