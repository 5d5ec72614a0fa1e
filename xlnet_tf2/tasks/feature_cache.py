"""Tokenized fine-tuning features cached as TFRecords, so text is tokenized once: not again by
the next run on the same data, nor by every worker of a multi-worker run.

    features = cached_features("train", key, build, cache_dir, is_chief)

The cache entry is CACHE_DIR/<sha256 of key>.tfrecord (one tf.train.Example per row, every
feature flattened) plus CACHE_DIR/<sha256>.json (shapes and dtypes), written last and
atomically: an entry with its .json is complete. The key holds everything the features depend
on: the input file's content hash (or the TFDS name, split and version), the SentencePiece
model's sha256, the task settings (seq_len, layout, labels, ...) and FORMAT_VERSION. Only the
chief of a multi-worker run writes; the other workers wait for the entry and read it.

CACHE_DIR: --feature_cache_dir, default $XLNET_TF2_CACHE or ~/.cache/xlnet_tf2/features;
"off" disables the cache.

Users: classification and regression (classification.py), RACE (race.py) and SQuAD
(squad.py: the training windows, and evaluation sets as fixed-shape arrays that also carry
what post-processing needs, `squad.window_arrays`; the key holds the file's content hash and
only the settings windows depend on, so changing n_best_size or a threshold reuses them).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import time
from typing import Callable, Dict, Optional, Sequence

import numpy as np
import tensorflow as tf
from absl import logging

from xlnet_tf2 import fileio

FORMAT_VERSION = 1
DISABLED = "off"
WAIT_SECONDS = 3600


def default_cache_dir() -> str:
    return os.environ.get("XLNET_TF2_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "xlnet_tf2", "features")


def file_fingerprint(path: str) -> str:
    """sha256 of a file's content (fine-tuning inputs are small enough to read)."""
    digest = hashlib.sha256()
    with tf.io.gfile.GFile(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def cache_key(parts: dict) -> str:
    return hashlib.sha256(json.dumps({"format": FORMAT_VERSION, **parts}, sort_keys=True,
                                     default=str).encode("utf-8")).hexdigest()


def _write(prefix: str, features: Dict[str, np.ndarray]) -> None:
    n = len(next(iter(features.values())))
    tmp = f"{prefix}.tfrecord.tmp"
    with tf.io.TFRecordWriter(tmp) as writer:
        for i in range(n):
            feature = {}
            for name, values in features.items():
                row = np.asarray(values[i]).ravel()
                if np.issubdtype(values.dtype, np.floating):
                    feature[name] = tf.train.Feature(float_list=tf.train.FloatList(value=row))
                else:
                    feature[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=row))
            writer.write(tf.train.Example(features=tf.train.Features(feature=feature))
                         .SerializeToString())
    fileio.rename(tmp, f"{prefix}.tfrecord")
    spec = {name: {"shape": list(values.shape[1:]), "dtype": str(values.dtype)}
            for name, values in features.items()}
    fileio.write_atomically(f"{prefix}.json",
                            json.dumps({"rows": n, "features": spec}, indent=2).encode())


def _read(prefix: str) -> Dict[str, np.ndarray]:
    with tf.io.gfile.GFile(f"{prefix}.json") as f:
        meta = json.load(f)
    spec = {}
    for name, info in meta["features"].items():
        kind = tf.float32 if np.issubdtype(np.dtype(info["dtype"]), np.floating) else tf.int64
        spec[name] = tf.io.FixedLenFeature([int(np.prod(info["shape"], dtype=np.int64))], kind)
    columns: Dict[str, list] = {name: [] for name in spec}
    dataset = tf.data.TFRecordDataset(f"{prefix}.tfrecord").batch(4096)
    for batch in dataset.map(lambda b: tf.io.parse_example(b, spec)):
        for name, values in batch.items():
            columns[name].append(values.numpy())
    out = {}
    for name, info in meta["features"].items():
        values = np.concatenate(columns[name]) if columns[name] else np.zeros([0])
        out[name] = values.reshape([-1] + info["shape"]).astype(info["dtype"])
    if any(len(v) != meta["rows"] for v in out.values()):
        raise ValueError(f"feature cache {prefix}.tfrecord is incomplete")
    return out


def cached_features(name: str, key_parts: dict, build: Callable[[], Dict[str, np.ndarray]],
                    cache_dir: Optional[str] = None, is_chief: bool = True
                    ) -> Dict[str, np.ndarray]:
    """The features `build()` returns, from the cache when an entry for `key_parts` exists."""
    cache_dir = cache_dir or default_cache_dir()
    if cache_dir == DISABLED:
        return build()
    prefix = os.path.join(cache_dir, cache_key(key_parts))
    if not is_chief:
        deadline = time.time() + WAIT_SECONDS
        while not tf.io.gfile.exists(f"{prefix}.json"):
            if time.time() > deadline:
                raise TimeoutError(f"waited {WAIT_SECONDS} s for the chief to write the {name} "
                                   f"feature cache {prefix}.json")
            time.sleep(2.0)
    if tf.io.gfile.exists(f"{prefix}.json"):
        try:
            features = _read(prefix)
            print(f"{name} features: read {len(next(iter(features.values()))):,} cached rows "
                  f"from {prefix}.tfrecord", flush=True)
            return features
        except (ValueError, tf.errors.OpError) as e:  # a damaged entry is rebuilt
            logging.warning("feature cache %s is unreadable (%s); rebuilding it", prefix, e)
    features = build()
    try:
        tf.io.gfile.makedirs(cache_dir)
        _write(prefix, features)
        print(f"{name} features: cached {len(next(iter(features.values()))):,} rows in "
              f"{prefix}.tfrecord", flush=True)
    except (OSError, tf.errors.OpError) as e:  # a read-only cache directory is not fatal
        logging.warning("could not write the feature cache %s (%s); continuing without it",
                        prefix, e)
    return features


def examples_fingerprint(examples: Sequence) -> str:
    """sha256 of the examples' texts and labels (what their features depend on)."""
    digest = hashlib.sha256()
    for e in examples:
        digest.update(json.dumps(dataclasses.astuple(e), default=str).encode("utf-8"))
    return digest.hexdigest()
