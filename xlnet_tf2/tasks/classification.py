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


def _columns(config: ClassificationConfig, regression: bool):
    return (config.text_a_column, config.text_b_column, config.label_column, regression)


def load_examples(config: ClassificationConfig):
    """(train examples, label list or None, train source) of the files or the TFDS dataset
    the config names."""
    c = config
    regression = c.kind == "regression"
    if c.tfds_name:
        train, names = text_readers.read_tfds(c.tfds_name, c.tfds_train_split,
                                              *_columns(c, regression), c.tfds_data_dir)
        train = [e for e in train if e.label is not None]
        return (train, list(c.labels) if c.labels else names,
                f"tfds:{c.tfds_name}[{c.tfds_train_split}]")
    if not c.train_file:
        raise RunConfigError("Give --train_file (TSV/CSV/JSONL) or --tfds_name.")
    if not c.text_a_column or not c.label_column:
        raise RunConfigError("Local files need --text_a_column and --label_column.")
    train = text_readers.read_text_file(c.train_file, *_columns(c, regression))
    label_list = None
    if not regression:
        label_list = list(c.labels) if c.labels else sorted({e.label for e in train})
    return train, label_list, c.train_file


def eval_examples(config: ClassificationConfig, regression: bool):
    """(evaluation examples, their source) of --eval_file or the TFDS evaluation split
    (default the dataset's validation split); ([], None) when there are none."""
    c = config
    if c.tfds_name:
        split = (c.tfds_eval_split
                 or text_readers.TFDS_DEFAULTS.get(c.tfds_name, (0, 0, 0, None))[3])
        if not split:
            return [], None
        examples, _ = text_readers.read_tfds(c.tfds_name, split, *_columns(c, regression),
                                             c.tfds_data_dir)
        return [e for e in examples if e.label is not None], f"tfds:{c.tfds_name}[{split}]"
    if not c.eval_file:
        return [], None
    if not c.text_a_column or not c.label_column:
        raise RunConfigError("Local files need --text_a_column and --label_column.")
    return text_readers.read_text_file(c.eval_file, *_columns(c, regression)), c.eval_file


def cached_features(name: str, examples, source: str, spec: HeadSpec,
                    tokenizer: SentencePieceTokenizer, config: ClassificationConfig):
    """The features of `examples` laid out as `spec` says, with their labels (checked every
    run: errors name the record), through the feature cache."""
    regression = spec.kind == "regression"
    labels = ([e.label for e in examples] if regression
              else text_readers.label_ids(examples, spec.label_list, source))
    return feature_cache.cached_features(
        name, {"examples": feature_cache.examples_fingerprint(examples),
               "spm": tokenizer.checksum, "spec": dataclasses.asdict(spec),
               "regression": regression},
        lambda: build_features(examples, tokenizer, spec.seq_len, spec.layout, labels,
                               regression),
        config.feature_cache_dir, distribution.is_chief(tf.distribute.get_strategy()))


class ClassificationTask(FinetuneTask):
    """Sentence(-pair) classification or regression from a ClassificationConfig: reads the
    examples (files or TFDS), tokenizes them once (feature cache), and trains a
    SequenceClassifier, evaluating accuracy/F1/MCC or Pearson/Spearman."""

    EVALUATION_DATA = "--eval_file (or --tfds_name with an evaluation split)"

    def __init__(self, config: ClassificationConfig):
        regression = config.kind == "regression"
        xlnet_config, spm_model = backbone_config(config), spm_model_of(config)
        train_examples, label_list, train_source = load_examples(config)
        spec = HeadSpec(kind=config.kind, seq_len=config.seq_len,
                        summary_type=config.summary_type,
                        layout=layout_for_summary(config.summary_type), label_list=label_list,
                        paired=any(e.text_b is not None for e in train_examples),
                        lower=config.lower)
        tokenizer = backbone_tokenizer(spm_model, spec.lower, xlnet_config)
        train = cached_features("train", train_examples, train_source, spec, tokenizer, config)
        num_outputs = 1 if regression else len(spec.label_list)

        def model_fn():
            return SequenceClassifier(xlnet_config, num_outputs, spec.summary_type,
                                      head_dropout=config.head_dropout)

        super().__init__(
            config, model_fn=model_fn, loss_fn=regression_loss if regression
            else classification_loss,
            dataset_fn=global_batches_fn(train, config.train_batch_size, config.seed),
            eval_fn=self.evaluation(config, spec, tokenizer), seq_len=spec.seq_len, spec=spec,
            spm_model=spm_model)

    @classmethod
    def evaluation(cls, config: ClassificationConfig, spec: HeadSpec, tokenizer):
        regression = spec.kind == "regression"
        examples, source = eval_examples(config, regression)
        if not examples:
            return None
        features = cached_features("eval", examples, source, spec, tokenizer, config)
        num_outputs = 1 if regression else len(spec.label_list)
        return lambda model: evaluate(model, features, config.eval_batch_size, regression,
                                      num_outputs)
