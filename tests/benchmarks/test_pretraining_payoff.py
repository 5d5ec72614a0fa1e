"""benchmarks/pretraining_payoff.py end to end at a toy size: both pretraining orders, the
three initializations fine-tuned on a task, test accuracies, the table and the figure, and a
second run that reuses every finished stage."""

import json
import os
import subprocess
import sys

import pytest

from fixtures.payoff_texts import write_fake_packages

pytestmark = pytest.mark.slow

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _doc_tree(root):
    """A few README files of prose for the pretraining corpus."""
    for k in range(300):
        folder = root / f"package{k:02d}"
        folder.mkdir(parents=True)
        lines = [f"Package {k} reads the file number {i} and writes a summary of every record "
                 f"it finds there, then closes stream {i + k} before it exits."
                 for i in range(8)]
        (folder / "README").write_text("\n\n".join(lines) + "\n")


def _run(workdir, tmp_path, *extra):
    argv = [sys.executable, os.path.join(ROOT, "benchmarks", "pretraining_payoff.py"),
            f"--workdir={workdir}", "--tasks=python_package", "--seeds=1",
            f"--python_root={tmp_path / 'site'}", f"--doc_root={tmp_path / 'doc'}",
            f"--man_root={tmp_path / 'man'}", f"--info_root={tmp_path / 'info'}",
            "--min_tokens=0", "--vocab_size=60", "--seq_len=16", "--n_layer=1",
            "--d_model=32", "--pretrain_steps=4", "--pretrain_batch_size=4",
            "--pretrain_eval_every=2", "--eval_batches=1", "--train_per_label=4",
            "--dev_per_label=2", "--test_per_label=2", "--finetune_steps=3",
            "--finetune_batch_size=4", *extra]
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=900)


@pytest.mark.xla  # the commands' compiled step (--jit_compile, their default)
def test_toy_experiment_end_to_end_and_resumed(tmp_path):
    write_fake_packages(tmp_path / "site", modules_per_package=60)
    _doc_tree(tmp_path / "doc")
    (tmp_path / "man").mkdir()
    (tmp_path / "info").mkdir()
    workdir = tmp_path / "payoff"
    done = _run(workdir, tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads((workdir / "results.json").read_text())
    assert set(report["pretraining"]) == {"permutation", "left_to_right"}
    for order, run in report["pretraining"].items():
        assert [e["step"] for e in run["heldout"]] == [2, 4]
        record = json.loads((workdir / "pretrain" / order / "run_config.json").read_text())
        assert json.dumps(record).count(f'"factorization_order": "{order}"') == 1
    results = report["finetuning"]
    assert sorted(r["init"] for r in results) == ["left_to_right", "permutation", "random"]
    for r in results:
        assert 0.0 <= r["test_accuracy"] <= 1.0 and r["task"] == "python_package"
    # The pretrained fine-tunes started from their pretraining run; random did not.
    recipe = workdir / "finetune" / "steps3-batch4-lr0.0002-warmup0.1-last"
    config = json.loads((recipe / "python_package" / "permutation-s1" /
                         "run_config.json").read_text())
    assert "pretrain/permutation" in json.dumps(config)
    # The corpus left out every task document.
    corpus = (workdir / "corpus.txt").read_text()
    assert "Package 0 reads" in corpus and "helper" not in corpus
    table = (workdir / "results.md").read_text()
    assert "| python_package | permutation-pretrained |" in table
    # One seed: each run's figure, no sd and no verdict (a single run has no spread).
    assert "(one seed: no sd) | s1 " in table and "+- 0.0000" not in table
    assert table.count("| cannot tell (one seed: no spread) |") == 2
    assert (workdir / "payoff.png").read_bytes()[:4] == b"\x89PNG"
    assert "== 6/7 finetune" in done.stdout
    # A second run reuses every finished stage and gives the same results.
    again = _run(workdir, tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "reusing" in again.stdout
    assert json.loads((workdir / "results.json").read_text())["finetuning"] == results
    # Another fine-tuning recipe on the same pretraining runs: only the fine-tuning runs anew
    # (one of them: a pretrained initialization).
    other = _run(workdir, tmp_path, "--finetune_steps=2", "--inits=permutation",
                 "--orders=permutation")
    assert other.returncode == 0, other.stderr[-3000:]
    assert "pretraining, permutation order" not in other.stdout
    assert sorted(p.name for p in (workdir / "finetune").iterdir()) == [
        "steps2-batch4-lr0.0002-warmup0.1-last", recipe.name]


def test_too_small_corpus_is_one_line_naming_the_flag(tmp_path):
    write_fake_packages(tmp_path / "site", modules_per_package=60)
    _doc_tree(tmp_path / "doc")
    (tmp_path / "man").mkdir()
    (tmp_path / "info").mkdir()
    failed = _run(tmp_path / "payoff", tmp_path, "--min_tokens=100000000")
    assert failed.returncode != 0
    assert "--min_tokens" in failed.stderr and "Traceback" not in failed.stderr
