"""--grad_accum_steps for pretraining: N micro-batches per update equal the large batch, with
Transformer-XL memory carried per micro-batch stream (bi_data, memory on), and an exact resume
at dropout 0.1."""

import numpy as np
import pytest
import tensorflow as tf

from xlnet_tf2.config import XLNetConfig
from xlnet_tf2.config_flags import RunConfigError
from xlnet_tf2.tasks.pretraining import DataShape, PretrainTask
from xlnet_tf2.tasks.pretraining_config import PretrainConfig
from benchmarks.tools.synthetic_data import SyntheticPretrainData, synthetic_pretrain_dataset
from xlnet_tf2.training.trainer import DataExhaustedError, Trainer

SHAPE = DataShape(seq_len=16, reuse_len=8, num_predict=4, bi_data=True)
# A large init scale makes attention (and so the memory) matter from the first steps.
MODEL = XLNetConfig.preset("tiny", n_token=200, d_model=32, n_head=2, d_head=16, d_inner=64,
                           initializer_range=0.3)
BATCH = 8


def make(model_dir, accum, stop_after=None, **overrides):
    """A pretraining Trainer of global batch 8 with `accum` micro-batches; `stop_after`: the data runs
    out after that many steps (an interrupted run, same schedule as the full one)."""
    def dataset_fn(context, start_step):
        data = synthetic_pretrain_dataset(seq_len=16, reuse_len=8, num_predict=4, bi_data=True,
                                          vocab_size=200, global_batch_size=BATCH,
                                          input_context=context, start_step=start_step, seed=3,
                                          micro_batches=accum)
        return data if stop_after is None else data.take(max(stop_after - start_step, 0))

    values = dict(model_dir=str(model_dir), data_dir=("synthetic",), model_config="tiny",
                  train_batch_size=BATCH, grad_accum_steps=accum, train_steps=3,
                  steps_per_loop=1, learning_rate=1e-2, warmup_steps=0, mem_len=8,
                  save_steps=1, log_steps=100, seed=7, initializer_range=0.3,
                  peak_tflops=1.0, dropout=0.0, dropatt=0.0)
    values.update(overrides)
    return Trainer(PretrainTask(PretrainConfig.flat(**values), architecture=MODEL,
                                data=SyntheticPretrainData(SHAPE, 200, dataset_fn)))


def _memory_by_slot(p):
    """{slot: [n_layer, M, D]} of the saved memory (rows are ordered differently per layout)."""
    layers = np.stack([v.numpy() for v in p.carried_state.layers], axis=1)
    return {int(s): layers[i] for i, s in enumerate(p.carried_state.slots)}


def _eager_step_loss(p, batch, mems):
    """(mean loss over the micro-batches, each fed rows [4k, 4k + 4) of `mems`; the same with
    the memory rows reversed, i.e. another micro-batch's memory)."""
    batch = p.task.model_features(batch)
    total, count, swapped = 0.0, 0.0, 0.0
    for k in range(2):
        rows = slice(4 * k, 4 * k + 4)
        inputs = {n: batch[n][rows] for n in ("input_ids", "segment_ids", "perm_mask",
                                                "target_mapping")}
        for memory, own in ((mems, True), ([m[::-1] for m in mems], False)):
            out = p.model({**inputs, "mems": [tf.constant(m[rows]) for m in memory]},
                          training=False)
            ce = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=batch["target"][rows],
                                                                logits=out["logits"])
            value = float(tf.reduce_sum(ce * batch["target_mask"][rows]))
            if own:
                total += value
                count += float(tf.reduce_sum(batch["target_mask"][rows]))
            else:
                swapped += value
    return total / count, swapped / count


def test_accumulation_equals_the_large_batch_and_carries_memory_per_micro_batch(tmp_path):
    """Dropout 0, bi_data, memory on, global batch 8: accum 2 (interrupted after step 1 and
    resumed, so the memory also goes through save/restore) against accum 1 over 3 steps."""
    one = make(tmp_path / "one", 1)
    loss1 = [s["loss"] for s in one.train().steps]
    assert loss1[0] - loss1[-1] > 0.05  # it trains (the comparison is not of constants)

    first = make(tmp_path / "two", 2, stop_after=1)
    with pytest.raises(DataExhaustedError):
        first.train()
    # The layouts differ: one batch [4 forward; 4 backward] against two micro-batches
    # [2 forward; 2 backward] each; the slots name the same texts.
    assert one.layout.slots(0) == [0, 1, 2, 3, 4, 5, 6, 7]
    assert first.layout.slots(0) == [0, 1, 4, 5, 2, 3, 6, 7]
    step1 = next(iter(first.task.build_inputs(None, 0)))
    np.testing.assert_array_equal(step1["stream_id"], [0, 1, 0, 1, 2, 3, 2, 3])
    np.testing.assert_array_equal(step1["direction"], [0, 0, 1, 1, 0, 0, 1, 1])
    # Step 2 eagerly: micro-batch k fed the memory micro-batch k produced at step 1.
    mems = [v.numpy() for v in first.carried_state.layers]                 # [8, M, D] each
    assert all(np.abs(m).max() > 0 for m in mems)
    two = make(tmp_path / "two", 2)  # restores in train()
    expected2, swapped2 = _eager_step_loss(first, next(iter(two.task.build_inputs(None, 1))), mems)
    assert abs(swapped2 - expected2) > 1e-3  # another micro-batch's memory: another loss
    result = two.train()
    assert result.start_step == 1
    loss2 = [s["loss"] for s in result.steps]
    assert loss2[0] == pytest.approx(expected2, abs=1e-5)
    assert loss2 == pytest.approx(loss1[1:], abs=2e-5)
    for a, b in zip(one.model.trainable_variables, two.model.trainable_variables):
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=2e-5, rtol=1e-4)
    mem1, mem2 = _memory_by_slot(one), _memory_by_slot(two)
    assert set(mem1) == set(mem2) == set(range(BATCH))
    for slot in mem1:
        np.testing.assert_allclose(mem1[slot], mem2[slot], atol=5e-5, rtol=1e-4)


def test_dropout_accumulation_resumes_exactly(tmp_path):
    """Dropout 0.1, two micro-batches: 3 steps straight equal 1 + 2 with a restart, bit for
    bit (losses, weights, memory)."""
    straight = make(tmp_path / "straight", 2, dropout=0.1, dropatt=0.1)
    reference = [s["loss"] for s in straight.train().steps]
    with pytest.raises(DataExhaustedError):
        make(tmp_path / "resumed", 2, stop_after=1, dropout=0.1, dropatt=0.1).train()
    resumed = make(tmp_path / "resumed", 2, dropout=0.1, dropatt=0.1)
    result = resumed.train()
    assert result.start_step == 1
    assert [s["loss"] for s in result.steps] == reference[1:]
    for a, b in zip(straight.model.variables, resumed.model.variables):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    for a, b in zip(straight.carried_state.layers, resumed.carried_state.layers):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_micro_batch_must_hold_both_directions(tmp_path):
    with pytest.raises(RunConfigError, match="micro-batch 1 .* must be even"):
        make(tmp_path, 8)  # micro-batches of one row
