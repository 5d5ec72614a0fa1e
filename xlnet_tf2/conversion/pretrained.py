"""Converted checkpoints on disk: writing them and loading them back with one call.

A converted directory holds:
  model.ckpt.index / model.ckpt.data-*   a native TF2 checkpoint of XLNetLMHeadModel
  xlnet_config.json                      the model config (our keys, a superset of the original's)
  spiece.model                           the SentencePiece model, when one was given
"""

from __future__ import annotations

import os
from typing import Optional

import tensorflow as tf

from xlnet_tf2.config import XLNetConfig

CHECKPOINT_PREFIX = "model.ckpt"
CONFIG_NAME = "xlnet_config.json"
SPM_NAME = "spiece.model"


def checkpoint_for(model) -> tf.train.Checkpoint:
    """The object graph every xlnet-tf2 checkpoint uses: `model` -> the LM head model, whose
    `transformer` is the backbone. A bare backbone is nested the same way, so a backbone can
    be restored from an LM checkpoint (the LM bias is then simply not read)."""
    from xlnet_tf2.models import XLNetModel

    if isinstance(model, XLNetModel):
        return tf.train.Checkpoint(model=tf.train.Checkpoint(transformer=model))
    return tf.train.Checkpoint(model=model)


def save_pretrained(model, output_dir: str, spm_model: Optional[str] = None) -> str:
    """Writes `model` (an XLNetLMHeadModel) as a converted directory; returns the prefix."""
    tf.io.gfile.makedirs(output_dir)
    prefix = checkpoint_for(model).write(os.path.join(output_dir, CHECKPOINT_PREFIX))
    model.config.to_json_file(os.path.join(output_dir, CONFIG_NAME))
    if spm_model:
        if not tf.io.gfile.exists(spm_model):
            raise FileNotFoundError(f"--spm_model {spm_model!r} does not exist.")
        tf.io.gfile.copy(spm_model, os.path.join(output_dir, SPM_NAME), overwrite=True)
    return prefix


def restore_weights(model, checkpoint_path: str) -> None:
    """Restores `model` (XLNetLMHeadModel or XLNetModel, built) from a checkpoint prefix or a
    converted directory. Every variable of `model` must be found, else ValueError."""
    model.build()
    if tf.io.gfile.isdir(checkpoint_path):
        directory = checkpoint_path
        checkpoint_path = tf.train.latest_checkpoint(directory) or os.path.join(directory, CHECKPOINT_PREFIX)
    if not tf.io.gfile.exists(checkpoint_path + ".index"):
        raise FileNotFoundError(f"No checkpoint at {checkpoint_path!r} (expected {checkpoint_path}.index).")
    status = checkpoint_for(model).read(checkpoint_path)
    try:
        status.assert_existing_objects_matched()
    except AssertionError as e:
        raise ValueError(f"Checkpoint {checkpoint_path!r} does not match the model: {e}") from e
    status.expect_partial()


def load_pretrained(directory: str, **config_overrides):
    """Loads a converted directory as a ready `XLNetLMHeadModel`.

    `config_overrides` set run-time fields (e.g. mem_len=384, dropout=0.0).
    """
    from xlnet_tf2.models import XLNetLMHeadModel

    config = XLNetConfig.from_json_file(os.path.join(directory, CONFIG_NAME), **config_overrides)
    model = XLNetLMHeadModel(config)
    restore_weights(model, directory)
    return model
