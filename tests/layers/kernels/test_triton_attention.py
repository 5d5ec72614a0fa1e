"""The attention op's `triton` implementation (layers/kernels/triton_attention.py) on a CPU:
the wrapper's pre-processing against the reference's tensors (the bit-packed mask, the
dropout keys and the bits the kernels hash from them), its choice through the step's plan,
and the step traced for a GPU: three `__gpu$xla.gpu.triton` calls (forward, dk/dv, dq) whose
TTIR TensorFlow's own XLA parses and verifies (benchmarks/tools/triton_parse_check.py). The
kernels' numbers are tests/layers/kernels/test_flash_kernel.py's (Triton's CPU interpreter)."""

import re

import numpy as np
import pytest
import tensorflow as tf

from benchmarks.tools import triton_parse_check
from xlnet_tf2.layers import dropout, xlnet_block
from xlnet_tf2.layers.dropout import Dropout
from xlnet_tf2.layers.kernels import attention_choice, triton_attention
from xlnet_tf2.layers.kernels import flash_relative_attention as flash
from xlnet_tf2.layers.kernels import triton_call
from xlnet_tf2.layers.step_plan import DropoutKeys, StepPlan
from fixtures.attention_cases import (gradient_names, outputs_and_gradients,
                                     relative_attention_case)

pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")


def _fmix32(h):
    h = h.astype(np.uint64)
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & 0xFFFFFFFF
    h ^= h >> 16
    return h


def test_blocked_mask_is_bit_packed_as_the_kernels_read_it():
    blocked = np.random.default_rng(0).random([2, 3, 70]) < 0.4
    words = triton_attention.bit_packed_blocked(tf.constant(blocked)).numpy()
    assert words.shape == (2, 3, 3) and words.dtype == np.int32
    unpacked = (words.view(np.uint32)[..., :, None] >> np.arange(32, dtype=np.uint32)) & 1
    np.testing.assert_array_equal(unpacked.reshape(2, 3, 96)[..., :70], blocked)
    assert not unpacked.reshape(2, 3, 96)[..., 70:].any()


def test_dropout_keys_are_the_reference_draws_and_the_kernels_hash_its_bits():
    """The keys advance the Dropout's draw count as the reference's two-part draw does, and
    the kernels' per-example hash of those keys (flash_relative_attention.py, written out
    below) gives layers/dropout.py's hashed_bits' bits."""
    batch, heads, rows, keys, split = 3, 2, 7, 5, 4
    layer = Dropout(0.1)
    layer.salt = 11
    step, ids = tf.constant(9), tf.constant([4, 0, 2])
    plan = StepPlan(device="gpu").with_dropout_keys(DropoutKeys.of(5, step, ids, 6))
    k0s, k1 = triton_attention.dropout_keys(layer, batch, (split, rows - split), plan)
    assert layer._draw_number(plan.dropout_keys) == 2  # the next draw is the third
    reference = StepPlan(device="gpu").with_dropout_keys(DropoutKeys.of(5, step, ids, 6))
    for part, part_rows in enumerate((split, rows - split)):
        k0, ref_k1 = layer._keys(False, batch, reference)
        assert k0.numpy() == k0s.numpy().view(np.uint32)[part]
        np.testing.assert_array_equal(ref_k1.numpy(), k1.numpy().view(np.uint32))
        bits = dropout.hashed_bits([batch, heads, part_rows, keys], k0, ref_k1).numpy()
        n = np.arange(heads * part_rows * keys, dtype=np.uint64).reshape(heads, part_rows, keys)
        k0v = np.uint64(k0.numpy())
        for b in range(batch):
            k1b = np.uint64(ref_k1.numpy()[b])
            inner = (n * 0x9E3779B9 + k0v * 0x85EBCA77 + k1b) & 0xFFFFFFFF
            expect = _fmix32(_fmix32(inner) ^ _fmix32(k1b ^ _fmix32(np.array(k0v))))
            np.testing.assert_array_equal(bits[b], expect.astype(np.uint32))


def test_forced_where_it_cannot_run_is_one_line():
    q = tf.zeros([1, 2, 4, 16])
    k = tf.zeros([1, 2, 6, 16])
    with pytest.raises(attention_choice.AttentionImplementationError,
                       match=r"--attention_implementation=triton cannot run here: the step is "
                             r"traced for a CPU, not a GPU; use"):
        xlnet_block.attention(q, k, k, tf.zeros([1, 2, 4, 6]), None, scale=0.25,
                              dropout=Dropout(0.0), training=False,
                              plan=StepPlan(device="cpu", attention="triton"))
    reason = triton_attention.triton_unavailable_reason(
        tf.zeros([1, 2, 4, 24]), k, dropout_rate=0.0, dropout_rows=None,
        plan=StepPlan(device="gpu"))
    assert reason == "the step is not compiled by XLA (--jit_compile)"


def test_backend_config_is_the_dictionary_xla_reads():
    config = triton_call.backend_config('tt.func @f() "x"\n', "f", (3, 2, 1), 4, 2)
    assert config == ('{debug = false, grid_x = 3 : i32, grid_y = 2 : i32, grid_z = 1 : i32, '
                      'ir = "tt.func @f() \\22x\\22\\0A", name = "f", num_stages = 2 : i32, '
                      'num_warps = 4 : i32}')


@pytest.mark.xla
@pytest.mark.slow
@pytest.mark.parametrize("generation", ["sm_90", "sm_80"])
def test_a_gpu_step_emits_the_kernels_and_tensorflows_xla_parses_them(generation):
    """The layer traced for a GPU under jit_compile, in bfloat16, with both streams, memory,
    segments and attention dropout: forward, dk/dv and dq calls, the forward fed q + r_r and
    the [X, N, T, H] projected position embedding (no [B, N, S, T] array in the program), TTIR
    that TensorFlow 2.20's own XLA parses and verifies."""
    case = relative_attention_case("bi", True)
    layer = xlnet_block.RelativeAttention(32, 2, 16, dropatt=0.1, dtype="mixed_bfloat16")
    layer.attention_dropout.salt = 3
    batch, q_len, n_query = 2, 12, 4
    k_len, t_len = case["mems"].shape[1] + q_len, case["pos_emb"].shape[1]
    extra = {k: v for k, v in case.items() if k not in ("h", "g", "mems", "pos_emb")}

    @tf.function(jit_compile=True)
    def step(h, g, mems):
        plan = StepPlan(device="gpu", attention="auto", gpu_generation=generation
                        ).with_dropout_keys(DropoutKeys.of(7, tf.constant(5), tf.range(batch), 2))
        with tf.GradientTape() as tape:
            tape.watch([h, g, mems])
            h_out, g_out = layer(h, case["pos_emb"], g=g, mems=mems, training=True, plan=plan,
                                 **extra)
            loss = tf.reduce_sum(tf.cast(h_out, tf.float32)) + tf.reduce_sum(
                tf.cast(g_out, tf.float32))
        return loss, tape.gradient(loss, [h, g, mems] + layer.trainable_weights)

    args = [case["h"], case["g"], case["mems"]]
    hlo = step.experimental_get_compiler_ir(*args)(stage="hlo")
    proto = step.experimental_get_compiler_ir(*args)(stage="hlo_serialized")
    checks = triton_parse_check.check_module(proto)
    assert sorted(c.name for c in checks) == ["flash_bwd_dkdv", "flash_bwd_dq", "flash_fwd"]
    assert all(c.module == "OK" for c in checks), [c.module for c in checks]
    grids = {c.name: c.grid for c in checks}
    assert grids["flash_fwd"] == (1, batch * 2, 1)          # 16 rows in one 64-row tile
    assert all(c.ir_bytes > 10_000 and c.num_warps == 4 for c in checks)
    # The forward reads k_r per group and head; no array of B x N x S x T elements exists.
    forward = next(line for line in hlo.splitlines()
                   if "__gpu$xla.gpu.triton" in line and "flash_fwd" in line)
    assert f"bf16[2,2,{t_len},16]" in forward.split("custom-call(")[1]
    rows = q_len + n_query
    assert not re.search(rf"\[{batch},2,{rows},{t_len}\]|\[{batch * 2},{rows},{t_len}\]", hlo)
    assert k_len < t_len


# ---------------------------------------------------------------- the layer on the Triton path
def _interpreted_call(launch, ir, buffers, specs):
    """triton_attention._call run eagerly by Triton's CPU interpreter instead of emitted as a
    custom call: the same launch (kernel, pointers, constexprs, grid) on the same buffers."""
    import torch
    kernel = flash.kernels(interpret=True)[launch.name]

    def to_torch(t):
        if t.dtype == tf.bfloat16:  # numpy's bfloat16 is not torch's: through the bits
            return torch.from_numpy(tf.bitcast(t, tf.int16).numpy().copy()).view(torch.bfloat16)
        return torch.from_numpy(np.array(t.numpy()))

    def to_tf(t, dtype):
        if dtype == tf.bfloat16:
            return tf.bitcast(tf.constant(t.view(torch.int16).numpy()), tf.bfloat16)
        return tf.constant(t.numpy())

    pointers = {p + "_ptr": to_torch(buffers[p]) for p in launch.operands}
    dtypes = {tf.float32: torch.float32, tf.bfloat16: torch.bfloat16, tf.int32: torch.int32}
    results = {p: torch.full(specs[p].shape.as_list(), float("nan"), dtype=dtypes[specs[p].dtype])
               for p in launch.results}
    # The interpreter multiplies 16-bit floats' bit patterns in tl.dot: in float32 there.
    constexprs = dict(launch.constexprs, DOT_F32=buffers["q"].dtype != tf.float32)
    kernel[launch.grid](**pointers, **{p + "_ptr": t for p, t in results.items()}, **constexprs)
    return {p: to_tf(t, specs[p].dtype) for p, t in results.items()}


@pytest.fixture
def xla_context_waived(monkeypatch):
    """The Triton path chosen outside an XLA program (eagerly)."""
    checked = triton_attention.triton_unavailable_reason

    def reason(*args, **kwargs):
        why = checked(*args, **kwargs)
        return None if why == "the step is not compiled by XLA (--jit_compile)" else why

    monkeypatch.setattr(triton_attention, "triton_unavailable_reason", reason)


@pytest.fixture
def interpreted_triton(monkeypatch, xla_context_waived):
    """The layer's Triton path on this CPU: the kernels interpreted in place of the custom
    calls, and the XLA-context condition waived (the interpreter runs eagerly)."""
    pytest.importorskip("torch")
    monkeypatch.setattr(triton_attention, "_call", _interpreted_call)
    monkeypatch.setattr(triton_call, "ttir", lambda *args, **kwargs: "")


@pytest.mark.parametrize("attn_type,segments", [("bi", True), ("uni", False)])
def test_the_layer_on_the_triton_path_is_the_reference(interpreted_triton, attn_type,
                                                       segments):
    """RelativeAttention with both streams, memory, bi_data's two position groups, padding,
    a row that sees nothing, three segment ids and attention dropout: its outputs and every
    gradient on the Triton path (the kernels interpreted, fed the unshifted position scores,
    the row positions and the segment ids the layer hands them) equal the reference's."""
    layer = xlnet_block.RelativeAttention(32, 2, 16, dropatt=0.2)
    layer.attention_dropout.salt = 5
    case = relative_attention_case(attn_type, segments)
    layer(case["h"], case["pos_emb"], g=case["g"], mems=case["mems"],
          query_positions=case["query_positions"], query_weights=case["query_weights"])

    def run(implementation):
        return outputs_and_gradients(layer, case, "gpu", implementation)

    reference, triton = run("reference"), run("triton")
    names = gradient_names(layer)
    for name, want, got in zip(names, reference, triton):
        if want is None:  # seg_embed without a segment term
            assert got is None, name
            continue
        want, got = np.asarray(want), np.asarray(got)
        scale = max(1.0, float(np.abs(want).max()))
        np.testing.assert_allclose(got, want, atol=1e-5 * scale, rtol=0, err_msg=name)
    assert float(np.abs(np.asarray(reference[0]) - np.asarray(run("reference")[0])).max()) \
        == 0  # the draws repeat: same keys, same bits


# ---------------------------------------------------------------- the check on the device
@pytest.fixture
def checked_here(monkeypatch):
    """A GPU machine as the device check sees it, with Triton's CPU interpreter standing in
    for the GPU: the kernels interpreted in place of the custom calls, the check's program run
    eagerly instead of compiled by XLA; no check result kept from another test."""
    pytest.importorskip("torch")
    monkeypatch.setattr(triton_attention, "_gpu_present", lambda: True)
    monkeypatch.setattr(triton_attention, "_run_compiled", lambda fn, *args: fn(*args))
    monkeypatch.setattr(triton_attention, "_call", _interpreted_call)
    monkeypatch.setattr(triton_call, "ttir", lambda *args, **kwargs: "")
    monkeypatch.setattr(triton_attention, "_CHECKED", {})
    monkeypatch.setattr(attention_choice, "_SAID", set())
    # The check's attention with one example per position group and one head (batch 2,
    # not 4; 1 head, not 2): the interpreter's time is the attention's size, and what these
    # tests prove is the check itself (the kernels' values are the layer test's above).
    monkeypatch.setattr(triton_attention, "_CHECK_SHAPE",
                        dict(triton_attention._CHECK_SHAPE, batch=2, heads=1))


def _shifted(g, rel, low, BLOCK_N):  # noqa: N803 - a kernel function's constexpr
    """flash_relative_attention._shifted reading one column too far: a deliberately wrong
    kernel (its name is the one the kernels call)."""
    column = rel - low + 1
    inside = (column >= 0) & (column < BLOCK_N)
    return tl.where(inside, tl.gather(g, tl.where(inside, column, 0), 1), 0.0)


@pytest.fixture
def wrong_kernels(monkeypatch):
    """The flash kernels built with this module's `_shifted` in place of theirs."""
    monkeypatch.setattr(flash, "_TRITON_FUNCTIONS", tuple(
        _shifted if f is flash._shifted else f for f in flash._TRITON_FUNCTIONS))
    flash.kernels.cache_clear()
    yield
    monkeypatch.undo()
    flash.kernels.cache_clear()


def _choose(attention_implementation, dtype=tf.bfloat16):
    """chosen_implementation for a bfloat16 attention with dropout, XLA's context waived."""
    q = tf.zeros([2, 2, 8, 64], dtype)
    plan = StepPlan(device="gpu", attention=attention_implementation).with_dropout_keys(
        DropoutKeys.of(1, tf.constant(2), tf.range(2), 2))
    return attention_choice.chosen_implementation(
        q, tf.zeros([2, 2, 12, 64], dtype), dropout=Dropout(0.1), training=True, plan=plan,
        reference_attention=xlnet_block.reference_attention)


@pytest.mark.slow  # the check's attention, forward and backward, interpreted: about 20 s
@pytest.mark.parametrize("dtype", [tf.bfloat16, tf.float32])
def test_the_kernels_pass_their_check_and_auto_takes_them(checked_here, interpreted_triton,
                                                          dtype):
    triton_attention.device_check(dtype, 64, "sm_90", compare=True,
                                  reference_attention=xlnet_block.reference_attention)
    assert triton_attention._CHECKED == {(dtype.name, 64, "sm_90", True): None}
    assert _choose("auto", dtype) == "triton"


@pytest.mark.slow  # the check's attention, interpreted: about 20 s
def test_a_wrong_kernel_fails_the_check_and_auto_takes_the_reference(
        checked_here, interpreted_triton, wrong_kernels, caplog):
    with pytest.raises(triton_attention.TritonKernelsFailed,
                       match=r"^their output differs from the reference op's by \d"):
        triton_attention.device_check(tf.bfloat16, 64, "sm_90", compare=True,
                                      reference_attention=xlnet_block.reference_attention)
    assert _choose("auto") == "reference"
    said = [r.getMessage() for r in caplog.records if "Triton" in r.getMessage()]
    assert said == ["--attention_implementation=auto: the Triton attention kernels failed "
                    "their check: their output differs from the reference op's by "
                    + said[0].split(" by ")[1]]
    assert _choose("auto") == "reference"                      # asked again: said once
    assert len([r for r in caplog.records if "Triton" in r.getMessage()]) == 1
    assert _choose("triton") == "triton"                       # forced: no comparison


@pytest.mark.xla
def test_kernels_that_do_not_compile_fail_the_check_in_one_line(monkeypatch, xla_context_waived):
    """This CPU's XLA, which has no Triton custom call, stands in for a GPU's XLA that rejects
    the kernels: auto takes the reference op, forced triton is one line naming the flag."""
    monkeypatch.setattr(triton_attention, "_gpu_present", lambda: True)
    monkeypatch.setattr(triton_attention, "_CHECKED", {})
    monkeypatch.setattr(attention_choice, "_SAID", set())
    assert _choose("auto") == "reference"
    with pytest.raises(attention_choice.AttentionImplementationError) as raised:
        _choose("triton")
    line = str(raised.value)
    assert "\n" not in line
    assert re.fullmatch(r"--attention_implementation=triton cannot run here: the Triton "
                        r"attention kernels failed their check: they did not compile or run "
                        r"on this device \(\w+: .*\); use --attention_implementation=auto \(or "
                        r"reference\)\.", line), line


def test_without_a_gpu_the_kernels_are_not_checked(monkeypatch, xla_context_waived):
    """A step traced for a GPU on a machine without one (an export) takes the kernels as a GPU
    that passes the check would: there is nothing to run them on."""
    monkeypatch.setattr(triton_attention, "_CHECKED", {})
    assert _choose("auto") == "triton" and triton_attention._CHECKED == {}
