"""--init_checkpoint for pretraining and fine-tuning: converted directories and training runs,
through the one restore function (xlnet_tf2.restore_weights)."""

import numpy as np
import pytest
import tensorflow as tf

import xlnet_tf2
from xlnet_tf2.models.xlnet_classifier import SequenceClassifier
from xlnet_tf2.tasks.finetuning import init_backbone
from xlnet_tf2.training.checkpointing import load_model_weights

CONFIG = xlnet_tf2.XLNetConfig.preset("tiny", n_token=120)


def _source_model():
    model = xlnet_tf2.XLNetLMHeadModel(CONFIG)
    model.build()
    return model


def _assert_same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x.numpy(), y.numpy())


def test_fine_tuning_initializes_the_backbone_from_a_converted_directory(tmp_path):
    source = _source_model()
    xlnet_tf2.save_pretrained(source, str(tmp_path / "converted"))
    task = SequenceClassifier(CONFIG, 2)
    task(task.dummy_inputs(16))
    resolved = init_backbone(task, str(tmp_path / "converted"))
    assert resolved.endswith("model.ckpt")
    _assert_same(task.transformer.weights, source.transformer.weights)


def test_pretraining_initializes_from_a_training_checkpoint(tmp_path):
    source = _source_model()
    optimizer_step = tf.Variable(7, dtype=tf.int64)
    manager = tf.train.CheckpointManager(
        tf.train.Checkpoint(model=source, global_step=optimizer_step), str(tmp_path / "run"), 2)
    manager.save()
    target = _source_model()
    load_model_weights(target, str(tmp_path / "run"))
    _assert_same(target.weights, source.weights)


def test_bad_init_checkpoint_errors_name_the_flag(tmp_path):
    task = SequenceClassifier(CONFIG, 2)
    task(task.dummy_inputs(16))
    with pytest.raises(FileNotFoundError, match="--init_checkpoint=.*names no checkpoint"):
        init_backbone(task, str(tmp_path / "missing"))
    other = xlnet_tf2.XLNetLMHeadModel(CONFIG.replace(d_inner=96))
    other.build()
    xlnet_tf2.save_pretrained(other, str(tmp_path / "other"))
    with pytest.raises(ValueError, match="does not hold this model's weights"):
        load_model_weights(_source_model(), str(tmp_path / "other"))
