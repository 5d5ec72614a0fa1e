"""A shortened run of the README's main job (scripts/run_demo.sh): stdlib corpus ->
SentencePiece -> TFRecords with held-out documents -> pretraining with held-out evaluation ->
held-out loss against the unigram baselines -> export -> a fresh process calls the export."""

import json
import os
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.slow
def test_demo_script_end_to_end(tmp_path):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", SKIP_SETUP="1", OUT=str(tmp_path / "demo"),
               STEPS="60", LOG_STEPS="20", MIN_BYTES="100000", MAX_BYTES="200000", VOCAB="500",
               SEQ_LEN="32", BATCH="8", MIN_MARGIN="-100")
    proc = subprocess.run(["bash", "scripts/run_demo.sh"], cwd=ROOT, env=env, timeout=600,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    assert "held-out unigram baseline" in out and "Demo finished" in out
    assert "step      60/60" in out
    summary = json.load(open(tmp_path / "demo" / "demo_summary.json"))
    assert summary["steps"] == 60
    assert summary["last_loss"] < summary["first_loss"] - 0.3  # it learns
    # held out every STEPS/4 steps, on documents the run never trained on
    assert [e["step"] for e in summary["evals"]] == [15, 30, 45, 60]
    assert summary["evals"][-1]["loss"] < summary["evals"][0]["loss"]
    assert summary["heldout_baseline_nats"] > summary["train_entropy_nats"] > 0
    assert (tmp_path / "demo" / "model" / "ckpt-60.index").exists()
    assert (tmp_path / "demo" / "data" / "eval" / "record_info.json").exists()
    assert "exported model at" in out
