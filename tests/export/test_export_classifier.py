"""Train a tiny classifier on real text, export it, and check the SavedModel everywhere it is
used: in-process, `saved_model_cli show/run`, and a fresh Python process that imports only
TensorFlow and tensorflow-text."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the SentencePiece op SavedModels use)

from fixtures.paths import REPO_ROOT as ROOT
from fixtures.task_files import topic_examples, train_tiny_spm, write_classification_files

ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
# saved_model_cli with the tensorflow-text ops registered (the stock binary lacks them).
SMCLI = ("import sys, tensorflow_text; from tensorflow.python.tools.saved_model_cli import main; "
         "sys.argv[0] = 'saved_model_cli'; main()")


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    directory = str(tmp_path_factory.mktemp("classifier"))
    spm = train_tiny_spm(directory)
    paths = write_classification_files(directory, "tsv", per_class=300)
    model_dir = os.path.join(directory, "run")
    cmd = [sys.executable, os.path.join(ROOT, "experiments/run_classifier.py"),
           f"--model_dir={model_dir}", f"--spm_model={spm}", "--model_config=tiny",
           f"--train_file={paths['train']}", f"--eval_file={paths['dev']}",
           "--text_a_column=sentence", "--label_column=topic", "--seq_len=64",
           "--train_steps=60", "--train_batch_size=16", "--learning_rate=1e-3",
           "--warmup_steps=6", "--eval_every=30", "--log_steps=30", "--dropout=0",
           "--dropatt=0"]
    run = subprocess.run(cmd, capture_output=True, text=True, env=ENV, cwd=ROOT)
    assert run.returncode == 0, run.stderr[-3000:]
    export_base = os.path.join(directory, "export")
    cmd = [sys.executable, os.path.join(ROOT, "experiments/export_saved_model.py"),
           f"--model_dir={model_dir}", "--kind=classification", f"--export_dir={export_base}"]
    run = subprocess.run(cmd, capture_output=True, text=True, env=ENV, cwd=ROOT)
    assert run.returncode == 0, run.stderr[-3000:]
    return dict(directory=directory, spm=spm, model_dir=model_dir,
                export=os.path.join(export_base, "1"), stdout=run.stdout)


def _texts():
    texts = [t for t, _ in topic_examples(per_class=5, seed=7)]
    long_text = " ".join(t for t, _ in topic_examples(per_class=20, seed=3))  # >> seq_len
    return texts + [long_text, "", "   "]


@pytest.mark.slow
def test_classifier_learns_and_keeps_best(trained):
    with open(os.path.join(trained["model_dir"], "best_eval.json")) as f:
        best = json.load(f)
    # Two balanced topics: chance is 0.5; measured 0.85 at step 30 and 0.87 at 60.
    assert best["accuracy"] > 0.75, best
    with open(os.path.join(trained["model_dir"], "eval_results.jsonl")) as f:
        evaluations = [json.loads(line) for line in f]
    assert [e["step"] for e in evaluations] == [30, 60]
    assert best["accuracy"] == max(e["accuracy"] for e in evaluations)


def _in_process_outputs(trained, texts):
    from xlnet_tf2.tasks.finetuned_model import load_task_model
    from xlnet_tf2.tasks.classification import build_features
    from xlnet_tf2.tasks.text_readers import TextExample
    from xlnet_tf2.tokenizers.sentencepiece_tokenizer import SentencePieceTokenizer

    model, spec, spm = load_task_model(trained["model_dir"], "classification")
    tokenizer = SentencePieceTokenizer.from_file(spm)
    features = build_features([TextExample(str(i), t, None, None) for i, t in enumerate(texts)],
                              tokenizer, spec.seq_len, spec.layout)
    logits = model({k: tf.constant(v) for k, v in features.items()}, training=False)["logits"]
    return features, tf.nn.softmax(logits).numpy()


@pytest.mark.slow
def test_saved_model_matches_in_process_model(trained):
    texts = _texts()
    features, expected = _in_process_outputs(trained, texts)
    loaded = tf.saved_model.load(trained["export"])
    out = loaded.signatures["serving_default"](text=tf.constant(texts))
    np.testing.assert_allclose(out["probabilities"].numpy(), expected, atol=1e-5)
    assert [x.decode() for x in out["label"].numpy()] == [
        ["asyncio", "email"][i] for i in expected.argmax(-1)]
    by_ids = loaded.signatures["serve_token_ids"](
        **{k: tf.constant(v) for k, v in features.items()})
    np.testing.assert_allclose(by_ids["probabilities"].numpy(), expected, atol=1e-5)
    # Over-long text: truncated to its first seq_len-2 tokens, then <sep> <cls> (no padding).
    assert features["attention_mask"][len(texts) - 3].all()
    # Empty and blank strings: the defined input "<sep> <cls>", a valid probability row.
    assert features["attention_mask"][-1].sum() == 2
    np.testing.assert_allclose(out["probabilities"].numpy()[-2:].sum(-1), 1.0, atol=1e-6)
    assert os.path.isfile(os.path.join(trained["export"], "assets", "spiece.model"))


@pytest.mark.slow
def test_saved_model_cli_show_and_run(trained, tmp_path):
    show = subprocess.run([sys.executable, "-c", SMCLI, "show", "--all", "--dir",
                           trained["export"]], capture_output=True, text=True, env=ENV)
    assert show.returncode == 0, show.stderr[-2000:]
    assert "signature_def['serving_default']" in show.stdout
    assert "signature_def['serve_token_ids']" in show.stdout
    # --input_exprs separates inputs with ";", so texts holding one are left out here.
    texts = [t for t in _texts() if ";" not in t][:4] + [""]
    features, expected = _in_process_outputs(trained, texts)
    outdir = str(tmp_path / "cli")
    run = subprocess.run([sys.executable, "-c", SMCLI, "run", "--dir", trained["export"],
                          "--tag_set", "serve", "--signature_def", "serving_default",
                          "--input_exprs", "text=" + repr(texts), "--outdir", outdir],
                         capture_output=True, text=True, env=ENV)
    assert run.returncode == 0, run.stderr[-2000:]
    np.testing.assert_allclose(np.load(os.path.join(outdir, "probabilities.npy")), expected,
                               atol=1e-5)
    arrays = []
    for name, value in features.items():
        np.save(str(tmp_path / f"{name}.npy"), value)
        arrays.append(f"{name}={tmp_path / name}.npy")
    outdir = str(tmp_path / "cli_ids")
    run = subprocess.run([sys.executable, "-c", SMCLI, "run", "--dir", trained["export"],
                          "--tag_set", "serve", "--signature_def", "serve_token_ids",
                          "--inputs", ";".join(arrays), "--outdir", outdir],
                         capture_output=True, text=True, env=ENV)
    assert run.returncode == 0, run.stderr[-2000:]
    np.testing.assert_allclose(np.load(os.path.join(outdir, "probabilities.npy")), expected,
                               atol=1e-5)


@pytest.mark.slow
def test_fresh_process_without_project_code(trained, tmp_path):
    texts = _texts()
    _, expected = _in_process_outputs(trained, texts)
    script = tmp_path / "client.py"
    script.write_text(
        "import json, sys\n"
        "import tensorflow as tf\n"
        "import tensorflow_text  # noqa: F401  (registers the SentencePiece op)\n"
        "texts = json.loads(sys.argv[2])\n"
        "model = tf.saved_model.load(sys.argv[1])\n"
        "out = model.signatures['serving_default'](text=tf.constant(texts))\n"
        "assert not any(m.startswith('xlnet_tf2') for m in sys.modules)\n"
        "print(json.dumps(out['probabilities'].numpy().tolist()))\n")
    run = subprocess.run([sys.executable, str(script), trained["export"], json.dumps(texts)],
                         capture_output=True, text=True, env=ENV, cwd=str(tmp_path))
    assert run.returncode == 0, run.stderr[-2000:]
    got = np.asarray(json.loads(run.stdout.strip().splitlines()[-1]))
    np.testing.assert_allclose(got, expected, atol=1e-5)
