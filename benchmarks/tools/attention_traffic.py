"""Before/after figures for the attention's memory traffic (BENCHMARKS.md, "The pretraining
step's roofline at XLNet-Base"): the pretraining step (benchmarks/tools/benchmarking.py
tf_pretrain_step) traced in one process with the code this change replaced ("before": the
query stream's `tf.gather(batch_dims=3)`, TensorFlow's float32 softmax kept for the backward
pass, rebuilt below), with this tree's code as TensorFlow traces it where it sees a GPU
("after (GPU path)": the window read) and as it traces it on this CPU ("after (CPU path)").
For each:

  * counts in the pre-optimization HLO: tensors of a score shape (any dtype), gathers,
    gathers with a rank-5 index, scatters; whether the HLO equals the "before" one;
  * XLA's cost analysis of the compiled step on this CPU (jax's XLA client compiles the HLO
    module TensorFlow hands to XLA): flops, bytes accessed;
  * the first two steps' losses (same weights and dropout keys on every side);
  * with --rounds > 0, the step time on this CPU in paired rounds (order rotating).

  python -m benchmarks.tools.attention_traffic --shape loop --precision float32 --rounds 12 --steps 4
  python -m benchmarks.tools.attention_traffic --shape base --batch 2 --precision mixed_bfloat16 \
      --as_on_gpu --no_run --sides "before,after (GPU path)"

--as_on_gpu turns the CPU-only stored dropout mask off (as TensorFlow does on a GPU). Not a
library: it swaps module attributes while a side is traced.
"""

import argparse
import contextlib
import json
import re
import statistics
import time

import keras
import numpy as np
import tensorflow as tf

from xlnet_tf2.config import XLNetConfig
from xlnet_tf2.layers import dropout, relative_attention, relative_position
from xlnet_tf2.layers.relative_attention import BLOCKED_SCORE
from benchmarks.tools.benchmarking import Workload, make_batch, tf_pretrain_step


def _old_gather(scores, query_positions, q_len, k_len):
    t_len = scores.shape[-1]
    columns = (q_len - query_positions)[:, :, None] + tf.range(k_len, dtype=tf.int32)[None, None]
    columns = tf.minimum(columns, t_len - 1)
    b, n, p, _ = keras.ops.shape(scores)
    columns = tf.broadcast_to(columns[:, None], [b, n, p, k_len])
    return tf.gather(scores, columns, batch_dims=3)


def _old_attention(queries, keys, values, bias, blocked, *, scale, dropout, training):
    scores = tf.einsum("bnsh,bnkh->bnsk", queries, keys) + bias
    scores = tf.cast(scores, tf.float32) * scale
    if blocked is not None:
        scores = tf.where(blocked[:, None], tf.constant(BLOCKED_SCORE, tf.float32), scores)
    probs = tf.nn.softmax(scores, axis=-1)
    probs = dropout(tf.cast(probs, values.dtype), training=training)
    return tf.einsum("bnsk,bnkh->bnsh", probs, values)


@contextlib.contextmanager
def window_read():
    """This tree's code as TensorFlow traces it where it sees a GPU: the query stream's shift
    is the window read (relative_position.coordinate_gather_here)."""
    saved = relative_position.coordinate_gather_here
    relative_position.coordinate_gather_here = lambda: False
    try:
        yield
    finally:
        relative_position.coordinate_gather_here = saved


@contextlib.contextmanager
def old_code():
    saved = relative_attention.gather_relative_scores, relative_attention.attention
    relative_attention.gather_relative_scores = _old_gather
    relative_attention.attention = _old_attention
    try:
        yield
    finally:
        relative_attention.gather_relative_scores, relative_attention.attention = saved


SHAPES = {  # layers, width, heads, d_inner, vocab, batch, seq, reuse, mem, predictions
    "loop": (4, 256, 4, 1024, 32000, 8, 128, 64, 64, 21),
    "tiny": (2, 64, 2, 128, 1000, 4, 32, 16, 16, 6),
    "base": (12, 768, 12, 3072, 32000, 16, 512, 256, 384, 85),
}


def build(shape_name, batch, precision):
    n_layer, d_model, n_head, d_inner, vocab, b, seq, reuse, mem, p = SHAPES[shape_name]
    b = batch or b
    config = XLNetConfig.from_dict(dict(
        n_layer=n_layer, d_model=d_model, n_head=n_head, d_head=64, d_inner=d_inner,
        n_token=vocab, dropout=0.1, dropatt=0.1, mem_len=mem, reuse_len=reuse, bi_data=True))
    workload = Workload(batch_size=b, seq_len=seq, mem_len=mem, reuse_len=reuse, num_predict=p,
                        bi_data=True)
    keras.mixed_precision.set_global_policy(precision)
    batch_arrays = make_batch(workload, config)
    dims = dict(B=b, N=n_head, L=seq, P=p, K=seq + mem, T=2 * seq + mem)
    return config, batch_arrays, dims


def score_shapes(d):
    heads = [d["B"], d["N"]]
    return {tuple(heads + [rows, cols]) for rows in (d["L"], d["P"])
            for cols in (d["K"], d["T"])}


def hlo_counts(text, d):
    shapes = score_shapes(d)
    counts = dict(score_shaped=0, score_shaped_by_dtype={}, gathers=0, rank5_index_gathers=0,
                  scatters=0)
    for line in text.split("\n"):
        m = re.match(r"\s*(ROOT )?%?[\w.\-]+ = (\w+)\[([\d,]*)\]", line)
        if not m:
            continue
        dims = tuple(int(x) for x in m.group(3).split(",")) if m.group(3) else ()
        if dims[:4] in shapes:
            counts["score_shaped"] += 1
            by = counts["score_shaped_by_dtype"]
            by[m.group(2)] = by.get(m.group(2), 0) + 1
        if " gather(" in line:
            counts["gathers"] += 1
            index = re.search(r"gather\([^)]*?, s(?:32|64)\[([\d,]*)\]", line)
            if index and len(index.group(1).split(",")) >= 5:
                counts["rank5_index_gathers"] += 1
        if " scatter(" in line:
            counts["scatters"] += 1
    return counts


def xla_cost(proto):
    from jax._src.lib import _jax, xla_client
    import jax
    dev = jax.devices("cpu")[0]
    module = _jax.mlir.hlo_to_stablehlo(proto)
    exe = dev.client.compile_and_load(module, xla_client.DeviceList((dev,)),
                                      xla_client.CompileOptions())
    cost = exe.cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    return {k: float(cost[k]) for k in ("flops", "bytes accessed") if k in cost}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--shape", choices=sorted(SHAPES), default="loop")
    parser.add_argument("--batch", type=int, default=0)
    parser.add_argument("--precision", default="float32")
    parser.add_argument("--rounds", type=int, default=0)
    parser.add_argument("--steps", type=int, default=5, help="timed steps per round and side")
    parser.add_argument("--no_cost", action="store_true", help="skip XLA's cost analysis")
    parser.add_argument("--no_run", action="store_true", help="only trace and analyse")
    parser.add_argument("--sides", default="before,after (GPU path),after (CPU path)")
    parser.add_argument("--as_on_gpu", action="store_true",
                        help="no CPU-only stored dropout mask (as export_step_hlo.py does)")
    a = parser.parse_args()
    if a.as_on_gpu:
        dropout.masks_are_stored_here = lambda: False
    config, batch, dims = build(a.shape, a.batch, a.precision)
    steps, texts, report = {}, {}, {"shape": a.shape, "dims": dims, "precision": a.precision}
    contexts = {"before": old_code, "after (GPU path)": window_read,
                "after (CPU path)": contextlib.nullcontext}
    for side in a.sides.split(","):
        with contexts[side]():
            keras.utils.set_random_seed(0)  # the same weights and dropout keys on both sides
            step = tf_pretrain_step(config, batch, jit_compile=True)
            fn, args = _function_and_args(step)
            text = fn.experimental_get_compiler_ir(*args)(stage="hlo")
            proto = fn.experimental_get_compiler_ir(*args)(stage="hlo_serialized")
            losses = [] if a.no_run else [step(), step()]
        entry = dict(hlo_counts(text, dims), first_losses=losses)
        texts[side] = _without_metadata(text)
        if side != "before" and "before" in texts:
            entry["hlo_identical_to_before"] = texts[side] == texts["before"]
        if not a.no_cost:
            entry["xla_cpu_cost"] = xla_cost(proto)
        report[side] = entry
        steps[side] = step
        print(side, json.dumps(entry), flush=True)
    if a.rounds:
        times = {side: [] for side in steps}
        for r in range(a.rounds):
            order = list(steps)[r % len(steps):] + list(steps)[:r % len(steps)]
            for side in order:
                steps[side]()
                t0 = time.perf_counter()
                for _ in range(a.steps):
                    steps[side]()
                times[side].append((time.perf_counter() - t0) / a.steps * 1e3)
        report["step_ms"] = {k: statistics.median(v) for k, v in times.items()}
        for side in list(steps)[1:]:
            ratios = [a_ / b_ for a_, b_ in zip(times[side], times["before"])]
            report[f"{side} / before"] = {"median": statistics.median(ratios),
                                          "per_round": ratios}
        print("times", json.dumps(times), flush=True)
    print(json.dumps(report, indent=1))


def _without_metadata(hlo):
    """HLO text without source metadata, the module's name and the trace's numbers in the
    computations' names (they differ from one trace to the next)."""
    hlo = re.sub(r", metadata=\{[^}]*\}", "", hlo)
    hlo = re.sub(r"_\d+__", "__", hlo)
    return hlo.split("\n", 1)[1]


def _function_and_args(step):
    """The tf.function and arguments behind tf_pretrain_step's zero-argument callable."""
    names = step.__code__.co_freevars
    closure = dict(zip(names, (c.cell_contents for c in step.__closure__)))
    return closure["compiled"], (closure["tensors"], closure["target"])


if __name__ == "__main__":
    main()
