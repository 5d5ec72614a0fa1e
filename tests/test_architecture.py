"""The shape of the code, checked: the floors of xlnet_tf2 never point up (the import-linter
`layers` contract in pyproject.toml), no module of the package imports one of its own modules
inside a function (the way an upward arrow or a circle hides), no test module imports
another (shared test code lives in tests/fixtures/ and conftest.py files), and between the
test suite and the benchmarks imports go one way: tests import benchmarks, never the
reverse."""

import ast
import os
import subprocess
import sys
import tomllib

import pytest

from fixtures.paths import REPO_ROOT

PACKAGE = os.path.join(REPO_ROOT, "xlnet_tf2")
TESTS = os.path.join(REPO_ROOT, "tests")

# Modules whose imports inside functions are the point: they keep TensorFlow out of
# `import xlnet_tf2` and out of every command's start-up and --help.
LAZY_BY_DESIGN = {
    "xlnet_tf2/__init__.py": "public names are imported on first use, so `import xlnet_tf2` "
                             "does not import TensorFlow",
    "xlnet_tf2/cli.py": "a command's start-up and --help must not import TensorFlow: the "
                        "project's error classes are looked up (or imported) only when an "
                        "error is caught",
    # A folder: every module in it.
    "xlnet_tf2/commands/": "a command imports what needs TensorFlow after its flags were "
                           "parsed, so --help and a bad flag never start TensorFlow",
}


def _lazy_by_design(relative):
    return any(relative == lazy or (lazy.endswith("/") and relative.startswith(lazy))
               for lazy in LAZY_BY_DESIGN)


def _python_files(root):
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            if name.endswith(".py"):
                yield os.path.join(dirpath, name)


def _relative(path):
    return os.path.relpath(path, REPO_ROOT).replace(os.sep, "/")


def _own_imports_inside_functions(path):
    """[(line, statement)] of the imports of the package's own modules inside a function."""
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    found = set()
    for function in ast.walk(tree):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        for node in ast.walk(function):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                # A relative import inside the package is always one of its own modules.
                modules = ["xlnet_tf2" if node.level else node.module or ""]
            else:
                continue
            if any(m == "xlnet_tf2" or m.startswith("xlnet_tf2.") for m in modules):
                found.add((node.lineno, ast.unparse(node)))
    return sorted(found)


def _offenders():
    offenders = []
    for path in _python_files(PACKAGE):
        relative = _relative(path)
        if not _lazy_by_design(relative):
            offenders += [(relative, line, statement)
                          for line, statement in _own_imports_inside_functions(path)]
    return offenders


def _report(offenders):
    return "imports of the package inside a function (import at the top of the module; if " \
           "that makes a circle, the code is on the wrong floor):\n" + "\n".join(
               f"  {path}:{line}: {statement}" for path, line, statement in offenders)


@pytest.mark.slow
def test_floors_never_point_up():
    """lint-imports checks the `layers` contract of pyproject.toml on this tree."""
    with open(os.path.join(REPO_ROOT, "pyproject.toml"), "rb") as f:
        contracts = tomllib.load(f)["tool"]["importlinter"]["contracts"]
    floors = [c for c in contracts if c["type"] == "layers"]
    assert len(floors) == 1 and floors[0]["containers"] == ["xlnet_tf2"], contracts
    assert floors[0]["exhaustive"] is True
    run = subprocess.run(
        [sys.executable, "-c",
         "import sys; from importlinter.cli import lint_imports; "
         "sys.exit(lint_imports(config_filename='pyproject.toml', no_cache=True, no_logo=True))"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=120,
        env=dict(os.environ, PYTHONPATH=REPO_ROOT))
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-3000:]
    assert "1 kept, 0 broken" in run.stdout, run.stdout[-3000:]


def test_no_import_of_the_package_inside_a_function():
    for relative in LAZY_BY_DESIGN:  # a rename must not widen the exceptions silently
        exists = os.path.isdir if relative.endswith("/") else os.path.isfile
        assert exists(os.path.join(REPO_ROOT, relative)), relative
    offenders = _offenders()
    assert not offenders, _report(offenders)


def test_no_test_module_imports_another():
    """Test modules (test_*.py, conftest.py) import shared code from tests/fixtures/ only."""
    paths = list(_python_files(TESTS))
    test_modules = {os.path.basename(p)[:-3] for p in paths
                    if os.path.basename(p).startswith("test_")} | {"conftest"}
    assert len(test_modules) > 50, sorted(test_modules)
    offenders = []
    for path in paths:
        tree = ast.parse(open(path, encoding="utf-8").read(), path)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            else:
                continue
            offenders += [(_relative(path), node.lineno, name) for name in names
                          if name.split(".")[0] in test_modules]
    assert not offenders, "test modules importing test modules (move what they share to " \
        "tests/fixtures/):\n" + "\n".join(f"  {p}:{line}: {name}" for p, line, name in offenders)


def _imported_top_names(path):
    """{(line, top-level module name)} of every absolute import in a file, wherever it is."""
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {(node.lineno, alias.name.split(".")[0]) for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add((node.lineno, node.module.split(".")[0]))
    return found


def test_the_package_imports_nothing_of_the_checkout():
    """The installed package holds only the library: it never imports the benchmarks, the
    test helpers or the command scripts, which are not installed."""
    outside = {"benchmarks", "fixtures", "tests", "experiments", "data_prep", "_paths",
               "benchmark_reference"}
    offenders = [(_relative(path), line, name) for path in _python_files(PACKAGE)
                 for line, name in sorted(_imported_top_names(path)) if name in outside]
    assert not offenders, "the library imports code that is not installed:\n" + "\n".join(
        f"  {p}:{line}: {name}" for p, line, name in offenders)
    assert not os.path.exists(os.path.join(PACKAGE, "tools")), "benchmark code belongs in benchmarks/"


def test_the_benchmarks_never_import_the_test_suite():
    """The tests import the benchmarks (they test the benchmarks' code and use its shared tools,
    e.g. benchmarks/tools/hf_reference.py, synthetic_data.py); the benchmarks never import the
    tests' code, nor put tests/ on sys.path."""
    benchmarks = os.path.join(REPO_ROOT, "benchmarks")
    test_names = {"tests", "fixtures", "conftest"} | {
        os.path.basename(p)[:-3] for p in _python_files(TESTS)
        if os.path.basename(p).startswith("test_")}
    offenders = [(_relative(path), line, name) for path in _python_files(benchmarks)
                 for line, name in sorted(_imported_top_names(path)) if name in test_names]
    assert not offenders, "benchmarks importing the test suite (move what both use to " \
        "benchmarks/tools/):\n" + "\n".join(f"  {p}:{line}: {name}" for p, line, name in offenders)
    paths = open(os.path.join(benchmarks, "_paths.py"), encoding="utf-8").read()
    assert '"tests"' not in paths and "'tests'" not in paths


def _layer_imports(layers_dir, package="xlnet_tf2.layers"):
    """{module: {module}}: the arrows between the modules of layers/ (dotted names, the
    package's __init__ as `package`), from every import statement of each file, those under
    `if TYPE_CHECKING:` included: a circle there is a circle in the design."""
    modules = {}
    for path in _python_files(layers_dir):
        parts = os.path.relpath(path, layers_dir).replace(os.sep, "/")[:-len(".py")].split("/")
        name = ".".join([package] + (parts[:-1] if parts[-1] == "__init__" else parts))
        modules[name] = path
    arrows = {name: set() for name in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(open(path, encoding="utf-8").read(), path)):
            targets = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                # A submodule named in `from PKG import name` is the arrow; else PKG itself.
                targets = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules
                           else node.module for a in node.names]
            arrows[name].update(t for t in targets if t in modules and t != name)
    return arrows


def _a_circle(arrows):
    """One circle of the graph `arrows` as a list of modules (first == last), or None."""
    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(arrows[node]):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        state[node] = "done"
        stack.pop()
        return None

    for node in sorted(arrows):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_no_import_circle_among_the_layers_modules(tmp_path):
    """The modules of layers/ import each other without a circle, TYPE_CHECKING imports
    included (the step plan carries dropout keys; the dropout layer reads the plan: one way)."""
    arrows = _layer_imports(os.path.join(PACKAGE, "layers"))
    assert "xlnet_tf2.layers.step_plan" in arrows["xlnet_tf2.layers.dropout"]
    assert _a_circle(arrows) is None, " -> ".join(_a_circle(arrows))
    # The check finds a circle hidden under TYPE_CHECKING.
    (tmp_path / "a.py").write_text("from xlnet_tf2.layers.b import B\n")
    (tmp_path / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                   "    from xlnet_tf2.layers import a\n")
    assert _a_circle(_layer_imports(str(tmp_path))) == [
        "xlnet_tf2.layers.a", "xlnet_tf2.layers.b", "xlnet_tf2.layers.a"]
