"""The TensorFlow side of the loop benchmark (tools/loop_benchmark.py): the data every
contender reads, the real pretraining loop and the bare step.

`prepare_loop_data` builds what a user would (tools/docstring_data.py: a docstring corpus, a
SentencePiece model of the benchmark's vocabulary trained on it, and the corpus prepared by
data_prep/create_tfrecords.py's library function at the benchmark's shape, num_streams = the
streams one step reads). It also writes the first `steps` batches of the training pipeline
with their dense masks (masks.dense_features) to an .npz for the HuggingFace loop, so both
frameworks train on the same examples.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import time

import numpy as np
import tensorflow as tf

from xlnet_tf2.data.params import DataParams
from xlnet_tf2.data.pretrain_dataset import PretrainData
from xlnet_tf2.tasks.objective import dense_features
from xlnet_tf2.tasks.pretraining import PretrainTask
from xlnet_tf2.tasks.pretraining_config import PretrainConfig
from benchmarks.tools.benchmarking import Workload, make_batch, tf_pretrain_step
from benchmarks.tools.docstring_data import prepare_docstring_data
from benchmarks.tools.loop_benchmark import LoopSpec, contender_result, time_loops
from xlnet_tf2.training.trainer import run_task

DENSE_BATCHES_FILE = "dense_batches.json"  # what dense_batches.npz was exported for (reuse)


def data_params(spec: LoopSpec) -> DataParams:
    """The data preparation settings of the benchmark's shape: one step reads every stream,
    factorization orders permuted within blocks dividing both halves."""
    return DataParams(seq_len=spec.seq_len, reuse_len=spec.reuse_len,
                      num_predict=spec.num_predict, bi_data=spec.bi_data,
                      perm_size=math.gcd(spec.reuse_len, spec.seq_len - spec.reuse_len),
                      num_streams=spec.batch_size // 2 if spec.bi_data else spec.batch_size,
                      num_passes=1, seed=0)


def prepare_loop_data(spec: LoopSpec, corpus_bytes: int) -> dict:
    """The prepared TFRecords (tools/docstring_data.py, in `spec.workdir`), the model config
    and the dense batches of the HuggingFace loop; each part is reused when it was built
    before with the same settings. Returns docstring_data's record plus `dense_batches_s`
    (None when reused)."""
    # docstring_data prepares into WORKDIR/data, which is LoopSpec.data_dir.
    prepared = prepare_docstring_data(spec.workdir, data_params(spec), spec.vocab_size,
                                      corpus_bytes)
    _write_model_config(spec)
    key = {"data": prepared["key"], "steps": spec.steps, "batch_size": spec.batch_size}
    record = os.path.join(spec.workdir, DENSE_BATCHES_FILE)
    if prepared["reused"] and os.path.exists(record) and os.path.exists(spec.dense_batches_path):
        with open(record) as f:
            if json.load(f) == key:
                return dict(prepared, dense_batches_s=None)
    start = time.perf_counter()
    export_dense_batches(spec)
    seconds = time.perf_counter() - start
    with open(record + ".tmp", "w") as f:
        json.dump(key, f)
    os.replace(record + ".tmp", record)
    return dict(prepared, dense_batches_s=seconds)


def _write_model_config(spec: LoopSpec) -> None:
    with open(spec.model_config_path, "w") as f:
        f.write(spec.xlnet_config().to_json_string())


def export_dense_batches(spec: LoopSpec) -> None:
    """The first `spec.steps` global batches of the training pipeline with their dense masks
    (as the training step builds them) as an .npz: input_ids, segment_ids int32 [S, B, L],
    perm_mask uint8 [S, B, L, L], target_mapping uint8 [S, B, P, L], target int32 [S, B, P],
    target_mask float32 [S, B, P], chunk_index int32 [S, B]."""
    data = PretrainData.read(spec.data_dir)
    dataset = data.dataset(spec.batch_size).take(spec.steps)
    columns = {k: [] for k in ("input_ids", "segment_ids", "perm_mask", "target_mapping",
                               "target", "target_mask", "chunk_index")}
    for batch in dataset:
        dense = dense_features(batch, data.shape.reuse_len)
        dense["chunk_index"] = batch["chunk_index"]
        for k in columns:
            columns[k].append(dense[k].numpy())
    dtypes = {"perm_mask": np.uint8, "target_mapping": np.uint8, "target_mask": np.float32}
    arrays = {k: np.stack(v).astype(dtypes.get(k, np.int32)) for k, v in columns.items()}
    tmp = spec.dense_batches_path + ".tmp.npz"
    np.savez(tmp, **arrays)
    os.replace(tmp, spec.dense_batches_path)


def configure_threads(spec: LoopSpec) -> None:
    """--threads for TensorFlow (before any op runs); by default TensorFlow's own choice, as
    run_pretrain.py."""
    if spec.threads:
        tf.config.threading.set_intra_op_parallelism_threads(spec.threads)
        tf.config.threading.set_inter_op_parallelism_threads(min(spec.threads, 2))


def pretrain_config(spec: LoopSpec, model_dir: str) -> PretrainConfig:
    """run_pretrain.py's configuration for the benchmark: the shape's flags, every other
    setting at its default (a log line every 100 steps, a checkpoint every 10,000 and at the
    end, float32, one device)."""
    return PretrainConfig.flat(
        data_dir=(spec.data_dir,), model_dir=model_dir, model_config=spec.model_config_path,
        train_batch_size=spec.batch_size, train_steps=spec.steps,
        steps_per_loop=spec.steps_per_loop, mem_len=spec.mem_len, dropout=spec.dropout,
        dropatt=spec.dropout, jit_compile=True)


def run_real_loop(spec: LoopSpec, model_dir: str) -> dict:
    """The pretraining run as experiments/run_pretrain.py runs it (fresh model_dir)."""
    shutil.rmtree(model_dir, ignore_errors=True)
    config = pretrain_config(spec, model_dir)
    result = run_task(PretrainTask, config)
    finished = time.perf_counter()
    return contender_result(result.loops, finished, last_loss=result.steps[-1]["loss"])


def run_bare_step(spec: LoopSpec) -> dict:
    """tf_pretrain_step (XLA) at the same shape on a fixed random batch, back to back."""
    workload = Workload(batch_size=spec.batch_size, seq_len=spec.seq_len, mem_len=spec.mem_len,
                        reuse_len=spec.reuse_len, num_predict=spec.num_predict,
                        bi_data=spec.bi_data)
    config = spec.xlnet_config()
    step = tf_pretrain_step(config, make_batch(workload, config), jit_compile=True)
    losses = []

    def run_steps(n):
        for _ in range(n):
            losses.append(step())

    result = time_loops(run_steps, spec.steps, spec.steps_per_loop)
    return dict(result, last_loss=losses[-1])
