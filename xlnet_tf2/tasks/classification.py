"""Sentence(-pair) classification and regression as a task: examples -> features -> batches,
the SequenceClassifier, and the evaluation (accuracy, F1, MCC; Pearson, Spearman)."""

from __future__ import annotations

import dataclasses
from typing import Dict, Optional, Sequence

import numpy as np
import tensorflow as tf

from xlnet_tf2.config_flags import RunConfigError
from xlnet_tf2.data.finetune_batches import global_batches_fn
from xlnet_tf2.models.xlnet_classifier import SequenceClassifier
from xlnet_tf2.tasks import feature_cache, text_readers
from xlnet_tf2.tasks import metrics as metrics_lib
from xlnet_tf2.tasks.finetune_config import ClassificationConfig
from xlnet_tf2.tasks.finetuning import (FinetuneTask, backbone_config, backbone_tokenizer,
                                        spm_model_of)
from xlnet_tf2.tasks.losses import classification_loss, regression_loss
from xlnet_tf2.tasks.head_spec import HeadSpec
from xlnet_tf2.tasks.text_readers import TextExample
from xlnet_tf2.tokenizers.packing import encode_sequence_pair, layout_for_summary
from xlnet_tf2.tokenizers.sentencepiece_tokenizer import SentencePieceTokenizer
from xlnet_tf2.training import distribution
from xlnet_tf2.training.inference import predict

MODEL_INPUTS = ("input_ids", "segment_ids", "attention_mask")


def build_features(examples: Sequence[TextExample], tokenizer: SentencePieceTokenizer,
                   seq_len: int, layout: str, labels: Optional[Sequence] = None,
                   regression: bool = False) -> Dict[str, np.ndarray]:
    """Stacked int32 model inputs [E, L] (and "label" [E]: int32 ids or float32 scores)."""
    rows = [encode_sequence_pair(tokenizer.encode_ids(e.text_a),
                                 None if e.text_b is None else tokenizer.encode_ids(e.text_b),
                                 seq_len, layout) for e in examples]
    features = {k: np.stack([r[k] for r in rows]) for k in MODEL_INPUTS}
    if labels is not None:
        features["label"] = np.asarray(labels, np.float32 if regression else np.int32)
    return features


def evaluate(model, features: Dict[str, np.ndarray], batch_size: int, regression: bool,
             num_classes: int) -> Dict[str, float]:
    logits = predict(model, features, batch_size)["logits"]
    if regression:
        return metrics_lib.regression_metrics(features["label"], logits[:, 0])
    return metrics_lib.classification_metrics(features["label"], logits.argmax(-1), num_classes)


def load_examples(config: ClassificationConfig):
    """(train examples, eval examples, label list or None, train source, eval source) of the
    files or the TFDS dataset the config names."""
    c = config
    regression = c.kind == "regression"
    columns = (c.text_a_column, c.text_b_column, c.label_column, regression)
    if c.tfds_name:
        train, names = text_readers.read_tfds(c.tfds_name, c.tfds_train_split, *columns,
                                              c.tfds_data_dir)
        eval_split = (c.tfds_eval_split
                      or text_readers.TFDS_DEFAULTS.get(c.tfds_name, (0, 0, 0, None))[3])
        evaluation, _ = (text_readers.read_tfds(c.tfds_name, eval_split, *columns,
                                                c.tfds_data_dir)
                         if eval_split else ([], None))
        train = [e for e in train if e.label is not None]
        evaluation = [e for e in evaluation if e.label is not None]
        return (train, evaluation, list(c.labels) if c.labels else names,
                f"tfds:{c.tfds_name}[{c.tfds_train_split}]", f"tfds:{c.tfds_name}[{eval_split}]")
    if not c.train_file:
        raise RunConfigError("Give --train_file (TSV/CSV/JSONL) or --tfds_name.")
    if not c.text_a_column or not c.label_column:
        raise RunConfigError("Local files need --text_a_column and --label_column.")
    train = text_readers.read_text_file(c.train_file, *columns)
    evaluation = text_readers.read_text_file(c.eval_file, *columns) if c.eval_file else []
    label_list = None
    if not regression:
        label_list = list(c.labels) if c.labels else sorted({e.label for e in train})
    return train, evaluation, label_list, c.train_file, c.eval_file


class ClassificationTask(FinetuneTask):
    """Sentence(-pair) classification or regression from a ClassificationConfig: reads the
    examples (files or TFDS), tokenizes them once (feature cache), and trains a
    SequenceClassifier, evaluating accuracy/F1/MCC or Pearson/Spearman."""

    def __init__(self, config: ClassificationConfig):
        regression = config.kind == "regression"
        xlnet_config, spm_model = backbone_config(config), spm_model_of(config)
        train_examples, eval_examples, label_list, train_source, eval_source = \
            load_examples(config)
        spec = HeadSpec(kind=config.kind, seq_len=config.seq_len,
                        summary_type=config.summary_type,
                        layout=layout_for_summary(config.summary_type), label_list=label_list,
                        paired=any(e.text_b is not None for e in train_examples),
                        lower=config.lower)
        tokenizer = backbone_tokenizer(spm_model, spec.lower, xlnet_config)
        is_chief = distribution.is_chief(tf.distribute.get_strategy())  # run_task's, in its scope

        def labels_of(examples, source):
            if regression:
                return [e.label for e in examples]
            return text_readers.label_ids(examples, spec.label_list, source)

        def features_of(name, examples, source):
            labels = labels_of(examples, source)  # checked every run: errors name the record
            return feature_cache.cached_features(
                name, {"examples": feature_cache.examples_fingerprint(examples), "spm": tokenizer.checksum,
                       "spec": dataclasses.asdict(spec), "regression": regression},
                lambda: build_features(examples, tokenizer, spec.seq_len, spec.layout, labels,
                                       regression),
                config.feature_cache_dir, is_chief)

        train = features_of("train", train_examples, train_source)
        evaluation = (features_of("eval", eval_examples, eval_source) if eval_examples
                      else None)
        num_outputs = 1 if regression else len(spec.label_list)

        def model_fn():
            return SequenceClassifier(xlnet_config, num_outputs, spec.summary_type,
                                      head_dropout=config.head_dropout)

        eval_fn = None
        if evaluation is not None:
            def eval_fn(model):
                return evaluate(model, evaluation, config.eval_batch_size, regression,
                                num_outputs)

        super().__init__(
            config, model_fn=model_fn, loss_fn=regression_loss if regression
            else classification_loss,
            dataset_fn=global_batches_fn(train, config.train_batch_size, config.seed),
            eval_fn=eval_fn, seq_len=spec.seq_len, spec=spec, spm_model=spm_model)
