"""No silent skip in CI (tests/fixtures/expected_skips.py): with --strict-skips a skipped test or
file that the registry does not expect fails the run, named with its reason; expected skips
are listed with why CI accepts them; an entry can hold for one environment only (the
tensorflow-tpu leg's tests marked xla, tests/fixtures/xla_backend.py)."""

import ast
import dataclasses
import os
import sys

import pytest

from fixtures import expected_skips, xla_backend
from fixtures.expected_skips import ExpectedSkip
from fixtures.paths import REPO_ROOT

INNER = """
import pytest


def test_passes():
    pass


def test_skips_for_a_missing_module():
    pytest.importorskip("no_such_module_for_the_skip_check")


@pytest.mark.skipif(True, reason="expected here")
def test_expected():
    pass


@pytest.mark.xfail(reason="a known failure", strict=True)
def test_xfails():
    assert False


@pytest.mark.xla
def test_compiles():
    pass
"""
WHOLE_FILE = """
import pytest

pytest.importorskip("no_such_module_for_the_whole_file")


def test_never_runs():
    pass
"""
PLUGIN = ("-p", "fixtures.xla_backend", "-p", "fixtures.expected_skips", "-p", "no:cacheprovider")
INI = "[pytest]\nmarkers =\n    xla: compiles with XLA\n"


@pytest.fixture
def inner(pytester, monkeypatch):
    """The inner suite, with a registry that expects test_expected's skip and the xla
    entry of the real one (its environment predicate switched by the returned function)."""
    pytester.makepyfile(test_inner=INNER, test_whole=WHOLE_FILE)
    pytester.makeini(INI)
    monkeypatch.delenv(expected_skips.ENV, raising=False)
    # The plain wheel's answer, whichever build runs this (CI's TPU leg runs it too).
    monkeypatch.setattr(xla_backend.tensorflow_build, "xla_on_cpu_missing", lambda: None)
    xla_entry = next(e for e in expected_skips.EXPECTED if e.tests == "marker:xla")
    tpu_leg = []

    def registry(on_tpu_leg: bool):
        tpu_leg[:] = [on_tpu_leg]
        monkeypatch.setattr(expected_skips, "EXPECTED", (
            ExpectedSkip("test_inner.py::test_expected", r"^expected here$", "a test of it"),
            dataclasses.replace(xla_entry, when=lambda: tpu_leg[0])))

    registry(False)
    return registry


def test_an_unexpected_skip_fails_a_strict_run_naming_it(pytester, inner):
    result = pytester.runpytest_inprocess("--strict-skips", *PLUGIN)
    assert result.ret == 1
    result.assert_outcomes(passed=2, skipped=3, xfailed=1)  # the whole file: a collect skip
    result.stdout.fnmatch_lines([
        "1 expected skip(s) (tests/fixtures/expected_skips.py):",
        "  test_inner.py::test_expected: a test of it (every run)",
        "2 skip(s) that tests/fixtures/expected_skips.py does not expect fail the run *",
        "  test_inner.py::test_skips_for_a_missing_module: "
        "could not import 'no_such_module_for_the_skip_check'*",
        "  test_whole.py: could not import 'no_such_module_for_the_whole_file'*",
    ])
    assert "test_xfails" not in result.stdout.str()  # an xfail is no skip


def test_without_the_option_they_are_listed_and_the_run_passes(pytester, inner, monkeypatch):
    result = pytester.runpytest_inprocess(*PLUGIN)
    assert result.ret == 0
    result.stdout.fnmatch_lines(["2 skip(s) * would fail a run with --strict-skips, as CI's *"])
    monkeypatch.setenv(expected_skips.ENV, "1")  # the same as the option
    assert pytester.runpytest_inprocess(*PLUGIN).ret == 1


def test_an_environments_entry_holds_there_only(pytester, inner, monkeypatch):
    """Under the TPU build (no XLA for the CPU) tests marked xla skip, saying why; the
    registry expects that under that build and nowhere else."""
    monkeypatch.setattr(xla_backend.tensorflow_build, "xla_on_cpu_missing",
                        lambda: "this TensorFlow is the TPU build")
    pytester.makepyfile(test_whole="")
    result = pytester.runpytest_inprocess("--strict-skips", *PLUGIN)
    assert result.ret == 1
    result.stdout.fnmatch_lines([
        "2 skip(s) that * fail the run *",
        "  test_inner.py::test_compiles: marked xla: this TensorFlow is the TPU build"])
    inner(True)
    result = pytester.runpytest_inprocess("--strict-skips", *PLUGIN)
    assert result.ret == 1
    result.stdout.fnmatch_lines([
        "  test_inner.py::test_compiles: the tensorflow-tpu build's XLA compiles for the TPU "
        "only (CI deselects them there) (under tensorflow-tpu)",
        "1 skip(s) that * fail the run *"])


@pytest.mark.slow  # pytest-xdist starts its workers as Python processes
def test_under_xdist_the_controller_counts_the_workers_skips(pytester, inner, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([os.path.join(REPO_ROOT, "tests")] + sys.path))
    result = pytester.runpytest_subprocess("-n", "2", "--dist", "loadfile", "--strict-skips",
                                           *PLUGIN, timeout=300)
    assert result.ret == 1
    # The real registry in the workers: test_expected's skip is unexpected too.
    result.stdout.fnmatch_lines([
        "3 skip(s) that * fail the run *",
        "  test_inner.py::test_skips_for_a_missing_module: *",
        "  test_whole.py: *"])


def test_the_registry_names_tests_that_exist():
    """Each entry's test is a function of its file (an entry left behind by a rename would
    accept nothing, silently)."""
    for entry in expected_skips.EXPECTED:
        if entry.tests.startswith("marker:"):
            continue
        path, name = entry.tests.split("::")
        tree = ast.parse(open(os.path.join(REPO_ROOT, path)).read())
        assert name in {node.name for node in ast.walk(tree)
                        if isinstance(node, ast.FunctionDef)}, entry.tests
        assert entry.why and entry.where
