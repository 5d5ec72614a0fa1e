"""The bad-input battery's judge (tests/fixtures/battery.py): a case's check holds when it
returns None (its asserts passed) or True; one that returns anything else fails the case,
alone or inside `both`, with the check's source in the message."""

import pytest

from fixtures.battery import Result, Workspace, both, judge, says, works


@pytest.mark.parametrize("check", [
    lambda ws, r: r.value == 1,
    lambda ws, r: None,
    both(says("fine"), lambda ws, r: True),
])
def test_checks_that_hold(check, tmp_path):
    judge(works(check), Result(status=None, stdout="fine", value=1), Workspace(str(tmp_path), str))


@pytest.mark.parametrize("check, shown", [
    (lambda ws, r: r.value == 2, "r.value == 2"),
    (lambda ws, r: 0, "returned 0"),
    (both(says("fine"), lambda ws, r: r.stdout.startswith("x")), "returned False"),
])
def test_a_check_that_returns_false_fails_the_case(check, shown, tmp_path):
    with pytest.raises(pytest.fail.Exception, match="the check returned") as failed:
        judge(works(check), Result(status=None, stdout="fine", value=1),
              Workspace(str(tmp_path), str))
    assert shown in str(failed.value)
