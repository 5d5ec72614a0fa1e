"""How a run's process executes: its `tf.distribute` strategy and, with --deterministic,
bit-reproducible execution; both must be set before TensorFlow's runtime starts.

`resolve_strategy("auto")` picks TPU when `--tpu` is given, multi-worker when `TF_CONFIG`
names more than one worker, mirrored when there are several GPUs, one-device otherwise.
A `--tpu` that points at nothing fails within `tpu_timeout_s` with a message naming the flag,
instead of the resolver's long hang or an opaque gRPC error.
"""

from __future__ import annotations

import json
import os
import socket
import threading
from typing import Optional

import tensorflow as tf

from xlnet_tf2 import tensorflow_build
from xlnet_tf2.config_flags import RunConfigError

STRATEGIES = ("auto", "tpu", "multi_worker", "mirrored", "one_device")


class StrategyError(ValueError):
    """The requested strategy cannot be set up; the message says which flag to change."""


def _tf_config_workers() -> int:
    raw = os.environ.get("TF_CONFIG")
    if not raw:
        return 0
    try:
        cluster = json.loads(raw).get("cluster", {})
    except json.JSONDecodeError as e:
        raise StrategyError(f"The TF_CONFIG environment variable is not valid JSON: {e}.") from e
    return len(cluster.get("worker", [])) + len(cluster.get("chief", []))


def _check_tpu_address(tpu: str, timeout_s: float) -> None:
    """For a grpc://host:port address, fail fast if nothing listens there."""
    if not tpu.startswith("grpc://"):
        return
    host, _, port = tpu[len("grpc://"):].rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s):
            return
    except (OSError, ValueError) as e:
        raise StrategyError(
            f"--tpu={tpu!r}: no TPU answers at that address ({e}). Pass the name of a Cloud "
            "TPU (e.g. --tpu=my-tpu), 'local' on a TPU VM, or a reachable grpc://host:port.") from e


def _connect_tpu(tpu: str, timeout_s: float):
    """Cluster resolver -> connect -> initialize, bounded by `timeout_s` seconds."""
    if not tpu or not tpu.strip():
        raise StrategyError(
            "--tpu is empty. Pass the name of a Cloud TPU (e.g. --tpu=my-tpu), 'local' on a "
            "TPU VM, or a grpc://host:port address; or choose --strategy=one_device/mirrored.")
    missing = tensorflow_build.tpu_runtime_missing()
    if missing:  # known before any connection is tried: the resolver would fail obscurely
        raise StrategyError(f"--tpu={tpu!r}: {missing}.")
    _check_tpu_address(tpu, timeout_s)
    result = {}

    def work():
        try:
            resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu)
            tf.config.experimental_connect_to_cluster(resolver)
            tf.tpu.experimental.initialize_tpu_system(resolver)
            result["resolver"] = resolver
        except BaseException as e:  # reported below with the flag named
            result["error"] = e

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        raise StrategyError(f"--tpu={tpu!r}: no TPU answered within {timeout_s:.0f} s. Check the "
                            "TPU name, zone and project, or that this VM can reach it.")
    if "error" in result:
        e = result["error"]
        why = f"{type(e).__name__}: {' '.join(str(e).split())}"
        if tpu == "local":
            raise StrategyError(
                f"--tpu='local': this machine has no TPU ({why}). 'local' is the TPU of the "
                "Cloud TPU VM the run is on; from another machine pass the TPU's name (gcloud "
                "compute tpus list) or grpc://host:port.") from e
        raise StrategyError(f"--tpu={tpu!r} could not be resolved or initialized: {why}. Check "
                            "the TPU name (gcloud compute tpus list), zone and project, or use "
                            "'local' on a TPU VM.") from e
    return tf.distribute.TPUStrategy(result["resolver"])


def check_jit_compile(jit_compile: bool, strategy: tf.distribute.Strategy) -> None:
    """--jit_compile off a TPU where this TensorFlow has no XLA for the CPU (the TPU build): one
    line naming the flag, before anything is traced."""
    if not jit_compile or isinstance(strategy, tf.distribute.TPUStrategy):
        return
    missing = tensorflow_build.xla_on_cpu_missing()
    if missing:
        raise RunConfigError(f"--jit_compile: {missing}; run the step on the TPU (--tpu=local on "
                             "a TPU VM), or pass --nojit_compile.")


def resolve_strategy(name: str = "auto", tpu: Optional[str] = None,
                     tpu_timeout_s: float = 60.0) -> tf.distribute.Strategy:
    """Returns the strategy for `--strategy=name` (and `--tpu`).

    Must run before any other TensorFlow op (multi-worker and TPU need a fresh runtime).
    """
    if name not in STRATEGIES:
        raise StrategyError(f"--strategy={name!r} is not one of {STRATEGIES}.")
    if tpu is not None and name not in ("auto", "tpu"):
        raise StrategyError(f"--tpu={tpu!r} was given with --strategy={name}; use "
                            "--strategy=tpu (or auto), or drop --tpu.")
    if name == "auto":
        if tpu is not None:
            name = "tpu"
        elif _tf_config_workers() > 1:
            name = "multi_worker"
        elif len(tf.config.list_physical_devices("GPU")) > 1:
            name = "mirrored"
        else:
            name = "one_device"
    if name == "tpu":
        if tpu is None:
            raise StrategyError("--strategy=tpu needs --tpu (a Cloud TPU name, 'local' on a TPU "
                                "VM, or grpc://host:port).")
        return _connect_tpu(tpu, tpu_timeout_s)
    if name == "multi_worker":
        if _tf_config_workers() < 1:
            raise StrategyError("--strategy=multi_worker needs the TF_CONFIG environment variable "
                                "describing the cluster and this worker's task.")
        return tf.distribute.MultiWorkerMirroredStrategy()
    if name == "mirrored":
        return tf.distribute.MirroredStrategy()
    gpus = tf.config.list_logical_devices("GPU")
    return tf.distribute.OneDeviceStrategy(gpus[0].name if gpus else "/cpu:0")


def apply_determinism(loop) -> None:
    """Turns on deterministic execution for this process when a run's loop settings (a
    LoopConfig) ask for --deterministic.

    Every kernel being deterministic by itself is not enough: with several inter-op threads the
    same training step run twice in one process gives losses that part by float rounding after
    a few steps. With one inter-op thread (ops run one at a time, each still using all cores)
    the losses and weights of repeated runs, and of a run resumed from any checkpoint, are
    bit-identical (BENCHMARKS.md#figures-behind-choices-in-the-code). So --deterministic sets
    one inter-op thread and TensorFlow's op determinism (which also selects deterministic GPU
    kernels). The thread count can only be set before TensorFlow's runtime starts: `run_task`
    calls this first thing; in a process that already ran TensorFlow ops it raises unless the
    setting is already in force."""
    if not loop.deterministic:
        return
    tf.config.experimental.enable_op_determinism()
    if tf.config.threading.get_inter_op_parallelism_threads() == 1:
        return
    try:
        tf.config.threading.set_inter_op_parallelism_threads(1)
    except RuntimeError as e:
        raise RunConfigError(
            "--deterministic needs one inter-op thread, which can only be set before "
            "TensorFlow starts: call tf.config.threading.set_inter_op_parallelism_threads(1) "
            f"before running any TensorFlow op in this process ({e}).") from None


def is_chief(strategy: tf.distribute.Strategy) -> bool:
    """True on the worker that writes checkpoints and summaries."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or isinstance(strategy, tf.distribute.TPUStrategy):
        return True
    task_type, task_id = resolver.task_type, resolver.task_id
    if task_type is None:
        return True
    return task_type == "chief" or (task_type == "worker" and task_id == 0
                                    and "chief" not in resolver.cluster_spec().as_dict())


def num_workers(strategy: tf.distribute.Strategy) -> int:
    """Worker processes of a MultiWorkerMirroredStrategy cluster; 1 for single-client
    strategies (one device, mirrored, TPU: one Python process drives every device)."""
    if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return 1
    spec = strategy.cluster_resolver.cluster_spec().as_dict()
    return len(spec.get("worker", [])) + len(spec.get("chief", []))


def worker_id(strategy: tf.distribute.Strategy) -> int:
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or resolver.task_id is None:
        return 0
    return int(resolver.task_id)


def distribute_inputs(strategy: tf.distribute.Strategy, dataset_fn):
    """The per-replica batches of `dataset_fn(input_context)` for `strategy.run`: a
    distributed dataset, or for one replica on a CPU the dataset itself.

    Why not a distributed dataset there: its iterator prefetches to the device through a
    GeneratorDataset, and constructing that kernel on Python 3.11 calls
    mallopt(M_MMAP_THRESHOLD, 128 KiB) (TensorFlow's workaround for from_generator memory
    growth). That fixes glibc's mmap threshold for the whole process, so every buffer of 128 KiB
    or more that XLA's CPU kernels allocate in a step is mmap'd and unmapped again: on the
    benchmark model about 1,400 mmap/munmap pairs and 45,000 page faults per step, a fifth of
    the step time. With one replica on the host there is nothing to fetch to, and the plain
    dataset (what the default strategy hands out) yields the same batches."""
    if (isinstance(strategy, tf.distribute.OneDeviceStrategy)
            and "CPU" in strategy.extended.worker_devices[0].upper()):
        return dataset_fn(tf.distribute.InputContext())
    return strategy.distribute_datasets_from_function(dataset_fn)
