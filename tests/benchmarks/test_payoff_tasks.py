"""The pretraining payoff experiment's downstream tasks (benchmarks/tools/payoff_tasks.py) and
its report (payoff_report.py): splits by document, balance, paragraphs used once, task
documents left out of the pretraining corpus, the verdict's arithmetic, the table and figure."""

import gzip
import json
import shutil
import subprocess

import pytest

from benchmarks.tools import doc_corpus, payoff_report, payoff_tasks

from fixtures.payoff_texts import write_fake_man_pages, write_fake_packages


def _sizes(**kw):
    values = dict(train=40, dev=40, test=40, max_per_document=6, min_words=12,
                  max_pages_per_section=1000)
    values.update(kw)
    return payoff_tasks.TaskSizes(**values)


def test_python_package_task_is_split_by_document_balanced_and_used_once(tmp_path):
    write_fake_packages(tmp_path / "site", modules_per_package=60)
    splits, names = payoff_tasks.build_task(
        payoff_tasks.iter_python_package_documents(str(tmp_path / "site")), _sizes())
    assert len(names) == 4 * 60
    by_split_documents = {s: {r["document"] for r in rows} for s, rows in splits.items()}
    # Every document's paragraphs are in one split only, the one its hash names.
    assert not by_split_documents["train"] & by_split_documents["test"]
    assert not by_split_documents["dev"] & by_split_documents["test"]
    for split, documents in by_split_documents.items():
        assert all(payoff_tasks.split_of(d) == split for d in documents)
    texts = [r["text"] for rows in splits.values() for r in rows]
    assert len(texts) == len(set(texts))
    for split, rows in splits.items():
        counts = {}
        for r in rows:
            counts[r["label"]] = counts.get(r["label"], 0) + 1
            assert r["document"].split("/")[0] == r["label"]
            assert len(r["text"].split()) >= 12
        assert sorted(counts) == sorted(payoff_tasks.PYTHON_PACKAGES)
        assert len(set(counts.values())) == 1, counts  # balanced
    # Short paragraphs (the one-line summaries) are never used.
    assert not any("Short summary" in t for t in texts)
    # At most max_per_document paragraphs of a document.
    per_doc = {}
    for rows in splits.values():
        for r in rows:
            per_doc[r["document"]] = per_doc.get(r["document"], 0) + 1
    assert max(per_doc.values()) <= 6


def test_split_sizes_are_capped_per_label(tmp_path):
    write_fake_packages(tmp_path / "site", modules_per_package=60)
    splits, _ = payoff_tasks.build_task(
        payoff_tasks.iter_python_package_documents(str(tmp_path / "site")),
        _sizes(train=5, dev=2, test=3))
    assert [len(splits[s]) for s in payoff_tasks.SPLITS] == [20, 8, 12]


@pytest.mark.skipif(shutil.which("groff") is None, reason="groff renders the man pages")
def test_man_section_task_reads_rendered_pages_of_each_section(tmp_path):
    write_fake_man_pages(tmp_path / "man", pages_per_section=40)
    documents = list(payoff_tasks.iter_man_section_documents(str(tmp_path / "man"),
                                                             max_pages=30))
    assert {d[0] for d in documents} == set(payoff_tasks.MAN_SECTIONS)
    assert len(documents) == 4 * 30  # max_pages per section
    label, name, paragraphs = documents[0]
    assert name.startswith(f"man{label}/") and any("configuration" in p for p in paragraphs)
    splits, names = payoff_tasks.build_task(iter(documents), _sizes(train=3, dev=1, test=1))
    assert len(names) == 120 and all(len(rows) for rows in splits.values())


def test_written_task_files_and_corpus_exclusion(tmp_path):
    write_fake_packages(tmp_path / "site", modules_per_package=60)
    splits, names = payoff_tasks.build_task(
        payoff_tasks.iter_python_package_documents(str(tmp_path / "site")), _sizes())
    info = payoff_tasks.write_task(str(tmp_path / "task"), "python_package", splits, names)
    rows = [json.loads(line) for line in (tmp_path / "task" / "test.jsonl").open()]
    assert set(rows[0]) == {"text", "label"} and len(rows) == sum(info["counts"]["test"].values())
    assert info["labels"] == sorted(payoff_tasks.PYTHON_PACKAGES)
    # The corpus builder leaves out every document a task read.
    excluded = set(names)
    stats = doc_corpus.build_doc_corpus(
        str(tmp_path / "corpus.txt"), str(tmp_path / "spm.txt"), max_bytes=10 ** 9,
        sources=("python",), roots={"python": str(tmp_path / "site")},
        exclude=lambda source, name: name in excluded or name.startswith("numpy/"))
    assert stats["excluded_documents"] == len(names) and stats["documents"] == 0
    write_fake_packages(tmp_path / "other", modules_per_package=3, packages=("scipy",))
    stats = doc_corpus.build_doc_corpus(
        str(tmp_path / "corpus2.txt"), str(tmp_path / "spm2.txt"), max_bytes=10 ** 9,
        sources=("python",), roots={"python": str(tmp_path / "other")}, spm_fraction=0.0,
        exclude=lambda source, name: name in excluded)
    assert stats["excluded_documents"] == 0 and stats["documents"] == 3


def test_summary_verdict_is_gap_over_twice_the_larger_sd():
    rows = [{"task": "t", "init": init, "seed": s, "test_accuracy": a}
            for init, accs in (("random", [0.60, 0.62, 0.64]),
                               ("permutation", [0.70, 0.71, 0.72]),
                               ("left_to_right", [0.61, 0.67, 0.73]))
            for s, a in enumerate(accs)]
    table = payoff_report.summarize(rows)["t"]
    assert table["random"]["mean"] == pytest.approx(0.62)
    assert table["random"]["sd"] == pytest.approx(0.02)
    assert table["permutation"]["gap"] == pytest.approx(0.09)
    assert table["permutation"]["clear"] is True          # 0.09 > 2 * 0.02
    assert table["left_to_right"]["gap"] == pytest.approx(0.05)
    assert table["left_to_right"]["clear"] is False       # 0.05 < 2 * 0.06
    assert "clear" not in table["random"]
    assert table["left_to_right"]["seeds"] == [0, 1, 2]
    assert table["left_to_right"]["accuracies"] == [0.61, 0.67, 0.73]


def test_one_seed_has_no_spread_and_no_verdict():
    # One run per initialization: the gap is a number, but there is no spread to weigh it
    # against, so the report cannot say "clearly better" either way.
    rows = [{"task": "t", "init": "random", "seed": 1, "test_accuracy": 0.60},
            {"task": "t", "init": "permutation", "seed": 1, "test_accuracy": 0.70}]
    table = payoff_report.summarize(rows)["t"]
    assert table["permutation"]["sd"] is None and table["random"]["sd"] is None
    assert table["permutation"]["gap"] == pytest.approx(0.10)
    assert table["permutation"]["clear"] is None
    report = {"finetuning": rows, "pretraining": {}, "timings": {}}
    text = payoff_report.markdown_table(report)
    assert ("| t | permutation-pretrained | 0.7000 (one seed: no sd) | s1 0.7000 | +0.1000 "
            "| cannot tell (one seed: no spread) |") in text
    assert "+- 0.0000" not in text and "| yes |" not in text
    # Several seeds against one random run: still no spread on random's side.
    rows.append({"task": "t", "init": "permutation", "seed": 2, "test_accuracy": 0.72})
    assert payoff_report.summarize(rows)["t"]["permutation"]["clear"] is None


def test_report_writes_the_table_and_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    finetuning = [{"task": task, "init": init, "seed": s, "test_accuracy": 0.5 + 0.1 * k + 0.01 * s}
                  for task in ("a", "b") for k, init in enumerate(("random", "permutation"))
                  for s in range(3)]
    report = {"finetuning": finetuning, "heldout_baseline": {"heldout_cross_entropy": 6.0},
              "pretraining": {"permutation": {
                  "heldout": [{"step": 10, "loss": 6.5}, {"step": 20, "loss": 5.0}],
                  "train_loss": [{"step": 5, "loss": 7.0}, {"step": 20, "loss": 5.1}],
                  "seconds": 120.0}},
              "timings": {"pretrain": {"seconds": 120.0, "load_start": 1.0, "load_end": 2.0}}}
    payoff_report.write_report(str(tmp_path), report)
    table = (tmp_path / "results.md").read_text()
    assert ("| a | permutation-pretrained | 0.6100 +- 0.0100 | s0 0.6000, s1 0.6100, s2 0.6200 "
            "| +0.1000 | yes |") in table
    assert "6.500 (step 10) -> 5.000 (step 20) | 1.000 nats" in table
    assert (tmp_path / "payoff.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
