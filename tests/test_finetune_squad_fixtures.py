"""SQuAD-format files written from real text: the standard library's function docstrings.

A paragraph is a few functions of one module, each "name(): <raw docstring>" (indentation and
line breaks kept, so answers can span whitespace runs). For each function whose docstring
starts "Return(s) X." the question "What does name return?" has the answer X (the raw
substring up to the first period); SQuAD 2.0 files add "What does other return?" about a
function of another module, unanswerable.
"""

from __future__ import annotations

import ast
import json
import os
import random
import re
import sysconfig

STDLIB = sysconfig.get_paths()["stdlib"]
_RETURNS = re.compile(r"Returns?\s+([^.]{3,80}?)\s*\.", re.S)


def returning_functions(package: str):
    """[(module path, [(name, raw docstring, answer, answer offset in docstring)])]."""
    modules = []
    root = os.path.join(STDLIB, package)
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for file in sorted(filenames):
            if not file.endswith(".py"):
                continue
            with open(os.path.join(dirpath, file), "rb") as f:
                tree = ast.parse(f.read())
            found = []
            for node in ast.walk(tree):
                if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    continue
                doc = ast.get_docstring(node, clean=False)
                match = _RETURNS.match(doc.lstrip()) if doc else None
                if match and not node.name.startswith("__"):
                    offset = len(doc) - len(doc.lstrip()) + match.start(1)
                    found.append((node.name, doc, match.group(1), offset))
            if found:
                modules.append((os.path.relpath(os.path.join(dirpath, file), STDLIB), found))
    return modules


def squad_dataset(packages, version_2: bool, seed: int, per_paragraph: int = 3,
                  max_paragraphs: int = 1000):
    rng = random.Random(seed)
    modules = [m for p in packages for m in returning_functions(p)]
    all_names = [(path, name) for path, fns in modules for name, *_ in fns]
    paragraphs, n = [], 0
    for path, functions in modules:
        for i in range(0, len(functions), per_paragraph):
            group = functions[i:i + per_paragraph]
            context, qas = "", []
            names_here = {name for name, *_ in group}
            for name, doc, answer, offset in group:
                prefix = ("\n\n" if context else "") + f"{name}(): "
                start = len(context) + len(prefix) + offset
                context += prefix + doc
                qas.append({"id": f"q{n}", "question": f"What does {name} return?",
                            "answers": [{"text": answer, "answer_start": start}]})
                n += 1
            if version_2:
                other = rng.choice([nm for p, nm in all_names
                                    if p != path and nm not in names_here])
                qas.append({"id": f"q{n}", "question": f"What does {other} return?",
                            "answers": [], "is_impossible": True})
                n += 1
            paragraphs.append({"context": context, "qas": qas})
    rng.shuffle(paragraphs)
    return {"version": "2.0" if version_2 else "1.1",
            "data": [{"title": "stdlib", "paragraphs": paragraphs[:max_paragraphs]}]}


def write_squad(path: str, packages, version_2: bool, seed: int, **kwargs) -> str:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(squad_dataset(packages, version_2, seed, **kwargs), f)
    return path
