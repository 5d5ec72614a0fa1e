"""The code examples in the docstrings of the public modules run as written, and what their
comments say of the results holds.

The public modules are those defining a name of `xlnet_tf2.__all__`; an example is an indented
block after a blank line in the docstring of the module or of one of its classes or
functions. Each runs in a fresh working directory holding a tiny converted model at
`converted/base` (with its `spiece.model`, also beside it), in a namespace holding what a
reader brings: `xlnet_tf2`, `tf`, the package's public names (`from xlnet_tf2 import *`) and
the example data the block names (`READER_DATA`: texts, labels, ...).

A comment on a statement (or on the lines right after an assignment) is checked where it says
a shape: `# logits [E, num_classes]`, `# start_top_index [E, k], cls_logits [E]`,
`# input_ids, segment_ids int32 [B, L]` name a dict's entries (or describe the value itself
when it is not a dict) with their rank, any number in the brackets and the dtype; a comment
that is a Python literal (`# [["B-PER", "O"]]`) gives the result's structure (the nesting,
the lengths, the types). Other comments are prose.
"""

import ast
import importlib
import inspect
import re
import shutil
import textwrap

import numpy as np
import pytest

import xlnet_tf2

_TEXTS = ["Sort the list in place.", "Create a new event loop.", "Return the number of items.",
          "Run the coroutine until it completes."]
_ARTICLES = ["The list is sorted in place by the method.", "An event loop runs coroutines."]
# The data each example's reader brings, by module (the same name means different things in
# two examples: answers are option ids for RACE, answer strings for SQuAD).
READER_DATA = {
    "xlnet_tf2.models.xlnet_classifier": dict(
        texts=_TEXTS, labels=[0, 1, 0, 1], pairs=_TEXTS[::-1], scores=[0.1, 0.9, 0.3, 0.7]),
    "xlnet_tf2.models.xlnet_multiple_choice": dict(
        articles=_ARTICLES, questions=["What is sorted?", "What runs coroutines?"],
        options=[["The list", "A loop", "A file", "Nothing"],
                 ["A list", "An event loop", "A method", "Nothing"]], answers=[0, 1]),
    "xlnet_tf2.models.xlnet_question_answerer": dict(
        questions=["What is sorted?", "What runs coroutines?"], contexts=_ARTICLES,
        char_offsets=[4, 0], answers=["list", "An event loop"]),
    "xlnet_tf2.tokenizers.xlnet_preprocessor": dict(texts=_TEXTS),
    "xlnet_tf2.tokenizers.xlnet_multiple_choice_preprocessor": dict(
        articles=_ARTICLES, questions=["What is sorted?", "What runs coroutines?"],
        options=[["The list", "A loop", "A file", "Nothing"],
                 ["A list", "An event loop", "A method", "Nothing"]]),
    "xlnet_tf2.tokenizers.xlnet_question_answering_preprocessor": dict(
        questions=["What is sorted?", "What runs coroutines?"], contexts=_ARTICLES),
}


def code_blocks(docstring: str):
    """The indented blocks of a docstring that follow a blank line (or open it), dedented."""
    lines = inspect.cleandoc(docstring).splitlines()
    blocks, i = [], 0
    while i < len(lines):
        if lines[i].startswith("    ") and (i == 0 or not lines[i - 1].strip()):
            j = i
            while j < len(lines) and (lines[j].startswith("    ") or not lines[j].strip()):
                j += 1
            blocks.append(textwrap.dedent("\n".join(lines[i:j])).strip() + "\n")
            i = j
        else:
            i += 1
    return blocks


def public_modules():
    return sorted({getattr(xlnet_tf2, name).__module__ for name in xlnet_tf2.__all__
                   if name != "__version__"})


def examples():
    """[(module, where, block)] of every example of the public modules."""
    found = []
    for module in public_modules():
        tree = ast.parse(inspect.getsource(importlib.import_module(module)))
        for node in [tree] + [n for n in ast.walk(tree)
                              if isinstance(n, (ast.ClassDef, ast.FunctionDef))]:
            docstring = ast.get_docstring(node, clean=False)
            for block in code_blocks(docstring or ""):
                found.append((module, getattr(node, "name", "module"), block))
    return found


# ---------------------------------------------------------------------------- comment claims
_SHAPE = re.compile(r"(?P<names>\w+(?:,\s*\w+)*)\s+(?:(?P<dtype>int32|float32)\s+)?"
                    r"\[(?P<dims>[^\[\]]*)\]")


def _comments(block: str):
    """{statement index: comment text} of the block's top-level statements: the comment at
    the end of a statement's last line, and comment lines right after an assignment."""
    lines = block.splitlines()
    out = {}
    for index, statement in enumerate(ast.parse(block).body):
        texts = []
        last = lines[statement.end_lineno - 1]
        if "#" in last and not last.lstrip().startswith("#"):
            texts.append(last[last.index("#") + 1:].strip())
        following = statement.end_lineno
        while isinstance(statement, ast.Assign) and following < len(lines) \
                and lines[following].lstrip().startswith("#"):
            texts.append(lines[following].lstrip()[1:].strip())
            following += 1
        if texts:
            out[index] = "; ".join(texts)
    return out


def _shape_and_dtype(value):
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return tuple(value.shape), getattr(value.dtype, "name", str(value.dtype))
    array = np.asarray(value, dtype=object if isinstance(value, list) else None)
    return np.shape(value), str(array.dtype)


def _same_structure(value, literal) -> bool:
    if isinstance(literal, (list, tuple)):
        return (isinstance(value, (list, tuple)) and len(value) == len(literal)
                and all(_same_structure(v, x) for v, x in zip(value, literal)))
    return isinstance(value, type(literal))


def claim_problems(comment: str, value) -> list:
    """What of `comment`'s claims `value` contradicts (empty: all hold, or prose)."""
    try:
        literal = ast.literal_eval(comment)
    except (ValueError, SyntaxError):
        literal = None
    if isinstance(literal, (list, tuple)):
        return [] if _same_structure(value, literal) else [
            f"{value!r} has not the structure of {comment}"]
    problems = []
    for match in _SHAPE.finditer(comment):
        names = [n.strip() for n in match.group("names").split(",")]
        dims = [d.strip() for d in match.group("dims").split(",")]
        entries = ([(n, value[n]) for n in names] if isinstance(value, dict)
                   else [(match.group("names"), value)])
        for name, entry in entries:
            shape, dtype = _shape_and_dtype(entry)
            if len(shape) != len(dims) or any(d.isdigit() and int(d) != s
                                               for d, s in zip(dims, shape)):
                problems.append(f"{name}: shape {shape}, the comment says [{', '.join(dims)}]")
            if match.group("dtype") and dtype != match.group("dtype"):
                problems.append(f"{name}: dtype {dtype}, the comment says {match.group('dtype')}")
    return problems


def run_example(block: str, namespace: dict) -> list:
    """Runs `block` statement by statement in `namespace`; returns its comments' problems."""
    comments = _comments(block)
    problems = []
    for index, statement in enumerate(ast.parse(block).body):
        if isinstance(statement, ast.Expr):
            value = eval(compile(ast.Expression(statement.value), "<example>", "eval"),
                         namespace)
        else:
            exec(compile(ast.Module([statement], []), "<example>", "exec"), namespace)
            target = statement.targets[0] if isinstance(statement, ast.Assign) else None
            value = namespace.get(target.id) if isinstance(target, ast.Name) else None
        if index in comments:
            problems += [f"line {statement.lineno}: {p}"
                         for p in claim_problems(comments[index], value)]
    return problems


# ---------------------------------------------------------------------------- the tests
def test_the_comment_checks_find_a_wrong_claim():
    logits = np.zeros((1, 2), np.float32)
    assert claim_problems("logits [E, num_classes]", logits) == []
    assert claim_problems("logits [E]", logits) == ["logits: shape (1, 2), the comment says [E]"]
    out = {"start_top_index": np.zeros((1, 5), np.int32), "cls_logits": np.zeros((1, 1))}
    assert len(claim_problems("start_top_index [E, k], cls_logits [E], ...", out)) == 1
    assert claim_problems("input_ids int32 [B, 4]", {"input_ids": np.zeros((2, 4), np.int32)}) \
        == []
    assert len(claim_problems("input_ids float32 [B, 3]",
                              {"input_ids": np.zeros((2, 4), np.int32)})) == 2
    assert claim_problems('[["B-PER", "O"]]', [["O", "O"]]) == []
    assert len(claim_problems('[["B-PER", "O"]]', [["O"]])) == 1
    assert claim_problems("labels: class ids", [1, 2]) == []
    assert _comments("x = f()  # a [B]\n# b [C]\ny = 1\nz()  # c\n") == {0: "a [B]; b [C]",
                                                                       2: "c"}


def test_every_public_module_with_examples_has_them_run():
    """The examples found are the ones below: a public module's new example runs here too,
    and the examples of the task models are all there (one per declared keras-hub class)."""
    from xlnet_tf2 import task_registry

    modules = {module for module, _, _ in examples()}
    for declaration in task_registry.declared_tasks():
        assert declaration.keras_hub_model.rpartition(".")[0] in modules, declaration.name
    assert "xlnet_tf2.tokenizers.xlnet_tokenizer" in modules


@pytest.fixture(scope="module")
def tiny_model_files(tmp_path_factory):
    """converted/base (a tiny converted model with its spiece.model) and spiece.model."""
    from fixtures.task_files import train_tiny_spm

    root = tmp_path_factory.mktemp("reader")
    spm = train_tiny_spm(str(tmp_path_factory.mktemp("spm")))
    model = xlnet_tf2.XLNetLMHeadModel(xlnet_tf2.XLNetConfig.preset("tiny", n_token=500))
    model.build()
    xlnet_tf2.save_pretrained(model, str(root / "converted" / "base"), spm_model=spm)
    shutil.copy(spm, root / "spiece.model")
    return root


@pytest.fixture
def reader_directory(tiny_model_files, tmp_path, monkeypatch):
    """A fresh working directory holding converted/base and spiece.model."""
    shutil.copytree(tiny_model_files, tmp_path, dirs_exist_ok=True)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _example_id(example):
    module, where, _ = example
    return f"{module.rpartition('.')[2]}.{where}"


def _params():
    """The examples; those that train (the task models' `fit`: 20-70 s each) are slow."""
    return [pytest.param(e, id=_example_id(e), marks=[pytest.mark.slow] if ".fit(" in e[2]
                         else []) for e in examples()]


@pytest.mark.parametrize("example", _params())
def test_the_example_runs_and_its_comments_hold(example, reader_directory):
    import tensorflow as tf

    module, _, block = example
    namespace = {"xlnet_tf2": xlnet_tf2, "tf": tf}
    namespace.update({name: getattr(xlnet_tf2, name) for name in xlnet_tf2.__all__})
    namespace.update(READER_DATA.get(module, {}))
    problems = run_example(block, namespace)
    assert problems == [], f"{module}: the example's comments say otherwise:\n" + "\n".join(
        problems)
