"""Progress lines of data preparation sum the counts of every worker."""

import logging

from xlnet_tf2.data import beam_pipeline
from xlnet_tf2.data.beam_pipeline import SharedProgress


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
    assert line.startswith("train: tokenizing: 250/1,000 chars (25%) | ")
    assert "ETA " in line
    unknown = SharedProgress(**dict(args, stage="eval-tokenize", total=0))
    unknown.add(42)
    text = unknown.line()
    assert text.startswith("train: tokenizing: 42 chars | ") and "ETA" not in text
