"""The loop workload of benchmarks/benchmark.py: its arithmetic (medians, ratios, MFU) on
made-up results, and its plumbing end to end at a tiny shape (three contenders in processes of
their own, the HuggingFace loop on the real loop's batches). No timing is asserted."""

import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest
from fixtures.paths import REPO_ROOT

from benchmarks.tools.loop_benchmark import LoopSpec, contender_result, summarize

ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
SPEC = LoopSpec(n_layer=1, d_model=32, n_head=2, d_head=16, d_inner=64, vocab_size=300,
                batch_size=4, seq_len=16, reuse_len=8, mem_len=8, num_predict=3, bi_data=True,
                steps=4, steps_per_loop=2, workdir="/unused")


def test_contender_result_leaves_out_the_first_loop_and_counts_the_wall_clock():
    loops = [{"steps": 2, "seconds": 9.0, "started": 100.0},
             {"steps": 2, "seconds": 0.4, "started": 109.0},
             {"steps": 2, "seconds": 0.2, "started": 109.5}]
    # The run ended 0.3 s after the last loop (say, a checkpoint).
    result = contender_result(loops, finished=110.0, last_loss=1.5)
    assert result["loop_ms"] == pytest.approx([200.0, 100.0])
    assert result["step_ms"] == pytest.approx(150.0)
    assert result["wall_ms"] == pytest.approx(1000.0 * (110.0 - 109.0) / 4)
    # 0.1 s of host work between the timed loops, 0.3 s after the last one.
    assert result["between_loops_s"] == pytest.approx(0.1)
    assert result["after_loops_s"] == pytest.approx(0.3)
    assert result["first_loop_s"] == 9.0 and result["steps"] == 6 and result["last_loss"] == 1.5
    assert result["peak_rss_mb"] > 0
    with pytest.raises(ValueError, match="at least two loops"):
        contender_result(loops[:1], finished=110.0)


def test_summary_takes_medians_over_rounds_and_ratios_per_round():
    def result(step_ms, wall_ms, rss, load):
        return {"step_ms": step_ms, "wall_ms": wall_ms, "peak_rss_mb": rss, "first_loop_s": 5.0,
                "load_before": load, "load_after": load + 1.0}

    # Round 2 ran under heavy load for everyone: the per-round ratios stay stable.
    rounds = [{"real": result(100, 110, 900, 1.0), "bare": result(100, 100, 800, 1.0),
               "huggingface": result(250, 250, 500, 1.0)},
              {"real": result(210, 220, 950, 6.0), "bare": result(200, 200, 800, 6.0),
               "huggingface": result(500, 500, 520, 6.0)},
              {"real": result(104, 108, 910, 2.0), "bare": result(100, 100, 810, 2.0),
               "huggingface": result(260, 260, 510, 2.0)}]
    summary = summarize(rounds, SPEC, flops_per_step=2e9, peak_flops=1e11)
    rows = {r["role"]: r for r in summary["rows"]}
    assert rows["real"]["step_ms"] == 104 and rows["real"]["wall_ms"] == 110
    assert rows["real"]["tokens_per_s"] == pytest.approx(64 / 0.104)
    assert rows["real"]["mfu"] == pytest.approx(2e9 / 0.104 / 1e11)
    assert rows["real"]["peak_rss_mb"] == 950 and rows["huggingface"]["peak_rss_mb"] == 520
    assert rows["bare"]["load"] == pytest.approx((1 + 2 + 6 + 7 + 2 + 3) / 6)
    ratios = summary["ratios"]
    assert ratios["real_over_bare_step_ms"] == pytest.approx(1.04)  # median of 1, 1.05, 1.04
    assert ratios["real_over_bare_wall_ms"] == pytest.approx(1.1)  # median of 1.1, 1.1, 1.08
    assert ratios["huggingface_over_real_step_ms"] == pytest.approx(2.5)  # 2.5, 2.38, 2.5


@pytest.mark.slow
@pytest.mark.xla  # the commands' compiled step (--jit_compile, their default)
def test_loop_workload_runs_three_contenders_on_the_same_data(tmp_path):
    out = tmp_path / "loop.json"
    workdir = tmp_path / "work"
    run = subprocess.run(
        [sys.executable, "benchmarks/benchmark.py", "--workloads=loop", "--n_layer=1",
         "--d_model=32", "--n_head=2", "--d_head=16", "--d_inner=64", "--batch_size=4",
         "--seq_len=16", "--reuse_len=8", "--mem_len=8", "--num_predict=3",
         "--loop_vocab_size=300", "--loop_steps=4", "--loop_steps_per_loop=2",
         "--loop_repeats=1", "--loop_corpus_bytes=200000", f"--loop_workdir={workdir}",
         f"--output_json={out}"],
        cwd=REPO_ROOT, env=ENV, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "| real loop (run_pretrain.py) |" in run.stdout
    loop = json.loads(out.read_text())["loop"]
    assert [r["role"] for r in loop["rows"]] == ["real", "bare", "huggingface"]
    (results,) = loop["rounds"]
    for role, result in results.items():
        assert result["steps"] == 4 and len(result["loop_ms"]) == 1, role
        assert math.isfinite(result["last_loss"]) and result["last_loss"] > 0, role
        assert result["step_ms"] > 0 and result["wall_ms"] > 0, role
    # The HuggingFace process never imported TensorFlow (its peak RSS, torch's, is no measure:
    # 1,216 MB against the real loop's 1,165 MB in one CI run).
    assert {role: r["tensorflow_imported"] for role, r in results.items()} == {
        "real": True, "bare": True, "huggingface": False}
    # The real loop ran as run_pretrain.py does: a checkpoint and a log line at the last step.
    real_run = workdir / "real_run"
    assert (real_run / "ckpt-4.index").exists() and (real_run / "train").is_dir()
    # The HuggingFace loop's batches are the training pipeline's, with the step's dense masks.
    import tensorflow as tf

    from xlnet_tf2.tasks.objective import dense_features
    from xlnet_tf2.data.pretrain_dataset import PretrainData

    data = PretrainData.read(str(workdir / "data"))
    first = next(iter(data.dataset(4)))
    dense = dense_features(first, data.shape.reuse_len)
    with np.load(workdir / "dense_batches.npz") as batches:
        assert batches["input_ids"].shape == (4, 4, 16)
        for key in ("input_ids", "segment_ids", "perm_mask", "target_mapping", "target",
                    "target_mask"):
            np.testing.assert_array_equal(batches[key][0], dense[key].numpy(), err_msg=key)
        np.testing.assert_array_equal(batches["chunk_index"][0], first["chunk_index"].numpy())
    assert tf.reduce_sum(dense["target_mask"]) > 0
