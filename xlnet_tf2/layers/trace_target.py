"""Which kind of device the program being traced will run on: "cpu", "gpu" or "tpu".

A few layers and the training step trace a different (numerically equivalent) program for
each kind of device: the attention-dropout mask kept in a stored tensor on a CPU and
bit-packed on a GPU (layers/dropout.py), the shifts of the position scores
(layers/relative_position.py), both streams as one attention on a GPU
(layers/relative_attention.py), the clipping norm and the AdamW update one variable at a time
on a CPU and over groups of gradients elsewhere (training/optimization.py). Each asks `kind()`
while the step is traced; every such switch of the project goes through this module, so
forcing the target here (`tracing_for`) traces exactly the program that device would run, on
any machine: that is how a step is exported for an accelerator from a CPU-only machine
(benchmarks/tools/step_export.py).
"""

from __future__ import annotations

import contextlib
from typing import Iterator, Optional

import tensorflow as tf

KINDS = ("cpu", "gpu", "tpu")

# A process-wide setting, not a thread-local one: MirroredStrategy traces each replica's step
# in a thread of its own, and every replica must see the forced target.
_forced: Optional[str] = None


def kind() -> str:
    """The target of the step being traced: the forced one inside `tracing_for`, else "tpu"
    when TensorFlow sees a TPU, "gpu" when it sees a GPU, "cpu" otherwise. Asked at trace time,
    not cached: a TPU system initialized later in the process changes the answer."""
    if _forced is not None:
        return _forced
    if tf.config.list_logical_devices("TPU"):
        return "tpu"
    if tf.config.list_logical_devices("GPU"):
        return "gpu"
    return "cpu"


def is_cpu() -> bool:
    """Whether the step being traced will run on a CPU (see `kind`)."""
    return kind() == "cpu"


@contextlib.contextmanager
def tracing_for(target: str) -> Iterator[None]:
    """Traces inside the block as for `target` ("cpu", "gpu" or "tpu"), whatever devices this
    machine has."""
    global _forced
    if target not in KINDS:
        raise ValueError(f"Unknown trace target {target!r}; expected one of {', '.join(KINDS)}.")
    previous, _forced = _forced, target
    try:
        yield
    finally:
        _forced = previous
