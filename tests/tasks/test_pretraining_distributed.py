"""Pretraining through the real CLIs and input pipeline: SIGKILLs at random moments and restarts
(at the paper's settings), MirroredStrategy over two logical CPUs against one device.
MultiWorkerMirroredStrategy with two local workers, stopped and resumed: its test is in
test_pretraining_preemption.py (one run proves checkpoint, resume and the losses)."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from fixtures.paths import REPO_ROOT as ROOT
from fixtures.pretrain_runs import ENV, SOAK_FLAGS, SOAK_STEPS, shared_data, shared_soak_reference
from fixtures.pretrain_runs import final_state as _final_state
from fixtures.pretrain_runs import run_python as _run
from fixtures.pretrain_runs import steps_by_number as _steps

pytestmark = pytest.mark.slow  # data_dir is prepared by a command in a subprocess


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    """A small real dataset: stdlib docstrings -> SentencePiece -> TFRecords (bi_data)."""
    return shared_data(tmp_path_factory)


def _example_tuples(record):
    keys = ("stream_id", "chunk_index", "direction", "pass_id")
    return list(zip(*(record[k] for k in keys)))


def _same_examples(a, b):
    return all(a[k] == b[k] for k in ("stream_id", "chunk_index", "direction", "pass_id"))


MIRRORED_SCRIPT = textwrap.dedent("""
    import json, os, sys
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    from xlnet_tf2.tasks.pretraining import build_trainer
    from xlnet_tf2.tasks.pretraining_config import PretrainConfig
    data_dir, out = sys.argv[1], sys.argv[2]
    results = {}
    for name, strategy in (("one", tf.distribute.OneDeviceStrategy("/cpu:0")),
                           ("mirrored", tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]))):
        config = PretrainConfig.flat(model_dir=os.path.join(out, name), data_dir=(data_dir,),
                                model_config="tiny", train_batch_size=4, train_steps=6,
                                steps_per_loop=3, learning_rate=3e-3, warmup_steps=2,
                                mem_len=16, save_steps=3, log_steps=3, peak_tflops=0.1,
                                record_steps=True, dropout=0.1, dropatt=0.1,
                                deterministic=True)
        p = build_trainer(config, strategy)
        results[name] = {"replicas": strategy.num_replicas_in_sync,
                         "steps": p.train().steps}
    print("RESULT" + json.dumps(results))
""")


def test_mirrored_two_cpus_matches_one_device(data_dir, tmp_path):
    out = _run(["-c", MIRRORED_SCRIPT, data_dir, str(tmp_path)]).stdout
    results = json.loads(out.split("RESULT", 1)[1])
    assert results["mirrored"]["replicas"] == 2
    one, two = results["one"]["steps"], results["mirrored"]["steps"]
    assert len(one) == len(two) == 6
    for a, b in zip(one, two):
        assert b["loss"] == pytest.approx(a["loss"], abs=1e-5), (a["step"], a["loss"], b["loss"])
        # Same global batch: the same examples. The slot order differs: one device holds
        # [forward; backward] of all streams, each of the two replicas its own [fwd; bwd].
        assert sorted(_example_tuples(a)) == sorted(_example_tuples(b))
        assert b["direction"] == [0, 1, 0, 1] and a["direction"] == [0, 0, 1, 1]


# A run_pretrain.py whose checkpoint saves pause for a second with a half-written temporary
# directory in model_dir (what a crash inside TensorFlow's writer leaves), announced on stdout,
# so the soak below can kill it exactly there.
SLOW_SAVE_DRIVER = textwrap.dedent("""
    import os, runpy, shutil, sys, time
    from xlnet_tf2.training import checkpointing
    real_save = checkpointing.CheckpointKeeper.save
    def slow_save(self, step):
        temp = os.path.join(self.model_dir, f"ckpt-{step}_temp")
        os.makedirs(temp, exist_ok=True)
        with open(os.path.join(temp, "part-00000-of-00001.data-00000-of-00001"), "wb") as f:
            f.write(b"half a checkpoint")
        print(f"SAVING {step}", flush=True)
        time.sleep(1.0)
        shutil.rmtree(temp)
        return real_save(self, step)
    checkpointing.CheckpointKeeper.save = slow_save
    sys.argv = ["experiments/run_pretrain.py"] + sys.argv[1:]
    runpy.run_path("experiments/run_pretrain.py", run_name="__main__")
""")


# Where each SIGKILL of the soak below is aimed: inside the first or second checkpoint save of
# the attempt (its SAVING line: the save then pauses a second), or 0 to 1 s after the
# attempt's first step line. A last attempt runs to the end.
KILLS = ["save", "training", "save", "training"]


@pytest.mark.slow  # five start-ups: four killed runs, the last (and the shared reference run)
def test_sigkill_soak_at_paper_settings_is_bit_exact(data_dir, tmp_path, tmp_path_factory):
    """Dropout 0.1, bi_data, memory, steps_per_loop 8: killed at random moments, half of them
    aimed inside a checkpoint save; whatever moment each kill hit (reported), the run ends
    with exactly the losses, examples and weights of an uninterrupted run, and steps.jsonl
    holds every step once."""
    import random
    import threading

    import numpy as np

    steps = SOAK_STEPS
    common = [f"--data_dir={data_dir}"] + SOAK_FLAGS
    reference = shared_soak_reference(tmp_path_factory, data_dir)  # the SIGTERM soak's too
    assert sorted(_steps(reference)) == list(range(1, steps + 1))

    soak = tmp_path / "soak"
    rng = random.Random(20261122)
    rows = []  # per kill: aim, the moment it hit, the status
    for aim in KILLS + [None]:
        proc = subprocess.Popen([sys.executable, "-c", SLOW_SAVE_DRIVER, f"--model_dir={soak}"]
                                + common, cwd=ROOT, env=ENV, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        lines, seen = [], {}

        def read(proc=proc, lines=lines, seen=seen):
            for line in proc.stdout:
                lines.append(line)
                seen.setdefault(line.split(" ", 1)[0], time.time())
                if line.startswith("SAVING"):
                    seen["last save"] = time.time()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        target_save = rng.randint(1, 2)  # which save of this attempt to die in
        delay = rng.uniform(0.0, 1.0)    # or: how long after the first step line
        moment = None
        deadline = time.time() + 240
        while aim is not None and proc.poll() is None and time.time() < deadline:
            saves = sum(line.startswith("SAVING") for line in list(lines))
            if (aim == "save" and saves >= target_save) or (
                    aim == "training" and "step" in seen and time.time() - seen["step"] > delay):
                proc.send_signal(signal.SIGKILL)
                in_save = time.time() - seen.get("last save", -10.0) < 1.0
                moment = "checkpoint save" if in_save else "training"
                break
            time.sleep(0.02)
        proc.wait(timeout=240)
        reader.join(timeout=10)
        rows.append({"aim": aim, "moment": moment, "status": proc.returncode})
        if moment is None:  # not killed: it ran to the end (a fast attempt may beat its kill)
            assert proc.returncode == 0, "".join(lines)[-3000:]
            break
        assert proc.returncode == -signal.SIGKILL, "".join(lines)[-3000:]
    assert not [n for n in os.listdir(soak) if "_temp" in n]  # leftovers were cleaned

    ref, got = _steps(reference), _steps(soak)
    assert sorted(got) == list(range(1, steps + 1))
    with open(soak / "steps.jsonl") as f:
        assert len(f.readlines()) == steps  # every step once: killed attempts' lines dropped
    for step in range(1, steps + 1):
        assert got[step]["loss"] == ref[step]["loss"], step   # bit for bit
        assert _same_examples(got[step], ref[step]), step  # nothing skipped or repeated
    # Every stream advances one chunk per step: the memory's text continues across the kills.
    for step in range(2, steps + 1):
        assert [c - 1 for c in got[step]["chunk_index"]] == got[step - 1]["chunk_index"]
    ref_w, got_w = _final_state(reference), _final_state(soak)
    assert sorted(ref_w) == sorted(got_w) and len(ref_w) > 30
    assert any(name.startswith("memory/") for name in ref_w)
    for name in ref_w:
        np.testing.assert_array_equal(got_w[name], ref_w[name], err_msg=name)
    with open(soak / "attempts.jsonl") as f:
        attempts = [json.loads(line) for line in f]
    kills = sum(r["moment"] is not None for r in rows)
    assert len(attempts) == kills + 1
    # Restarts resumed from checkpoints the killed attempts left (one inside the run, with
    # steps still to train: the third kill falls in a save after one that completed), and the
    # last attempt says where it started.
    assert any(a["restored_from"] and 8 <= a["start_step"] < steps for a in attempts), attempts
    assert f"(started at {attempts[-1]['start_step']})" in "".join(lines), "".join(lines)[-3000:]
    print(f"SOAK kills={kills} "
          + " ".join(f"[{r['aim']} -> {r['moment']}]" for r in rows[:kills])
          + f" steps={steps} attempts={len(attempts)} max |loss difference|=0.0")
