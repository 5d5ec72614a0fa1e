"""Every repository path the documentation names exists, and nothing cites a file outside it.

Read: README.md, BENCHMARKS.md and docs/*.md (all text), the docstrings and comments of every
Python file in xlnet_tf2/, benchmarks/, experiments/, data_prep/ and tests/, and the shell
scripts in scripts/ (all text). A path is checked when it starts with a folder of the checkout
(`xlnet_tf2/layers/dropout.py`, `tests/prep/test_encode.py`, `docs/DATA.md`), or with a
subpackage of xlnet_tf2/ or a folder of tests/ (`layers/dropout.py`, `fixtures/paths.py`:
found under xlnet_tf2/, tests/ or beside the file naming it), or is a document name in
capitals (`DATA.md`: at the root, in docs/ or beside the file). `#anchor` after a Markdown
path must name one of its headings. Paths of other projects (`email/message.py`) and
placeholders (`OUTPUT_DIR/eval`) match none of these forms and are left alone.

Pure file reading: no TensorFlow, about a second.
"""

import ast
import functools
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOP_FOLDERS = ("xlnet_tf2", "tests", "docs", "experiments", "data_prep", "benchmarks", "scripts")
PYTHON_FOLDERS = ("xlnet_tf2", "benchmarks", "experiments", "data_prep", "tests")
# The name of the external reference this project must not cite, assembled so that this file
# does not contain it.
EXTERNAL_REFERENCE = "XLNET" + "_REFERENCE"

_PATH = re.compile(r"(?<![\w./$*<>-])((?:[\w.-]+/)+[\w.-]+\.(?:py|md|sh|toml|txt|json|cfg))"
                   r"(#[\w-]+)?(?![\w/-])")
_DOC_NAME = re.compile(r"(?<![\w./$*<>-])([A-Z][A-Z_]*\.md)(#[\w-]+)?(?![\w/-])")


def _subfolders(root, folder):
    path = os.path.join(root, folder)
    return {d for d in os.listdir(path) if os.path.isdir(os.path.join(path, d))
            and not d.startswith((".", "__"))}


_COMMENT = re.compile(r"(?:^|\s)(#.*)$")


def _python_text(source):
    """(line, text) of every docstring and comment of a Python file.

    Docstrings come from the syntax tree (walking statements only); a comment is the text from
    a `#` at the start of a line or after a blank, outside docstrings (Python's tokenizer would
    be exact, and ten times slower)."""
    tree = ast.parse(source)
    in_docstring = set()
    stack = [tree]
    while stack:
        node = stack.pop()
        body = getattr(node, "body", None)
        first = body[0] if body else None
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) \
                and isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                and isinstance(first.value.value, str):
            in_docstring.update(range(first.lineno, first.end_lineno + 1))
            for k, line in enumerate(first.value.value.splitlines()):
                yield first.lineno + k, line
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            stack.extend(child for child in getattr(node, field, None) or []
                         if isinstance(child, ast.AST))
    for lineno, line in enumerate(source.splitlines(), 1):
        if lineno not in in_docstring:
            match = _COMMENT.search(line)
            if match:
                yield lineno, match.group(1)


def documentation_files(root):
    """Repository-relative paths of the files whose text is checked."""
    files = [f for f in ("README.md", "BENCHMARKS.md") if os.path.exists(os.path.join(root, f))]
    docs = os.path.join(root, "docs")
    if os.path.isdir(docs):
        files += ["docs/" + f for f in sorted(os.listdir(docs)) if f.endswith(".md")]
    for folder in PYTHON_FOLDERS + ("scripts",):
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, folder)):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith((".", "__")))
            for name in sorted(filenames):
                if name.endswith((".py", ".sh")):
                    files.append(os.path.relpath(os.path.join(dirpath, name), root))
    return files


def _lines(root, relpath):
    with open(os.path.join(root, relpath), encoding="utf-8") as f:
        source = f.read()
    if relpath.endswith(".py"):
        return list(_python_text(source))
    return list(enumerate(source.splitlines(), 1))


def _slug(heading):
    """GitHub's anchor of a Markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(path):
    with open(path, encoding="utf-8") as f:
        return {_slug(m.group(1)) for m in re.finditer(r"^#+\s+(.*)$", f.read(), re.M)}


def _candidates(root, relpath, path, packages, test_folders):
    """Where `path`, named in `relpath`, may live; None if it is not a path of this checkout."""
    first = path.split("/")[0]
    here = os.path.dirname(relpath)
    if "/" not in path:  # a document name in capitals
        return [path, "docs/" + path, os.path.join(here, path)]
    if first in TOP_FOLDERS:
        return [path]
    if first in packages or first in test_folders:
        return ["xlnet_tf2/" + path, "tests/" + path, os.path.join(here, path)]
    return None


def broken_references(root):
    """['file:line: path (why)'] for every named path of the checkout that does not exist."""
    packages, test_folders = _subfolders(root, "xlnet_tf2"), _subfolders(root, "tests")
    problems = []
    for relpath in documentation_files(root):
        for lineno, text in _lines(root, relpath):
            for match in list(_PATH.finditer(text)) + list(_DOC_NAME.finditer(text)):
                path, anchor = match.group(1), match.group(2)
                candidates = _candidates(root, relpath, path, packages, test_folders)
                if candidates is None:
                    continue
                found = [c for c in candidates if os.path.isfile(os.path.join(root, c))]
                if not found:
                    problems.append(f"{relpath}:{lineno}: {path} (no such file)")
                elif anchor and path.endswith(".md") and anchor[1:] not in _anchors(
                        os.path.join(root, found[0])):
                    problems.append(f"{relpath}:{lineno}: {path}{anchor} (no such heading)")
    return problems


def external_citations(root):
    """['file:line'] of every checked or tracked text file mentioning the external reference."""
    hits = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith(".") and d != "__pycache__"]
        for name in filenames:
            if not name.endswith((".py", ".md", ".sh", ".toml", ".txt", ".cfg", ".json")):
                continue
            path = os.path.join(dirpath, name)
            with open(path, encoding="utf-8", errors="replace") as f:
                for lineno, line in enumerate(f, 1):
                    if EXTERNAL_REFERENCE in line:
                        hits.append(f"{os.path.relpath(path, root)}:{lineno}")
    return hits


def test_every_named_path_exists():
    problems = broken_references(ROOT)
    assert not problems, "named paths that do not exist:\n" + "\n".join(problems)


def test_nothing_cites_the_external_reference():
    hits = external_citations(ROOT)
    assert not hits, (f"{EXTERNAL_REFERENCE}.md is not part of the repository; cite "
                      "docs/SEMANTICS.md instead:\n" + "\n".join(hits))


def _write(root, relpath, text):
    path = os.path.join(root, relpath)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def test_planted_bad_paths_are_reported_and_good_ones_are_not(tmp_path):
    root = str(tmp_path)
    _write(root, "docs/GUIDE.md", "# Guide\n\n## Masks here\n\nSee `xlnet_tf2/data/masks.py`, "
           "`docs/GUIDE.md#masks-here`, `docs/GUIDE.md#nowhere`, `tests/data/test_gone.py`,\n"
           "layers/gone.py, MISSING.md, email/message.py and OUTPUT_DIR/eval/x.txt.\n")
    _write(root, "xlnet_tf2/data/masks.py",
           '"""Tested in tests/data/test_masks.py and data/nothing.py (GUIDE.md)."""\n'
           '# see layers/dropout.py\n'
           'PATH = "xlnet_tf2/in_code_not_docs.py"\n')
    _write(root, "xlnet_tf2/layers/dropout.py", "")
    _write(root, "tests/data/test_masks.py",
           f'def test():\n    """No {EXTERNAL_REFERENCE}.md here."""\n')
    _write(root, "scripts/run.sh", "python experiments/absent.py --x\n")
    assert sorted(broken_references(root)) == sorted([
        "docs/GUIDE.md:5: docs/GUIDE.md#nowhere (no such heading)",
        "docs/GUIDE.md:5: tests/data/test_gone.py (no such file)",
        "docs/GUIDE.md:6: layers/gone.py (no such file)",
        "docs/GUIDE.md:6: MISSING.md (no such file)",
        "xlnet_tf2/data/masks.py:1: data/nothing.py (no such file)",
        "scripts/run.sh:1: experiments/absent.py (no such file)",
        f"tests/data/test_masks.py:2: {EXTERNAL_REFERENCE}.md (no such file)",
    ])
    assert external_citations(root) == ["tests/data/test_masks.py:2"]


# ---------------------------------------------------------------------------- moved files
def _files_under(root, folders):
    """Every file name under `folders` (each looked for at the root, in xlnet_tf2/ and in
    tests/), and the folders found."""
    names, found = set(), []
    for folder in folders:
        for base in ("", "xlnet_tf2", "tests"):
            path = os.path.join(root, base, folder)
            if os.path.isdir(path):
                found.append(path)
                for _, _, files in os.walk(path):
                    names.update(files)
    return names, found


def moved_names(root):
    """['doc:line: name (not in folders)'] for each bare file name (`trainer.py`) in a Markdown
    table row of the docs whose first two cells name folders (`training/`): the file must be
    in one of them (or a module of the package's ground floor, which rows of any floor name),
    so a file that moved to another folder fails where its old row still names it."""
    docs = ["README.md"] + ["docs/" + f for f in sorted(os.listdir(os.path.join(root, "docs")))
                            if f.endswith(".md")]
    package = os.path.join(root, "xlnet_tf2")
    ground = {f for f in os.listdir(package) if f.endswith(".py")} if os.path.isdir(package) \
        else set()
    problems = []
    for doc in docs:
        with open(os.path.join(root, doc), encoding="utf-8") as f:
            lines = f.read().splitlines()
        for number, line in enumerate(lines, 1):
            if not line.startswith("|"):
                continue
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            folders = [f for cell in cells[:2] for f in re.findall(r"`([\w./-]+/)`", cell)]
            inside, found = _files_under(root, folders)
            if not found:
                continue
            for name in re.findall(r"`([\w.-]+\.(?:py|sh))`", line):
                if name not in inside and name not in ground:
                    problems.append(f"{doc}:{number}: {name} (not in {', '.join(folders)})")
    return problems


def test_a_file_a_table_row_names_is_in_the_rows_folders():
    problems = moved_names(ROOT)
    assert not problems, "named in a row of folders it is not in:\n" + "\n".join(problems)


def test_a_moved_file_is_reported_where_its_old_row_names_it(tmp_path):
    root = str(tmp_path)
    _write(root, "docs/MAP.md", "| where | what |\n|---|---|\n"
           "| `experiments/` | the commands (`run_tagger.py`, `run_race.py`) |\n"
           "| `xlnet_tf2/training/` | the loop (`trainer.py`), `config.py`, `memory.py` |\n")
    _write(root, "README.md", "")
    _write(root, "experiments/run_race.py", "")
    _write(root, "scripts/run_tagger.py", "")  # moved out of experiments/
    _write(root, "xlnet_tf2/config.py", "")
    _write(root, "xlnet_tf2/training/trainer.py", "")
    _write(root, "xlnet_tf2/models/memory.py", "")
    assert moved_names(root) == ["docs/MAP.md:3: run_tagger.py (not in experiments/)",
                                 "docs/MAP.md:4: memory.py (not in xlnet_tf2/training/)"]


# ---------------------------------------------------------------------------- dotted names
_DOTTED = re.compile(r"(?<![\w./])xlnet_tf2((?:\.[A-Za-z_]\w*)+)(?![\w-])")  # not egg-info


@functools.lru_cache(maxsize=None)
def _top_level_names(path):
    """The names a module's source defines at its top level (and a package's lazy names:
    the string keys of its `_LAZY` table)."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
            if any(isinstance(t, ast.Name) and t.id == "_LAZY" for t in targets) and \
                    isinstance(node.value, ast.Dict):
                names.update(k.value for k in node.value.keys if isinstance(k, ast.Constant))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def unresolved_module_name(root, parts, public_names):
    """Why `xlnet_tf2.<parts>` names no module of the checkout nor a name one defines (None
    when it does). `public_names`: the package's own names (xlnet_tf2.__all__, derived from
    the task declarations, so not all written in its source)."""
    path = os.path.join(root, "xlnet_tf2")
    rest = []
    for i, part in enumerate(parts):
        if os.path.isdir(os.path.join(path, part)):
            path = os.path.join(path, part)
        elif os.path.isfile(os.path.join(path, part + ".py")):
            path, rest = os.path.join(path, part + ".py"), parts[i + 1:]
            break
        else:
            path, rest = os.path.join(path, "__init__.py"), parts[i:]
            break
    if not rest:
        return None
    if path == os.path.join(root, "xlnet_tf2", "__init__.py"):
        known = set(public_names)
    elif os.path.isfile(path):
        known = _top_level_names(path)
    else:
        return f"{os.path.relpath(path, root)} does not exist"
    if rest[0] in known:
        return None
    return f"{os.path.relpath(path, root)} defines no {rest[0]}"


def broken_module_names(root, public_names):
    """['file:line: xlnet_tf2.<module>.<name> (why)'] for every dotted name of the package in the checked
    text (docs, docstrings, comments) that names no module and no name a module defines: a
    module that moved, a class renamed, a public name the package does not have."""
    problems = []
    for relpath in documentation_files(root):
        for lineno, text in _lines(root, relpath):
            for match in _DOTTED.finditer(text):
                parts = match.group(1)[1:].split(".")
                if parts[-1] in ("py", "md", "json", "toml"):  # a path written with dots
                    continue
                why = unresolved_module_name(root, parts, public_names)
                if why:
                    problems.append(f"{relpath}:{lineno}: xlnet_tf2.{'.'.join(parts)} ({why})")
    return problems


def test_every_dotted_name_of_the_package_exists():
    import xlnet_tf2  # its names only: no TensorFlow

    problems = broken_module_names(ROOT, dir(xlnet_tf2))
    assert not problems, "dotted names that name nothing:\n" + "\n".join(problems)


def test_a_dotted_name_that_moved_is_reported(tmp_path):
    root = str(tmp_path)
    _write(root, "xlnet_tf2/__init__.py", "")
    _write(root, "xlnet_tf2/tasks/__init__.py", "")
    _write(root, "xlnet_tf2/tasks/losses.py", "def squad_loss():\n    pass\nIGNORE = -1\n")
    _write(root, "xlnet_tf2/tokenizers/__init__.py", '_LAZY = {"XLNetTokenizer": "x"}\n')
    _write(root, "docs/GUIDE.md",
           "xlnet_tf2.tasks.losses.squad_loss, xlnet_tf2.tasks.losses.IGNORE, "
           "xlnet_tf2.tokenizers.XLNetTokenizer, xlnet_tf2.XLNetClassifier.from_preset\n"
           "xlnet_tf2.tasks.losses.tagging_loss, xlnet_tf2.tasks.tagging, "
           "xlnet_tf2.XLNetTokenClassifier, xlnet_tf2/tasks/losses.py, xlnet_tf2.egg-info\n")
    assert broken_module_names(root, ["XLNetClassifier"]) == [
        "docs/GUIDE.md:2: xlnet_tf2.tasks.losses.tagging_loss (xlnet_tf2/tasks/losses.py "
        "defines no tagging_loss)",
        "docs/GUIDE.md:2: xlnet_tf2.tasks.tagging (xlnet_tf2/tasks/__init__.py defines no "
        "tagging)",
        "docs/GUIDE.md:2: xlnet_tf2.XLNetTokenClassifier (xlnet_tf2/__init__.py defines no "
        "XLNetTokenClassifier)"]
