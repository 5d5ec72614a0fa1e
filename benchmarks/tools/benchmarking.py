"""Timing helpers and xlnet-tf2 workloads for `benchmarks/benchmark.py`.

Every workload is a zero-argument callable that runs one step to completion (results pulled to
the host), so wall-clock timing around it is the step time. Inputs are numpy arrays shared
with the reference implementation so both frameworks see the same numbers.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from typing import Callable, Dict, List, Optional

import numpy as np
import tensorflow as tf

from xlnet_tf2.config import XLNetConfig
from xlnet_tf2.models import XLNetLMHeadModel
from xlnet_tf2.training.optimization import create_optimizer
from xlnet_tf2.models import XLNetModel
from xlnet_tf2.prep.docstring_corpus import build_stdlib_corpus
from xlnet_tf2.export.saved_model import ServingModule, export
from xlnet_tf2.models.xlnet_classifier import SequenceClassifier
from xlnet_tf2.tasks.head_spec import HeadSpec
from xlnet_tf2.tokenizers.sentencepiece_tokenizer import train_sentencepiece


@dataclasses.dataclass
class Workload:
    """Shape of one benchmark row."""
    batch_size: int
    seq_len: int
    mem_len: int = 0
    reuse_len: int = 0
    num_predict: int = 0  # 0: content stream only (inference)
    bi_data: bool = False

    @property
    def tokens_per_step(self) -> int:
        return self.batch_size * self.seq_len


def make_batch(workload: Workload, config: XLNetConfig, seed: int = 0) -> Dict[str, np.ndarray]:
    """Random but valid inputs in our batch-major layout.

    Pretraining rows get a random factorization order with the `num_predict` last-ranked
    positions as targets (perm_mask[b, i, j] = 1 hides j from i), sorted one-hot
    target_mapping rows, two segments, and memories of the configured length.
    """
    rng = np.random.default_rng(seed)
    b, n, p = workload.batch_size, workload.seq_len, workload.num_predict
    batch = {"input_ids": rng.integers(9, config.n_token, (b, n)).astype(np.int32),
             "segment_ids": (np.arange(n)[None] >= (n * 5) // 8).astype(np.int32).repeat(b, 0)}
    if p:
        perm_mask = np.zeros((b, n, n), np.float32)
        target_mapping = np.zeros((b, p, n), np.float32)
        for row in range(b):
            rank = rng.permutation(n)
            targets = np.sort(np.argsort(rank)[-p:])
            is_target = np.zeros(n, bool)
            is_target[targets] = True
            perm_mask[row] = (is_target[None, :] & (rank[None, :] >= rank[:, None]))
            target_mapping[row, np.arange(p), targets] = 1.0
        batch.update(perm_mask=perm_mask, target_mapping=target_mapping,
                     target=rng.integers(9, config.n_token, (b, p)).astype(np.int32))
    if workload.mem_len:
        batch["mems"] = [rng.normal(size=(b, workload.mem_len, config.d_model)).astype(np.float32)
                         for _ in range(config.n_layer)]
    return batch


def _to_tensors(batch):
    return {k: ([tf.constant(m) for m in v] if k == "mems" else tf.constant(v))
            for k, v in batch.items()}


def tf_pretrain_step(config: XLNetConfig, batch, *, jit_compile: bool = True,
                     clip_norm: float = 1.0) -> Callable[[], float]:
    """One full pretraining step of our model: two streams with memory, the LM loss, the
    backward pass, global-norm clipping and the project's AdamW update."""
    model = XLNetLMHeadModel(config)
    model.build()
    optimizer, _ = create_optimizer(model, learning_rate=1e-4, warmup_steps=10, total_steps=1000,
                                    weight_decay=0.01, epsilon=1e-6)
    variables = model.trainable_variables
    tensors = _to_tensors(batch)
    target = tensors.pop("target")

    def step(inputs, target):
        with tf.GradientTape() as tape:
            logits = model(inputs, training=True)["logits"]
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
                labels=target, logits=logits))
        grads = tape.gradient(loss, variables)
        grads, _ = tf.clip_by_global_norm(grads, clip_norm)
        optimizer.apply(grads, variables)
        return loss

    compiled = tf.function(step, jit_compile=jit_compile)
    return lambda: float(compiled(tensors, target).numpy())


def tf_inference(config: XLNetConfig, batch, *, mode: str = "xla") -> Callable[[], None]:
    """Content-stream features of the backbone. mode: "eager" (the Keras model called
    directly), "function" (tf.function) or "xla" (tf.function with jit_compile)."""
    model = XLNetModel(config)
    model.build()
    tensors = _to_tensors({k: batch[k] for k in ("input_ids", "segment_ids")})

    def forward(inputs):
        return model(inputs, training=False)["hidden"]

    if mode != "eager":
        forward = tf.function(forward, jit_compile=(mode == "xla"))
    return lambda: forward(tensors).numpy()


def export_features_saved_model(config: XLNetConfig, seq_len: int, workdir: str) -> str:
    """Exports a randomly initialized backbone of `config` as the `features` SavedModel that
    `experiments/export_saved_model.py --kind=features` writes (with a SentencePiece model of
    `config.n_token` pieces trained on a standard-library corpus); returns its directory."""
    import os


    corpus = os.path.join(workdir, "corpus.txt")
    build_stdlib_corpus(corpus, min_bytes=300_000, max_bytes=600_000)
    spm_model = train_sentencepiece([corpus], vocab_size=config.n_token,
                                    model_prefix=os.path.join(workdir, "spiece"))
    model = SequenceClassifier(config, 1)
    model(model.dummy_inputs(seq_len))
    return export(ServingModule("features", model, HeadSpec(kind="classification", seq_len=seq_len),
                                spm_model), os.path.join(workdir, "export"))


def saved_model_inference(export_dir: str, batch) -> Callable[[], None]:
    """The exported SavedModel's `serve_token_ids` signature on the batch's ids."""
    loaded = tf.saved_model.load(export_dir)
    signature = loaded.signatures["serve_token_ids"]
    ids = tf.constant(batch["input_ids"])
    args = {"input_ids": ids, "segment_ids": tf.constant(batch["segment_ids"]),
            "attention_mask": tf.ones_like(ids)}
    return lambda: [v.numpy() for v in signature(**args).values()]


# ---------------------------------------------------------------------- measurement
@dataclasses.dataclass
class Measurement:
    times: List[float]
    peak_memory_mb: Optional[float]

    @property
    def median(self) -> float:
        return statistics.median(self.times)


class PeakMemory:
    """How far the resident memory of this process rose above its level at the start of a
    block (peak minus start), on Linux: VmHWM after resetting it through
    /proc/self/clear_refs. None elsewhere. Memory an allocator keeps cached from earlier steps
    is part of the starting level, so this is the step's transient extra memory."""

    def __init__(self):
        self.peak_mb = None

    @staticmethod
    def _read(field):
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024.0
        return None

    def __enter__(self):
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
            self._start = self._read("VmRSS")
        except OSError:
            self._start = None
        return self

    def __exit__(self, *exc):
        if self._start is not None:
            self.peak_mb = self._read("VmHWM") - self._start
        return False


def interleaved(runs: Dict[str, Callable[[], object]], *, warmup: int, repeats: int,
                settle_seconds: float = 0.3) -> Dict[str, Measurement]:
    """Times several callables alternately (a, b, a, b, ...) so background load hits all of
    them alike; the first `warmup` calls of each (tracing, compilation) are not timed.

    Before each timed call the process idles `settle_seconds`: TensorFlow's and PyTorch's
    (OpenMP) worker threads spin for a while after finishing, and would otherwise steal cores
    from whichever framework runs next."""
    for fn in runs.values():
        for _ in range(warmup):
            fn()
    times = {name: [] for name in runs}
    peaks = {}
    for _ in range(repeats):
        for name, fn in runs.items():
            time.sleep(settle_seconds)
            with PeakMemory() as memory:
                start = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - start)
            if memory.peak_mb is not None:
                peaks[name] = max(peaks.get(name, 0.0), memory.peak_mb)
    return {name: Measurement(times[name], peaks.get(name)) for name in runs}
