"""How one step is traced: the plan handed down from where the step is traced to every layer.

A layer that traces a different, numerically equivalent program per kind of device (the forms
in layers/kernels/) reads the plan, never a global: the caller that traces the step (the
trainer, a step export, a test) builds one `StepPlan` and passes it down the model's calls; a
call without one (eager use, inference, Keras' `fit`) gets `StepPlan.for_this_machine()`.
Forcing `device` traces that device's program on any machine. The plan holds values only.

The plan decides each piece's form for the device traced for (its properties), the
optimizer's included; what depends on the distribution strategy is decided where that is
known: the compile scope (training/trainer.py: the whole step as one XLA computation with
--jit_compile, one replica, not under TPUStrategy) and whether the optimizer takes the
grouped form (training/step.py: one replica, not under TPUStrategy).

Run-time values (`always_true`, `zero`, `int_zero`): TensorFlow folds an op whose inputs are
all constants into a literal, and XLA folds what it can prove, so a table computed from
constants (the position sinusoids, an [L, K] index pattern) would be a constant of its full
size, read at every step; an input derived from a run-time tensor through arithmetic no
simplifier sees through keeps the computation in the program.
"""

from __future__ import annotations

import dataclasses
import importlib.util
from typing import Optional

import tensorflow as tf

from xlnet_tf2.config import (ATTENTION_IMPLEMENTATIONS, DEVICES, GPU_GENERATIONS,
                              POSITION_SCORE_FORMS, TPU_GENERATIONS)
from xlnet_tf2.layers import this_machine


# eq=False: compared and hashed by identity (its tensors have no truth value while traced).
@dataclasses.dataclass(frozen=True, eq=False)
class DropoutKeys:
    """The keys of one traced training (micro-)step's dropout draws (layers/dropout.py): the
    run's `seed` (uint32 as an int), `shared_k1` uint32 [] (the step) and `example_k1` uint32
    [b] (step * examples_per_step + each row's place) or None. Built once per trace (`of`)."""

    seed: int
    shared_k1: tf.Tensor
    example_k1: Optional[tf.Tensor] = None

    @classmethod
    def of(cls, seed: int, step: tf.Tensor, example_ids: Optional[tf.Tensor] = None,
           examples_per_step: int = 1) -> "DropoutKeys":
        """The keys of training step `step` (int, any integer dtype) for rows `example_ids`
        int [b] (None: one key for every row)."""
        step = tf.cast(tf.math.floormod(tf.cast(step, tf.int64), 2 ** 32), tf.uint32)
        example_k1 = None
        if example_ids is not None:
            example_k1 = (step * tf.constant(examples_per_step % 2 ** 32, tf.uint32)
                          + tf.cast(example_ids, tf.uint32))                # [b]
        return cls(int(seed) % 2 ** 32, step, example_k1)


@dataclasses.dataclass(frozen=True)
class StepPlan:
    """What a traced step is traced for: `device` ("cpu", "gpu", "tpu"); `attention`, one of
    config.ATTENTION_IMPLEMENTATIONS ("auto" picks per call: layers/kernels/attention_choice.py);
    `position_scores`, one of config.POSITION_SCORE_FORMS; `dropout_keys`, this trace's
    (`keyed_plan`, per traced training step), or None (each Dropout's own seed generator); the
    generation the Triton kernels are lowered for (`gpu_generation`: "sm_90" H100/H200, "sm_80"
    A100) and the Pallas kernels written for (`tpu_generation`, TPU_GENERATIONS)."""

    device: str = "cpu"
    attention: str = "auto"
    position_scores: str = "auto"
    dropout_keys: Optional[DropoutKeys] = None
    gpu_generation: str = "sm_90"
    tpu_generation: str = "v5e"

    def __post_init__(self):
        for name, value, allowed in (
                ("device", self.device, DEVICES),
                ("attention implementation", self.attention, ATTENTION_IMPLEMENTATIONS),
                ("position-score form", self.position_scores, POSITION_SCORE_FORMS),
                ("GPU generation", self.gpu_generation, GPU_GENERATIONS),
                ("TPU generation", self.tpu_generation, TPU_GENERATIONS)):
            if value not in allowed:
                where = " to trace a step for" if name == "device" else ""
                raise ValueError(f"Unknown {name} {value!r}{where}; expected one of "
                                 f"{', '.join(allowed)}.")

    @classmethod
    def for_this_machine(cls, **settings) -> "StepPlan":
        """The plan of a call given none: this machine's device (asked when the call is traced:
        a TPU system initialized later changes the answer; a TPU's generation unless
        `settings` names it) with `settings` (attention=..., position_scores=...)."""
        device = this_machine.device()
        if device == "tpu":
            settings.setdefault("tpu_generation", this_machine.tpu_generation())
        return cls(device=device, **settings)

    def on(self, device: str, tpu_generation: Optional[str] = None) -> "StepPlan":
        """The same plan traced for `device` (and, given, for that TPU generation)."""
        changes = {} if tpu_generation is None else {"tpu_generation": tpu_generation}
        return dataclasses.replace(self, device=device, **changes)

    def with_dropout_keys(self, keys: Optional[DropoutKeys]) -> "StepPlan":
        return dataclasses.replace(self, dropout_keys=keys)

    # ---------------------------------------------------------------- the device switches
    @property
    def kernel_attention(self) -> bool:
        """The attention op may be another than the reference, which
        layers/kernels/attention_choice.py picks per call (or refuses, forced): a GPU's or a
        TPU's step under "auto", or an implementation forced. False: the reference path."""
        return self.attention != "reference" and (self.attention != "auto"
                                                   or self.device != "cpu")

    @property
    def pallas_kernels(self) -> bool:
        """The attention may be the Pallas kernels: a TPU's step, auto or pallas, JAX installed
        (each call's operands still checked)."""
        return (self.device == "tpu" and self.attention in ("auto", "pallas")
                and importlib.util.find_spec("jax") is not None)

    @property
    def one_attention_for_both_streams(self) -> bool:
        """Both streams as one attention of L + P query rows (one score product, one softmax,
        nothing to concatenate): on a GPU, and on a TPU with the Pallas kernels (which take
        both streams in one call). A CPU's fused loops do not need the stacked copies, and a
        TPU's compiler makes every slice of a stacked score-sized tensor a pass of its own."""
        return self.device == "gpu" or self.pallas_kernels

    @property
    def content_window_read(self) -> bool:
        """The content rows' shift as the query stream's window read (GPU; XLA fuses it)."""
        return self.device == "gpu"

    @property
    def coordinate_gather(self) -> bool:
        """The query stream's shift as `tf.gather(batch_dims=3)` (CPU: XLA's CPU fusion of the
        window read recomputes the incoming gradient's elementwise chain per read element)."""
        return self.device == "cpu"

    @property
    def stores_dropout_masks(self) -> bool:
        """A `store_mask` Dropout keeps its mask behind a conditional, computed once (CPU)."""
        return self.device == "cpu"

    @property
    def packs_dropout_masks(self) -> bool:
        """A `store_mask` Dropout's mask bit-packed (GPU, whose compiler stores it anyway)."""
        return self.device == "gpu"

    @property
    def angle_position_scores(self) -> bool:
        """The position scores as a product with an angle table, without the rel-shift
        (kernels/angle_scores.py): on a TPU without the Pallas kernels (which shift in VMEM),
        whose compiler makes the shift's reshapes and slices passes of their own; or forced.
        The model keeps the shift where the table is not exact (clamp_len, dropout on the
        position embedding)."""
        if self.position_scores == "auto":
            return self.device == "tpu" and not self.pallas_kernels
        return self.position_scores == "angles"

    @property
    def grouped_optimizer(self) -> bool:
        """The clipping norm and the AdamW update over groups of gradients, fused into a few
        kernels (accelerators; training/step.py takes it with one replica, not under
        TPUStrategy); one variable at a time on a CPU."""
        return self.device != "cpu"


def plan_or_default(plan: Optional[StepPlan]) -> StepPlan:
    """`plan`, or this machine's plan for a call given none."""
    return plan if plan is not None else StepPlan.for_this_machine()


def keyed_plan(seed: int, step: tf.Tensor, example_ids: Optional[tf.Tensor] = None,
               examples_per_step: int = 1, plan: Optional[StepPlan] = None) -> StepPlan:
    """`plan` (default: this machine's) with one traced training step's `DropoutKeys.of`."""
    return plan_or_default(plan).with_dropout_keys(
        DropoutKeys.of(seed, step, example_ids, examples_per_step))


# ---------------------------------------------------------------------------- run-time values
def always_true(x: tf.Tensor) -> tf.Tensor:
    """bool scalar, true for every value of `x` (an integer tensor of any shape, possibly
    empty, that is not a constant), computed at run time from its largest element u:
    u + 1 != u in uint32 arithmetic (wrapping), which no simplifier folds."""
    if x.dtype != tf.uint32:
        x = tf.bitcast(tf.cast(x, tf.int32), tf.uint32)
    largest = tf.reduce_max(x)
    return tf.not_equal(largest + tf.constant(1, tf.uint32), largest)


def zero(x: tf.Tensor) -> tf.Tensor:
    """float32 scalar 0.0 (positive zero), computed at run time from `x` (see `always_true`)."""
    return 1.0 - tf.cast(always_true(x), tf.float32)


def int_zero(x: tf.Tensor) -> tf.Tensor:
    """int32 scalar 0, computed at run time from `x` (see `always_true`): added to a
    `tf.range`, it keeps index patterns built from the range ([L, K] masks) in the program."""
    return 1 - tf.cast(always_true(x), tf.int32)
