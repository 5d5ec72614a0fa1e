"""The battery's table of counts, printed at the end of a run that collected its cases.

Each case's expected outcome class travels on its report (`user_properties`), so the table
is right under pytest-xdist too, where the controller process never imports the tables.
"""

import pytest

_OUTCOMES = {}
_KINDS = ("clear", "stopped", "works")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    case = getattr(getattr(item, "callspec", None), "params", {}).get("case")
    if case is not None and call.when == "call":
        outcome.get_result().user_properties.append(("battery_expect", case.expect.kind))


def pytest_runtest_logreport(report):
    if report.when == "call" and "tests/battery/" in report.nodeid.replace("\\", "/"):
        _OUTCOMES[report.nodeid] = (report.outcome, dict(report.user_properties).get(
            "battery_expect"))


def pytest_terminal_summary(terminalreporter):
    if not _OUTCOMES:
        return
    rows = {}
    for nodeid, (outcome, kind) in _OUTCOMES.items():
        area = nodeid.split("::")[0].rsplit("/", 1)[-1][len("test_"):-len(".py")]
        row = rows.setdefault(area, dict.fromkeys(("cases",) + _KINDS + ("failed",), 0))
        row["cases"] += 1
        row[kind if outcome == "passed" and kind in _KINDS else "failed"] += 1
    write = terminalreporter.write_line
    write("")
    write("bad-input battery  (clear = one clear line; works = ran and its output was checked)")
    write(f"{'area':<26}{'cases':>7}{'clear':>7}{'stopped':>9}{'works':>7}{'failed':>8}")
    total = dict.fromkeys(("cases",) + _KINDS + ("failed",), 0)
    for area in sorted(rows):
        r = rows[area]
        write(f"{area:<26}{r['cases']:>7}{r['clear']:>7}{r['stopped']:>9}{r['works']:>7}"
              f"{r['failed']:>8}")
        for k in total:
            total[k] += r[k]
    write(f"{'total':<26}{total['cases']:>7}{total['clear']:>7}{total['stopped']:>9}"
          f"{total['works']:>7}{total['failed']:>8}")
