"""Sentence(-pair) classification and regression: examples -> features -> datasets, and the
evaluation (accuracy, F1, MCC; Pearson, Spearman)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Callable, Dict, Optional, Sequence

import numpy as np
import tensorflow as tf

from xlnet_tf2.config_flags import RunConfigError
from xlnet_tf2.tasks import feature_cache
from xlnet_tf2.tasks import metrics as metrics_lib
from xlnet_tf2.training import distribution
from xlnet_tf2.data.finetune_batches import global_batches_fn
from xlnet_tf2.training.inference import batched_outputs
from xlnet_tf2.tokenizers.packing import encode_sequence_pair
from xlnet_tf2.tasks.text_readers import TextExample
from xlnet_tf2.tokenizers.sentencepiece_tokenizer import SentencePieceTokenizer

MODEL_INPUTS = ("input_ids", "segment_ids", "attention_mask")


def build_features(examples: Sequence[TextExample], tokenizer: SentencePieceTokenizer,
                   seq_len: int, layout: str, labels: Optional[Sequence] = None,
                   regression: bool = False) -> Dict[str, np.ndarray]:
    """Stacked int32 model inputs [N, L] (and "label" [N]: int32 ids or float32 scores)."""
    rows = [encode_sequence_pair(tokenizer.encode_ids(e.text_a),
                                 None if e.text_b is None else tokenizer.encode_ids(e.text_b),
                                 seq_len, layout) for e in examples]
    features = {k: np.stack([r[k] for r in rows]) for k in MODEL_INPUTS}
    if labels is not None:
        features["label"] = np.asarray(labels, np.float32 if regression else np.int32)
    return features


def train_dataset_fn(features: Dict[str, np.ndarray], global_batch_size: int,
                     seed: int) -> Callable[[tf.distribute.InputContext, int], tf.data.Dataset]:
    """(input_context, start_step) -> shuffled per-replica batches with a static batch
    dimension, a function of the step alone (exact resume; see batches.py)."""
    return global_batches_fn(features, global_batch_size, seed)


def predict(model, features: Dict[str, np.ndarray], batch_size: int,
            output_keys: Sequence[str] = ("logits",)) -> Dict[str, np.ndarray]:
    """Runs `model` over all rows in batches of exactly `batch_size` (the last is padded and
    the padding outputs dropped), so every call has the same shapes; inside the current
    distribution strategy (inference.py), with a progress line on long sets."""
    inputs = {k: v for k, v in features.items() if k != "label" and not k.endswith("positions")
              and k != "is_impossible"}

    def outputs_of(batch):
        outputs = model(batch, training=False)
        return {k: outputs[k] for k in output_keys}

    return batched_outputs(outputs_of, inputs, batch_size, label="evaluating")


def evaluate(model, features: Dict[str, np.ndarray], batch_size: int, regression: bool,
             num_classes: int) -> Dict[str, float]:
    logits = predict(model, features, batch_size)["logits"]
    if regression:
        return metrics_lib.regression_metrics(features["label"], logits[:, 0])
    return metrics_lib.classification_metrics(features["label"], logits.argmax(-1), num_classes)


def load_examples(*, task: str, train_file: Optional[str], eval_file: Optional[str],
                  tfds_name: Optional[str], tfds_train_split: str, tfds_eval_split: Optional[str],
                  tfds_data_dir: Optional[str], text_a_column: Optional[str],
                  text_b_column: Optional[str], label_column: Optional[str],
                  labels: Optional[Sequence[str]]):
    """(train examples, eval examples, label list or None, train source, eval source)."""
    from xlnet_tf2.tasks import text_readers

    regression = task == "regression"
    if tfds_name:
        train, names = text_readers.read_tfds(tfds_name, tfds_train_split, text_a_column, text_b_column,
                                         label_column, regression, tfds_data_dir)
        eval_split = tfds_eval_split or text_readers.TFDS_DEFAULTS.get(tfds_name, (0, 0, 0, None))[3]
        evaluation, _ = (text_readers.read_tfds(tfds_name, eval_split, text_a_column, text_b_column,
                                           label_column, regression, tfds_data_dir)
                         if eval_split else ([], None))
        train = [e for e in train if e.label is not None]
        evaluation = [e for e in evaluation if e.label is not None]
        return (train, evaluation, list(labels) if labels else names,
                f"tfds:{tfds_name}[{tfds_train_split}]", f"tfds:{tfds_name}[{eval_split}]")
    if not train_file:
        raise RunConfigError("Give --train_file (TSV/CSV/JSONL) or --tfds_name.")
    if not text_a_column or not label_column:
        raise RunConfigError("Local files need --text_a_column and --label_column.")
    train = text_readers.read_text_file(train_file, text_a_column, text_b_column, label_column,
                                   regression)
    evaluation = (text_readers.read_text_file(eval_file, text_a_column, text_b_column, label_column,
                                         regression) if eval_file else [])
    label_list = None
    if not regression:
        label_list = list(labels) if labels else sorted({e.label for e in train})
    return train, evaluation, label_list, train_file, eval_file


def examples_fingerprint(examples: Sequence) -> str:
    """sha256 of the examples' texts and labels (what their features depend on)."""
    digest = hashlib.sha256()
    for e in examples:
        digest.update(json.dumps(dataclasses.astuple(e), default=str).encode("utf-8"))
    return digest.hexdigest()


def run(*, cfg, model_config, spec, spm_model: str, train_examples, eval_examples,
        train_source: str, eval_source: Optional[str], eval_batch_size: int,
        strategy=None, head_dropout: float = 0.1):
    """Trains and evaluates a classifier/regressor; returns the FinetuneResult."""
    from xlnet_tf2.tasks import text_readers
    from xlnet_tf2.models.sequence_classifier import SequenceClassifier
    from xlnet_tf2.tasks.losses import classification_loss, regression_loss
    from xlnet_tf2.tasks.task_spec import copy_spm_model
    from xlnet_tf2.tasks.finetuning import FinetuneRunner

    regression = spec.task == "regression"
    tokenizer = SentencePieceTokenizer.from_file(spm_model, lower=spec.lower)
    if tokenizer.vocab_size > model_config.n_token:
        raise RunConfigError(f"--spm_model has {tokenizer.vocab_size} pieces but the model's "
                             f"n_token is {model_config.n_token}.")

    def labels_of(examples, source):
        if regression:
            return [e.label for e in examples]
        return text_readers.label_ids(examples, spec.label_list, source)

    def features_of(name, examples, source):
        labels = labels_of(examples, source)  # checked every run: errors name the record
        return feature_cache.cached_features(
            name, {"examples": examples_fingerprint(examples), "spm": tokenizer.checksum,
                   "spec": dataclasses.asdict(spec), "regression": regression},
            lambda: build_features(examples, tokenizer, spec.seq_len, spec.layout, labels,
                                   regression),
            cfg.feature_cache_dir, distribution.is_chief(strategy or tf.distribute.get_strategy()))

    train = features_of("train", train_examples, train_source)
    evaluation = features_of("eval", eval_examples, eval_source) if eval_examples else None
    spec.write(cfg.model_dir)
    copy_spm_model(spm_model, cfg.model_dir)
    num_outputs = 1 if regression else len(spec.label_list)

    def model_fn():
        return SequenceClassifier(model_config, num_outputs, spec.summary_type,
                                  head_dropout=head_dropout)

    eval_fn = None
    if evaluation is not None:
        def eval_fn(model):
            return evaluate(model, evaluation, eval_batch_size, regression, num_outputs)

    runner = FinetuneRunner(cfg, model_fn, regression_loss if regression else classification_loss,
                            train_dataset_fn(train, cfg.train_batch_size, cfg.seed), eval_fn,
                            spec.seq_len, strategy)
    return runner.train()
