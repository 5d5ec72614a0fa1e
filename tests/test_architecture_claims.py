"""The claims of docs/ARCHITECTURE.md that code can check: the Task protocol it lists is the one
training/task.py defines, every module it names exists, every file the library writes goes
through xlnet_tf2/fileio.py (an AST scan for direct writes), the tasks are declared once
(xlnet_tf2/task_registry.py: no other table of them, every derived view holds each) and every
loader goes down one path (models/pretrained.py's `load`). Also one claim of docs/GLOSSARY.md:
"segment" means sentence A/B only, not the piece of a stream a step reads (a chunk)."""

import ast
import importlib
import inspect
import os
import pathlib
import re
import textwrap

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


# The one module that may list the tasks: their declarations.
REGISTRY = "xlnet_tf2/task_registry.py"


def task_tables(source: str, path: str, task_names) -> list:
    """(line, the tasks it names) of each literal tuple, list, set or dict of `source` that
    names three or more of `task_names` as string constants (as keys, for a dict): a table of
    the tasks written by hand. Two names (a class's pair of tasks, a flag's choices of one
    command) are a task's own code, not a table."""
    found = []
    for node in ast.walk(ast.parse(source, filename=path)):
        if isinstance(node, ast.Dict):
            items = node.keys
        elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            items = node.elts
        else:
            continue
        named = {item.value for item in items if isinstance(item, ast.Constant)
                 and isinstance(item.value, str) and item.value in task_names}
        if len(named) >= 3:
            found.append((node.lineno, sorted(named)))
    return found


def test_the_scan_finds_a_table_of_the_tasks():
    names = ("classification", "regression", "race", "squad")
    source = ('SEQ = {"classification": 128, "race": 512, "squad": 512}\n'
              'CHOICES = ("classification", "regression")\n'
              'def f(task):\n    return task in ["race", "squad", "regression"]\n')
    assert task_tables(source, "x.py", names) == [
        (1, ["classification", "race", "squad"]), (4, ["race", "regression", "squad"])]


def test_no_table_of_the_tasks_outside_the_registry():
    """Every table of the tasks derives from xlnet_tf2/task_registry.py: a new literal table
    naming three or more declared tasks anywhere else in the package fails here."""
    from xlnet_tf2 import task_registry

    offenders = []
    for dirpath, _, filenames in os.walk(PACKAGE):
        for filename in sorted(filenames):
            if not filename.endswith(".py"):
                continue
            path = os.path.join(dirpath, filename)
            relative = os.path.relpath(path, REPO_ROOT).replace(os.sep, "/")
            if relative == REGISTRY:
                continue
            with open(path, encoding="utf-8") as f:
                source = f.read()
            offenders += [f"{relative}:{line}: {named}"
                          for line, named in task_tables(source, path, task_registry.names())]
    assert offenders == [], ("a table of the tasks outside xlnet_tf2/task_registry.py: derive "
                             "it from the declarations")


def test_every_view_of_the_registry_holds_every_declared_task():
    """Each table the declarations feed (task_registry.py's docstring) holds exactly the
    declared tasks, with the declared values, and every class, function and command a
    declaration names exists and serves its task."""
    import dataclasses
    import importlib
    import tomllib

    from xlnet_tf2 import run_dir, task_registry
    from xlnet_tf2.conversion.convert_config import DEFAULT_SEQ_LEN, HEAD_KINDS, ConvertConfig
    from xlnet_tf2.conversion.to_huggingface import ARCHITECTURES
    from xlnet_tf2.export.saved_model import signatures_of
    from xlnet_tf2.export.export_config import EXPORT_KINDS, ExportConfig
    from xlnet_tf2.models.head_model import head_model_class
    from xlnet_tf2.tasks.finetuning import FinetuneTask
    from xlnet_tf2.tasks.head_spec import HeadSpec

    declarations = task_registry.declared_tasks()
    names = tuple(d.name for d in declarations)
    assert names == task_registry.names() and len(set(names)) == len(names) >= 5
    assert run_dir.TASKS == names and HEAD_KINDS == names
    assert EXPORT_KINDS == names + ("features",)
    assert DEFAULT_SEQ_LEN == {d.name: d.default_seq_len for d in declarations}
    assert {k: v for k, v in ARCHITECTURES.items() if k not in ("lm", "backbone")} == {
        d.name: d.huggingface_architecture for d in declarations}
    choices = {f.name: f.metadata.get("choices") for f in dataclasses.fields(ConvertConfig)}
    assert tuple(choices["kind"]) == names
    export_choices = {f.name: f.metadata.get("choices") for f in dataclasses.fields(ExportConfig)}
    assert tuple(export_choices["kind"]) == EXPORT_KINDS
    spec_keys = {f.name for f in dataclasses.fields(HeadSpec)}
    assert spec_keys == set(task_registry.SHARED_SETTINGS) | {
        s.name for d in declarations for s in d.settings}
    with open(os.path.join(REPO_ROOT, "pyproject.toml"), "rb") as f:
        scripts = tomllib.load(f)["project"]["scripts"]

    def named(dotted):
        module, _, attribute = dotted.rpartition(".")
        return getattr(importlib.import_module(module), attribute)

    for d in declarations:
        head_model = head_model_class(d.name)
        assert f"{head_model.__module__}.{head_model.__qualname__}" == d.head_model
        assert d.name in head_model.KINDS, (d.name, head_model.KINDS)
        assert named(d.keras_hub_model).KIND == d.name
        assert issubclass(named(d.finetune_task), FinetuneTask), d.finetune_task
        assert signatures_of(d.name) is named(d.serving)
        assert d.command in scripts, (d.name, d.command)
        spec = HeadSpec(kind=d.name, seq_len=d.default_seq_len)
        assert spec.kind == d.name


def test_every_loader_goes_down_one_path(monkeypatch):
    """docs/ARCHITECTURE.md's floor 4: every class's from_pretrained / from_preset is, or
    calls, models/pretrained.py's `load` with the class itself, and the commands' loader of a
    trained model_dir (tasks/finetuned_model.py) goes through the classes' from_pretrained."""
    import importlib

    import xlnet_tf2
    from xlnet_tf2 import task_registry
    from xlnet_tf2.models import pretrained
    from xlnet_tf2.models.head_model import HeadModel, head_model_class
    from xlnet_tf2.models.lm_head_model import XLNetLMHeadModel
    from xlnet_tf2.models.xlnet_model import XLNetModel
    from xlnet_tf2.tasks import finetuned_model

    assert XLNetLMHeadModel.from_pretrained.__func__ is pretrained.load
    assert xlnet_tf2.from_pretrained.__func__ is pretrained.load
    calls = []
    monkeypatch.setattr(pretrained, "load",
                        lambda cls, name, **kwargs: calls.append((cls, name)) or cls)
    keras_hub = [getattr(importlib.import_module(module), name) for module, _, name in
                 (d.keras_hub_model.rpartition(".") for d in task_registry.declared_tasks())]
    classes = [XLNetModel, HeadModel] + [head_model_class(n) for n in task_registry.names()]
    for cls in classes:
        assert cls.from_pretrained("dir") is cls
    for cls in [XLNetModel, XLNetLMHeadModel] + keras_hub:
        assert cls.from_preset("dir") is cls
    assert calls == [(cls, "dir") for cls in classes + [XLNetModel, XLNetLMHeadModel]
                     + keras_hub]
    source = open(finetuned_model.__file__, encoding="utf-8").read()
    assert "XLNetModel.from_pretrained(" in source and "HeadModel.from_pretrained(" in source
    assert "SequenceClassifier" not in source and "restore_" not in source


def _config_classes():
    """(module, class name) of every class of the package and the benchmarks' tools whose body
    declares a flag setting (config_flags.setting / setting_like / section)."""
    found = []
    for root in ("xlnet_tf2", "benchmarks"):
        for path in sorted(pathlib.Path(REPO_ROOT, root).rglob("*.py")):
            tree = ast.parse(path.read_text())
            module = ".".join(path.relative_to(REPO_ROOT).with_suffix("").parts)
            for node in tree.body:
                if isinstance(node, ast.ClassDef) and any(
                        isinstance(st, ast.AnnAssign) and isinstance(st.value, ast.Call)
                        and _called(st.value) in ("setting", "setting_like", "section")
                        for st in node.body):
                    found.append((module, node.name))
    return found


def _called(call: ast.Call) -> str:
    return getattr(call.func, "id", None) or getattr(call.func, "attr", "")


def _first_statement(function) -> ast.stmt:
    body = ast.parse(textwrap.dedent(inspect.getsource(function))).body[0].body
    return next(s for s in body if not (isinstance(s, ast.Expr)
                                         and isinstance(s.value, ast.Constant)))


def test_every_node_of_a_configuration_tree_starts_with_check_declared():
    """ARCHITECTURE.md, "Configuration": every class with flag settings validates its
    declared choices and required values first (check_declared, or its base's __post_init__
    that does), so a library caller's bad value fails as the command line's would."""
    classes = _config_classes()
    assert len(classes) >= 15, classes
    missing = []
    for module, name in classes:
        cls = getattr(importlib.import_module(module), name)
        owners = [k for k in cls.__mro__ if "__post_init__" in vars(k)]
        checked = False
        for owner in owners:  # follow super().__post_init__() down the MRO
            first = _first_statement(vars(owner)["__post_init__"])
            if not (isinstance(first, ast.Expr) and isinstance(first.value, ast.Call)):
                break
            if _called(first.value) == "check_declared":
                checked = True
                break
            if _called(first.value) != "__post_init__":
                break
        if not checked:
            missing.append(f"{module}.{name}")
    assert not missing, f"configuration classes not starting with check_declared: {missing}"


# ---------------------------------------------------------------------------- one word, "task"
# "task" is a training procedure (training/task.py) or a declared fine-tuning task; what a
# model is, is its kind (docs/GLOSSARY.md). These spellings name a model's kind as a "task":
# task.json's old key and the old --task flag. They may appear only where the old name is
# declared to be read (old_names=..., RENAMED_SETTINGS, the help text saying "Formerly").
_KIND_AS_TASK = re.compile(r"""--task(?![s_a-zA-Z])|\[["']task["']\]|get\(["']task["']\)|"""
                           r"""["']task["']\s*:|\btask=(?!task\b)""")
# (TF_CONFIG's "task" is TensorFlow's word for a cluster member: {"type": ..., "index": ...}.)
_OLD_NAME_DECLARED = ("old_names=", "renamed_settings", "formerly", "deprecated",
                      '"task": {"type"')


def kind_called_task(text: str, path: str) -> list:
    """file:line of each place `text` names a model's kind as a "task"."""
    return [f"{path}:{number}: {line.strip()}" for number, line in
            enumerate(text.splitlines(), 1)
            if _KIND_AS_TASK.search(line)
            and not any(m in line.lower() for m in _OLD_NAME_DECLARED)]


def test_the_scan_finds_a_kind_called_task():
    assert kind_called_task('spec = HeadSpec(task="race")\n', "x.py") == [
        'x.py:1: spec = HeadSpec(task="race")']
    assert len(kind_called_task('return {"task": self.kind}\nx = settings.get("task")\n'
                                "run --task=features\n", "x.py")) == 3
    assert kind_called_task('Trainer(task, loop)\nkind: str = setting(old_names=("task",))\n'
                            "self.task = task\n", "x.py") == []


def test_a_model_kind_is_never_called_a_task():
    """The package, its commands and the docs say kind (task.json's `kind`, `--kind`)."""
    roots = [PACKAGE, os.path.join(REPO_ROOT, "experiments"), os.path.join(REPO_ROOT, "docs"),
             os.path.join(REPO_ROOT, "scripts")]
    found = []
    for root in roots:
        for directory, _, names in os.walk(root):
            for name in names:
                if name.endswith((".py", ".md", ".sh")):
                    path = os.path.join(directory, name)
                    with open(path, encoding="utf-8") as f:
                        found += kind_called_task(f.read(), os.path.relpath(path, REPO_ROOT))
    with open(os.path.join(REPO_ROOT, "README.md"), encoding="utf-8") as f:
        found += kind_called_task(f.read(), "README.md")
    assert not found, "a model's kind called a task (say kind):\n" + "\n".join(found)


# ---------------------------------------------------------------------------- words
# docs/GLOSSARY.md, "Words with one meaning": a segment is sentence A/B. The L-token piece of a
# stream a step reads is a chunk, a query's index 0..L-1 its position in the example. Each
# pattern is a phrase that once said otherwise, with what the code says now.
_NOT_SEGMENT = r"(?!\s+(?:[AB]|ids?|terms?|embedding|matrix)\b)"  # "of the segment ids" is A/B
CHUNK_MEANING_OF_SEGMENT = {
    r"\b(?:current|previous|next|this) segments?\b": "the current / previous / next chunk",
    r"\beach segment\b": "each example",
    r"\bsegment positions?\b": "position in the example",
    r"\b(?:of|in) the segment\b" + _NOT_SEGMENT: "of the example",
    r"concat\(memory, segment\)": "concat(memory, example)",
    r"\bmemory (?:\+|and) segment\b" + _NOT_SEGMENT: "memory and example",
    r"\bconsecutive segments\b": "consecutive chunks",
    r"-token segments?\b": "512-token examples",
    r"length \(segment\)": "sequence length (one example)",
    r"\bsegment_positions\b": "content_positions",
    r"\bseg_len\b": "seq_len (L)",
}
_WORD_FOLDERS = ("xlnet_tf2", "experiments", "data_prep", "benchmarks", "scripts", "docs")
_WORD_FILES = ("README.md", "BENCHMARKS.md")


def chunk_meaning_of_segment(text: str) -> list:
    """(line, phrase, what to say instead) of every use of "segment" for a chunk or for a
    position in the example."""
    patterns = [(re.compile(pattern, re.IGNORECASE), say)
                for pattern, say in CHUNK_MEANING_OF_SEGMENT.items()]
    return sorted((number, m.group(0), say) for number, line in enumerate(text.splitlines(), 1)
                  for pattern, say in patterns for m in pattern.finditer(line))


def test_the_scan_finds_the_chunk_meaning_of_segment():
    text = ("L  query length (current segment)\n"
            "memory for the next segment\n"
            "query_positions: int32 [B, P], the Segment position i of each query row\n"
            "A query at position i of the segment and a key of concat(memory, segment)\n"
            "positions = segment_positions(queries, q_len); seg_len=q_len\n"
            "segment_ids: int [B, L] of the example. Memory keys count as segment 0.\n"
            "(q + r_s) . seg_embed[c] for c = 0 (same segment), 1 (different segments)\n"
            "the query stream compares the segment of its target position\n"
            "attention mask and segment mismatch; memory and segment ids; of the segment A\n")
    assert [line for line, _, _ in chunk_meaning_of_segment(text)] == [1, 2, 3, 4, 4, 5, 5]


def test_segment_means_sentence_a_or_b_only():
    found = []
    paths = [pathlib.Path(REPO_ROOT, name) for name in _WORD_FILES]
    for folder in _WORD_FOLDERS:
        paths += sorted(p for p in pathlib.Path(REPO_ROOT, folder).rglob("*")
                        if p.suffix in (".py", ".md", ".sh", ".txt")
                        and "__pycache__" not in p.parts)
    for path in paths:
        relative = path.relative_to(REPO_ROOT).as_posix()
        found += [f"{relative}:{line}: {phrase!r} (say: {say})" for line, phrase, say
                  in chunk_meaning_of_segment(path.read_text(encoding="utf-8"))]
    assert not found, ("'segment' is sentence A/B only (docs/GLOSSARY.md, Words with one "
                       "meaning): the piece of a stream a step reads is a chunk, a query's index "
                       "0..L-1 its position in the example. Found:\n  " + "\n  ".join(found))


# ---------------------------------------------------------------------------- losses
def loss_functions_passed(source: str, path: str = "<source>"):
    """(line, name, imported from) of every name in a `loss_fn=` argument of `source`, with
    the module it is imported from (None: defined or bound here)."""
    tree = ast.parse(source, path)
    origin = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module:
            origin.update({a.asname or a.name: node.module for a in node.names})
    def functions(value):  # the function(s) a value gives: a name, or either branch of an if
        if isinstance(value, ast.IfExp):
            return functions(value.body) + functions(value.orelse)
        if isinstance(value, ast.Constant) and value.value is None:
            return []
        return [(value.lineno, getattr(value, "id", ast.unparse(value)))]

    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            for keyword in node.keywords:
                if keyword.arg == "loss_fn":
                    found += [(line, name, origin.get(name))
                              for line, name in functions(keyword.value)]
    return found


def test_the_scan_finds_a_loss_outside_losses_py():
    source = ("from xlnet_tf2.tasks.losses import squad_loss\n"
              "def tagging_loss(o, f):\n    return 0\n"
              "Task(loss_fn=squad_loss)\nTask(loss_fn=tagging_loss if x else squad_loss)\n")
    assert [(n, m) for _, n, m in loss_functions_passed(source)] == [
        ("squad_loss", "xlnet_tf2.tasks.losses"), ("tagging_loss", None),
        ("squad_loss", "xlnet_tf2.tasks.losses")]


def test_every_fine_tuning_loss_is_in_losses_py():
    """ARCHITECTURE.md: a task's loss goes in tasks/losses.py (the tagger's was in its own
    module): every `loss_fn=` of tasks/ names a function imported from there."""
    offenders = []
    for path in sorted(pathlib.Path(PACKAGE, "tasks").glob("*.py")):
        found = loss_functions_passed(path.read_text(encoding="utf-8"), str(path))
        offenders += [f"tasks/{path.name}:{line}: {name}" for line, name, module in found
                      if module != "xlnet_tf2.tasks.losses"]
    assert offenders == [], "losses outside xlnet_tf2/tasks/losses.py"


# ---------------------------------------------------------------------------- script files
def test_the_script_files_row_names_every_script():
    """The `data_prep/`, `experiments/` row of the doc's outside-the-package table names every
    script file there (run_tagger.py was missing)."""
    row = next(line for line in _doc().splitlines()
               if line.startswith("| `data_prep/`, `experiments/` |"))
    named = set(re.findall(r"`(\w+\.py)`", row))
    present = {p.name for folder in ("data_prep", "experiments")
               for p in pathlib.Path(REPO_ROOT, folder).glob("*.py")}
    assert named == present, (sorted(present - named), sorted(named - present))
# ---------------------------------------------------------------------------- who calls whom
# A module docstring may say who calls it ("Called by `tasks/finetuning.py` (...) and
# `export/saved_model.py`"; also "imported by", "used by") and that a module is "not yet"
# used ("... not yet emitted from the step"). Both are checked against the package's import
# graph: every module named as a caller imports the module the claim is about, and a module
# said not to be used yet has no importer. In a package's docstring a line opening with a
# module's file name (`attention.py   the attention op ...`) starts that module's entry.
_CALLER_CLAIM = re.compile(r"\b(?:called|imported|used) (?:only )?by\b", re.IGNORECASE)
_UNUSED_CLAIM = re.compile(r"\bnot yet (?:emitted|used|called|imported|wired|reached|run)\b",
                           re.IGNORECASE)
_MODULE_REF = re.compile(r"(?<![\w/.])((?:[\w]+/)*[\w]+\.py)\b")
_ENTRY = re.compile(r"^\s*(\w+\.py)\b")


def _module_name(package_root, path):
    relative = pathlib.Path(path).relative_to(package_root).with_suffix("")
    parts = ("xlnet_tf2",) + relative.parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(package_root):
    """{module: the package's modules it imports} of every module under `package_root` (an
    `xlnet_tf2` folder), `from x import y` counted as importing x.y when that is a module."""
    files = {_module_name(package_root, p): p for p in pathlib.Path(package_root).rglob("*.py")}
    graph = {}
    for module, path in files.items():
        imported = set()
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(anchor + ([base] if base else []))
                imported.add(base)
                imported.update(f"{base}.{a.name}" for a in node.names)
        graph[module] = {m for m in imported if m in files and m != module}
    return graph


def _resolve(reference, module, modules):
    """The module a `path.py` named in `module`'s docstring is: beside it, in the package or
    from the package's root."""
    stem = reference[:-3].replace("/", ".")
    package = module.rpartition(".")[0]
    for candidate in (f"{package}.{stem}", f"xlnet_tf2.{stem}", stem.removeprefix("xlnet_tf2.")
                      and f"xlnet_tf2.{stem.removeprefix('xlnet_tf2.')}", f"{module}.{stem}"):
        if candidate in modules:
            return candidate
    return None


def caller_claim_problems(package_root):
    """['module: what its docstring claims (why it is false)'] for the package's docstrings'
    caller and not-yet claims (the comment above)."""
    graph = import_graph(package_root)
    importers = {m: {k for k, v in graph.items() if m in v} for m in graph}
    problems = []
    for path in sorted(pathlib.Path(package_root).rglob("*.py")):
        module = _module_name(package_root, path)
        docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        subject, entries = module, {module: []}
        for line in docstring.splitlines():
            entry = _ENTRY.match(line)
            if entry and path.name == "__init__.py":
                subject = _resolve(entry.group(1), module, graph) or subject
                entries.setdefault(subject, [])
            entries[subject].append(line)
        for subject, lines in entries.items():
            text = " ".join(lines)
            for sentence in re.split(r"(?<=[.;])\s", text):
                if _UNUSED_CLAIM.search(sentence) and importers.get(subject):
                    problems.append(f"{subject}: {_UNUSED_CLAIM.search(sentence).group(0)} "
                                    f"(imported by {', '.join(sorted(importers[subject]))})")
                claim = _CALLER_CLAIM.search(sentence)
                if not claim:
                    continue
                for reference in _MODULE_REF.findall(sentence[claim.end():]):
                    caller = _resolve(reference, module, graph)
                    if caller is None:
                        problems.append(f"{subject}: called by {reference} (no such module)")
                    elif subject not in graph[caller]:
                        problems.append(f"{subject}: called by {reference} (which does not "
                                        "import it)")
    return problems


def _package(tmp_path, files):
    for name, text in files.items():
        path = tmp_path / "xlnet_tf2" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path / "xlnet_tf2"


def test_the_caller_check_finds_a_docstring_contradicting_its_callers(tmp_path):
    root = _package(tmp_path, {
        "__init__.py": "",
        "kernels/__init__.py": '"""The kernels.\n\n  flash.py   the kernel, not yet emitted from '
                               'the step\n  spare.py   a kernel, not yet used\n"""\n',
        "kernels/flash.py": '"""The flash kernel."""\n',
        "kernels/spare.py": '"""A spare kernel."""\n',
        "kernels/triton.py": '"""Launches it.\n\nCalled by `layers/attention.py` and '
                             '`tasks/loop.py`."""\nfrom xlnet_tf2.kernels import flash\n',
        "layers/__init__.py": "",
        "layers/attention.py": "from xlnet_tf2.kernels.triton import launch\n",
        "tasks/__init__.py": "",
        "tasks/loop.py": "import os\n",
    })
    assert caller_claim_problems(root) == [
        "xlnet_tf2.kernels.flash: not yet emitted (imported by xlnet_tf2.kernels.triton)",
        "xlnet_tf2.kernels.triton: called by tasks/loop.py (which does not import it)"]


def test_no_module_docstring_contradicts_who_imports_it():
    """Module docstrings saying who calls a module, or that one is not yet used, agree with
    the import graph (layers/kernels/__init__.py said the flash kernels were "not yet emitted
    from the step" while the step's attention imports them)."""
    problems = caller_claim_problems(PACKAGE)
    assert problems == [], "\n".join(problems)


# The strategy's facts: a choice that reads them besides the plan is not the plan's alone.
_STRATEGY_NAMES = {"num_replicas", "on_tpu"}


def plan_and_strategy_choices(package_root, plan_properties):
    """{path: [line, ...]} of the boolean expressions of the package that combine a StepPlan
    property (`plan.X`) with the strategy's facts (`num_replicas`, `on_tpu`)."""
    found = {}
    for path in sorted(pathlib.Path(package_root).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.BoolOp):
                continue
            names = {n.attr if isinstance(n, ast.Attribute) else n.id
                     for n in ast.walk(node) if isinstance(n, (ast.Attribute, ast.Name))}
            reads_plan = any(isinstance(n, ast.Attribute) and n.attr in plan_properties
                             and isinstance(n.value, (ast.Name, ast.Attribute))
                             and (getattr(n.value, "id", None) or n.value.attr) == "plan"
                             for n in ast.walk(node))
            if reads_plan and names & _STRATEGY_NAMES:
                relative = path.relative_to(package_root).as_posix()
                found.setdefault(relative, []).append(node.lineno)
    return found


def test_the_scan_finds_a_plan_property_combined_with_the_strategy(tmp_path):
    (tmp_path / "a.py").write_text(
        "grouped = plan.grouped_optimizer and self.num_replicas == 1 and not self.on_tpu\n"
        "fused = self.plan.grouped_optimizer or other\n"
        "whole = jit and self.num_replicas == 1\n")
    assert plan_and_strategy_choices(tmp_path, {"grouped_optimizer"}) == {"a.py": [1]}


def test_the_plan_and_the_strategy_decide_where_the_docs_say():
    """layers/step_plan.py's docstring and ARCHITECTURE.md's layers row: the plan decides each
    piece's form for the device; what depends on the strategy too (the compile scope, whether
    the optimizer takes the grouped form) is decided in modules they name (issue 49 item 10:
    the doc called step_plan.py the one place that picks a device form). Every module that
    combines a plan property with the strategy's facts is named in both, and each module they
    name there reads the strategy's facts."""
    from xlnet_tf2.layers import step_plan

    properties = {name for name, value in vars(step_plan.StepPlan).items()
                  if isinstance(value, property)}
    choices = plan_and_strategy_choices(PACKAGE, properties)
    assert "training/step.py" in choices, choices  # the grouped optimizer's condition
    docstring = step_plan.__doc__
    strategy_part = docstring.partition("distribution strategy")[2]
    named = set(re.findall(r"\btraining/\w+\.py", strategy_part))
    layers_row = next(line for line in _doc().splitlines() if line.startswith("| 2 | `layers/`"))
    for module in choices:
        assert module in named, (module, "not named in layers/step_plan.py's docstring")
        assert module in layers_row, (module, "not named in ARCHITECTURE.md's layers row")
    for module in named:
        text = pathlib.Path(PACKAGE, module).read_text(encoding="utf-8")
        assert all(name in text for name in _STRATEGY_NAMES), module
    assert not re.search(r"every device switch|the one place", docstring + layers_row, re.I)
