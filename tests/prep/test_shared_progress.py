"""Progress lines of data preparation sum the counts of every worker."""

import logging

from xlnet_tf2.prep import beam_pipeline
from xlnet_tf2.prep.beam_pipeline import SharedProgress


def test_progress_sums_workers_and_gives_eta(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(beam_pipeline, "_PROGRESS_SECONDS", 0.0)
    args = dict(directory=str(tmp_path), stage="train-tokenize", label="train: tokenizing",
                unit="chars", total=1000)
    first, second = SharedProgress(**args), SharedProgress(**args)
    other_stage = SharedProgress(**dict(args, stage="train-write"))
    other_stage.add(999)
    first.add(100)
    with caplog.at_level(logging.WARNING, logger="xlnet_tf2.data"):
        second.add(150)   # two workers: 250 of 1000 chars in all
    line = caplog.records[-1].getMessage()
    assert line.startswith(beam_pipeline.PROGRESS_TAG)  # what a quiet console prints
    line = line[len(beam_pipeline.PROGRESS_TAG):]
    assert line.startswith("train: tokenizing: 250/1,000 chars (25%) | ")
    assert "ETA " in line
    unknown = SharedProgress(**dict(args, stage="eval-tokenize", total=0))
    unknown.add(42)
    text = unknown.line()
    assert text.startswith("train: tokenizing: 42 chars | ") and "ETA" not in text


def test_quiet_console_prints_progress_lines_only(capsys):
    """create_tfrecords.py without --verbosity: progress lines (also inside the envelope Beam
    forwards worker records in) reach stdout without the tag; Beam's other records do not."""
    from xlnet_tf2.prep import beam_options

    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        beam_options.print_only_tagged_lines(beam_pipeline.PROGRESS_TAG)
        tag = beam_pipeline.PROGRESS_TAG
        logging.getLogger("xlnet_tf2.data").warning(tag + "train: writing: 5/10 examples")
        logging.getLogger("apache_beam.runners.portability.local_job_service").warning(
            'Worker: severity: WARN timestamp {   seconds: 1 } message: "%strain: tokenizing: '
            '1,000/2,000 chars (50%%) | ETA 3s" log_location: "x.py:1"', tag)
        logging.getLogger("apache_beam.runners.worker").warning("No semi_persistent_directory")
        out = capsys.readouterr().out.splitlines()
        assert out == ["train: writing: 5/10 examples",
                       "train: tokenizing: 1,000/2,000 chars (50%) | ETA 3s"]
    finally:
        for handler in list(root.handlers):
            if handler not in handlers:
                root.removeHandler(handler)
        for handler in handlers:
            handler.filters.clear()
        root.setLevel(level)
