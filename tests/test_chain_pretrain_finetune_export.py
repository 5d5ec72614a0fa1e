"""The stages chained as a user runs them, at the paper's run-time settings, with no hand-edited
file in between: prepare data (bi_data) -> pretrain (dropout 0.1, memory) -> fine-tune a
classifier from the pretraining model_dir (no --model_config, no --spm_model) -> export -> a
fresh process without project code serves requests one at a time and as a batch. Also export
and extraction straight from the pretraining model_dir."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from fixtures.task_files import spm_training_text, write_classification_files

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")

CLIENT = """
import json, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the SentencePiece op)
texts = json.loads(open(sys.argv[2]).read())
serve = tf.saved_model.load(sys.argv[1]).signatures["serving_default"]
one = [serve(text=tf.constant([t]))["probabilities"].numpy()[0].tolist() for t in texts]
batch = serve(text=tf.constant(texts))["probabilities"].numpy().tolist()
assert not any(m.startswith("xlnet_tf2") for m in sys.modules)
print("RESULT" + json.dumps({"one": one, "batch": batch}))
"""


def _run(args, timeout=600):
    proc = subprocess.run([sys.executable] + args, cwd=ROOT, env=ENV, timeout=timeout,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("chain"))
    corpus = spm_training_text(os.path.join(d, "corpus.txt"))
    _run(["data_prep/train_sentencepiece.py", f"--input={corpus}", "--vocab_size=500",
          f"--model_prefix={d}/sp"])
    _run(["data_prep/create_tfrecords.py", f"--input={corpus}", f"--spm_model={d}/sp.model",
          f"--output_dir={d}/data", "--seq_len=32", "--reuse_len=16", "--num_predict=5",
          "--num_streams=4", "--bi_data"])
    pretrain = os.path.join(d, "pretrain")
    _run(["experiments/run_pretrain.py", f"--data_dir={d}/data", f"--model_dir={pretrain}",
          "--model_config=tiny", "--train_batch_size=8", "--train_steps=30",
          "--steps_per_loop=5", "--save_steps=15", "--log_steps=15", "--learning_rate=5e-4",
          "--warmup_steps=5", "--mem_len=16", "--dropout=0.1", "--dropatt=0.1"])
    paths = write_classification_files(d, "tsv", per_class=120)
    finetune = os.path.join(d, "finetune")
    _run(["experiments/run_classifier.py", f"--init_checkpoint={pretrain}",
          f"--model_dir={finetune}", f"--train_file={paths['train']}",
          f"--eval_file={paths['dev']}", "--text_a_column=sentence", "--label_column=topic",
          "--seq_len=48", "--train_steps=60", "--train_batch_size=8", "--learning_rate=1e-3",
          "--warmup_steps=6", "--eval_every=30", "--log_steps=30", "--dropout=0.1",
          "--dropatt=0.1", "--eval_batch_size=16"])
    _run(["experiments/export_saved_model.py", f"--model_dir={finetune}",
          "--kind=classification", f"--export_dir={d}/export"])
    return dict(dir=d, pretrain=pretrain, finetune=finetune, dev=paths["dev"],
                export=os.path.join(d, "export", "1"), spm=f"{d}/sp.model")


@pytest.mark.slow
def test_pretraining_model_dir_is_self_contained(chain):
    pretrain = chain["pretrain"]
    with open(os.path.join(pretrain, "spiece.model"), "rb") as a, open(chain["spm"], "rb") as b:
        assert a.read() == b.read()  # found through the data manifest, copied
    with open(os.path.join(pretrain, "xlnet_config.json")) as f:
        assert sorted(json.load(f)) == sorted(["n_layer", "d_model", "n_head", "d_head",
                                               "d_inner", "ff_activation", "untie_r", "n_token"])
    with open(os.path.join(pretrain, "run_config.json")) as f:
        record = json.load(f)
    assert record["derived"]["bi_data"] is True and record["settings"]["model"]["dropout"] == 0.1
    # The fine-tuning run wrote the same architecture and its own run settings.
    with open(os.path.join(chain["finetune"], "xlnet_config.json")) as f:
        assert json.load(f)["n_layer"] == 2


@pytest.mark.slow
def test_served_predictions_equal_the_runs_own_evaluation(chain):
    texts, labels = [], []
    with open(chain["dev"], encoding="utf-8") as f:
        next(f)
        for line in f:
            text, label = line.rstrip("\n").split("\t")
            texts.append(text.replace("\\", ""))
            labels.append(label)
    request = os.path.join(chain["dir"], "texts.json")
    with open(request, "w") as f:
        json.dump(texts, f)
    proc = _run(["-c", CLIENT, chain["export"], request])
    out = json.loads(proc.stdout.split("RESULT", 1)[1])
    one, batch = np.asarray(out["one"]), np.asarray(out["batch"])
    # One request at a time and one batch give the same predictions (a leaked bi_data would
    # read the second half of the batch backward).
    np.testing.assert_allclose(one, batch, atol=1e-5)
    with open(os.path.join(chain["export"], "assets.extra", "task.json")) as f:
        label_list = json.load(f)["label_list"]
    predicted = [label_list[i] for i in batch.argmax(-1)]
    accuracy = float(np.mean([p == t for p, t in zip(predicted, labels)]))
    with open(os.path.join(chain["finetune"], "best_eval.json")) as f:
        best = json.load(f)
    assert accuracy == pytest.approx(best["accuracy"], abs=1e-9), (accuracy, best)
    assert accuracy > 0.6, best  # two balanced topics: chance is 0.5


@pytest.mark.slow
def test_export_and_extraction_straight_from_the_pretraining_dir(chain, tmp_path):
    _run(["experiments/export_saved_model.py", f"--model_dir={chain['pretrain']}",
          "--kind=features", f"--export_dir={tmp_path}/features"])
    with open(os.path.join(tmp_path, "features", "1", "assets.extra", "task.json")) as f:
        assert json.load(f)["seq_len"] == 32  # the pretraining data's seq_len
    texts = tmp_path / "texts.txt"
    texts.write_text("Return the sum of two numbers.\nOpen a file.\n", encoding="utf-8")
    _run(["experiments/extract_features.py", f"--model_dir={chain['pretrain']}",
          f"--input_file={texts}", f"--output_file={tmp_path}/f.npz"])
    features = np.load(tmp_path / "f.npz")
    assert features["pooled"].shape == (2, 64)
    # The same text twice in one batch gives the same features (no bi_data leak).
    texts.write_text("Open a file.\nOpen a file.\n", encoding="utf-8")
    _run(["experiments/extract_features.py", f"--model_dir={chain['pretrain']}",
          f"--input_file={texts}", f"--output_file={tmp_path}/g.npz", "--batch_size=2"])
    g = np.load(tmp_path / "g.npz")
    np.testing.assert_allclose(g["token_features"][0], g["token_features"][1], atol=1e-6)
