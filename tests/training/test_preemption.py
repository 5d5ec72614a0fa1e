"""Preemption (xlnet_tf2/training/preemption.py, the Trainer's hook): a SIGTERM to the process
or a Compute Engine termination notice while `train` runs ends the loop in flight after its
current step, writes the checkpoint of that step unless it has one, raises TrainingPreempted,
and a new Trainer resumes exactly. In process, on a tiny fine-tuning run (the pretraining
command's soak and the two-worker run: tests/tasks/test_pretraining_preemption.py)."""

import http.server
import os
import signal
import socket
import threading

import numpy as np
import pytest
import tensorflow as tf

from xlnet_tf2.data.finetune_batches import global_batches_fn
from xlnet_tf2.models.xlnet_classifier import SequenceClassifier
from xlnet_tf2.tasks.finetuning import FinetuneConfig, FinetuneTask
from xlnet_tf2.tasks.losses import classification_loss
from xlnet_tf2.training import preemption
from xlnet_tf2.training.trainer import Trainer

from fixtures.tiny_finetune import CONFIG, FEATURES
from fixtures.toy_task import toy_trainer


@pytest.fixture
def sigterm_received():
    """SIGTERM caught by the test itself outside `train` (a late signal must not end pytest);
    yields the list of signals it caught. Also checks that `train` put back this handler and
    the wakeup fd."""
    caught = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: caught.append(signum))
    handler = signal.getsignal(signal.SIGTERM)
    yield caught
    assert signal.getsignal(signal.SIGTERM) is handler  # train() restored it
    assert signal.set_wakeup_fd(-1) == -1
    signal.signal(signal.SIGTERM, previous)


def _on_loop(trainer, on_loop):
    """Calls on_loop(n) before the n-th call (1-based) of the trainer's loop; returns it."""
    calls = []
    loop = trainer._loop

    def counted(iterator, state, num_steps):
        calls.append(int(num_steps))
        on_loop(len(calls))
        return loop(iterator, state, num_steps)

    trainer._loop = counted
    return trainer


def _finetune_trainer(model_dir, train_steps):
    """The tiny classifier fine-tuned at dropout 0.1 on the real data path (batches a function
    of the step); loops of up to 40 steps, a checkpoint every 16 steps."""
    cfg = FinetuneConfig.flat(model_dir=str(model_dir), train_steps=train_steps,
                              train_batch_size=8, learning_rate=1e-3, warmup_steps=1,
                              weight_decay=0.01, log_steps=train_steps, save_steps=16,
                              steps_per_loop=40, best_metric="accuracy", peak_tflops=1.0)
    task = FinetuneTask(cfg, model_fn=lambda: SequenceClassifier(CONFIG, 2, head_dropout=0.1),
                        loss_fn=classification_loss,
                        dataset_fn=global_batches_fn(FEATURES, 8, seed=5), eval_fn=None,
                        seq_len=16)
    return Trainer(task)


def _sigterm_self():
    os.kill(os.getpid(), signal.SIGTERM)


def _sigterm_at_step(trainer, step):
    """The trainer, sending SIGTERM to this process from inside its loop's graph as `step`
    (1-based) begins: a point in the middle of a loop, whatever the machine's speed."""
    def send(current):
        if int(current) == step - 1:
            _sigterm_self()
        return current

    step_features = trainer._step_features

    def features_and_signal(features):
        tf.py_function(send, [trainer.global_step.read_value()], tf.int64)  # stateful: runs
        return step_features(features)

    trainer._step_features = features_and_signal
    return trainer


def _checkpoint_steps(model_dir):
    return sorted(int(name[len("ckpt-"):-len(".index")]) for name in os.listdir(model_dir)
                  if name.startswith("ckpt-") and name.endswith(".index"))


def test_sigterm_mid_loop_saves_that_step_and_the_resumed_run_is_bit_exact(
        tmp_path, sigterm_received):
    """Fine-tuning, 40 steps in loops of 16 (the save cadence): a SIGTERM sent as step 21
    begins, inside the loop of steps 17-32, stops the run after the step in flight, S; ckpt-S is
    written; a new Trainer resumes from S and ends with the weights and losses of an
    uninterrupted run, bit for bit."""
    steps = 40
    reference = _finetune_trainer(tmp_path / "reference", steps)
    ref = reference.train()
    ref_weights = [v.numpy() for v in reference.model.variables]

    model_dir = tmp_path / "preempted"
    with pytest.raises(preemption.TrainingPreempted) as stop:
        _sigterm_at_step(_finetune_trainer(model_dir, steps), 21).train()
    s = stop.value.step
    assert 21 <= s < 32, s  # inside the loop, not at its end
    assert stop.value.checkpoint == str(model_dir / f"ckpt-{s}")
    assert str(stop.value).startswith(f"SIGTERM: stopped after step {s} of {steps} and saved "
                                      f"checkpoint {model_dir}/ckpt-{s} ")
    assert _checkpoint_steps(model_dir)[-1] == s

    resumed = _finetune_trainer(model_dir, steps)
    result = resumed.train()
    assert (result.start_step, result.final_step) == (s, steps)
    assert [r["loss"] for r in result.steps] == [r["loss"] for r in ref.steps[s:]]
    for got, want in zip([v.numpy() for v in resumed.model.variables], ref_weights):
        np.testing.assert_array_equal(got, want)
    assert sigterm_received == []  # every SIGTERM reached the trainer's handler


def test_sigterm_before_the_first_step_saves_nothing_new(tmp_path, sigterm_received):
    """A SIGTERM before any step of the attempt (during restore, start-up, tracing): a fresh
    run stops with no checkpoint; a resumed one names the checkpoint it already has and
    writes none. (The toy records a feature of no static batch size, as on several workers:
    an empty loop's records still stack.)"""
    model_dir = tmp_path / "run"
    fresh = _on_loop(toy_trainer(model_dir), lambda n: _sigterm_self())
    with pytest.raises(preemption.TrainingPreempted, match="before the first step") as stop:
        fresh.train()
    assert (stop.value.step, stop.value.checkpoint) == (0, None)
    assert _checkpoint_steps(model_dir) == []

    assert toy_trainer(model_dir).train().final_step == 10
    again = _on_loop(toy_trainer(model_dir, train_steps=20), lambda n: _sigterm_self())
    saves = []
    save = again.checkpoints.save
    again.checkpoints.save = lambda step: saves.append(step) or save(step)
    with pytest.raises(preemption.TrainingPreempted, match="SIGTERM: stopped at step 10 of 20, "
                                                           "which checkpoint .*ckpt-10 holds"):
        again.train()
    assert saves == [] and _checkpoint_steps(model_dir) == [10]
    assert sigterm_received == []


class _Metadata(http.server.BaseHTTPRequestHandler):
    """A Compute Engine metadata server: answers instance/<key> from `values` (404 if absent)
    when asked with the Metadata-Flavor header."""

    values = {}

    def do_GET(self):  # noqa: N802 - http.server's name
        key = self.path.rsplit("/", 1)[-1]
        if self.headers.get("Metadata-Flavor") != "Google" or key not in self.values:
            self.send_error(404)
            return
        body = self.values[key].encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def metadata_server(monkeypatch):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Metadata)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv(preemption.METADATA_HOST_VARIABLE, f"127.0.0.1:{server.server_port}")
    monkeypatch.setattr(preemption, "METADATA_POLL_SECONDS", 0.02)
    _Metadata.values = {"maintenance-event": "NONE"}
    yield _Metadata.values
    server.shutdown()
    server.server_close()


def test_a_maintenance_notice_stops_the_run_like_a_sigterm(tmp_path, metadata_server):
    """The metadata server announces TERMINATE_ON_HOST_MAINTENANCE once the run has trained: the
    run stops at a step boundary with the checkpoint of that step, the notice named."""
    def notice_after_first_loop(n):
        if n == 2:
            metadata_server["maintenance-event"] = "TERMINATE_ON_HOST_MAINTENANCE"

    model_dir = tmp_path / "run"
    trainer = _on_loop(toy_trainer(model_dir, train_steps=100000, save_steps=100000),
                       notice_after_first_loop)
    with pytest.raises(preemption.TrainingPreempted) as stop:
        trainer.train()
    s = stop.value.step
    assert 3 <= s < 100000 and _checkpoint_steps(model_dir) == [s]
    assert str(stop.value).startswith("a Compute Engine maintenance notice "
                                      f"(TERMINATE_ON_HOST_MAINTENANCE): stopped after step {s} "
                                      f"of 100000 and saved checkpoint {model_dir}/ckpt-{s} ")


def test_metadata_poller_preempted_notice_and_no_server(metadata_server, monkeypatch):
    """instance/preempted TRUE is a notice; where no metadata server answers the poller ends at
    once and the host is not asked again."""
    metadata_server["preempted"] = "TRUE"
    told = []
    preemption._poll_metadata(threading.Event(), told.append)
    assert told == ["a Compute Engine preemption notice"]

    with socket.socket() as free:  # a port nothing listens on
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    monkeypatch.setenv(preemption.METADATA_HOST_VARIABLE, f"127.0.0.1:{port}")
    preemption._poll_metadata(threading.Event(), told.append)
    assert preemption.metadata_url("") in preemption._NO_METADATA and len(told) == 1
