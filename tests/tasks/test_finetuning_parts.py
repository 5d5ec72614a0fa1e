"""Layer-wise learning-rate decay, summaries, metrics and the readers' error messages."""

from __future__ import annotations

import json
import tempfile

import numpy as np
import pytest
import tensorflow as tf

from xlnet_tf2.config import XLNetConfig


def _tiny(n_layer=3):
    return XLNetConfig.preset("tiny", n_layer=n_layer, d_model=32, n_head=2, d_head=16,
                              d_inner=64, n_token=300)


def _update_sizes(layer_decay):
    import keras

    from xlnet_tf2.models.xlnet_classifier import SequenceClassifier
    from xlnet_tf2.tasks.finetuning import FinetuneConfig, FinetuneTask
    from xlnet_tf2.training.trainer import Trainer

    keras.utils.set_random_seed(0)
    model = SequenceClassifier(_tiny(), 2)
    inputs = model.dummy_inputs(16, batch_size=4)
    # Distinct tokens (identical ones would make attention uniform and the query gradient 0).
    inputs["input_ids"] = tf.constant(np.random.RandomState(0).randint(9, 300, [4, 16]), tf.int32)
    model(inputs)
    cfg = FinetuneConfig.flat(model_dir=tempfile.mkdtemp(), train_steps=10, learning_rate=1e-3,
                              layer_decay=layer_decay, best_metric="accuracy")
    # The optimizer the fine-tuning loop really builds for this model (layer-wise rates).
    task = FinetuneTask(cfg, model_fn=lambda: model, loss_fn=None,
                        dataset_fn=lambda context, start_step: None, eval_fn=None, seq_len=16)
    optimizer = Trainer(task).optimizer
    variables = [v for v in model.trainable_variables if v is not model.transformer.mask_emb]
    before = {id(v): v.numpy().copy() for v in variables}
    for _ in range(1):  # one step: the update ratio is exactly the lr ratio
        with tf.GradientTape() as tape:
            logits = model(inputs, training=True)["logits"]
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
                labels=tf.constant([0, 1, 0, 1]), logits=logits))
        optimizer.apply(tape.gradient(loss, variables), variables)
    blocks = model.transformer.blocks
    # Total |update| of each block's variables, and of the head.
    def moved(layer):
        return float(sum(np.sum(np.abs(v.numpy() - before[id(v)])) for v in layer.trainable_variables))

    return [moved(b) for b in blocks] + [moved(model.head)]


def test_layer_decay_gives_lower_layers_smaller_updates():
    flat = _update_sizes(1.0)
    decayed = _update_sizes(0.5)
    # Same data, same initialization: with decay 0.5 block i of 3 moves 0.5**(2-i) as far as
    # without decay, and the head as far.
    assert all(x > 0 for x in flat), flat
    np.testing.assert_allclose(np.array(decayed) / np.array(flat), [0.25, 0.5, 1.0, 1.0],
                               rtol=1e-3)


def test_layer_multipliers_are_structural():
    from xlnet_tf2.training.layer_decay import layer_lr_multipliers
    from xlnet_tf2.models.xlnet_classifier import SequenceClassifier

    model = SequenceClassifier(_tiny(), 2)
    model(model.dummy_inputs(8))
    multipliers = layer_lr_multipliers(model, 0.5)
    assert multipliers[id(model.transformer.word_embedding.embeddings)] == 0.125
    for block in model.transformer.blocks:
        assert {multipliers[id(v)] for v in block.trainable_variables} == {
            0.5 ** (2 - block.layer_index)}
    assert {multipliers[id(v)] for v in model.head.trainable_variables} == {1.0}


@pytest.mark.parametrize("summary_type", ["last", "first", "mean", "attn"])
def test_summary_ignores_padding(summary_type):
    """Changing the content of padded positions must not change the summary."""
    from xlnet_tf2.models.heads import SequenceSummary

    layer = SequenceSummary(8, summary_type, n_head=2, dropout=0.0)
    hidden = tf.random.normal([2, 5, 8], seed=1)
    if summary_type == "first":
        mask = tf.constant([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
        pad = tf.constant([[0, 0, 0, 1, 1], [0, 0, 0, 0, 0]], tf.float32)
    else:  # left padding, <cls> last
        mask = tf.constant([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])
        pad = tf.constant([[1, 1, 0, 0, 0], [0, 0, 0, 0, 0]], tf.float32)
    a = layer(hidden, attention_mask=mask)
    b = layer(hidden + 100.0 * pad[..., None], attention_mask=mask)
    np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-5)
    if summary_type == "mean":
        expected = tf.reduce_mean(hidden[0, 2:], axis=0)
        np.testing.assert_allclose(layer.proj(expected[None]).numpy()[0], a.numpy()[0], atol=1e-5)


def _numpy_summary(layer, hidden, mask):
    """The original's summarize_sequence(use_proj=True), without dropout, in NumPy from the
    layer's weights: the pooled vector [B, D] through dense(D, tanh)."""
    if layer.summary_type == "last":
        pooled = hidden[:, -1]
    elif layer.summary_type == "first":
        pooled = hidden[:, 0]
    elif layer.summary_type == "mean":
        pooled = (hidden * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
    else:  # one learned query attends over the real positions, n_head heads
        attention = layer.attention
        weights = {w.path.rsplit("/", 2)[-2] + "/" + w.path.rsplit("/", 1)[-1]: w.numpy()
                   for w in attention.weights}
        query = layer.query.numpy()[0, 0]                                          # [D]
        q = np.einsum("d,dnh->nh", query, weights["query/kernel"]) + weights["query/bias"]
        k = np.einsum("bld,dnh->blnh", hidden, weights["key/kernel"]) + weights["key/bias"]
        v = np.einsum("bld,dnh->blnh", hidden, weights["value/kernel"]) + weights["value/bias"]
        scores = np.einsum("nh,blnh->bnl", q, k) / np.sqrt(q.shape[-1])          # [B, N, L]
        scores = np.where(mask[:, None, :] > 0, scores, -np.inf)
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        heads = np.einsum("bnl,blnh->bnh", probs, v)
        pooled = (np.einsum("bnh,nhd->bd", heads, weights["attention_output/kernel"])
                  + weights["attention_output/bias"])
    return np.tanh(pooled @ layer.proj.kernel.numpy() + layer.proj.bias.numpy())


@pytest.mark.parametrize("summary_type", ["last", "first", "mean", "attn"])
def test_summary_against_hand_computed_values(summary_type):
    """Each summary equals its NumPy form on random weights large enough that attention is
    far from uniform (the initializer's 0.02 would make `attn` a plain mean)."""
    from xlnet_tf2.models.heads import SequenceSummary

    rng = np.random.RandomState(3)
    layer = SequenceSummary(8, summary_type, n_head=2, dropout=0.0)
    layer.build((None, None, 8))
    for weight in layer.weights:
        weight.assign(rng.normal(scale=0.7, size=weight.shape).astype(np.float32))
    hidden = rng.normal(size=[3, 5, 8]).astype(np.float32)
    mask = np.array([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], np.float32)
    got = layer(tf.constant(hidden), attention_mask=tf.constant(mask)).numpy()
    np.testing.assert_allclose(got, _numpy_summary(layer, hidden, mask), atol=1e-5)


def test_metrics_against_hand_computed_values():
    from xlnet_tf2.tasks import metrics

    labels = [1, 1, 0, 0, 1, 0]
    predictions = [1, 0, 0, 1, 1, 0]
    assert metrics.accuracy(labels, predictions) == pytest.approx(4 / 6)
    assert metrics.f1(labels, predictions, 2) == pytest.approx(2 / 3)  # tp 2, fp 1, fn 1
    # MCC = (tp*tn - fp*fn) / sqrt(...) = (2*2 - 1*1) / sqrt(3*3*3*3) = 1/3
    assert metrics.matthews_corrcoef(labels, predictions, 2) == pytest.approx(1 / 3)
    assert metrics.pearson([1, 2, 3], [2, 4, 7]) == pytest.approx(0.9933992677987828)
    assert metrics.spearman([1, 2, 3, 4], [10, 20, 20, 40]) == pytest.approx(0.9486832980505138)


def test_reader_errors_name_file_and_record(tmp_path):
    from xlnet_tf2.tasks.errors import TaskDataError
    from xlnet_tf2.tasks.text_readers import label_ids, read_text_file

    tsv = tmp_path / "train.tsv"
    tsv.write_text("sentence\ttopic\nfirst text\temail\nsecond text\tasyncio\n")
    with pytest.raises(TaskDataError, match=r"train\.tsv: record line 2: missing column 'label'"):
        read_text_file(str(tsv), "sentence", None, "label", regression=False)
    examples = read_text_file(str(tsv), "sentence", None, "topic", regression=False)
    with pytest.raises(TaskDataError, match=r"train\.tsv: record line 3: label 'asyncio' is not "
                       r"in the label set \['email'\]"):
        label_ids(examples, ["email"], str(tsv))
    with pytest.raises(TaskDataError, match=r"record line 2: label 'email' is not a number"):
        read_text_file(str(tsv), "sentence", None, "topic", regression=True)
    jsonl = tmp_path / "dev.jsonl"
    jsonl.write_text(json.dumps({"sentence": "ok", "topic": "email"}) + "\n{broken\n")
    with pytest.raises(TaskDataError, match=r"dev\.jsonl: record line 2: malformed JSON"):
        read_text_file(str(jsonl), "sentence", None, "topic", regression=False)
