"""Features of a text file written to .npz or .jsonl: what experiments/extract_features.py
runs (the numbers are feature_extraction.py's, the same as the `features` SavedModel's).

Output by extension:
  .npz   token_features [E, L, D] float32, pooled [E, D] (mean over real tokens), input_ids and
         attention_mask [E, L] int32 (1 = real token; padding is on the left), texts [E]
  .jsonl one object per line: {"index", "text", "pieces": [real tokens, <sep> and <cls> last],
         "token_features": [[D floats] per real token], "pooled": [D floats]}
"""

from __future__ import annotations

import io
import json
import os
import sys
from typing import Dict, Sequence, Tuple

import keras
import numpy as np
import tensorflow as tf

from xlnet_tf2 import fileio
from xlnet_tf2.config_flags import RunConfigError
from xlnet_tf2.export.export_config import ExtractConfig
from xlnet_tf2.export.feature_extraction import extract
from xlnet_tf2.tasks.finetuned_model import load_task_model
from xlnet_tf2.tasks.text_readers import read_utf8_text
from xlnet_tf2.tokenizers.sentencepiece_tokenizer import SentencePieceTokenizer
from xlnet_tf2.training.distribution import resolve_strategy


def extract_to_file(config: ExtractConfig) -> Tuple[int, int]:
    """Features of every line of config.input_file, written to config.output_file.

    Returns:
      (number of texts, seq_len used).
    """
    if not tf.io.gfile.exists(config.input_file):
        raise RunConfigError(f"--input_file={config.input_file!r} does not exist.")
    texts = read_utf8_text(config.input_file).splitlines()
    if not texts:
        raise RunConfigError(f"--input_file={config.input_file!r} is empty: it needs one text "
                             "per line.")
    # Before the model is built, inside the strategy's scope; features stay float32.
    keras.mixed_precision.set_global_policy(config.precision)
    dist = config.distribution
    strategy = resolve_strategy(dist.strategy, dist.tpu, dist.tpu_timeout)
    with strategy.scope():
        backbone, spec, spm_model = load_task_model(config.model_dir, "features")
        seq_len = config.seq_len or spec.seq_len
        tokenizer = SentencePieceTokenizer.from_file(spm_model, lower=spec.lower)
        features = extract(backbone, tokenizer, texts, seq_len, config.batch_size)
    for leftover in fileio.leftover_temporaries(config.output_file):
        print(f"[extract] found {leftover}, an incomplete output left by a killed run; "
              "removing it.", file=sys.stderr, flush=True)
        fileio.remove(leftover)
    fileio.makedirs(os.path.dirname(config.output_file) or ".")
    write_features(config.output_file, texts, features, tokenizer)
    return len(texts), seq_len


def write_features(path: str, texts: Sequence[str], features: Dict[str, np.ndarray],
                   tokenizer) -> None:
    """Writes `extract`'s output for `texts` as .npz or .jsonl (by the extension of `path`),
    atomically: a file of this name is either the previous one or the complete new one."""
    if path.endswith(".npz"):
        buffer = io.BytesIO()  # zip needs a seekable file; GFile (gs:// too) gets the bytes
        np.savez(buffer, texts=np.asarray(texts, dtype=str), **features)
        fileio.write_atomically(path, buffer.getvalue())
        return
    lines = []
    for i, text in enumerate(texts):
        real = features["attention_mask"][i].astype(bool)
        lines.append(json.dumps({
            "index": i, "text": text,
            "pieces": [tokenizer.id_to_piece(t) for t in features["input_ids"][i][real]],
            "token_features": features["token_features"][i][real].tolist(),
            "pooled": features["pooled"][i].tolist()}, ensure_ascii=False) + "\n")
    fileio.write_atomically(path, "".join(lines).encode("utf-8"))
