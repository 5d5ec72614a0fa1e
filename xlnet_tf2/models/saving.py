"""Our own model format on disk: writing a model directory and loading it back with one call.

A saved (or converted) directory holds:
  model.ckpt.index / model.ckpt.data-*   a native TF2 checkpoint of XLNetLMHeadModel
  xlnet_config.json                      the model config (our keys, a superset of the original's)
  spiece.model                           the SentencePiece model, when one was given
"""

from __future__ import annotations

import os
from typing import Optional

import tensorflow as tf

from xlnet_tf2 import run_dir
from xlnet_tf2.config import XLNetConfig
from xlnet_tf2.models.lm_head_model import XLNetLMHeadModel
from xlnet_tf2.models.xlnet_model import XLNetModel

CHECKPOINT_PREFIX = run_dir.SAVED_CHECKPOINT_PREFIX
CONFIG_NAME = run_dir.ARCH_FILE
SPM_NAME = run_dir.SPM_FILE


def checkpoint_for(model) -> tf.train.Checkpoint:
    """The object graph every xlnet-tf2 checkpoint uses: `model` -> the LM head model, whose
    `transformer` is the backbone. A bare backbone is nested the same way, so a backbone can
    be restored from an LM checkpoint (the LM bias is then simply not read)."""
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


def restore_weights(model, checkpoint_path: str, source: str = "checkpoint") -> str:
    """Restores `model` (XLNetLMHeadModel or XLNetModel) from a checkpoint prefix or a
    directory: one of our training runs (its latest checkpoint) or a converted release.

    Every variable of `model` must be found, else ValueError; values the model does not have
    (optimizer slots, memory, the LM bias for a backbone, task heads) are ignored. `source`
    names the path in error messages (e.g. "--init_checkpoint"). Returns the prefix read.
    """
    if not model.built:
        model.build()
    resolved = checkpoint_path
    if tf.io.gfile.isdir(checkpoint_path):
        resolved = (tf.train.latest_checkpoint(checkpoint_path)
                    or os.path.join(checkpoint_path, CHECKPOINT_PREFIX))
    if not tf.io.gfile.exists(resolved + ".index"):
        raise FileNotFoundError(
            f"{source}={checkpoint_path!r} names no checkpoint (expected a prefix such as "
            f".../ckpt-1000, or a directory holding one; {resolved}.index does not exist).")
    try:
        status = checkpoint_for(model).read(resolved)  # raises ValueError on a shape mismatch
        status.assert_existing_objects_matched()
    except (AssertionError, ValueError) as e:
        raise ValueError(f"{source}={checkpoint_path!r} does not hold this model's weights "
                         f"(is the model config the same?): {e}") from None
    status.expect_partial()
    return resolved


def load_pretrained(directory: str, **config_overrides):
    """Loads a converted directory as a ready `XLNetLMHeadModel`.

    `config_overrides` set run-time fields (e.g. mem_len=384, dropout=0.0).
    """
    config = XLNetConfig.from_json_file(os.path.join(directory, CONFIG_NAME), **config_overrides)
    model = XLNetLMHeadModel(config)
    restore_weights(model, directory)
    return model
