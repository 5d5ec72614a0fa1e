"""The hashed dropout layer: Keras dropout semantics, independent masks, XLA-ready."""

import numpy as np
import pytest
import tensorflow as tf

from fixtures.traced_graphs import hash_functions, library
from xlnet_tf2.layers import Dropout
from xlnet_tf2.layers.dropout import hashed_bits
from xlnet_tf2.layers.step_plan import StepPlan, always_true, keyed_plan


def test_inference_is_identity_and_training_drops_and_rescales():
    layer = Dropout(0.25, seed=3)
    x = tf.ones([64, 256])
    np.testing.assert_array_equal(layer(x, training=False).numpy(), x.numpy())
    y = layer(x, training=True).numpy()
    dropped = np.mean(y == 0.0)
    assert abs(dropped - 0.25) < 0.014  # 16384 draws: 4 standard deviations
    np.testing.assert_allclose(y[y != 0.0], 1.0 / 0.75, rtol=1e-6)


def test_a_traced_hash_carries_no_device_of_the_trace_that_asked_for_it_first():
    """A draw's traced hash serves every later trace in the process (layers/dropout.py's
    `_traced_hash`): it is traced apart, so a device function in scope where it was first
    asked for (a placement function, as graph-mode strategies use) is not written into it."""
    sizes = [3, 7, 41]  # drawn by no other test: this trace makes the hash

    @tf.function
    def draw(k1):
        with tf.compat.v1.get_default_graph().device(lambda op: "/device:CPU:0"):
            return hashed_bits(sizes, tf.constant(5, tf.uint32), k1)

    graph_def = draw.get_concrete_function(tf.TensorSpec([], tf.uint32)).graph.as_graph_def()
    hashes = hash_functions(graph_def)
    assert len(hashes) == 1
    assert not [node.device for node in library(graph_def)[hashes.pop()] if node.device]


def test_bits_are_uniform_and_neighbours_independent():
    bits = hashed_bits(tf.constant([1 << 18]), tf.constant(12345, tf.uint32),
                       tf.constant(678, tf.uint32))
    u = bits.numpy().astype(np.float64) / 2.0 ** 32
    # Uniform: every 1/16 bin holds 1/16 of the values (4 sigma of a binomial count).
    counts = np.bincount((u * 16).astype(int), minlength=16)
    expected = u.size / 16
    assert np.all(np.abs(counts - expected) < 4 * np.sqrt(expected * 15 / 16))
    # Neighbouring elements (and elements a row apart) are uncorrelated.
    for lag in (1, 2, 64, 1024):
        corr = np.corrcoef(u[:-lag], u[lag:])[0, 1]
        assert abs(corr) < 4 / np.sqrt(u.size), (lag, corr)
    # Keys that differ in one bit give unrelated streams.
    other = hashed_bits(tf.constant([1 << 18]), tf.constant(12345, tf.uint32),
                        tf.constant(679, tf.uint32))
    corr = np.corrcoef(u, other.numpy().astype(np.float64))[0, 1]
    assert abs(corr) < 4 / np.sqrt(u.size)


@pytest.mark.xla
def test_masks_differ_between_calls_and_compile_under_xla():
    layer = Dropout(0.5, seed=1)
    step = tf.function(lambda x: layer(x, training=True), jit_compile=True)
    x = tf.ones([64, 64])
    a, b = step(x).numpy() == 0, step(x).numpy() == 0
    # Independent masks of rate 1/2 disagree on half the elements.
    assert abs(np.mean(a != b) - 0.5) < 4 * 0.5 / np.sqrt(a.size)


def test_same_seed_same_stream_and_zero_rate_is_free():
    x = tf.ones([16, 16])
    a = Dropout(0.3, seed=9)(x, training=True).numpy()
    b = Dropout(0.3, seed=9)(x, training=True).numpy()
    np.testing.assert_array_equal(a, b)
    assert Dropout(0.0).seed_generator is None
    np.testing.assert_array_equal(Dropout(0.0)(x, training=True).numpy(), x.numpy())


# ------------------------------------------------------------------ stored masks (store_mask)
def _keyed_dropout(store_mask: bool, device: str = "cpu"):
    """A jit-compiled training call of Dropout(0.3, store_mask) with the training loop's keys
    (the step is a run-time value, as in the trainer), traced for `device`, with its
    gradient."""
    layer = Dropout(0.3, store_mask=store_mask)

    @tf.function(jit_compile=True)
    def call(x, step):
        plan = keyed_plan(seed=5, step=step, example_ids=tf.range(4), examples_per_step=4,
                          plan=StepPlan(device=device))
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = layer(x, training=True, plan=plan)
            loss = tf.reduce_sum(y * y)
        return y, tape.gradient(loss, x)
    return call


@pytest.mark.xla
def test_stored_mask_gives_the_same_values_and_gradients():
    x = tf.random.stateless_normal([4, 3, 16, 24], seed=[1, 2])
    step = tf.constant(7, tf.int64)
    y_stored, g_stored = _keyed_dropout(True)(x, step)
    y_plain, g_plain = _keyed_dropout(False)(x, step)
    np.testing.assert_array_equal(y_stored.numpy(), y_plain.numpy())
    np.testing.assert_array_equal(g_stored.numpy(), g_plain.numpy())
    dropped = np.mean(y_plain.numpy() == 0.0)
    assert abs(dropped - 0.3) < 0.05
    # Outside the key scope (the layer's own seed stream) too.
    a = Dropout(0.3, seed=4, store_mask=True)(x, training=True).numpy()
    b = Dropout(0.3, seed=4)(x, training=True).numpy()
    np.testing.assert_array_equal(a, b)


@pytest.mark.xla
def test_stored_mask_is_a_conditional_that_xla_keeps_on_a_cpu():
    """The mask is stored only if XLA keeps the conditional: a condition it could prove true
    would be folded away, and the speed-up lost without any other sign."""
    x = tf.ones([4, 3, 16, 24])
    step = tf.constant(7, tf.int64)

    def conditionals(store_mask):
        hlo = _keyed_dropout(store_mask).experimental_get_compiler_ir(x, step)(
            stage="optimized_hlo")
        return hlo.count(" conditional(")

    assert conditionals(True) == 1
    assert conditionals(False) == 0


@pytest.mark.xla
def test_a_gpus_bit_packed_mask_gives_the_same_values_and_gradients():
    """On a GPU `store_mask` packs the mask's axis 1 into the bits of an integer (int16 up to
    15 elements, int32 up to 31) and reads it back: nothing may change."""
    x = tf.random.stateless_normal([4, 3, 16, 24], seed=[1, 2])
    step = tf.constant(7, tf.int64)
    gpu = StepPlan(device="gpu")
    assert gpu.packs_dropout_masks and not StepPlan(device="cpu").packs_dropout_masks
    y_packed, g_packed = _keyed_dropout(True, "gpu")(x, step)
    y_plain, g_plain = _keyed_dropout(False, "gpu")(x, step)
    wide = tf.random.stateless_normal([2, 20, 8, 8], seed=[3, 4])  # the int32 form
    wide_packed = Dropout(0.3, seed=6, store_mask=True)(wide, training=True, plan=gpu)
    wide_plain = Dropout(0.3, seed=6)(wide, training=True, plan=gpu)
    np.testing.assert_array_equal(y_packed.numpy(), y_plain.numpy())
    np.testing.assert_array_equal(g_packed.numpy(), g_plain.numpy())
    np.testing.assert_array_equal(wide_packed.numpy(), wide_plain.numpy())
    assert "s16[" in _keyed_dropout(True, "gpu").experimental_get_compiler_ir(x, step)(
        stage="hlo")  # packed: the three heads' bits in one int16


@pytest.mark.xla
def test_row_draws_give_each_part_the_mask_of_a_call_of_its_own():
    """Two tensors stacked on their second-to-last axis and dropped out at once with
    `row_draws` get exactly the masks of two calls, inside the training loop's keys and
    outside (the layer's seed stream)."""
    a = tf.random.stateless_normal([4, 3, 5, 8], seed=[5, 6])
    b = tf.random.stateless_normal([4, 3, 2, 8], seed=[7, 8])
    layer = Dropout(0.4)

    @tf.function(jit_compile=True)
    def calls(a, b, step):
        plan = keyed_plan(seed=5, step=step, example_ids=tf.range(4), examples_per_step=4)
        separate = tf.concat([layer(a, training=True, plan=plan),
                              layer(b, training=True, plan=plan)], axis=2)
        plan = keyed_plan(seed=5, step=step, example_ids=tf.range(4), examples_per_step=4)
        stacked = layer(tf.concat([a, b], axis=2), training=True, row_draws=(5, 2), plan=plan)
        return separate, stacked

    separate, stacked = calls(a, b, tf.constant(3, tf.int64))
    np.testing.assert_array_equal(stacked.numpy(), separate.numpy())
    assert 0.2 < np.mean(stacked.numpy() == 0.0) < 0.6
    first, second = Dropout(0.4, seed=2), Dropout(0.4, seed=2)
    separate = tf.concat([first(a, training=True), first(b, training=True)], axis=2)
    stacked = second(tf.concat([a, b], axis=2), training=True, row_draws=(5, 2))
    np.testing.assert_array_equal(stacked.numpy(), separate.numpy())
    with pytest.raises(ValueError, match=r"row_draws \(5, 3\) do not add up"):
        layer(tf.concat([a, b], axis=2), training=True, row_draws=(5, 3))


def test_the_stored_masks_condition_is_true_for_every_key():
    keys = tf.constant([0, 1, 2 ** 31, 2 ** 32 - 2, 2 ** 32 - 1], tf.uint32)
    for k in keys:
        assert bool(always_true(k))
    assert bool(always_true(keys))
    assert Dropout(0.1, store_mask=True).get_config()["store_mask"] is True
    assert Dropout.from_config(Dropout(0.1, store_mask=True).get_config()).store_mask


# ------------------------------------------------------------- the hash, against its formula
def _fmix32_np(h):
    h = h.astype(np.uint32)
    h ^= h >> np.uint32(16)
    h *= np.uint32(0x85EBCA6B)
    h ^= h >> np.uint32(13)
    h *= np.uint32(0xC2B2AE35)
    return h ^ (h >> np.uint32(16))


def _formula_bits(shape, k0, k1):
    """The module docstring's formula in numpy: element n (the row-major index, within the row
    when k1 is a vector of per-row keys) gets fmix32(fmix32(n G + k0 C + k1) ^ fmix32(k1 ^
    fmix32(k0)))."""
    k0 = np.uint32(k0)
    k1 = np.asarray(k1, np.uint32)
    if k1.ndim:
        n = np.arange(np.prod(shape[1:]), dtype=np.uint32).reshape([1] + list(shape[1:]))
        k1 = k1.reshape([-1] + [1] * (len(shape) - 1))
    else:
        n = np.arange(np.prod(shape), dtype=np.uint32).reshape(shape)
    with np.errstate(over="ignore"):
        h = _fmix32_np(n * np.uint32(0x9E3779B9) + k0 * np.uint32(0x85EBCA77) + k1)
        return _fmix32_np(h ^ _fmix32_np(k1 ^ _fmix32_np(np.asarray(k0))))


@pytest.mark.parametrize("shape, k1", [
    ((3, 5, 7, 11), 2 ** 32 - 3),                   # one key for the tensor
    ((4, 1, 9, 130), [0, 1, 2 ** 31, 2 ** 32 - 1]),  # a key per row, a dimension of size 1
    ((2, 1409, 1), 77),
    ((), 5),
])
@pytest.mark.xla
def test_bits_follow_the_flat_index_formula_exactly(shape, k1):
    """The per-dimension sum that builds n * GOLDEN equals the flat index formula bit for bit,
    eagerly, traced (under XLA and not) and with sizes known only at run time, with the step a
    run-time value as in the trainer."""
    k0 = 0xDEADBEEF
    expected = _formula_bits(shape, k0, k1)
    k0_t, k1_t = tf.constant(k0, tf.uint32), tf.constant(k1, tf.uint32)
    np.testing.assert_array_equal(hashed_bits(list(shape), k0_t, k1_t).numpy(), expected)
    # Traced, a call of the traced hash of these sizes (layers/dropout.py's _traced_hash):
    # compiled by XLA and run by TensorFlow's graph runtime.
    for jit_compile in (True, False):
        traced = tf.function(lambda k1: hashed_bits(list(shape), k0_t, k1),
                             jit_compile=jit_compile)
        np.testing.assert_array_equal(traced(k1_t).numpy(), expected)
    # Sizes known only at run time give the same bits.
    dynamic = tf.function(lambda x, k1: hashed_bits(tf.shape(x), k0_t, k1),
                          input_signature=[tf.TensorSpec([None] * len(shape)),
                                           tf.TensorSpec(k1_t.shape, tf.uint32)])
    np.testing.assert_array_equal(dynamic(tf.zeros(shape), k1_t).numpy(), expected)


# --------------------------------------------------------- the same masks on every layout
def _layout_masks(layer, rows_of_calls, step, jit):
    """{example id: keep mask [6, 10]} and the shared mask [5, 7] when the 8 examples of a step
    are split over calls (replicas or micro-batches, each traced on its own) holding the
    example ids `rows_of_calls`, each call also drawing a batch-shared mask."""
    def call(ids, step):
        plan = keyed_plan(seed=11, step=step, example_ids=ids, examples_per_step=8)
        batch = layer(tf.ones([len(rows_of_calls[0]), 6, 10]), training=True, plan=plan)
        shared = layer(tf.ones([5, 7]), training=True, shared_over_batch=True, plan=plan)
        return batch, shared

    call = tf.function(call, jit_compile=True) if jit else call
    masks, shared_masks = {}, []
    for ids in rows_of_calls:
        batch, shared = call(tf.constant(ids, tf.int32), step)
        masks.update({e: batch.numpy()[r] != 0 for r, e in enumerate(ids)})
        shared_masks.append(shared.numpy() != 0)
    return masks, shared_masks


@pytest.mark.xla
def test_masks_are_the_same_for_any_split_of_the_step_over_replicas_and_micro_batches():
    """One device (8 rows, compiled) against two replicas holding interleaved examples and
    against four micro-batches (eager): every example draws the same mask, and so does every
    batch-shared tensor; another step draws other masks."""
    layer = Dropout(0.3)
    step = tf.constant(41, tf.int64)
    one, one_shared = _layout_masks(layer, [[0, 1, 2, 3, 4, 5, 6, 7]], step, jit=True)
    replicas, rep_shared = _layout_masks(layer, [[0, 1, 4, 5], [2, 3, 6, 7]], step, jit=True)
    micro, micro_shared = _layout_masks(layer, [[6, 7], [0, 1], [4, 5], [2, 3]], step, jit=False)
    for e in range(8):
        np.testing.assert_array_equal(replicas[e], one[e])
        np.testing.assert_array_equal(micro[e], one[e])
    for shared in rep_shared + micro_shared:
        np.testing.assert_array_equal(shared, one_shared[0])
    # The masks are real draws: examples differ from each other and from the next step's.
    assert abs(np.mean(one[0]) - 0.7) < 0.2 and not np.array_equal(one[0], one[1])
    later, _ = _layout_masks(layer, [[0, 1, 2, 3, 4, 5, 6, 7]], step + 1, jit=True)
    assert not np.array_equal(later[0], one[0])
