"""The battery's table of counts, printed at the end of a run that collected its cases."""

_OUTCOMES = {}


def pytest_runtest_logreport(report):
    if report.when == "call" and "tests/battery/" in report.nodeid.replace("\\", "/"):
        _OUTCOMES[report.nodeid] = report.outcome


def pytest_terminal_summary(terminalreporter):
    if not _OUTCOMES:
        return
    from fixtures.battery import EXPECTED

    rows = {}
    for nodeid, outcome in _OUTCOMES.items():
        area = nodeid.split("::")[0].rsplit("/", 1)[-1][len("test_"):-len(".py")]
        kind = EXPECTED.get(nodeid.split("[", 1)[-1].rstrip("]"), "?")
        row = rows.setdefault(area, {"cases": 0, "clear": 0, "stopped": 0, "works": 0,
                                     "failed": 0})
        row["cases"] += 1
        row[kind if outcome == "passed" else "failed"] += 1
    write = terminalreporter.write_line
    write("")
    write("bad-input battery  (clear = one clear line; works = ran and its output was checked)")
    write(f"{'area':<24}{'cases':>7}{'clear':>7}{'stopped':>9}{'works':>7}{'failed':>8}")
    total = {k: 0 for k in ("cases", "clear", "stopped", "works", "failed")}
    for area in sorted(rows):
        r = rows[area]
        write(f"{area:<24}{r['cases']:>7}{r['clear']:>7}{r['stopped']:>9}{r['works']:>7}"
              f"{r['failed']:>8}")
        for k in total:
            total[k] += r[k]
    write(f"{'total':<24}{total['cases']:>7}{total['clear']:>7}{total['stopped']:>9}"
          f"{total['works']:>7}{total['failed']:>8}")
