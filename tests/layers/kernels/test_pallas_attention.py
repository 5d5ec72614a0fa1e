"""The attention op's `pallas` implementation on a CPU: the Pallas kernels
(layers/kernels/pallas_relative_attention.py) in Pallas's interpret mode, run by the TF op
(layers/kernels/pallas_attention.py: the operands' layout, the custom gradient) in place of the
tpu_custom_calls, against the reference op (layers/xlnet_block.py) fed the same score
terms assembled into a bias; the wrapper's pre-processing (the row-packed mask, the dropout
keys); and the step traced for a TPU: two tpu_custom_calls whose backend_config is the one JAX
lowered, compiled by libtpu for a v5e and a v4 without a TPU.
"""

import zlib

import numpy as np
import pytest
import tensorflow as tf
from fixtures.attention_cases import (gradient_names, outputs_and_gradients,
                                     relative_attention_case)

pytest.importorskip("jax")

from xlnet_tf2.layers import dropout as dropout_hash, xlnet_block  # noqa: E402
from xlnet_tf2.layers.dropout import Dropout  # noqa: E402
from xlnet_tf2.layers.kernels import attention_choice, pallas_attention, pallas_call  # noqa: E402
from xlnet_tf2.layers.step_plan import DropoutKeys, StepPlan  # noqa: E402

BLOCKS = (8, 8)  # interpret mode takes any tile; 8 rows and keys make several tiles here


def _interpreted_run(geometry, backward, keys, operands):
    """pallas_attention._run with the kernel in Pallas's interpret mode on this CPU instead of
    a tpu_custom_call: the same call on the same operands."""
    kernels = pallas_call.jax_module()
    call = (kernels.backward_call if backward else kernels.forward_call)(geometry,
                                                                           interpret=True)
    results = call(np.asarray(keys.numpy()), *[np.asarray(o.numpy()) for o in operands])
    return [tf.constant(np.asarray(r)) for r in results]


@pytest.fixture
def interpreted(monkeypatch):
    """The calls the kernels run, (forward or backward) each, in order."""
    calls = []

    def run(geometry, backward, keys, operands):
        calls.append("backward" if backward else "forward")
        return _interpreted_run(geometry, backward, keys, operands)

    monkeypatch.setattr(pallas_attention, "_run", run)
    return calls


def _plan(generation="v5e"):
    return StepPlan(device="tpu", tpu_generation=generation).with_dropout_keys(
        DropoutKeys.of(11, tf.constant(9), tf.constant([4, 1]), 6))


def _case(name):
    """The operands of one attention (numpy, float64) and its settings."""
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    two_stream = name.startswith("two_stream")
    batch, heads, head = 2, 2, 8
    # L = 16 is two whole tiles of 8 rows (the rows padded at the end only), 12 is not (each
    # stream's rows padded to whole tiles).
    mem, seq_len, n_query = ((20, 16 if name == "two_stream" else 12, 5) if two_stream
                             else (0, 16, 0))
    groups = 2 if two_stream else 1                      # bi_data's two direction groups
    keys, rows = mem + seq_len, seq_len + n_query
    dist = keys + seq_len
    positions = np.stack([rng.permutation(seq_len)[:n_query] for _ in range(batch)])
    blocked = rng.random((batch, rows, keys)) < 0.25
    blocked[0, :, keys - 3:] = True                      # padding of example 0
    blocked[1, 2, :] = True                              # rows that see nothing
    if two_stream:
        blocked[0, seq_len + 1, :] = True
    ids = rng.integers(0, 3, (batch, seq_len))           # A, B and <cls>
    key_seg = np.concatenate([np.zeros((batch, mem), np.int64), ids], axis=1)
    row_seg = np.concatenate([ids, np.take_along_axis(ids, positions, 1)], axis=1)
    f = lambda *shape: rng.standard_normal(shape)  # noqa: E731
    return dict(
        seq_len=seq_len, n_query=n_query, groups=groups, positions=positions,
        blocked=blocked, row_seg=row_seg, key_seg=key_seg,
        dtype=tf.bfloat16 if name.endswith("bf16") else tf.float32,
        generation="v4" if name.endswith("v4_bf16") else "v5e",
        rate=0.3 if two_stream else 0.0,
        q=f(batch, heads, rows, head), r_w=f(heads, head), r_r=f(heads, head),
        k=f(batch, heads, keys, head), v=f(batch, heads, keys, head),
        k_r=f(groups, dist, heads, head), seg=f(batch, heads, rows, 2),
        d_out=f(batch, heads, rows, head))


def _row_positions(c):
    batch = c["q"].shape[0]
    content = np.tile(np.arange(c["seq_len"]), (batch, 1))
    return np.concatenate([content, c["positions"]], axis=1)


def _position_bias(q_r, k_r, c):
    """bd[b, n, s, j] = q_r[b, n, s] . k_r[x(b), L - position(s) + j] by a gather of k_r's
    rows (independent of the rel-shift code)."""
    batch, heads, rows, _ = q_r.shape
    n_keys = c["k"].shape[2]
    group = np.arange(batch) // (batch // c["groups"])
    t = c["seq_len"] - _row_positions(c)[:, :, None] + np.arange(n_keys)[None, None, :]
    per_example = tf.gather(tf.transpose(k_r, [0, 2, 1, 3]), group)          # [B, N, T, H]
    rows_of_k_r = tf.gather(per_example, np.broadcast_to(t[:, None], (batch, heads, rows,
                                                                       n_keys)), batch_dims=2)
    return tf.einsum("bnsh,bnskh->bnsk", q_r, rows_of_k_r)


def _both(c, implementation, dropout, interpreted_kernels=None):
    """Output and gradients (q, r_w, r_r, k, v, k_r, seg) of the attention: `reference` (the
    reference op with the bias assembled) or `pallas` (the TF op, the kernels interpreted)."""
    dtype = c["dtype"]
    names = ("q", "r_w", "r_r", "k", "v", "k_r", "seg")
    t = {n: tf.constant(c[n], dtype) for n in names + ("d_out",)}
    if implementation == "reference":  # float32, of the operands the kernels see
        t = {n: tf.cast(x, tf.float32) for n, x in t.items()}
    blocked = tf.constant(c["blocked"])
    rows = (c["seq_len"], c["n_query"]) if c["n_query"] else None
    differ = (c["row_seg"][:, :, None] != c["key_seg"][:, None, :])[:, None]
    with tf.GradientTape() as tape:
        tape.watch(list(t.values()))
        if implementation == "reference":
            q_w, q_r = t["q"] + t["r_w"][:, None], t["q"] + t["r_r"][:, None]
            bias = _position_bias(q_r, t["k_r"], c) + tf.where(
                differ, t["seg"][..., 1:], t["seg"][..., :1])
            out = xlnet_block.reference_attention(q_w, t["k"], t["v"], bias, blocked,
                                      scale=c["q"].shape[-1] ** -0.5, dropout=dropout,
                                      training=True, dropout_rows=rows,
                                      plan=_plan(c["generation"]))
        else:
            out = pallas_attention.pallas_attention(
                t["q"], t["r_w"], t["r_r"], t["k"], t["v"], t["k_r"],
                tf.constant(c["positions"], tf.int32) if c["n_query"] else None, blocked,
                seq_len=c["seq_len"], scale=c["q"].shape[-1] ** -0.5, dropout=dropout,
                training=True, plan=_plan(c["generation"]), segment_scores=t["seg"],
                row_segments=tf.constant(c["row_seg"], tf.int32),
                key_segments=tf.constant(c["key_seg"], tf.int32), dropout_rows=rows,
                blocks=BLOCKS)[:, :, :c["seq_len"] + c["n_query"]]
    grads = tape.gradient(out, [t[n] for n in names], output_gradients=t["d_out"])
    return dict(out=out, **{"d" + n: g for n, g in zip(names, grads)})


@pytest.mark.parametrize("name", ["two_stream", "finetune", "two_stream_v4_bf16"])
def test_kernels_match_the_reference_op(interpreted, name):
    """Both streams in one kernel with memory, bi_data's two position groups, three segment
    ids, padding, rows that see nothing and attention dropout (the reference's bits), on v5e's
    strided rotate and v4's rotates and selects; fine-tuning's content rows alone. Output and
    every gradient: float32 to 1e-5, bfloat16 within bfloat16's rounding."""
    c = _case(name)
    dropout = Dropout(c["rate"])
    dropout.salt = 5
    want = _both(c, "reference", dropout)
    got = _both(c, "pallas", dropout)
    bf16 = c["dtype"] == tf.bfloat16
    for key in want:
        w = np.asarray(tf.cast(want[key], tf.float32))
        g = np.asarray(tf.cast(got[key], tf.float32))
        assert np.isfinite(g).all(), key
        scale = max(1.0, float(np.abs(w).max()))
        np.testing.assert_allclose(g, w, atol=(3e-2 if bf16 else 1e-5) * scale, rtol=0,
                                   err_msg=key)


def test_dropout_drops_what_the_reference_drops(interpreted):
    """With v = identity rows out = p_drop: zero exactly where layers/dropout.py's hashed_bits'
    bits of the Dropout's two draws (content rows, query rows) drop, at rate 0.6 (a threshold
    above 2**31)."""
    rng = np.random.default_rng(3)
    batch, heads, seq_len, n_query, n_keys = 2, 2, 16, 5, 16  # L a whole number of tiles
    rows, dist = seq_len + n_query, n_keys + seq_len
    f = lambda *shape: tf.constant(rng.standard_normal(shape), tf.float32)  # noqa: E731
    dropout = Dropout(0.6)
    dropout.salt = 2
    identity = tf.constant(np.broadcast_to(np.eye(n_keys), (batch, heads, n_keys, n_keys)),
                           tf.float32)
    out = pallas_attention.pallas_attention(
        f(batch, heads, rows, n_keys), f(heads, n_keys), f(heads, n_keys),
        f(batch, heads, n_keys, n_keys), identity, f(1, dist, heads, n_keys),
        tf.constant(rng.integers(0, seq_len, (batch, n_query)), tf.int32), None,
        seq_len=seq_len, scale=0.25, dropout=dropout, training=True, plan=_plan(),
        dropout_rows=(seq_len, n_query), blocks=BLOCKS)[:, :, :rows].numpy()
    reference = _plan()
    keeps = []
    for part_rows in (seq_len, n_query):
        k0, k1 = dropout._keys(False, batch, reference)
        bits = dropout_hash.hashed_bits([batch, heads, part_rows, n_keys], k0, k1).numpy()
        keeps.append(bits >= dropout._threshold)
    keep = np.concatenate(keeps, axis=2)
    assert 0.3 < keep.mean() < 0.5
    np.testing.assert_array_equal(out != 0, keep)


def test_blocked_mask_is_row_packed_as_the_kernels_read_it():
    """Row 8 k + w of query tile t is bit k of word [8 t + w, key]."""
    blocked = np.random.default_rng(0).random([2, 32, 5]) < 0.4
    words = pallas_attention.row_packed_blocked(tf.constant(blocked), 16).numpy()
    assert words.shape == (2, 16, 5) and words.dtype == np.int32
    for row in range(32):
        tile, k, w = row // 16, (row % 16) // 8, row % 8
        np.testing.assert_array_equal((words[:, 8 * tile + w] >> k) & 1, blocked[:, row])


def test_hash_keys_are_the_two_draws_key_terms():
    """The kernels' per-example key term and mix ([term, mix] of the content rows' draw, then
    of the query rows') come from the Dropout's two draws: its call counter advances by two,
    as the reference's two-part draw advances it."""
    layer = Dropout(0.1)
    layer.salt = 7
    plan = _plan()
    keys = pallas_attention.hash_keys(layer, 2, (12, 5), plan).numpy().view(np.uint32)
    assert keys.shape == (8,) and layer._draw_number(plan.dropout_keys) == 2  # the next: third
    reference = _plan()
    for part in range(2):
        k0, k1 = layer._keys(False, 2, reference)
        term = (int(k0.numpy()) * 0x85EBCA77 + k1.numpy().astype(np.uint64)) & 0xFFFFFFFF
        mix = dropout_hash.fmix32(tf.bitwise.bitwise_xor(k1, dropout_hash.fmix32(k0)))
        np.testing.assert_array_equal(keys[4 * part:4 * part + 2], term)
        np.testing.assert_array_equal(keys[4 * part + 2:4 * part + 4], mix.numpy())


# ---------------------------------------------------------------- the layer on the Pallas path
@pytest.fixture
def interpreted_layer(monkeypatch, interpreted):
    """The layer's Pallas path on this CPU: the kernels interpreted in place of the custom
    calls at 8-row tiles, and the XLA-context condition waived (the interpreter runs
    eagerly)."""
    checked = pallas_attention.pallas_unavailable_reason

    def reason(*args, **kwargs):
        why = checked(*args, **kwargs)
        return None if why == "the step is not compiled by XLA (--jit_compile)" else why

    monkeypatch.setattr(pallas_attention, "pallas_unavailable_reason", reason)
    monkeypatch.setattr(pallas_attention, "BLOCKS", BLOCKS)
    return interpreted


@pytest.mark.parametrize("q_len", [12, 16])
def test_the_layer_on_the_pallas_path_is_the_reference(interpreted_layer, q_len):
    """RelativeAttention with both streams (one kernel call), memory, bi_data's two position
    groups, a position embedding dropped out as the model drops it, padding, a row that sees
    nothing, three segment ids and attention dropout: its outputs and every gradient on the
    Pallas path (the kernels interpreted, fed the position embedding's projection, the query
    rows' positions and the segment ids the layer hands them) equal the reference's. L = 12
    rows pad each stream to whole 8-row tiles; L = 16 is two whole tiles (XLNet's case: the
    op returns the query rows' padding too, which the layer slices off)."""
    layer = xlnet_block.RelativeAttention(32, 2, 16, dropatt=0.2)
    layer.attention_dropout.salt = 5
    case = relative_attention_case("bi", True, q_len)
    embedding_dropout = Dropout(0.1)
    case["pos_emb"] = embedding_dropout(case["pos_emb"], training=True, shared_over_batch=True,
                                        plan=_plan())
    assert float(tf.reduce_mean(tf.cast(case["pos_emb"] == 0, tf.float32))) > 0.05
    layer(case["h"], case["pos_emb"], g=case["g"], mems=case["mems"],
          query_positions=case["query_positions"], query_weights=case["query_weights"])

    def run(implementation):
        return outputs_and_gradients(layer, case, "tpu", implementation)

    reference = run("reference")
    assert interpreted_layer == []
    pallas = run("pallas")
    assert interpreted_layer == ["forward", "backward"]  # both streams in one call
    for name, want, got in zip(gradient_names(layer), reference, pallas):
        want, got = np.asarray(want), np.asarray(got)
        scale = max(1.0, float(np.abs(want).max()))
        np.testing.assert_allclose(got, want, atol=1e-5 * scale, rtol=0, err_msg=name)


def test_forced_where_it_cannot_run_is_one_line():
    q = tf.zeros([1, 2, 4, 16])
    k = tf.zeros([1, 2, 6, 16])
    with pytest.raises(attention_choice.AttentionImplementationError,
                       match=r"^--attention_implementation=pallas cannot run here: the step is "
                             r"traced for a GPU, not a TPU; use --attention_implementation=auto "
                             r"\(or reference\)\.$"):
        xlnet_block.attention(q, k, k, tf.zeros([1, 2, 4, 6]), None, scale=0.25,
                            dropout=Dropout(0.0), training=False,
                            plan=StepPlan(device="gpu", attention="pallas"))
    plan = StepPlan(device="tpu")
    assert pallas_attention.pallas_unavailable_reason(
        q, k, dropout_rate=0.0, dropout_rows=None, plan=plan) == \
        "the step is not compiled by XLA (--jit_compile)"
    assert plan.pallas_kernels and plan.one_attention_for_both_streams
    assert not plan.angle_position_scores  # the kernels read the embedding's projection
    assert StepPlan(device="tpu", attention="reference").angle_position_scores


# ---------------------------------------------------------------- the step traced for a TPU
def _tpu_step_hlo(generation: str, stage: str):
    """A training step's attention traced for a TPU of `generation` under jit_compile, in
    bfloat16, with both streams, memory, segments, a mask and attention dropout (tiles of
    128: a TPU's), as the HLO stage asked."""
    batch, heads, head, seq_len, mem, n_query = 2, 2, 64, 128, 128, 20
    keys, rows = mem + seq_len, seq_len + n_query
    dropout = Dropout(0.1)
    dropout.salt = 3

    @tf.function(jit_compile=True)
    def step(q, r_w, r_r, k, v, k_r, seg):
        plan = StepPlan(device="tpu", tpu_generation=generation).with_dropout_keys(
            DropoutKeys.of(7, tf.constant(5), tf.range(batch), 2))
        blocked = tf.random.stateless_uniform([batch, rows, keys], [1, 2]) < 0.2
        with tf.GradientTape() as tape:
            tape.watch([q, r_w, r_r, k, v, k_r, seg])
            out = pallas_attention.pallas_attention(
                q, r_w, r_r, k, v, k_r, tf.zeros([batch, n_query], tf.int32) + 3, blocked,
                seq_len=seq_len, scale=0.125, dropout=dropout, training=True, plan=plan,
                segment_scores=seg, row_segments=tf.zeros([batch, rows], tf.int32),
                key_segments=tf.ones([batch, keys], tf.int32),
                dropout_rows=(seq_len, n_query))[:, :, :rows]
            loss = tf.reduce_sum(tf.cast(out, tf.float32))
        return loss, tape.gradient(loss, [q, r_w, r_r, k, v, k_r, seg])

    bf16 = tf.bfloat16
    args = [tf.zeros([batch, heads, rows, head], bf16), tf.zeros([heads, head], bf16),
            tf.zeros([heads, head], bf16),
            tf.zeros([batch, heads, keys, head], bf16), tf.zeros([batch, heads, keys, head], bf16),
            tf.zeros([2, keys + seq_len, heads, head], bf16), tf.zeros([batch, heads, rows, 2], bf16)]
    return step.experimental_get_compiler_ir(*args)(stage=stage)


@pytest.mark.xla
def test_a_tpu_step_carries_the_lowered_kernels_verbatim():
    """The forward and the backward call, each with the backend_config JAX lowered for its
    geometry (a Mosaic body of serialization format 1 and the kernel's cost estimate)."""
    import json

    from tensorflow.compiler.xla.service import hlo_pb2
    module = hlo_pb2.HloModuleProto.FromString(_tpu_step_hlo("v5e", "hlo_serialized"))
    calls = [i for c in module.computations for i in c.instructions
             if i.opcode == "custom-call" and i.custom_call_target == "tpu_custom_call"]
    assert len(calls) == 2
    configs = [json.loads(c.backend_config.decode()) for c in calls]
    for config in configs:
        body = config["custom_call_config"]
        assert body["serialization_format"] == 1 and len(body["body"]) > 10_000
        assert int(body["cost_estimate"]["flops"]) > 0
    kernels = pallas_call.jax_module()
    g = kernels.Geometry(batch=2, heads=2, head_size=64, seq_len=128, query_rows=20, keys=256,
                         distances=384, groups=2, scale=0.125, dropout_rate=0.1,
                         has_segment=True, has_mask=True)
    shapes = kernels.shapes(g)
    for call, backward in zip(calls, (False, True)):
        names = ("keys",) + kernels.operand_names(g, backward)
        fn = kernels.backward_call(g) if backward else kernels.forward_call(g)
        config, _ = pallas_call.lowered(fn, [(shapes[n][0], np.dtype(shapes[n][1]).name)
                                             for n in names])
        assert call.backend_config.decode() == config
        estimate = json.loads(config)["custom_call_config"]["cost_estimate"]
        assert int(estimate["flops"]) == kernels.flops(g, backward)


@pytest.mark.xla
@pytest.mark.slow
@pytest.mark.parametrize("generation,target", [("v5e", "tpu_v5e"), ("v4", "tpu_v4")])
def test_libtpu_compiles_the_step_for_a_v5e_and_a_v4(tmp_path, generation, target):
    """The step traced for each generation (v5e's strided rotate, v4's gathers) compiled by
    libtpu for that chip without one (benchmarks/tools/deviceless_worker.py in the compile
    venv: the project's .venv with the test extra has libtpu 0.0.30)."""
    import json
    import subprocess

    from benchmarks.tools import deviceless_compile
    from fixtures.paths import REPO_ROOT
    try:
        python = deviceless_compile.accelerator_python(target)
    except deviceless_compile.AcceleratorCompileError as e:
        pytest.skip(str(e))
    hlo = tmp_path / "step.hlo.pb"
    hlo.write_bytes(_tpu_step_hlo(generation, "hlo_serialized"))
    run = subprocess.run(
        [python, "-m", "benchmarks.tools.deviceless_worker",
         f"--target={json.dumps(deviceless_compile.worker_target(target))}", f"--hlo={hlo}",
         f"--out={tmp_path}"], cwd=REPO_ROOT, env=deviceless_compile.worker_env(target),
        capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    record = json.loads((tmp_path / "compile.json").read_text())
    assert "error" not in record, record.get("error")
    assert record["memory"]["generated_code"] > 0
    text = (tmp_path / "optimized.hlo.txt").read_text()
    assert text.count('custom_call_target="tpu_custom_call"') == 2
