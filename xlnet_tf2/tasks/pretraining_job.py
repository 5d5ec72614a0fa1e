"""A pretraining job from prepared data directories: manifest -> model config -> Pretrainer.

The data decides the example shape (seq_len, reuse_len, num_predict, bi_data) and the
vocabulary: they are read from `record_info.json` and checked again by the input pipeline,
so data and training cannot silently disagree.

The model_dir is made self-contained: besides checkpoints it receives `xlnet_config.json` (the
architecture), `spiece.model` (the SentencePiece model the data was encoded with, found through
the manifest and checked against its sha256) and `run_config.json`, so fine-tuning, feature
extraction and export work from it with no other flag.
"""

from __future__ import annotations

import os
from typing import Optional, Sequence

import tensorflow as tf

from xlnet_tf2.config import PRESETS, XLNetConfig
from xlnet_tf2.data import integrity
from xlnet_tf2.data import manifest as manifest_lib
from xlnet_tf2.data.pretrain_dataset import build_pretrain_dataset, load_schedule
from xlnet_tf2.tasks.pretraining_eval import default_eval_dirs
from xlnet_tf2.tasks.pretraining import DataShape, Pretrainer, eval_batch_size
from xlnet_tf2.training.run_config import PretrainConfig, RunConfigError
from xlnet_tf2.training.trainer import TrainResult
from xlnet_tf2.tokenizers.sentencepiece_tokenizer import model_checksum

SPM_FILE = "spiece.model"


def data_shape_and_vocab(data_dirs: Sequence[str]):
    """(DataShape, vocab_size) of the first directory; the pipeline checks the others."""
    for d in data_dirs:
        if not tf.io.gfile.isdir(d):
            raise RunConfigError(f"--data_dir={d!r} is not a directory; pass directories written "
                                 "by data_prep/create_tfrecords.py.")
    manifest = manifest_lib.read_manifest(data_dirs[0])
    params = manifest["params"]
    shape = DataShape(seq_len=params["seq_len"], reuse_len=params["reuse_len"],
                      num_predict=params["num_predict"], bi_data=bool(params["bi_data"]))
    return shape, int(manifest["vocab_size"])


def resolve_model_config(name_or_path: str, vocab_size: int) -> XLNetConfig:
    """A preset takes the data's vocabulary size; a JSON file must already agree with it."""
    if name_or_path in PRESETS:
        return XLNetConfig.preset(name_or_path, n_token=vocab_size)
    config = XLNetConfig.resolve(name_or_path)
    if config.n_token != vocab_size:
        raise RunConfigError(
            f"--model_config={name_or_path!r} has n_token={config.n_token} but the data in "
            f"--data_dir was encoded with a {vocab_size}-piece vocabulary; fix n_token or use "
            "data encoded with the model's SentencePiece model.")
    return config


def _sha256_of(path: str) -> str:
    with tf.io.gfile.GFile(path, "rb") as f:
        return model_checksum(f.read())


def resolve_spm_model(spm_model: Optional[str], data_dirs: Sequence[str]) -> str:
    """The SentencePiece model the data was encoded with: `spm_model` if given, else
    DATA_DIR/spiece.model, else the path the manifest records; checked against the
    manifest's sha256 so a run directory never ships a tokenizer that does not match its data.
    """
    manifest = manifest_lib.read_manifest(data_dirs[0])
    expected = manifest["spm_sha256"]
    if spm_model:
        candidates = [spm_model]
    else:
        recorded = manifest.get("spm_model") or ""
        candidates = [os.path.join(data_dirs[0], SPM_FILE)]
        if recorded:
            candidates += [recorded, os.path.join(data_dirs[0], recorded)]
    for path in candidates:
        if not tf.io.gfile.exists(path):
            continue
        if _sha256_of(path) == expected:
            return path
        if spm_model:
            raise RunConfigError(
                f"--spm_model={spm_model!r} is not the SentencePiece model {data_dirs[0]} was "
                f"encoded with (sha256 {_sha256_of(path)[:12]}..., the manifest records "
                f"{expected[:12]}...). Pass the model given to data_prep/create_tfrecords.py.")
    raise RunConfigError(
        f"Cannot find the SentencePiece model {data_dirs[0]} was encoded with (looked at "
        f"{', '.join(candidates)}; the manifest's sha256 is {expected[:12]}...). Pass it with "
        "--spm_model: it is copied into --model_dir so fine-tuning and export can use it.")


def copy_spm_model(spm_model: str, model_dir: str) -> str:
    """Copies the SentencePiece model into model_dir (unless an identical one is there)."""
    target = os.path.join(model_dir, SPM_FILE)
    tf.io.gfile.makedirs(model_dir)
    if tf.io.gfile.exists(target) and _sha256_of(target) == _sha256_of(spm_model):
        return target
    tmp = target + ".tmp"
    tf.io.gfile.copy(spm_model, tmp, overwrite=True)
    tf.io.gfile.rename(tmp, target, overwrite=True)
    return target


def _data_settings(shape: DataShape, vocab_size: int) -> dict:
    """The settings every pipeline of a run takes from its data (checked against manifests)."""
    return dict(seq_len=shape.seq_len, reuse_len=shape.reuse_len, num_predict=shape.num_predict,
                bi_data=shape.bi_data, vocab_size=vocab_size)


def held_out_dirs(config: PretrainConfig) -> list:
    """--eval_data_dir, else DATA_DIR/eval of every --data_dir that has one."""
    if config.evaluation.eval_data_dir:
        for d in config.evaluation.eval_data_dir:
            manifest_lib.read_manifest(d)
        return list(config.evaluation.eval_data_dir)
    return default_eval_dirs(config.data_dirs, manifest_lib.read_manifest)


def held_out_dataset_fn(config: PretrainConfig, shape: DataShape, vocab_size: int):
    """(input_context) -> held-out batches, or None without --eval_steps."""
    if not config.evaluation.eval_steps:
        return None
    dirs = held_out_dirs(config)
    if not dirs:
        raise RunConfigError(
            f"--eval_steps={config.evaluation.eval_steps} needs held-out data, but no --data_dir "
            "has an eval/ directory: prepare the data with data_prep/create_tfrecords.py "
            "--eval_fraction=0.01 (or --eval_input), or pass --eval_data_dir.")
    batch = eval_batch_size(config)

    def eval_dataset_fn(input_context):
        return build_pretrain_dataset(
            dirs, **_data_settings(shape, vocab_size), global_batch_size=batch,
            input_context=input_context, start_step=0)

    eval_dataset_fn(None)  # a bad layout fails now, naming the directory
    return eval_dataset_fn


def build_pretrainer(config: PretrainConfig,
                     strategy: Optional[tf.distribute.Strategy] = None) -> Pretrainer:
    shape, vocab_size = data_shape_and_vocab(config.data_dirs)
    model_config = resolve_model_config(config.model_config, vocab_size)
    spm_model = resolve_spm_model(config.spm_model, config.data_dirs)

    def dataset_fn(input_context, start_step):
        return build_pretrain_dataset(
            list(config.data_dirs), **_data_settings(shape, vocab_size),
            global_batch_size=config.loop.train_batch_size, input_context=input_context,
            start_step=start_step, online_permutation=config.online_permutation,
            seed=config.loop.seed, micro_batches=config.loop.grad_accum_steps)

    # Fail on a bad layout now, with the pipeline's own message, not inside the first loop.
    dataset_fn(None, 0)
    eval_dataset_fn = held_out_dataset_fn(config, shape, vocab_size)
    pretrainer = Pretrainer(config, model_config, shape, dataset_fn, strategy, eval_dataset_fn)
    # A corrupted record (DataLossError) is reported naming its file and step.
    pretrainer.input_error_locator = integrity.CorruptRecordLocator(
        load_schedule(list(config.data_dirs), **_data_settings(shape, vocab_size),
                      global_batch_size=config.loop.train_batch_size),
        bi_data=shape.bi_data)
    if pretrainer.is_chief:
        copy_spm_model(spm_model, config.model_dir)
    return pretrainer


def run_pretraining(config: PretrainConfig,
                    strategy: Optional[tf.distribute.Strategy] = None) -> TrainResult:
    return build_pretrainer(config, strategy).train()
