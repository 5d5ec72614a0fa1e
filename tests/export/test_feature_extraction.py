"""Feature extraction: experiments/extract_features.py (.npz and .jsonl) and the
`--kind=features` SavedModel give the backbone's hidden states and their mean over real
tokens, checked against a direct computation."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the SentencePiece op the SavedModel uses)

from fixtures.paths import REPO_ROOT as ROOT
from fixtures.stdlib_text import docstring_paragraphs
from fixtures.task_files import train_tiny_spm

ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
SEQ_LEN = 32


def _converted_like_dir(directory):
    """xlnet_config.json + spiece.model + a backbone checkpoint: what a converted release or
    a pretraining run holds (random tiny weights here)."""
    import shutil

    from xlnet_tf2.config import XLNetConfig
    from xlnet_tf2.models.xlnet_classifier import SequenceClassifier

    spm = train_tiny_spm(directory)
    model_dir = os.path.join(directory, "backbone")
    os.makedirs(model_dir)
    shutil.copy(spm, os.path.join(model_dir, "spiece.model"))
    config = XLNetConfig.resolve("tiny", dropout=0.0, dropatt=0.0, mem_len=0)
    config.to_json_file(os.path.join(model_dir, "xlnet_config.json"))
    model = SequenceClassifier(config, 1)
    model(model.dummy_inputs(SEQ_LEN))
    tf.train.Checkpoint(model=model).save(os.path.join(model_dir, "ckpt"))
    return model_dir, model


@pytest.mark.slow  # three start-ups: extraction to .npz and to .jsonl, the export
def test_extract_features_and_features_export(tmp_path):
    from xlnet_tf2.tokenizers.packing import encode_sequence_pair
    from xlnet_tf2.tokenizers.sentencepiece_tokenizer import SentencePieceTokenizer

    model_dir, model = _converted_like_dir(str(tmp_path))
    long_text = " ".join(docstring_paragraphs("json")[:8])           # > SEQ_LEN tokens
    texts = docstring_paragraphs("email")[:5] + [long_text, "", "Caf\u00e9  ``x''"]
    input_file = tmp_path / "texts.txt"
    input_file.write_text("\n".join(texts) + "\n", encoding="utf-8")
    for output in ("f.npz", "f.jsonl"):
        run = subprocess.run([sys.executable, os.path.join(ROOT, "experiments/extract_features.py"),
                              f"--model_dir={model_dir}", f"--input_file={input_file}",
                              f"--output_file={tmp_path / output}", f"--seq_len={SEQ_LEN}",
                              "--batch_size=3"], capture_output=True, text=True, env=ENV, cwd=ROOT)
        assert run.returncode == 0, run.stderr[-3000:]
    export_base = str(tmp_path / "export")
    run = subprocess.run([sys.executable, os.path.join(ROOT, "experiments/export_saved_model.py"),
                          f"--model_dir={model_dir}", "--kind=features", f"--seq_len={SEQ_LEN}",
                          f"--export_dir={export_base}"],
                         capture_output=True, text=True, env=ENV, cwd=ROOT)
    assert run.returncode == 0, run.stderr[-3000:]

    # Direct reference: the backbone on the classification layout, mean over real tokens.
    tokenizer = SentencePieceTokenizer.from_file(os.path.join(model_dir, "spiece.model"))
    rows = [encode_sequence_pair(tokenizer.encode_ids(t), None, SEQ_LEN, "cls_last")
            for t in texts]
    inputs = {k: np.stack([r[k] for r in rows]) for k in rows[0]}
    hidden = model.transformer({k: tf.constant(v) for k, v in inputs.items()},
                               training=False)["hidden"].numpy()
    mask = inputs["attention_mask"].astype(bool)
    pooled = np.stack([hidden[i][mask[i]].mean(0) for i in range(len(texts))])
    assert mask[len(texts) - 3].all() and mask[len(texts) - 2].sum() == 2  # long; empty

    npz = np.load(tmp_path / "f.npz")
    assert list(npz["texts"]) == texts
    np.testing.assert_array_equal(npz["input_ids"], inputs["input_ids"])
    np.testing.assert_allclose(npz["token_features"], hidden, atol=1e-5)
    np.testing.assert_allclose(npz["pooled"], pooled, atol=1e-5)
    with open(tmp_path / "f.jsonl", encoding="utf-8") as f:
        lines = [json.loads(line) for line in f]
    assert [line["text"] for line in lines] == texts
    for i, line in enumerate(lines):
        assert line["pieces"][-2:] == ["<sep>", "<cls>"]
        assert len(line["pieces"]) == len(line["token_features"]) == mask[i].sum()
        np.testing.assert_allclose(line["token_features"], hidden[i][mask[i]], atol=1e-5)
        np.testing.assert_allclose(line["pooled"], pooled[i], atol=1e-5)

    loaded = tf.saved_model.load(os.path.join(export_base, "1"))
    served = loaded.signatures["serving_default"](text=tf.constant(texts))
    by_ids = loaded.signatures["serve_token_ids"](**{k: tf.constant(v) for k, v in inputs.items()})
    for out in (served, by_ids):
        np.testing.assert_array_equal(out["input_ids"].numpy(), inputs["input_ids"])
        np.testing.assert_allclose(out["token_features"].numpy(), hidden, atol=1e-5)
        np.testing.assert_allclose(out["pooled"].numpy(), pooled, atol=1e-5)
