"""--init_checkpoint for pretraining and fine-tuning: one loader (models/pretrained.py's
read_weights, the path of from_pretrained), so every command takes what from_pretrained takes
(our directories, a task directory's backbone, a HuggingFace directory, an original release)
and one of our checkpoint prefixes, with from_pretrained's messages after the flag."""

import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

import xlnet_tf2
from fixtures.tf1_checkpoints import original_tensors, write_tf1_checkpoint
from xlnet_tf2.config_flags import RunConfigError
from xlnet_tf2.locate import PretrainedNotFoundError
from xlnet_tf2.models.xlnet_classifier import SequenceClassifier
from xlnet_tf2.tasks.finetune_config import FinetuneConfig
from xlnet_tf2.tasks.finetuning import backbone_config, init_backbone, spm_model_of
from xlnet_tf2.training.checkpointing import load_model_weights

CONFIG = xlnet_tf2.XLNetConfig.preset("tiny", n_token=120)
LAYOUTS = ("converted", "run", "prefix", "huggingface", "original")


def _source_model(config=CONFIG):
    model = xlnet_tf2.XLNetLMHeadModel(config)
    model.build()
    return model


def _assert_same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x.numpy(), y.numpy())


def _write(source, layout, root):
    """`source` written as `layout`; returns what --init_checkpoint names."""
    path = str(root / layout)
    spm = root / "spiece.model"
    spm.write_bytes(b"stands for a SentencePiece model")
    if layout == "converted":
        xlnet_tf2.save_pretrained(source, path, spm_model=str(spm))
        return path
    if layout in ("run", "prefix"):  # a pretraining model_dir: ckpt-N with model and step
        manager = tf.train.CheckpointManager(tf.train.Checkpoint(
            model=source, global_step=tf.Variable(7, dtype=tf.int64)), path, 2)
        prefix = manager.save()
        source.config.to_json_file(os.path.join(path, "xlnet_config.json"))
        shutil.copy(spm, path)
        return prefix if layout == "prefix" else path
    xlnet_tf2.save_pretrained(source, str(root / "hf"), spm_model=str(spm),
                              format="huggingface")
    if layout == "huggingface":
        return str(root / "hf")
    from safetensors.numpy import load_file  # the original release, from HF's tensors

    state = load_file(str(root / "hf" / "model.safetensors"))
    write_tf1_checkpoint(original_tensors(state, source.config), path, source.config)
    shutil.copy(spm, path)
    return path


@pytest.mark.parametrize("layout", LAYOUTS)
def test_pretraining_initializes_the_lm_model_from_what_from_pretrained_takes(layout, tmp_path):
    source = _source_model()
    path = _write(source, layout, tmp_path)
    target = _source_model()
    load_model_weights(target, path)
    _assert_same(target.weights, source.weights)
    _assert_same(target.weights, xlnet_tf2.from_pretrained(path).weights
                 if layout != "prefix" else source.weights)


@pytest.mark.parametrize("layout", LAYOUTS + ("task",))
def test_fine_tuning_takes_the_backbone_architecture_and_spm_of_any_of_them(layout, tmp_path):
    source = _source_model()
    if layout == "task":  # a fine-tuned model_dir: its backbone, at its best checkpoint
        finetuned = SequenceClassifier(CONFIG, 3).build_weights()
        spm = tmp_path / "spiece.model"
        spm.write_bytes(b"stands for a SentencePiece model")
        path = str(tmp_path / "task")
        finetuned.save_pretrained(path, str(spm))
        expected = finetuned.transformer.weights
    else:
        path = _write(source, layout, tmp_path)
        expected = source.transformer.weights
    config = FinetuneConfig.flat(model_dir=str(tmp_path / "run_dir"), init_checkpoint=path,
                                 best_metric="accuracy")
    architecture = backbone_config(config)
    assert architecture.architecture() == CONFIG.architecture()
    assert (architecture.mem_len, architecture.dropout) == (0, config.model.dropout)
    assert os.path.basename(spm_model_of(config)) == "spiece.model"
    task = SequenceClassifier(architecture, 2)
    task(task.dummy_inputs(16))
    head = [w.numpy() for w in task.head.weights]
    init_backbone(task, path)
    _assert_same(task.transformer.weights, expected)
    for before, after in zip(head, task.head.weights):  # the new head is left as it was
        np.testing.assert_array_equal(before, after.numpy())


def test_a_bad_init_checkpoint_says_what_from_pretrained_says_after_the_flag(tmp_path):
    missing = str(tmp_path / "missing")
    with pytest.raises(PretrainedNotFoundError) as loading:
        xlnet_tf2.from_pretrained(missing)
    for initialize in (lambda: load_model_weights(_source_model(), missing),
                       lambda: init_backbone(SequenceClassifier(CONFIG, 2).build_weights(),
                                             missing),
                       lambda: backbone_config(FinetuneConfig.flat(
                           model_dir=str(tmp_path / "run"), init_checkpoint=missing,
                           best_metric="accuracy"))):
        with pytest.raises(PretrainedNotFoundError) as error:
            initialize()
        assert str(error.value) == f"--init_checkpoint={missing!r}: {loading.value}"
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(PretrainedNotFoundError, match=r"^--init_checkpoint=.*empty': .*empty "
                       "holds no model: expected xlnet_config.json"):
        load_model_weights(_source_model(), str(empty))


def test_another_architecture_is_one_line_naming_the_keys(tmp_path):
    other = _source_model(CONFIG.replace(d_inner=96))
    xlnet_tf2.save_pretrained(other, str(tmp_path / "other"))
    with pytest.raises(RunConfigError) as error:
        load_model_weights(_source_model(), str(tmp_path / "other"))
    assert str(error.value) == (
        f"--init_checkpoint={str(tmp_path / 'other')!r} holds another architecture than the "
        "model it initializes: d_inner 96 (the run's 128); give the run that model's "
        "architecture (--model_config).")
    # A checkpoint that reads but misses the model's weights: the files named, one line.
    broken = tmp_path / "broken"
    tf.train.Checkpoint(model=tf.train.Checkpoint(x=tf.Variable(1.0))).write(
        str(broken / "model.ckpt"))
    CONFIG.to_json_file(str(broken / "xlnet_config.json"))
    with pytest.raises(ValueError, match=r"--init_checkpoint=.*does not hold this model's "
                       "weights") as error:
        load_model_weights(_source_model(), str(broken))
    assert "\n" not in str(error.value)
