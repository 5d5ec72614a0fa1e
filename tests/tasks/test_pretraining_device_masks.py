"""The pipeline ships compact features and the training step builds the dense two-stream masks
on the device: equality with the masks the host built before, in training and held-out
evaluation, under jit_compile; and the host-to-device bytes per example."""

import numpy as np
import pytest
import tensorflow as tf

from xlnet_tf2.config import XLNetConfig
from xlnet_tf2.tasks.objective import COMPACT_FEATURES, two_stream_masks
from xlnet_tf2.data.pretrain_dataset import (DENSE_HOST_DTYPES, OUTPUT_FEATURES,
                                             build_pretrain_dataset, bytes_per_example)
from xlnet_tf2.tasks.objective import LOSS_FEATURES, MODEL_FEATURES
from xlnet_tf2.tasks.pretraining import (DataShape,
                                         PretrainTask)
from xlnet_tf2.config_flags import RunConfigError
from xlnet_tf2.tasks.pretraining_config import PretrainConfig
from benchmarks.tools.synthetic_data import SyntheticPretrainData, synthetic_pretrain_dataset
from xlnet_tf2.training.trainer import Trainer
from xlnet_tf2.prep.docstring_corpus import build_stdlib_corpus
from xlnet_tf2.data.params import DataParams
from xlnet_tf2.tokenizers.sentencepiece_tokenizer import train_sentencepiece

from fixtures.corpora import LOCAL_BEAM

SMALL = DataParams(seq_len=64, reuse_len=32, num_predict=10, perm_size=32, bi_data=True,
                   num_streams=2, num_passes=1, seed=7)

DENSE = MODEL_FEATURES + LOSS_FEATURES


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """A small real directory: stdlib docstrings -> SentencePiece -> records (bi_data)."""
    from xlnet_tf2.prep.beam_pipeline import create_tfrecords

    d = tmp_path_factory.mktemp("prepared")
    corpus = str(d / "corpus.txt")
    build_stdlib_corpus(corpus, min_bytes=20_000, max_bytes=40_000)
    spm = train_sentencepiece([corpus], vocab_size=600, model_prefix=str(d / "sp"))
    create_tfrecords(params=SMALL, output_dir=str(d / "data"), spm_model=spm,
                     input_patterns=[corpus], beam_args=LOCAL_BEAM)
    return str(d / "data")


def _host_dense(x, reuse_len):
    """What the pipeline shipped before: the masks built on the host (tf.data) by
    two_stream_masks from the same parsed records, segment ids as int32."""
    out = two_stream_masks(x["input_ids"], x["perm_rank"], x["target_positions"], reuse_len)
    out["input_ids"] = x["input_ids"]
    out["segment_ids"] = tf.cast(x["segment_ids"], tf.int32)
    return out


def _small_pretrainer(model_dir, shape, dataset_fn, eval_dataset_fn=None, **overrides):
    model = XLNetConfig.preset("tiny", n_token=600, d_model=32, n_head=2, d_head=16,
                               d_inner=64, initializer_range=0.3)
    values = dict(model_dir=str(model_dir), data_dir=("synthetic",), model_config="tiny",
                  train_batch_size=4, train_steps=1, steps_per_loop=1, learning_rate=1e-2,
                  warmup_steps=0, mem_len=8, save_steps=100, log_steps=100, seed=7,
                  initializer_range=0.3, peak_tflops=1.0, dropout=0.0, dropatt=0.0,
                  jit_compile=True)
    values.update(overrides)
    eval_data = (None if eval_dataset_fn is None else
                 SyntheticPretrainData(shape, 600, lambda context, start: eval_dataset_fn(context)))
    return Trainer(PretrainTask(PretrainConfig.flat(**values), architecture=model,
                                data=SyntheticPretrainData(shape, 600, dataset_fn),
                                eval_data=eval_data))


@pytest.mark.xla
@pytest.mark.parametrize("online", [False, True])
def test_device_masks_equal_host_masks_on_real_records(tmp_path, prepared, online):
    """The real pipeline (stored and online orders): the pretraining task's jit-compiled builder
    gives bit-identical masks to the host-built ones."""
    cfg = dict(seq_len=SMALL.seq_len, reuse_len=SMALL.reuse_len, num_predict=SMALL.num_predict,
               bi_data=True, vocab_size=600, global_batch_size=4, online_permutation=online,
               seed=5)
    ds = build_pretrain_dataset(prepared, **cfg)
    assert tuple(ds.element_spec) == OUTPUT_FEATURES
    shape = DataShape(SMALL.seq_len, SMALL.reuse_len, SMALL.num_predict, True)
    p = _small_pretrainer(tmp_path, shape, None)
    device = tf.function(p.task.model_features, jit_compile=True)
    host = ds.map(lambda x: _host_dense(x, SMALL.reuse_len))
    for compact, expected in zip(ds.take(3), host.take(3)):
        built = device({k: compact[k] for k in COMPACT_FEATURES})
        assert set(built) == set(DENSE)
        for k in DENSE:
            assert built[k].dtype == expected[k].dtype, k
            np.testing.assert_array_equal(built[k].numpy(), expected[k].numpy(), err_msg=k)
        # Not trivially equal: the masks block something and the targets are real.
        assert 0 < float(tf.reduce_mean(built["perm_mask"])) < 1
        assert float(tf.reduce_sum(built["target_mask"])) > 0


def test_training_and_evaluation_use_masks_built_on_the_device(tmp_path):
    """The step receives only compact features; its (XLA) loss and the held-out loss equal an
    eager computation with host-built dense masks."""
    shape = DataShape(seq_len=16, reuse_len=8, num_predict=4, bi_data=True)

    def data(context, start_step, seed=3):
        return synthetic_pretrain_dataset(seq_len=16, reuse_len=8, num_predict=4, bi_data=True,
                                          vocab_size=600, global_batch_size=4,
                                          input_context=context, start_step=start_step,
                                          seed=seed)

    # (The compiled step at full size: test_pretraining_base_shape.py; here the graph step.)
    p = _small_pretrainer(tmp_path, shape, data, eval_steps=1, eval_batches=2,
                          eval_dataset_fn=lambda context: data(context, 0, seed=11),
                          jit_compile=False)
    assert set(p.task.step_features) == set(COMPACT_FEATURES) | {"stream_id", "direction",
                                                           "chunk_index"}
    assert not {"perm_mask", "target_mapping", "target", "target_mask"} & set(
        data(None, 0).element_spec)

    def eager(batches):
        mems = p.model.transformer.initial_memory(4)
        total = count = 0.0
        for x in batches:
            d = _host_dense(x, 8)
            out = p.model({**{k: d[k] for k in MODEL_FEATURES}, "mems": mems}, training=False)
            ce = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=d["target"],
                                                                logits=out["logits"])
            total += float(tf.reduce_sum(ce * d["target_mask"]))
            count += float(tf.reduce_sum(d["target_mask"]))
            mems = out["new_mems"]
        return total / count

    held_out = eager(data(None, 0, seed=11).take(2))
    assert p.task.evaluate(p, 0)["loss"] == pytest.approx(held_out, abs=1e-5)
    train_loss = eager(data(None, 0).take(1))
    assert p.train().steps[0]["loss"] == pytest.approx(train_loss, abs=1e-5)


def test_bytes_per_example_at_the_paper_shape():
    """L = 512, P = 85: the dense float32 masks were ~1.2 MB per example; the compact
    features are under 5 KB. The synthetic pipeline ships exactly the real one's features."""
    L, P = 512, 85
    dense = bytes_per_example(L, P, dense_masks=True)
    compact = bytes_per_example(L, P)
    assert dense == 4 * L * L + 4 * P * L + 4 * (2 * L + 2 * P + 4) == 1_227_448
    assert compact == 4 * L + 1 * L + 4 * L + 4 * P + 4 * 4 == 4_964
    assert dense / compact > 240
    assert "perm_mask" in DENSE_HOST_DTYPES
    spec = synthetic_pretrain_dataset(seq_len=L, reuse_len=256, num_predict=P, bi_data=True,
                                      vocab_size=32000, global_batch_size=2).element_spec
    assert tuple(spec) == OUTPUT_FEATURES
    assert sum(s.shape.num_elements() * s.dtype.size for s in spec.values()) == 2 * compact


@pytest.mark.xla
def test_left_to_right_order_reaches_the_step_and_ignores_later_tokens(tmp_path):
    """--factorization_order=left_to_right: the task's compiled mask builder gives causal
    masks, and a target's loss does not move when every token after it changes (it does under
    the permutation order, whose non-targets are visible from both sides)."""
    shape = DataShape(seq_len=16, reuse_len=8, num_predict=4, bi_data=True)

    def data(context, start_step):
        return synthetic_pretrain_dataset(seq_len=16, reuse_len=8, num_predict=4, bi_data=True,
                                          vocab_size=600, global_batch_size=4,
                                          input_context=context, start_step=start_step, seed=3)

    batch = next(iter(data(None, 0)))
    compact = {k: batch[k] for k in COMPACT_FEATURES}
    first_target = int(tf.reduce_min(tf.where(batch["target_positions"][0] >= 0,
                                              batch["target_positions"][0], 99)))
    changed = dict(compact)
    ids = compact["input_ids"].numpy().copy()
    ids[0, first_target + 1:] = 17  # every later token of row 0 (no <sep>/<cls> any more)
    changed["input_ids"] = tf.constant(ids, compact["input_ids"].dtype)

    def first_target_loss(trainer, features):
        d = tf.function(trainer.task.model_features, jit_compile=True)(features)
        out = trainer.model({**{k: d[k] for k in MODEL_FEATURES},
                             "mems": trainer.model.transformer.initial_memory(4)},
                            training=False)
        ce = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=d["target"],
                                                            logits=out["logits"])
        return float(ce[0, 0]), d["perm_mask"].numpy()

    losses = {}
    for order in ("left_to_right", "permutation"):
        p = _small_pretrainer(tmp_path / order, shape, data, factorization_order=order)
        before, mask = first_target_loss(p, compact)
        after, _ = first_target_loss(p, changed)
        losses[order] = (before, after)
        if order == "left_to_right":
            L = 16
            is_target = np.zeros(L, bool)
            is_target[[t for t in batch["target_positions"][0].numpy() if t >= 0]] = True
            causal = np.array([[j > i or (j == i and is_target[i]) for j in range(L)]
                               for i in range(L)], np.float32)
            np.testing.assert_array_equal(mask[0], causal)
    assert losses["left_to_right"][0] == pytest.approx(losses["left_to_right"][1], abs=1e-6)
    assert abs(losses["permutation"][0] - losses["permutation"][1]) > 1e-4


def test_left_to_right_order_needs_memory():
    # Without memory a target at position 0 would see no key, and a softmax over blocked keys
    # only spreads over all of them, the future included.
    with pytest.raises(RunConfigError, match="--mem_len > 0"):
        PretrainConfig.flat(model_dir="m", data_dir=("d",), factorization_order="left_to_right",
                            mem_len=0)
    assert PretrainConfig.flat(model_dir="m", data_dir=("d",), mem_len=0).model.mem_len == 0
