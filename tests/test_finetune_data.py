"""Task files written from real text (the standard library's docstrings) for the fine-tuning
and export tests, and the tests of the task-data readers' errors.

Nothing is hand-written: classification sentences are docstring paragraphs of two stdlib
packages (label = which package: a topic signal a tiny model can learn).
"""

from __future__ import annotations

import ast
import csv
import json
import os
import random
import re
import sysconfig

import pytest

STDLIB = sysconfig.get_paths()["stdlib"]


def docstring_paragraphs(package: str, min_chars: int = 30, max_chars: int = 300):
    out = []
    for dirpath, dirnames, filenames in os.walk(os.path.join(STDLIB, package)):
        dirnames.sort()
        for name in sorted(filenames):
            if not name.endswith(".py"):
                continue
            with open(os.path.join(dirpath, name), "rb") as f:
                tree = ast.parse(f.read())
            for node in ast.walk(tree):
                if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                     ast.AsyncFunctionDef)):
                    doc = ast.get_docstring(node)
                    for paragraph in re.split(r"\n\s*\n", doc or ""):
                        text = " ".join(paragraph.split())
                        if min_chars <= len(text) <= max_chars:
                            out.append(text)
    return out


def spm_training_text(path: str) -> str:
    """A few hundred KB of stdlib docstrings to train a tiny SentencePiece model on."""
    lines = []
    for package in ("email", "asyncio", "json", "http", "unittest", "xml", "importlib"):
        lines.extend(docstring_paragraphs(package, 10, 2000))
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    return path


def train_tiny_spm(directory: str, vocab_size: int = 500) -> str:
    from xlnet_tf2.tokenizers.sentencepiece_tokenizer import train_sentencepiece

    text = spm_training_text(os.path.join(directory, "spm_text.txt"))
    return train_sentencepiece([text], vocab_size=vocab_size,
                               model_prefix=os.path.join(directory, "spm"), num_threads=2)


def topic_examples(per_class: int = 300, seed: int = 0):
    """[(text, label)] with label "email" or "asyncio", shuffled."""
    rng = random.Random(seed)
    examples = []
    for label in ("email", "asyncio"):
        texts = docstring_paragraphs(label)
        rng.shuffle(texts)
        examples.extend((t, label) for t in texts[:per_class])
    rng.shuffle(examples)
    return examples


def write_classification_files(directory: str, fmt: str = "tsv", per_class: int = 300,
                               eval_fraction: float = 0.25):
    examples = topic_examples(per_class)
    n_eval = int(len(examples) * eval_fraction)
    splits = {"train": examples[n_eval:], "dev": examples[:n_eval]}
    paths = {}
    for split, rows in splits.items():
        path = os.path.join(directory, f"{split}.{fmt}")
        if fmt == "jsonl":
            with open(path, "w", encoding="utf-8") as f:
                for text, label in rows:
                    f.write(json.dumps({"sentence": text, "topic": label}) + "\n")
        else:
            with open(path, "w", encoding="utf-8", newline="") as f:
                writer = csv.writer(f, delimiter="\t" if fmt == "tsv" else ",",
                                    quoting=csv.QUOTE_NONE if fmt == "tsv" else csv.QUOTE_MINIMAL,
                                    escapechar="\\" if fmt == "tsv" else None)
                writer.writerow(["sentence", "topic"])
                for text, label in rows:
                    writer.writerow([text.replace("\t", " "), label])
        paths[split] = path
    return paths
