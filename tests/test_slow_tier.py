"""The check that keeps the fast tier fast (tests/fixtures/slow_tier.py): an unmarked test that
starts a Python process fails with the advice to mark it slow, a marked one passes, and the
unmarked tests over the duration bound are listed at the end of the run."""

import re
import subprocess
import sys

import pytest

from fixtures import slow_tier

# What the inner runs (pytester) execute: `python -c pass` starts no TensorFlow, so these
# spawns cost milliseconds; they are judged by the inner tests, the innermost running ones.
SPAWNING_TESTS = """
import multiprocessing
import subprocess
import sys

import pytest


def _spawn():
    subprocess.run([sys.executable, "-c", "pass"], check=True)


def test_unmarked_spawns():
    _spawn()


@pytest.mark.slow
def test_marked_spawns():
    _spawn()


def test_unmarked_check_output():
    subprocess.check_output([sys.executable, "-c", "print(1)"])


def test_unmarked_multiprocessing():
    process = multiprocessing.get_context("fork").Process(target=int)
    process.start()
    process.join()
    assert process.exitcode == 0


def test_unmarked_other_program():
    assert subprocess.run(["true"]).returncode == 0


@pytest.fixture(scope="module")
def built_by_a_command():
    _spawn()
    return 1


def test_unmarked_spawning_fixture(built_by_a_command):
    assert built_by_a_command == 1


def test_unmarked_spawns_and_fails():
    _spawn()
    assert False, "its own failure"
"""


def test_unmarked_spawning_tests_fail_and_marked_ones_pass(pytester):
    pytester.makepyfile(test_inner=SPAWNING_TESTS)
    result = pytester.inline_run("-p", "fixtures.slow_tier", "-p", "no:cacheprovider")
    reports = {r.nodeid.split("::")[-1] + ":" + r.when: r
               for r in result.getreports("pytest_runtest_logreport")}

    def outcome(name, when="call"):
        return reports[f"{name}:{when}"].outcome

    assert outcome("test_marked_spawns") == "passed"
    assert outcome("test_unmarked_other_program") == "passed"
    for name in ("test_unmarked_spawns", "test_unmarked_check_output",
                 "test_unmarked_multiprocessing", "test_unmarked_spawns_and_fails"):
        assert outcome(name) == "failed", name
    # A spawn in a fixture fails the setup of the test that built it (an error, not a run).
    assert outcome("test_unmarked_spawning_fixture", "setup") == "failed"
    assert "test_unmarked_spawning_fixture:call" not in reports

    message = str(reports["test_unmarked_spawns:call"].longrepr)
    assert slow_tier.ADVICE in message and f"{sys.executable} -c pass" in message
    assert re.search(r"a multiprocessing process \(ForkProcess-\d+, target int\)",
                     str(reports["test_unmarked_multiprocessing:call"].longrepr))
    # A test that fails by itself keeps its own failure; the advice is a section beside it.
    failed = reports["test_unmarked_spawns_and_fails:call"]
    assert "its own failure" in str(failed.longrepr)
    assert any(slow_tier.ADVICE in text for _, text in failed.sections)


def test_unmarked_tests_over_the_bound_are_listed(pytester, monkeypatch):
    monkeypatch.setattr(slow_tier, "SLOW_SECONDS", 0.3)
    pytester.makepyfile(test_inner="""
        import time
        import pytest

        def test_long():
            time.sleep(0.6)

        @pytest.mark.slow
        def test_long_marked():
            time.sleep(0.6)

        def test_short():
            pass
    """)
    result = pytester.runpytest_inprocess("-p", "fixtures.slow_tier", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["1 test(s) without @pytest.mark.slow took more than 0.3 s*",
                                 "*test_inner.py::test_long"])
    assert "test_long_marked" not in result.stdout.str()


@pytest.mark.parametrize("args, kwargs, python", [
    ([sys.executable, "-c", "pass"], {}, True),
    (["python3", "experiments/run_pretrain.py"], {}, True),
    (["/usr/bin/python3.11", "-m", "pip"], {}, True),
    (["/usr/bin/env", "-i", "A=1", "python", "x.py"], {}, True),
    ("python3", {}, True),
    (["bash", "scripts/run_demo.sh"], {}, False),
    (["groff", "-man"], {}, False),
    (["mount", "-t", "tmpfs"], {}, False),
    (["ignored"], {"executable": sys.executable}, True),
    ("cd /tmp && TF_CPP_MIN_LOG_LEVEL=2 python3 -c 'import x'", {"shell": True}, True),
    ("ls -l /tmp | grep python_files", {"shell": True}, False),
])
def test_what_counts_as_a_python_process(args, kwargs, python):
    assert slow_tier.is_python_command(args, kwargs.get("executable"),
                                       kwargs.get("shell", False)) is python


def test_the_wrappers_are_in_place():
    assert subprocess.Popen.__init__ is slow_tier._popen_init


def test_battery_cases_that_start_python_are_marked_slow():
    from fixtures.battery import (Case, as_params, clear, command, copy, faults, killed,
                                  run_first, spawn, works)

    script = "experiments/run_pretrain.py"
    cases = [
        Case("in-process", command(script, "--x=1"), clear("--x")),
        Case("spawned", spawn(script, "--x=1"), clear("--x")),
        Case("killed-first", command(script), works(),
             faults(copy("{pretrain}", "{ws}/run"), killed(spawn(script, kill_at="os|rename|1|")))),
        Case("in-process-first", command(script), works(), run_first(command(script))),
        Case("spawned-first", command(script), works(), run_first(spawn(script))),
    ]
    marked = {p.id: [m.name for m in p.marks] for p in as_params(cases)}
    assert marked == {"in-process": [], "spawned": ["slow"], "killed-first": ["slow"],
                      "in-process-first": [], "spawned-first": ["slow"]}
