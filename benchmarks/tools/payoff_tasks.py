"""Downstream classification tasks from labeled text installed on the machine, for the
pretraining payoff experiment (benchmarks/pretraining_payoff.py).

Two tasks, each a paragraph of documentation prose and the place it came from:

* "man_section": which section of the manual an English man page paragraph is from:
  1 (user commands), 3 (library functions), 5 (file formats), 8 (administration commands).
  Pages are rendered by groff (benchmarks/tools/doc_corpus.py); the words overlap a lot
  between sections (options, files, errors, return values), the way a passage is written
  tells them apart.
* "python_package": which installed Python package a docstring paragraph is from:
  apache_beam, keras, numpy or tensorflow (all runtime dependencies of this project, so
  every checkout that runs has them), module docstrings and those of classes and functions,
  parsed with `ast`, never imported.

Splits are by document (a man page, a module file), never by paragraph: a document's hash
puts all its paragraphs in train (70%), dev (10%) or test (20%), so test paragraphs come from
documents fine-tuning never saw. At most `max_per_document` paragraphs of a document are
used (the first ones in a hash order), paragraphs of fewer than `min_words` words or that
do not read as prose are dropped, every paragraph is used once, and each split is balanced:
every label gets the same number of examples (the smallest label's count, capped).
`task_documents` names every document a task reads, so the pretraining corpus can leave all
of them out (`benchmarks/pretraining_payoff.py` does).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import sysconfig
from concurrent.futures import ThreadPoolExecutor
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

from benchmarks.tools import doc_corpus
from xlnet_tf2.prep.docstring_corpus import docstrings

SPLITS = ("train", "dev", "test")
MAN_SECTIONS = ("1", "3", "5", "8")
PYTHON_PACKAGES = ("apache_beam", "keras", "numpy", "tensorflow")
TASKS = ("man_section", "python_package")
# A labeled document: (label, name, paragraphs); the name is what the corpus builder calls it.
LabeledDocument = Tuple[str, str, List[str]]


@dataclasses.dataclass(frozen=True)
class TaskSizes:
    """Examples per label and split (the split holds labels x this many, fewer if a label
    runs out: then every label is cut to the smallest count)."""

    train: int = 600
    dev: int = 100
    test: int = 200
    max_per_document: int = 6
    min_words: int = 12
    max_pages_per_section: int = 1500

    def per_label(self, split: str) -> int:
        return getattr(self, split)


def _hash(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


def split_of(name: str) -> str:
    """The split every paragraph of document `name` belongs to (70/10/20 by a hash)."""
    u = _hash(f"split:{name}") / 2.0 ** 64
    return "train" if u < 0.7 else "dev" if u < 0.8 else "test"


def man_section_pages(root: str, sections: Sequence[str], max_pages: int
                      ) -> List[Tuple[str, str]]:
    """(label, path) of the pages of each section (at most max_pages each, chosen by a hash
    of the name, so adding pages elsewhere does not change the choice)."""
    pages = []
    for section in sections:
        folder = os.path.join(root, f"man{section}")
        names = sorted(os.listdir(folder)) if os.path.isdir(folder) else []
        names = sorted(names, key=lambda n: _hash(f"page:{section}/{n}"))[:max_pages]
        pages.extend((section, os.path.join(folder, n)) for n in sorted(names))
    return pages


def iter_man_section_documents(root: str = "/usr/share/man",
                               sections: Sequence[str] = MAN_SECTIONS,
                               max_pages: int = 1500, workers: int = 2
                               ) -> Iterator[LabeledDocument]:
    """(section, name, paragraphs) of the chosen pages of each section; names as
    doc_corpus.iter_man_documents gives them (relative to root)."""
    pages = man_section_pages(root, sections, max_pages)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for start in range(0, len(pages), 64):
            batch = pages[start:start + 64]
            texts = pool.map(doc_corpus._render_man, [p for _, p in batch])
            for (section, path), text in zip(batch, texts):
                if text:
                    yield section, os.path.relpath(path, root), doc_corpus._paragraphs(text)


def iter_python_package_documents(root: Optional[str] = None,
                                  packages: Sequence[str] = PYTHON_PACKAGES
                                  ) -> Iterator[LabeledDocument]:
    """(package, name, paragraphs) of every module of each package under `root` (default:
    this interpreter's site-packages); names relative to root, as
    doc_corpus.iter_python_documents gives them."""
    root = root or sysconfig.get_paths()["purelib"]
    for package in packages:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, package)):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            for f in sorted(filenames):
                if f.endswith(".py"):
                    path = os.path.join(dirpath, f)
                    paragraphs = [p for doc in docstrings(path)
                                  for p in doc_corpus._paragraphs(doc)]
                    if paragraphs:
                        yield package, os.path.relpath(path, root), paragraphs


def labeled_documents(task: str, sizes: TaskSizes, *, man_root: str = "/usr/share/man",
                      python_root: Optional[str] = None) -> Iterator[LabeledDocument]:
    if task == "man_section":
        return iter_man_section_documents(man_root, MAN_SECTIONS, sizes.max_pages_per_section)
    if task == "python_package":
        return iter_python_package_documents(python_root, PYTHON_PACKAGES)
    raise ValueError(f"unknown task {task!r}; choose from {TASKS}.")


def build_task(documents: Iterator[LabeledDocument], sizes: TaskSizes
               ) -> Tuple[Dict[str, List[dict]], List[str]]:
    """({split: [{"text", "label", "document"}...]}, the names of every document read).

    Each split is balanced (a label with no document there empties the split) and shuffled
    by a hash of the text (no random state)."""
    pools: Dict[str, Dict[str, List[dict]]] = {s: {} for s in SPLITS}
    seen, names = set(), []
    for label, name, paragraphs in documents:
        names.append(name)
        kept = []
        for p in paragraphs:
            key = hashlib.blake2b(p.encode(), digest_size=12).digest()
            if key in seen or len(p.split()) < sizes.min_words or not doc_corpus._is_prose(p):
                continue
            seen.add(key)
            kept.append(p)
        kept = sorted(kept, key=lambda p: _hash(f"para:{p}"))[:sizes.max_per_document]
        pool = pools[split_of(name)].setdefault(label, [])
        pool.extend({"text": p, "label": label, "document": name} for p in kept)
    labels = sorted({label for pool in pools.values() for label in pool})
    splits = {}
    for split in SPLITS:
        by_label = pools[split]
        # Every label of the task, so a label missing from a split empties it (never a split
        # silently without a label).
        n = min([len(by_label.get(label, [])) for label in labels] or [0])
        n = min(n, sizes.per_label(split))
        rows = []
        for label in labels:
            rows.extend(sorted(by_label.get(label, []),
                               key=lambda r: _hash(f"pick:{r['text']}"))[:n])
        splits[split] = sorted(rows, key=lambda r: _hash(f"order:{r['text']}"))
    return splits, names


def write_task(out_dir: str, task: str, splits: Dict[str, List[dict]],
               documents: List[str]) -> dict:
    """Writes OUT/{train,dev,test}.jsonl (text, label) and OUT/task_info.json; returns the
    info (counts per split and label, the labels, the documents read)."""
    os.makedirs(out_dir, exist_ok=True)
    info = {"task": task, "labels": sorted({r["label"] for rows in splits.values()
                                            for r in rows}),
            "counts": {}, "documents_read": len(documents), "sha256": {}}
    for split, rows in splits.items():
        path = os.path.join(out_dir, f"{split}.jsonl")
        with open(path, "w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps({"text": r["text"], "label": r["label"]}) + "\n")
        with open(path, "rb") as f:
            info["sha256"][split] = hashlib.sha256(f.read()).hexdigest()
        counts: Dict[str, int] = {}
        for r in rows:
            counts[r["label"]] = counts.get(r["label"], 0) + 1
        info["counts"][split] = counts
    with open(os.path.join(out_dir, "documents.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(documents) + "\n")
    with open(os.path.join(out_dir, "task_info.json"), "w") as f:
        json.dump(info, f, indent=1)
    return info
