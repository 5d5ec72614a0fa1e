"""Preemption: a SIGTERM or a Compute Engine termination notice ends a training run at the next
step boundary with a checkpoint, on every worker at the same step (`PreemptionWatcher`, active
while `Trainer.train` runs). The platforms, and why TensorFlow's PreemptionCheckpointHandler
is not used: docs/PRETRAINING.md#preemption.
"""

from __future__ import annotations

import os
import signal
import socket
import threading
import urllib.error
import urllib.request
from typing import Callable, Optional

import tensorflow as tf
from absl import logging

from xlnet_tf2.training import distribution

METADATA_HOST_VARIABLE = "GCE_METADATA_IP"  # the variable TensorFlow's handler reads
METADATA_POLL_SECONDS = 1.0
# (metadata key under instance/, is-a-notice test, what the stop message calls it)
METADATA_NOTICES = (
    ("maintenance-event", lambda value: value.strip() == "TERMINATE_ON_HOST_MAINTENANCE",
     "a Compute Engine maintenance notice (TERMINATE_ON_HOST_MAINTENANCE)"),
    ("preempted", lambda value: value.strip().upper() == "TRUE",
     "a Compute Engine preemption notice"),
)
_STOP_READER = b"\0"  # no signal has number 0: tells the watcher thread to end

# Metadata hosts found not to answer (not a Compute Engine VM): asked once per process.
_NO_METADATA: set = set()


class TrainingPreempted(RuntimeError):
    """The run stopped on a SIGTERM or a termination notice, after a step boundary, with a
    checkpoint of that step; the message names the step and the checkpoint. The command-line
    tools exit with status 75 on it (cli.py): run the same command again to resume."""

    def __init__(self, message: str, step: int, checkpoint: Optional[str]):
        super().__init__(message)
        self.step = step
        self.checkpoint = checkpoint


class PreemptionWatcher:
    """Turns SIGTERM and termination notices into a stop request the training loop reads:
    * SIGTERM gets a Python handler; `signal.set_wakeup_fd` makes the interpreter's C-level
      handler also write the signal's number to a socket at once, and a watcher thread reading
      that socket sets the `flag` variable. (The Python handler itself runs only when the main
      thread is back in Python, i.e. after the loop of `steps_per_loop` steps in flight, and it
      may run while a tf.function is being traced, where a variable assignment would become part
      of the traced graph: so it touches no TensorFlow op.) SIGTERM is marked restartable
      (SA_RESTART), so a system call of TensorFlow's threads interrupted by it (a checkpoint
      write) is resumed, not failed.
    * On a Compute Engine VM (Cloud TPU VMs and spot GPU VMs are ones) a second thread polls the
      metadata server every second for `instance/maintenance-event` ==
      TERMINATE_ON_HOST_MAINTENANCE (the notice TensorFlow's PreemptionCheckpointHandler watches
      on GCE GPU VMs) and `instance/preempted` == TRUE. Elsewhere the first request fails (no
      such host) and the thread ends; `GCE_METADATA_IP` (TensorFlow's variable) points it at
      another address.
    * The training loop's tf.function reads the flag before each step (`Trainer._train_loop`)
      and ends the loop there: the step in flight finishes, no further step starts. Under
      MultiWorkerMirroredStrategy the flag is summed over all replicas first, one scalar
      all-reduce per step, so every worker ends its loop after the same step whichever worker
      was told; with one client (one device, mirrored, TPU) one process reads one flag.
    * The Trainer then writes the checkpoint of that step (its usual save: carried state, then
      model, optimizer, step, random state), unless the step already has one, and raises
      `TrainingPreempted`; the command line prints it as one line and exits with status 75
      (cli.py).

    Args:
      strategy: the run's strategy (decides whether the flag is all-reduced in the loop).
    """

    def __init__(self, strategy: tf.distribute.Strategy):
        # Whether the loop must sum the flag over the workers before reading it.
        self.collective = distribution.num_workers(strategy) > 1
        with tf.device("CPU:0"):
            # int32 [] on the host: 1 once a notice came to this process.
            self.flag = tf.Variable(0, dtype=tf.int32, trainable=False,
                                    name="preemption_requested")
        self.reason: Optional[str] = None  # what this process was told, e.g. "SIGTERM"
        self._lock = threading.Lock()
        self._stop = threading.Event()  # ends the metadata poller of the current `start`
        # While SIGTERM is caught: (reader thread, its two sockets, previous handler and fd).
        self._signals = None

    # ------------------------------------------------------------------ the notices' side
    def request(self, reason: str) -> None:
        """Asks the loop to stop after the step in flight (any thread but one tracing a
        tf.function; the signal handler therefore never calls it)."""
        with self._lock:
            first = self.reason is None
            if first:
                self.reason = reason
                self.flag.assign(1)
        if first:
            logging.info("Preemption: %s; stopping after the step in flight.", reason)
        else:
            logging.info("Preemption: %s again; already stopping.", reason)

    # ------------------------------------------------------------------ install / remove
    def __enter__(self) -> "PreemptionWatcher":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def start(self) -> None:
        """Installs the SIGTERM handler (main thread only) and starts the watcher threads."""
        self.reason = None
        self.flag.assign(0)
        self._stop = threading.Event()
        if threading.current_thread() is threading.main_thread():
            self._catch_sigterm()
        else:
            logging.warning("Training runs outside the main thread: SIGTERM is not caught "
                            "(Python delivers signals to the main thread only).")
        # Not joined by `close`: a request may be waiting for its timeout (a daemon thread).
        _start_thread(_poll_metadata, self._stop, self.request)

    def close(self) -> None:
        """Restores the previous SIGTERM handler and wakeup fd, ends the watcher threads."""
        self._stop.set()
        if self._signals is None:
            return
        thread, reader, writer, previous_handler, previous_fd = self._signals
        self._signals = None
        signal.set_wakeup_fd(previous_fd)
        signal.signal(signal.SIGTERM, previous_handler)
        try:
            writer.send(_STOP_READER)
        except OSError:
            pass
        thread.join(timeout=5.0)
        reader.close()
        writer.close()

    def _catch_sigterm(self) -> None:
        reader, writer = socket.socketpair()
        writer.setblocking(False)  # set_wakeup_fd needs a non-blocking fd
        previous_handler = signal.signal(signal.SIGTERM, _note_signal)
        signal.siginterrupt(signal.SIGTERM, False)
        previous_fd = signal.set_wakeup_fd(writer.fileno())
        thread = _start_thread(_read_signals, reader, previous_fd, self.request)
        self._signals = (thread, reader, writer, previous_handler, previous_fd)


def _start_thread(target: Callable, *args) -> threading.Thread:
    thread = threading.Thread(target=target, args=args, daemon=True,
                              name=f"preemption-{target.__name__}")
    thread.start()
    return thread


def _note_signal(signum, frame) -> None:
    """The Python-level SIGTERM handler. Its presence makes the interpreter write the signal to
    the wakeup fd, where `_read_signals` acts on it; it runs no TensorFlow op (it may run while
    a tf.function is traced)."""
    del signum, frame


def _read_signals(reader: socket.socket, forward_fd: int, request: Callable) -> None:
    """Reads signal numbers from the wakeup socket until told to end; SIGTERM requests a
    stop. Bytes are passed on to the wakeup fd that was installed before (an event loop's)."""
    while True:
        try:
            data = reader.recv(64)
        except OSError:
            return
        if not data:
            return
        if forward_fd >= 0:
            try:
                os.write(forward_fd, data.replace(_STOP_READER, b""))
            except OSError:
                pass
        if signal.SIGTERM in data:
            request("SIGTERM")
        if _STOP_READER in data:
            return


def metadata_url(key: str) -> str:
    host = os.environ.get(METADATA_HOST_VARIABLE, "metadata.google.internal")
    return f"http://{host}/computeMetadata/v1/instance/{key}"


def read_metadata(key: str, timeout: float = 2.0) -> str:
    request = urllib.request.Request(metadata_url(key), headers={"Metadata-Flavor": "Google"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return response.read().decode("utf-8", errors="replace")


def _poll_metadata(stop: threading.Event, request: Callable) -> None:
    """Polls the Compute Engine notices until one is given or `stop` is set; returns at once
    where no metadata server answers."""
    host = metadata_url("")
    if host in _NO_METADATA:
        return
    answered = False
    while not stop.is_set():
        for key, is_notice, description in METADATA_NOTICES:
            try:
                value = read_metadata(key)
            except urllib.error.HTTPError:
                answered = True  # the server is there; this key is not (yet)
                continue
            except (urllib.error.URLError, OSError, ValueError):
                if not answered:
                    _NO_METADATA.add(host)
                    return
                continue  # a passing failure of a server that answered before
            answered = True
            if is_notice(value):
                request(description)
                return
        stop.wait(METADATA_POLL_SECONDS)



def stop_message(reason: Optional[str], step: int, train_steps: int,
                 checkpoint: Optional[str], saved: bool) -> str:
    """The one line a preempted run ends with. `reason`: what this process was told (None on
    a worker that stopped because another one was told); `checkpoint`: the checkpoint of
    `step` (None: nothing trained, nothing saved); `saved`: whether it was written now."""
    told = reason or "another worker of the run got a SIGTERM or a termination notice"
    if checkpoint is None:
        return (f"{told}: stopped before the first step; nothing to save. Run the same command "
                "again to start.")
    if saved:
        what = (f"stopped after step {step} of {train_steps} and saved checkpoint {checkpoint} "
                "with everything an exact resume needs")
    else:
        what = f"stopped at step {step} of {train_steps}, which checkpoint {checkpoint} holds"
    return f"{told}: {what}. Run the same command again to resume from it."
