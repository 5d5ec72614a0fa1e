"""The claims of docs/ARCHITECTURE.md that code can check: the Task protocol it lists is the one
training/task.py defines, every module it names exists, and every file the library writes
goes through xlnet_tf2/fileio.py (an AST scan for direct writes)."""

import ast
import os
import re

from fixtures.paths import REPO_ROOT

from xlnet_tf2.training.task import Task

DOC = os.path.join(REPO_ROOT, "docs", "ARCHITECTURE.md")
PACKAGE = os.path.join(REPO_ROOT, "xlnet_tf2")

# Direct writes that are not the project's own files, each with why it may stay.
WRITE_ALLOWED = {
    # The one home of writing: atomic files, staging directories, appends.
    "xlnet_tf2/fileio.py": "the module every other write goes through",
}


def _doc():
    with open(DOC, encoding="utf-8") as f:
        return f.read()


def _protocol_block(text):
    """The indented code block of the Task protocol section (from `class MyTask(Task):`)."""
    start = text.index("class MyTask(Task):")
    end = text.index("\n\n", start)
    return text[start:end]


def protocol_methods(text):
    """(required, optional) method names the doc lists for the Task protocol."""
    block = _protocol_block(text)
    required = [m for m in re.findall(r"def (\w+)\(", block) if m != "__init__"]
    hooks = block[block.index("# optional hooks, with defaults:"):]
    hooks = hooks.split(":", 1)[1]
    optional = re.findall(r"\b([a-z_]+)\b", hooks.replace("#", " ").replace("(every eval_every "
                                                                           "steps)", ""))
    return required, optional


def test_the_documented_task_protocol_is_training_task_py():
    required, optional = protocol_methods(_doc())
    assert {"build_model", "build_inputs", "loss", "loss_count", "result"} <= set(required)
    documented = set(required) | set(optional)
    defined = {name for name, value in vars(Task).items()
               if callable(value) and not name.startswith("_")}
    assert documented - defined == set(), "the doc names methods Task does not have"
    assert defined - documented == set(), "Task has methods the doc does not list"


def documented_modules(text):
    """The `.py` module paths the doc names in backticks (`tasks/pretraining.py`,
    `fileio.py`, `xlnet_tf2/...`)."""
    return sorted(set(re.findall(r"`((?:[\w.]+/)*\w+\.py)", text)))


def _file_names():
    """Every file name of the repository's code folders."""
    names = set()
    for folder in ("xlnet_tf2", "benchmarks", "experiments", "data_prep", "tests", "scripts"):
        for _, dirnames, filenames in os.walk(os.path.join(REPO_ROOT, folder)):
            dirnames[:] = [d for d in dirnames if d != "__pycache__"]
            names.update(filenames)
    return names


def _module_exists(name, file_names):
    """A path (`tasks/pretraining.py`) must exist from the repository or the package root; a
    bare name (`trainer.py`, in a row about its folder) must be some file of the code."""
    if "/" in name:
        return any(os.path.isfile(os.path.join(root, name)) for root in (REPO_ROOT, PACKAGE))
    return name in file_names


def test_every_module_the_doc_names_exists():
    names = documented_modules(_doc())
    assert "tasks/objective.py" in names and "fileio.py" in names
    file_names = _file_names()
    missing = [name for name in names if not _module_exists(name, file_names)]
    assert missing == []


# ---------------------------------------------------------------------------- writes
_WRITE_MODE = set("wax+")
_WRITE_CALLS = {("gfile", "copy"), ("np", "save"), ("np", "savez"), ("np", "savez_compressed"),
                ("numpy", "save"), ("json", "dump"), ("pickle", "dump"), ("shutil", "copy"),
                ("shutil", "copyfile"), ("shutil", "copy2"), ("gfile", "rename"),
                ("os", "rename"), ("os", "replace")}


def _callee(node):
    parts, f = [], node.func
    while isinstance(f, ast.Attribute):
        parts.append(f.attr)
        f = f.value
    if isinstance(f, ast.Name):
        parts.append(f.id)
    return list(reversed(parts))


def _mode(node):
    for keyword in node.keywords:
        if keyword.arg == "mode":
            return keyword.value.value if isinstance(keyword.value, ast.Constant) else None
    if len(node.args) > 1 and isinstance(node.args[1], ast.Constant):
        return node.args[1].value
    return None


def _writes_to_memory(node):
    """np.save(buffer, ...) into an in-memory buffer (then written by fileio) is no file."""
    return (node.args and isinstance(node.args[0], ast.Name)
            and node.args[0].id in ("buffer", "buf"))


def direct_writes(source, path="<source>"):
    """[(line, call)] of the writes in `source` that bypass fileio.py."""
    found = []
    for node in ast.walk(ast.parse(source, path)):
        if not isinstance(node, ast.Call):
            continue
        parts = _callee(node)
        if not parts:
            continue
        name = ".".join(parts)
        if parts == ["open"] or parts[-1] == "GFile":
            mode = _mode(node)
            if isinstance(mode, str) and set(mode) & _WRITE_MODE:
                found.append((node.lineno, f"{name}(..., {mode!r})"))
        elif parts[-1] in ("write_text", "write_bytes"):
            found.append((node.lineno, name))
        elif len(parts) >= 2 and (parts[-2], parts[-1]) in _WRITE_CALLS:
            if not _writes_to_memory(node):
                found.append((node.lineno, name))
    return found


def test_the_scan_finds_direct_writes():
    source = ('import json, numpy as np, tensorflow as tf\n'
              'open("a", "w")\n'
              'tf.io.gfile.GFile("b", mode="ab")\n'
              'tf.io.gfile.copy("c", "d", overwrite=True)\n'
              'np.save("e.npy", 1)\n'
              'json.dump({}, f)\n'
              'open("f")\n'
              'np.save(buffer, 1)\n')
    assert [line for line, _ in direct_writes(source)] == [2, 3, 4, 5, 6]


def test_every_write_goes_through_fileio():
    offenders = []
    for dirpath, dirnames, filenames in os.walk(PACKAGE):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for filename in sorted(filenames):
            if not filename.endswith(".py"):
                continue
            path = os.path.join(dirpath, filename)
            relative = os.path.relpath(path, REPO_ROOT).replace(os.sep, "/")
            if relative in WRITE_ALLOWED:
                continue
            with open(path, encoding="utf-8") as f:
                source = f.read()
            offenders += [f"{relative}:{line}: {call}" for line, call in direct_writes(source, path)]
    assert offenders == [], "write through xlnet_tf2/fileio.py (or allow-list with a reason)"


def test_every_task_is_in_every_table_of_the_tasks():
    """Until one declaration feeds them, a task of task.json (run_dir.TASKS) must be told to
    each table that maps tasks (docs/ARCHITECTURE.md, "Where a new fine-tuning task goes"):
    a task missing from one fails here instead of at a user's load, conversion or export."""
    from xlnet_tf2 import run_dir
    from xlnet_tf2.conversion.convert_config import DEFAULT_SEQ_LEN
    from xlnet_tf2.conversion.to_huggingface import ARCHITECTURES
    from xlnet_tf2.export.export_config import EXPORT_TASKS
    from xlnet_tf2.models.directories import MODEL_CLASSES

    tables = {"models/directories.MODEL_CLASSES": MODEL_CLASSES,
              "conversion/to_huggingface.ARCHITECTURES": ARCHITECTURES,
              "conversion/convert_config.DEFAULT_SEQ_LEN": DEFAULT_SEQ_LEN,
              "export/export_config.EXPORT_TASKS": EXPORT_TASKS}
    missing = {name: sorted(set(run_dir.TASKS) - set(table)) for name, table in tables.items()}
    assert not any(missing.values()), missing
    for task, model_class in MODEL_CLASSES.items():
        assert task in model_class.KINDS, (task, model_class.__name__)
