"""The attention op (`attention` in xlnet_tf2/layers/xlnet_block.py) alone, forward and
backward, as XLA programs traced for a GPU: one per implementation, for a GPU machine without
TensorFlow to compare and time (benchmarks/gpu/attention_op_check.py).

    python -m benchmarks.tools.attention_op_export OUTDIR [--shape B,N,S,K,H]

Writes OUTDIR/reference.hlo.txt, OUTDIR/cudnn.hlo.txt and OUTDIR/meta.json (no attention
dropout: the cuDNN implementation runs without it, layers/kernels/cudnn.py). Each
program takes (queries [B, N, S, H], keys [B, N, K, H], values [B, N, K, H], bias [B, N, S, K]
in bfloat16, blocked bool [B, S, K]) and returns (out, d queries, d keys, d values, d bias) for the loss sum(out * cotangent),
cotangent = cos(1 + index of the output element) (fixed, so two programs see the same one).
The default shape is XLNet-Base's attention over both streams at batch 16: 512 content and
85 query-stream rows, 384 + 512 keys.
"""

from __future__ import annotations

import argparse
import json
import os

import tensorflow as tf

from xlnet_tf2 import fileio
from xlnet_tf2.layers.dropout import Dropout
from xlnet_tf2.layers.xlnet_block import attention
from xlnet_tf2.layers.step_plan import StepPlan

BASE_SHAPE = (16, 12, 597, 896, 64)


def op_program(shape, implementation: str) -> str:
    """HLO text of the op's forward and backward pass, traced for a GPU."""
    b, n, s, k, h = shape
    dropout = Dropout(0.0, dtype="mixed_bfloat16")
    scale = 1.0 / h ** 0.5

    @tf.function(jit_compile=True, autograph=False)
    def program(queries, keys, values, bias, blocked):
        cotangent = tf.cos(1.0 + tf.reshape(tf.range(b * n * s * h, dtype=tf.float32),
                                            [b, n, s, h]))
        with tf.GradientTape() as tape:
            tape.watch([queries, keys, values, bias])
            out = attention(queries, keys, values, bias, blocked, scale=scale, dropout=dropout,
                            training=True, plan=StepPlan(device="gpu", attention=implementation))
            loss = tf.reduce_sum(tf.cast(out, tf.float32) * cotangent)
        return [out] + tape.gradient(loss, [queries, keys, values, bias])

    specs = [tf.TensorSpec([b, n, s, h], tf.bfloat16), tf.TensorSpec([b, n, k, h], tf.bfloat16),
             tf.TensorSpec([b, n, k, h], tf.bfloat16), tf.TensorSpec([b, n, s, k], tf.bfloat16),
             tf.TensorSpec([b, s, k], tf.bool)]
    args = [tf.zeros(spec.shape, spec.dtype) for spec in specs]
    return program.experimental_get_compiler_ir(*args)(stage="hlo")


def export(outdir: str, shape=BASE_SHAPE) -> dict:
    programs = ("cudnn", "reference")
    fileio.makedirs(outdir)
    for name in programs:
        fileio.write_atomically(os.path.join(outdir, f"{name}.hlo.txt"),
                                op_program(shape, name).encode())
    meta = {"shape": list(shape), "programs": list(programs)}
    fileio.write_json_atomically(os.path.join(outdir, "meta.json"), meta)
    return meta


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("outdir")
    parser.add_argument("--shape", default=",".join(map(str, BASE_SHAPE)),
                        help="B,N,S,K,H (default: XLNet-Base's, both streams, batch 16)")
    a = parser.parse_args()
    print(json.dumps(export(a.outdir, tuple(int(x) for x in a.shape.split(",")))))


if __name__ == "__main__":
    main()
