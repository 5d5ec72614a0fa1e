"""The order and grouping of the suite's work for the pytest-xdist workers
(tests/fixtures/schedule.py): the longest units first, the battery's files one unit (its
artefacts are built once per process), under `--dist loadfile` a unit on one worker."""

import os

import pytest

from fixtures import schedule
from fixtures.paths import REPO_ROOT


def test_units_and_their_order():
    ids = ["tests/battery/test_pretraining.py::test_pretraining[a]",
           "tests/battery/test_finetuning.py::test_finetuning[b]",
           "tests/test_readme.py::test_x", "tests/test_readme.py::test_y",
           "tests/tasks/test_pretraining_preemption.py::test_soak",
           "tests/test_fileio.py::test_z"]
    assert [schedule.unit_of(n) for n in ids[:3]] == [schedule.BATTERY, schedule.BATTERY,
                                                      "tests/test_readme.py"]
    # LONGEST's units in its order, then the others by their number of tests
    assert schedule.file_order(ids) == [schedule.BATTERY,
                                        "tests/tasks/test_pretraining_preemption.py",
                                        "tests/test_readme.py", "tests/test_fileio.py"]


def test_every_longest_unit_exists():
    """A renamed file left in LONGEST would only lose its place, silently."""
    for unit in schedule.LONGEST:
        assert os.path.exists(os.path.join(REPO_ROOT, unit)), unit


@pytest.mark.slow  # pytest-xdist starts its workers as Python processes
def test_the_battery_runs_on_one_worker(pytester, monkeypatch):
    for name in ("test_a", "test_b", "test_c"):
        pytester.makepyfile(**{f"tests/battery/{name}": f"""
            import os

            def test_where():
                with open({str(pytester.path / "where")!r}, "a") as f:
                    f.write("battery {name} " + os.environ["PYTEST_XDIST_WORKER"] + "\\n")
            """})
    pytester.makepyfile(**{"tests/test_other": """
        def test_nothing():
            pass
        """})
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([os.path.join(REPO_ROOT, "tests"),
                                                      os.environ.get("PYTHONPATH", "")]))
    result = pytester.runpytest_subprocess("-n", "2", "--dist", "loadfile", "-p",
                                           "fixtures.schedule", "-p", "no:cacheprovider",
                                           timeout=300)
    result.assert_outcomes(passed=4)
    lines = (pytester.path / "where").read_text().split()
    workers = set(lines[2::3])
    assert len(lines) == 9 and len(workers) == 1, lines
