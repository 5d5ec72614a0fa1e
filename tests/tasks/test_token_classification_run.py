"""xlnet-tag end to end in a process: a tiny CoNLL file (written here) -> fine-tuning a tiny
model -> evaluation by entity F1 -> the task directory reloads as a TokenClassifier."""

import json
import os
import subprocess
import sys

import pytest

from fixtures.paths import REPO_ROOT
from fixtures.task_files import train_tiny_spm


def _conll(path, sentences):
    with open(path, "w") as f:
        for i in range(sentences):
            person, city = ("Peter", "Anna", "Maria")[i % 3], ("Paris", "London", "Berlin")[i % 3]
            f.write(f"{person} B-PER\nlives O\nin O\n{city} B-LOC\n\n")
    return str(path)


@pytest.mark.slow
def test_tagger_fine_tunes_evaluates_and_reloads(tmp_path):
    spm = train_tiny_spm(str(tmp_path))
    run = tmp_path / "run"
    result = subprocess.run(
        [sys.executable, os.path.join(REPO_ROOT, "experiments", "run_tagger.py"),
         f"--train_file={_conll(tmp_path / 'train.txt', 60)}",
         f"--eval_file={_conll(tmp_path / 'dev.txt', 12)}", f"--spm_model={spm}",
         "--model_config=tiny", f"--model_dir={run}", "--seq_len=16", "--train_steps=40",
         "--train_batch_size=8", "--eval_every=20", "--learning_rate=1e-3", "--warmup_steps=0",
         f"--feature_cache_dir={tmp_path / 'cache'}"],
        capture_output=True, text=True, timeout=600, cwd=REPO_ROOT)
    assert result.returncode == 0, result.stderr[-2000:]
    spec = json.loads((run / "task.json").read_text())
    assert spec["kind"] == "token_classification" and spec["label_list"] == ["O", "B-LOC",
                                                                            "B-PER"]
    best = json.loads((run / "best_eval.json").read_text())
    assert best["f1"] > 0.5 and 0.0 <= best["token_accuracy"] <= 1.0, best

    from xlnet_tf2.models import HeadModel
    model = HeadModel.from_pretrained(str(run))
    assert type(model).__name__ == "TokenClassifier" and model.num_labels == 3

    # The finished run evaluated on another file (--nodo_train): its metrics, not the stored
    # best; a tag the model does not know (B-ORG) is one warning line and counts as missed.
    test = tmp_path / "test.txt"
    test.write_text(open(_conll(tmp_path / "dev.txt", 12)).read() + "EU B-ORG\nrules O\n\n")
    evaluated = subprocess.run(
        [sys.executable, os.path.join(REPO_ROOT, "experiments", "run_tagger.py"),
         "--nodo_train", f"--model_dir={run}", f"--eval_file={test}",
         f"--feature_cache_dir={tmp_path / 'cache'}"],
        capture_output=True, text=True, timeout=600, cwd=REPO_ROOT)
    assert evaluated.returncode == 0, evaluated.stderr[-2000:]
    warnings = [line for line in evaluated.stderr.splitlines() if line.startswith("warning:")]
    assert warnings == [f"warning: {test}: tags ['B-ORG'] (1 word) are not among the model's "
                        "tags ['O', 'B-LOC', 'B-PER']: scored as missed, as conlleval scores "
                        "them."], evaluated.stderr[-2000:]
    metrics = json.loads(evaluated.stdout[evaluated.stdout.index("{"):])["metrics"]
    assert metrics["recall"] <= 24 / 25 and metrics["f1"] > 0.5, metrics  # 1 of 25 missed


@pytest.mark.slow
def test_bad_tag_line_is_one_error_line_from_the_command(tmp_path):
    bad = tmp_path / "train.txt"
    bad.write_text("EU B-ORG\nrejects\n")
    result = subprocess.run(
        [sys.executable, os.path.join(REPO_ROOT, "experiments", "run_tagger.py"),
         f"--train_file={bad}", "--model_config=tiny", f"--spm_model={bad}",
         f"--model_dir={tmp_path / 'run'}"], capture_output=True, text=True, timeout=300,
        cwd=REPO_ROOT)
    assert result.returncode == 2
    lines = [line for line in result.stderr.splitlines() if "error:" in line]
    assert lines == [f"run_tagger.py: error: {bad}: record line 2: 'rejects' has no tag: each "
                     "line holds a word and its tag (the last column)."], result.stderr[-1500:]
