"""The pretraining loop on a tiny model and the synthetic pipeline: loss against an eager
computation, memory continuation, resume, determinism, checkpoint coverage, failure handling."""

import json

import numpy as np
import pytest
import tensorflow as tf

from xlnet_tf2.config import XLNetConfig
from xlnet_tf2.tasks.pretraining import DataShape, PretrainTask
from xlnet_tf2.tasks.pretraining_config import PretrainConfig
from benchmarks.tools.synthetic_data import SyntheticPretrainData, synthetic_pretrain_dataset
from xlnet_tf2.training.trainer import Trainer, TrainingDivergedError

SHAPE = DataShape(seq_len=16, reuse_len=8, num_predict=4, bi_data=True)
# A large init scale makes attention (and so the memory) matter from the first steps.
MODEL = XLNetConfig.preset("tiny", n_token=200, d_model=32, n_head=2, d_head=16, d_inner=64,
                           initializer_range=0.3)


def dataset_fn(context, start_step):
    return synthetic_pretrain_dataset(seq_len=16, reuse_len=8, num_predict=4, bi_data=True,
                                      vocab_size=200, global_batch_size=4, input_context=context,
                                      start_step=start_step, seed=3)


def make(model_dir, device=None, **overrides):
    """A pretraining Trainer at the paper's run-time settings (dropout 0.1, bi_data, memory) unless
    `overrides` say otherwise; its step traced for `device` (default: this machine)."""
    values = dict(model_dir=str(model_dir), data_dir=("synthetic",), model_config="tiny",
                  train_batch_size=4, train_steps=2, steps_per_loop=2, learning_rate=1e-2,
                  warmup_steps=0, mem_len=8, save_steps=100, log_steps=100, seed=7,
                  initializer_range=0.3,
                  peak_tflops=1.0)
    values.update(overrides)
    return Trainer(PretrainTask(PretrainConfig.flat(**values), architecture=MODEL,
                                data=SyntheticPretrainData(SHAPE, 200, dataset_fn)),
                   device=device)


def eager_loss(pretrainer, batch, mems):
    batch = pretrainer.task.model_features(batch)  # the dense masks, as the step builds them
    inputs = {k: batch[k] for k in ("input_ids", "segment_ids", "perm_mask", "target_mapping")}
    inputs["mems"] = mems
    logits = pretrainer.model(inputs, training=False)["logits"]
    ce = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=batch["target"], logits=logits)
    return float(tf.reduce_sum(ce * batch["target_mask"]) / tf.reduce_sum(batch["target_mask"]))


def test_loss_matches_eager_and_memory_continues(tmp_path):
    # Step 1 of the loop against an eager forward pass on the initial weights (no dropout,
    # so the eager inference pass computes the same function).
    a = make(tmp_path / "a", train_steps=1, dropout=0.0, dropatt=0.0)
    batch1 = next(iter(dataset_fn(None, 0)))
    loss1 = eager_loss(a, batch1, a.model.transformer.initial_memory(4))
    result_a = a.train()
    assert result_a.steps[0]["loss"] == pytest.approx(loss1, abs=1e-5)

    # Step 2 eagerly, from the weights and memory saved after step 1.
    weights1 = [v.numpy() for v in a.model.variables]
    mems1 = [tf.constant(v.numpy()) for v in a.carried_state.layers]
    assert all(float(tf.reduce_max(tf.abs(m))) > 0 for m in mems1)  # memory was filled
    batch2 = next(iter(dataset_fn(None, 1)))
    loss2 = eager_loss(a, batch2, mems1)
    loss2_zero_memory = eager_loss(a, batch2, a.model.transformer.initial_memory(4))
    assert abs(loss2 - loss2_zero_memory) > 1e-3  # the memory matters for this loss

    # Resuming from the checkpoint reproduces the eager step 2 (memory restored)...
    b = make(tmp_path / "a", train_steps=2, dropout=0.0, dropatt=0.0)
    result_b = b.train()
    assert result_b.start_step == 1
    assert result_b.steps[0]["loss"] == pytest.approx(loss2, abs=1e-5)
    # ... and so does an uninterrupted run, with one or with two steps per loop.
    for steps_per_loop in (1, 2):
        c = make(tmp_path / f"c{steps_per_loop}", steps_per_loop=steps_per_loop, dropout=0.0,
                 dropatt=0.0)
        losses = [s["loss"] for s in c.train().steps]
        assert losses == pytest.approx([loss1, loss2], abs=1e-5)
    del weights1


def test_training_is_deterministic_and_learns(tmp_path):
    runs = []
    for name in ("x", "y"):
        p = make(tmp_path / name, train_steps=12, steps_per_loop=4, learning_rate=3e-3,
                 warmup_steps=2)
        losses = [s["loss"] for s in p.train().steps]
        runs.append((losses, [v.numpy() for v in p.model.variables]))
    assert runs[0][0] == runs[1][0]
    for u, v in zip(runs[0][1], runs[1][1]):
        np.testing.assert_array_equal(u, v)
    assert np.mean(runs[0][0][-3:]) < np.mean(runs[0][0][:3]) - 0.2


def test_checkpoint_restores_every_variable(tmp_path):
    p = make(tmp_path, train_steps=3, steps_per_loop=3)
    p.train()
    saved = {"model": [v.numpy() for v in p.model.variables],
             "optimizer": [v.numpy() for v in p.optimizer.variables],
             "memory": [v.numpy() for v in p.carried_state.layers]}
    # Another seed: every value that matches below came from the checkpoint, not the init.
    q = make(tmp_path, train_steps=3, seed=99)
    assert not np.array_equal(q.model.transformer.layer_1.rel_attn.q.numpy(),
                              p.model.transformer.layer_1.rel_attn.q.numpy())
    assert q.restore() is not None
    assert int(q.global_step.numpy()) == 3
    for key, fresh in (("model", q.model.variables), ("optimizer", q.optimizer.variables),
                       ("memory", q.carried_state.layers)):
        assert len(fresh) == len(saved[key])
        for old, new in zip(saved[key], fresh):
            np.testing.assert_array_equal(old, new.numpy())
    assert int(q.optimizer.iterations.numpy()) == 3


def test_nan_loss_stops_and_keeps_last_good_checkpoint(tmp_path):
    make(tmp_path, train_steps=2, save_steps=2).train()
    p = make(tmp_path, train_steps=6, save_steps=2)
    restore = p.restore

    def poisoned_restore():
        path = restore()
        p.model.lm_bias.assign(tf.fill(p.model.lm_bias.shape, np.nan))
        return path

    p.restore = poisoned_restore
    with pytest.raises(TrainingDivergedError, match=r"at step 3.*ckpt-2"):
        p.train()
    assert tf.train.latest_checkpoint(str(tmp_path)).endswith("ckpt-2")


def test_corrupt_latest_checkpoint_falls_back_to_previous(tmp_path, capsys):
    make(tmp_path, train_steps=4, save_steps=2).train()
    data = tmp_path / "ckpt-4.data-00000-of-00001"
    data.write_bytes(data.read_bytes()[:100])  # truncated
    q = make(tmp_path, train_steps=4, save_steps=2)
    path = q.restore()
    assert path.endswith("ckpt-2")
    assert int(q.global_step.numpy()) == 2
    assert "ckpt-4 is unreadable" in capsys.readouterr().out


@pytest.fixture(scope="module")
def float32_losses(tmp_path_factory):
    """The losses of 3 steps without XLA in float32, which every precision's compiled run must
    give. The paper's initializer scale: with the large test scale (0.3) float16 overflows
    under the initial loss scale and the LossScaleOptimizer skips the first steps."""
    return [s["loss"] for s in make(tmp_path_factory.mktemp("ref"), train_steps=3,
                                    steps_per_loop=3, initializer_range=0.02).train().steps]


@pytest.mark.xla
@pytest.mark.parametrize("precision", ["float32", "mixed_bfloat16", "mixed_float16"])
def test_jit_compiled_step_and_mixed_precision(tmp_path, precision, float32_losses):
    reference = float32_losses
    try:
        p = make(tmp_path / "jit", train_steps=3, steps_per_loop=3, jit_compile=True,
                 precision=precision, initializer_range=0.02)
        assert p.model.compute_dtype == {"float32": "float32", "mixed_bfloat16": "bfloat16",
                                         "mixed_float16": "float16"}[precision]
        losses = [s["loss"] for s in p.train().steps]
    finally:
        import keras
        keras.mixed_precision.set_global_policy("float32")
    tolerance = 1e-4 if precision == "float32" else 5e-2
    assert losses == pytest.approx(reference, abs=tolerance)


def test_memory_resets_where_a_slot_starts_a_new_stream(tmp_path):
    """At chunk 0 (a block boundary of the schedule) a slot's memory holds another stream's
    text: the step must see zero memory there, and the carried memory elsewhere."""
    def blocks_of_two(context, start_step):  # chunk 0 at every even step
        return dataset_fn(context, start_step).map(
            lambda b: {**b, "chunk_index": b["chunk_index"] % 2})

    def make_blocks(model_dir, train_steps):
        values = dict(model_dir=str(model_dir), data_dir=("synthetic",), train_batch_size=4,
                      train_steps=train_steps, steps_per_loop=1, learning_rate=1e-2,
                      warmup_steps=0, mem_len=8, save_steps=1, log_steps=100, seed=7,
                      initializer_range=0.3, peak_tflops=1.0, dropout=0.0, dropatt=0.0)
        return Trainer(PretrainTask(PretrainConfig.flat(**values), architecture=MODEL,
                                    data=SyntheticPretrainData(SHAPE, 200, blocks_of_two)))

    a = make_blocks(tmp_path, 2)
    a.train()  # steps 1 (chunk 0) and 2 (chunk 1): the memory after step 2 is not zero
    mems = [tf.constant(v.numpy()) for v in a.carried_state.layers]
    assert all(float(tf.reduce_max(tf.abs(m))) > 0 for m in mems)
    batch3 = next(iter(blocks_of_two(None, 2)))
    assert set(batch3["chunk_index"].numpy().tolist()) == {0}
    with_memory = eager_loss(a, batch3, mems)
    zero_memory = eager_loss(a, batch3, a.model.transformer.initial_memory(4))
    assert abs(with_memory - zero_memory) > 1e-3
    b = make_blocks(tmp_path, 3)
    loss3 = b.train().steps[0]["loss"]
    assert loss3 == pytest.approx(zero_memory, abs=1e-5)


def test_held_out_evaluation_matches_an_eager_pass(tmp_path):
    """Every eval_steps and at the end: the mean cross-entropy of the first eval_batches
    held-out batches, memory carried from zero, no dropout; logged to eval_results.jsonl."""
    def held_out(context, start_step=0):
        return synthetic_pretrain_dataset(seq_len=16, reuse_len=8, num_predict=4, bi_data=True,
                                          vocab_size=200, global_batch_size=4,
                                          input_context=context, start_step=start_step, seed=11)

    values = dict(model_dir=str(tmp_path), data_dir=("synthetic",), train_batch_size=4,
                  train_steps=4, steps_per_loop=2, learning_rate=1e-2, warmup_steps=0,
                  mem_len=8, save_steps=100, log_steps=100, seed=7, initializer_range=0.3,
                  peak_tflops=1.0, eval_steps=2, eval_batches=3)
    p = Trainer(PretrainTask(
        PretrainConfig.flat(**values), architecture=MODEL,
        data=SyntheticPretrainData(SHAPE, 200, dataset_fn),
        eval_data=SyntheticPretrainData(SHAPE, 200, lambda context, start: held_out(context))))
    p.train()
    results = [json.loads(line) for line in open(tmp_path / "eval_results.jsonl")]
    assert [r["step"] for r in results] == [2, 4]
    # The last evaluation used the final weights: redo it eagerly.
    mems = p.model.transformer.initial_memory(4)
    total, count = 0.0, 0.0
    for batch in held_out(None).take(3):
        batch = p.task.model_features(batch)
        inputs = {k: batch[k] for k in ("input_ids", "segment_ids", "perm_mask",
                                        "target_mapping")}
        out = p.model({**inputs, "mems": mems}, training=False)
        ce = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=batch["target"],
                                                            logits=out["logits"])
        total += float(tf.reduce_sum(ce * batch["target_mask"]))
        count += float(tf.reduce_sum(batch["target_mask"]))
        mems = out["new_mems"]
    assert results[-1]["loss"] == pytest.approx(total / count, abs=1e-5)
    assert results[-1]["perplexity"] == pytest.approx(np.exp(total / count), rel=1e-5)
    assert results[-1]["targets"] == int(count)



@pytest.mark.xla
@pytest.mark.slow
def test_the_accelerators_step_on_this_cpu_matches_the_cpus(tmp_path):
    """The whole step compiled as traced for a GPU (layers/step_plan.py: among others the
    grouped clipping norm and AdamW update of training/optimization.py) gives the CPU form's
    losses and gradient norms to float32 rounding, and weights within a few ulps of the
    updates' size (Adam divides small gradients by their own scale). The reference attention
    is forced: under "auto" a GPU step with triton installed holds the Triton kernels' custom
    calls, which only a GPU's XLA runs (the layer's Triton path is checked against the
    reference in tests/layers/kernels/test_triton_attention.py)."""
    runs = {}
    for target in ("cpu", "gpu"):
        p = make(tmp_path / target, device=target, jit_compile=True,
                 attention_implementation="reference")
        steps = p.train().steps
        runs[target] = (steps, [v.numpy() for v in p.model.trainable_variables])
    (cpu_steps, cpu_weights), (gpu_steps, gpu_weights) = runs["cpu"], runs["gpu"]
    for key in ("loss", "grad_norm"):
        assert [s[key] for s in gpu_steps] == pytest.approx([s[key] for s in cpu_steps],
                                                            rel=1e-5)
    for cpu, gpu in zip(cpu_weights, gpu_weights):  # updates are ~1e-2 (learning_rate)
        np.testing.assert_allclose(gpu, cpu, rtol=0, atol=2e-5)
