"""The attention op's `triton` implementation (layers/kernels/triton_attention.py) on a CPU:
the wrapper's pre-processing against the reference's tensors (the bit-packed mask, the
dropout keys and the bits the kernels hash from them), its choice through the step's plan,
and the step traced for a GPU: three `__gpu$xla.gpu.triton` calls (forward, dk/dv, dq) whose
TTIR TensorFlow's own XLA parses and verifies (benchmarks/tools/triton_parse_check.py). The
kernels' numbers are tests/layers/kernels/test_flash_kernel.py's (Triton's CPU interpreter)."""

import numpy as np
import pytest
import tensorflow as tf

from benchmarks.tools import triton_parse_check
from xlnet_tf2.layers.dropout import Dropout, DropoutKeys
from xlnet_tf2.layers.kernels import attention, dropout_masks, triton_attention
from xlnet_tf2.layers.kernels import triton_call
from xlnet_tf2.layers.step_plan import StepPlan

pytest.importorskip("triton")


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
    """The keys advance the Dropout's call counter as the reference's two-part draw does, and
    KERNEL_SPEC.md's per-example hash of those keys gives dropout_masks.hashed_bits' bits."""
    batch, heads, rows, keys, split = 3, 2, 7, 5, 4
    layer = Dropout(0.1)
    layer.salt = 11
    step, ids = tf.constant(9), tf.constant([4, 0, 2])
    plan = StepPlan(device="gpu").with_dropout_keys(DropoutKeys(5, step, ids, 6))
    k0s, k1 = triton_attention.dropout_keys(layer, batch, (split, rows - split), plan)
    assert plan.dropout_keys.calls == {11: 2}
    reference = StepPlan(device="gpu").with_dropout_keys(DropoutKeys(5, step, ids, 6))
    for part, part_rows in enumerate((split, rows - split)):
        k0, ref_k1 = layer._keys(False, batch, reference)
        assert k0.numpy() == k0s.numpy().view(np.uint32)[part]
        np.testing.assert_array_equal(ref_k1.numpy(), k1.numpy().view(np.uint32))
        bits = dropout_masks.hashed_bits([batch, heads, part_rows, keys], k0, ref_k1).numpy()
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
    with pytest.raises(attention.AttentionImplementationError,
                       match=r"--attention_implementation=triton cannot run here: the step is "
                             r"traced for a CPU, not a GPU; use"):
        attention.attention(q, k, k, tf.zeros([1, 2, 4, 6]), None, scale=0.25,
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


@pytest.mark.slow
@pytest.mark.parametrize("generation", ["sm_90", "sm_80"])
def test_a_gpu_step_emits_the_kernels_and_tensorflows_xla_parses_them(generation):
    batch, heads, rows, keys, head = 2, 2, 24, 40, 16
    layer = Dropout(0.1)
    layer.salt = 3

    @tf.function(jit_compile=True)
    def step(q, k, v, bias, blocked):
        plan = StepPlan(device="gpu", attention="auto", gpu_generation=generation
                        ).with_dropout_keys(DropoutKeys(7, tf.constant(5), tf.range(batch), 2))
        with tf.GradientTape() as tape:
            tape.watch([q, k, v, bias])
            out = attention.attention(q, k, v, bias, blocked, scale=0.25, dropout=layer,
                                      training=True, plan=plan, dropout_rows=(16, 8))
            loss = tf.reduce_sum(tf.cast(out, tf.float32))
        return out, tape.gradient(loss, [q, k, v, bias])

    bf16 = tf.bfloat16
    args = [tf.zeros([batch, heads, rows, head], bf16), tf.zeros([batch, heads, keys, head], bf16),
            tf.zeros([batch, heads, keys, head], bf16), tf.zeros([batch, heads, rows, keys], bf16),
            tf.zeros([batch, rows, keys], tf.bool)]
    proto = step.experimental_get_compiler_ir(*args)(stage="hlo_serialized")
    checks = triton_parse_check.check_module(proto)
    assert sorted(c.name for c in checks) == ["flash_bwd_dkdv", "flash_bwd_dq", "flash_fwd"]
    assert all(c.module == "OK" for c in checks), [c.module for c in checks]
    grids = {c.name: c.grid for c in checks}
    assert grids["flash_fwd"] == (1, batch * heads, 1)       # 24 rows in one 64-row tile
    assert all(c.ir_bytes > 10_000 and c.num_warps == 4 for c in checks)
