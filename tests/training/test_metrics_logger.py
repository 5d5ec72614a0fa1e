"""training/metrics_logger.py: the console line counts only compiled steps as step time."""

import pytest

from xlnet_tf2.training.metrics_logger import MetricsLogger


def _records(first, count):
    return [{"step": s, "loss": 2.0, "learning_rate": 1e-3, "grad_norm": 1.0}
            for s in range(first, first + count)]


def _logger(tmp_path):
    return MetricsLogger(str(tmp_path), enabled=True, total_steps=1500, tokens_per_step=1000,
                         flops_per_step=1e9, peak_flops=1e12)


def test_a_line_after_only_the_compiling_loop_gives_no_step_time(tmp_path, capsys):
    """A run resumed at step 94 logs step 95 after its first loop, which traced and compiled
    the step (11.6 s where steps take 30 ms): that time is said as start-up, not as a step's,
    with no speed, MFU or ETA computed from it; the next line has them."""
    logger = _logger(tmp_path)
    logger.record_loop(95, _records(95, 1), 11.6, compiled=True)
    values = logger.write(95)
    line = capsys.readouterr().out.strip()
    assert line.startswith("step      95/1500 | loss 2.0000")
    assert "start-up and compilation 11.6 s" in line
    assert "tok/s" not in line and "ETA" not in line and "MFU" not in line
    assert not any(name.startswith("perf/") for name in values)
    logger.record_loop(99, _records(96, 4), 0.12, compiled=False)
    values = logger.write(99)
    line = capsys.readouterr().out.strip()
    assert values["perf/step_time"] == pytest.approx(0.03)
    assert "33,333 tok/s | step 30.0 ms | MFU 3.33% | ETA 0m42s" in line


def test_a_compiling_loop_is_left_out_of_the_next_lines_speed(tmp_path, capsys):
    logger = _logger(tmp_path)
    logger.record_loop(4, _records(1, 4), 9.0, compiled=True)
    logger.record_loop(8, _records(5, 4), 0.2, compiled=False)
    values = logger.write(8)
    assert values["perf/step_time"] == pytest.approx(0.05)
    assert "step 50.0 ms" in capsys.readouterr().out
