"""A training run preempted by a SIGTERM or a termination notice (xlnet_tf2/training/
preemption.py) ends a command with one `<program>: preempted: <message>` line and exit status
75, which no other outcome of a command has."""

import sys

from xlnet_tf2 import cli
from xlnet_tf2.training.preemption import TrainingPreempted


def test_a_preempted_run_is_one_line_and_status_75(capsys, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["run_pretrain.py", "--train_steps=9"])

    def main(argv):
        raise TrainingPreempted("SIGTERM: stopped after step 5 of 9 and saved checkpoint\n"
                                "  runs/x/ckpt-5. Run it again.", 5, "runs/x/ckpt-5")

    assert cli.with_error_lines(main)(["run_pretrain.py"]) == cli.PREEMPTED_STATUS == 75
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == ("run_pretrain.py: preempted: SIGTERM: stopped after step 5 of 9 "
                            "and saved checkpoint runs/x/ckpt-5. Run it again.\n")
    # 0 done, 1 a traceback, 2 bad input, 3 stopped, 143 killed by SIGTERM before training.
    assert cli.PREEMPTED_STATUS not in (0, 1, 2, 3, 128 + 15)
