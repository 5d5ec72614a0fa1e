"""The sections every run configuration shares; the command-line flags are derived from them.

    LoopConfig          steps, batch, accumulation, checkpoints, logging, precision, seed
    OptimizerConfig     AdamW and its schedule, clipping
    DropoutConfig       the backbone's dropout (a run-time setting of each stage)
    DistributionConfig  strategy and TPU

Each task's configuration tree holds them as its `loop`, `optimizer`, `model` and
`distribution` sections, with the task's own defaults where they differ
(`config_flags.with_defaults`):
pretraining's in xlnet_tf2/tasks/pretraining_config.py, fine-tuning's in
xlnet_tf2/tasks/finetune_config.py. Every leaf is one flag of the same name, with its help
text and its resume policy (xlnet_tf2/config_flags.py): a checkpointed run cannot resume under
another value of a "fixed" setting.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

from xlnet_tf2 import tensorflow_build
from xlnet_tf2.config import ATTENTION_IMPLEMENTATIONS, POSITION_SCORE_FORMS
from xlnet_tf2.config_flags import (RunConfigError, check_declared, check_non_negative,
                                    check_positive, setting)

PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16")
STRATEGIES = ("auto", "tpu", "multi_worker", "mirrored", "one_device")
# --jit_compile unset: XLA for runs of at least this many steps. A compiled step is faster on
# a CPU (and what accelerators run), but the compile is paid once at the start, and for the
# tiny models of tests and smoke runs it costs more than a few hundred steps save
# (BENCHMARKS.md, "XLA by default"). Every test run is shorter; every command's default longer.
JIT_MIN_STEPS = 300


@dataclasses.dataclass(frozen=True)
class DistributionConfig:
    """Where the run executes."""

    strategy: str = setting(
        "auto", "The tf.distribute strategy: 'auto' picks tpu when --tpu is given, multi_worker "
        "when TF_CONFIG lists several workers, mirrored with several GPUs and one_device "
        "otherwise.", choices=STRATEGIES, resume="free")
    tpu: Optional[str] = setting(
        None, "Name or grpc:// address of the Cloud TPU to train on ('local' on a TPU VM); the "
        "run resolves it, connects, initializes the TPU system and uses TPUStrategy, and fails "
        "within --tpu_timeout seconds if nothing answers.", resume="free")
    tpu_timeout: int = setting(
        60, "Seconds to wait for the TPU named by --tpu before giving up with an error.",
        resume="free")

    def __post_init__(self):
        check_declared(self)
        check_positive(self, "tpu_timeout")


@dataclasses.dataclass(frozen=True)
class LoopConfig:
    """The training loop: steps, batch, checkpoints, logging, numerics."""

    model_dir: str = setting(
        None, "Directory for checkpoints, TensorBoard logs, the model's xlnet_config.json, "
        "spiece.model and run_config.json; if it already holds checkpoints the run resumes "
        "from them (with the settings it was started with: a changed setting that the "
        "checkpoint depends on is an error naming the flag).", required=True, resume="free")
    train_steps: int = setting(
        500_000, "Total number of optimizer steps of the run, counted from the start of "
        "training (not from the resume point); the learning rate decays to zero at this step.",
        resume="warn")
    train_batch_size: int = setting(
        8192, "Global batch size of one optimizer step, summed over all replicas and "
        "accumulation micro-batches (the paper uses 8192); it must divide evenly over the "
        "replicas and --grad_accum_steps, into even halves with bi_data.")
    grad_accum_steps: int = setting(
        1, "Micro-batches per optimizer step: each replica runs --train_batch_size / "
        "(replicas * grad_accum_steps) examples at a time and sums the gradients before one "
        "update, so a large batch fits on few devices (the result equals the large batch). "
        "Each micro-batch slot carries its own Transformer-XL memory.")
    steps_per_loop: int = setting(
        1000, "Number of training steps run inside one tf.function call between returns to "
        "Python; larger values cut host overhead, especially on TPU.", resume="free")
    precision: str = setting(
        "float32", "Numeric precision: float32, mixed_bfloat16 (TPU, recent GPUs), or "
        "mixed_float16 with dynamic loss scaling (older GPUs).", choices=PRECISIONS)
    jit_compile: Optional[bool] = setting(
        None, "Compile each step with XLA: forward, backward and, with one replica, the "
        "optimizer update (on TPU everything is compiled regardless). Unset: on for runs of "
        f"at least {JIT_MIN_STEPS} --train_steps, where the one-off compile at the first step "
        "has paid for itself (a compiled step of a small model takes about half the time on a "
        "CPU), off for shorter runs; pass --nojit_compile for a task whose loss uses ops XLA "
        "cannot compile (tf.print, tf.py_function, string ops).", resume="free")
    attention_implementation: str = setting(
        "auto", "How the attention op is computed: triton is the project's flash Triton kernels "
        "(the gpu extra), only in an XLA program (--jit_compile) traced for a GPU, with "
        "dropout; cudnn is cuDNN's flash attention, only in "
        "an XLA program (--jit_compile) on a GPU in bfloat16 or float16 and without attention "
        "dropout (--dropatt 0, or inference); reference is TensorFlow ops, everywhere; auto "
        "takes triton, else cudnn, where it can run and reference elsewhere (docs/PRETRAINING.md, "
        "\"Attention on GPUs\").", choices=ATTENTION_IMPLEMENTATIONS, resume="free")
    position_scores: str = setting(
        "auto", "How the attention's position scores are computed: shift is the original's "
        "product with every encoded distance and its rel-shift; angles is the same scores as a "
        "product with a sine/cosine table of the key positions, without the shift (exact for "
        "the sinusoid embedding, so the shift stays with --clamp_len or dropout on the "
        "position embedding, i.e. training with --dropout > 0); auto takes angles in a step "
        "compiled for a TPU and shift elsewhere (docs/PRETRAINING.md, \"Position scores on "
        "TPUs\").", choices=POSITION_SCORE_FORMS, resume="free")
    seed: int = setting(
        0, "Seed of the weight initialization, dropout and online permutations; the same "
        "seed, data and flags give the same run, across restarts and topologies (bit for bit "
        "with --deterministic).", resume="warn")
    deterministic: bool = setting(
        False, "Run TensorFlow ops in a reproducible order (one inter-op thread, "
        "tf.config.experimental.enable_op_determinism), so a run and every resume of it give "
        "bit-identical losses and weights. Without it, results agree to float rounding "
        "(about 1e-6). One inter-op thread can slow a step down without --jit_compile "
        "(BENCHMARKS.md); deterministic GPU kernels can be slower.", resume="free")
    save_steps: int = setting(
        10_000, "Save a checkpoint (weights, optimizer, step, memory, data position) every "
        "this many steps, and always at the end.", resume="free")
    keep_checkpoints: int = setting(
        5, "Number of most recent checkpoints to keep in --model_dir.", resume="free")
    log_steps: int = setting(
        100, "Write TensorBoard scalars and a console line (loss, learning rate, gradient "
        "norm, tokens/s, step time, MFU, ETA) every this many steps.", resume="free")
    peak_tflops: Optional[float] = setting(
        None, "Peak TFLOP/s of one device for the MFU figure; unset uses the data sheet of "
        "known GPUs/TPUs, or the CPU's cached measured peak.", resume="free")
    record_steps: bool = setting(
        False, "Append every step's loss and the ids (stream, chunk, direction, pass) of the "
        "examples it consumed to model_dir/steps.jsonl, to audit exactly what was trained on.",
        resume="free")

    def __post_init__(self):
        check_declared(self)
        check_positive(self, "train_steps", "train_batch_size", "grad_accum_steps",
                       "steps_per_loop", "save_steps", "keep_checkpoints", "log_steps")
        check_non_negative(self, "seed")
        if self.train_batch_size % self.grad_accum_steps:
            raise RunConfigError(
                f"--train_batch_size={self.train_batch_size} must be divisible by "
                f"--grad_accum_steps={self.grad_accum_steps}.")
        if self.peak_tflops is not None and not self.peak_tflops > 0:
            raise RunConfigError(f"--peak_tflops must be positive, got {self.peak_tflops}.")
        if self.jit_compile is None:  # the default: whichever is faster for this run's length
            # (the TPU build has no XLA for the CPU; on a TPU everything is compiled anyway)
            object.__setattr__(self, "jit_compile", self.train_steps >= JIT_MIN_STEPS
                               and tensorflow_build.xla_on_cpu_missing() is None)


@dataclasses.dataclass(frozen=True)
class OptimizerConfig:
    """AdamW (xlnet_tf2/training/step.py, built by optimization.py), its schedule and gradient
    clipping."""

    learning_rate: float = setting(
        4e-4, "Peak learning rate, reached at the end of warmup and then decayed linearly to "
        "zero at --train_steps (the paper uses 4e-4 for pretraining).", resume="warn")
    warmup_steps: int = setting(
        40_000, "Number of steps of linear learning-rate warmup from zero (the paper uses "
        "40000 for pretraining).", resume="warn")
    weight_decay: float = setting(
        0.01, "Decoupled weight decay rate; LayerNorm parameters and dense and output biases "
        "are exempt (the paper uses 0.01).", resume="warn")
    adam_epsilon: float = setting(
        1e-6, "Epsilon added to the square root of Adam's second moment (the paper uses "
        "1e-6).", resume="warn")
    adam_bias_correction: Optional[bool] = setting(
        None, "Adam's bias correction. Default: on exactly when --weight_decay is 0, as the "
        "original's get_train_op (its AdamWeightDecayOptimizer, used with weight decay, has "
        "none; tf.train.AdamOptimizer, used at weight decay 0, has it); true or false "
        "overrides the rule. The choice is logged at the start of the run.", resume="warn")
    clip_norm: float = setting(
        1.0, "Clip the gradient, summed over all replicas, to this global norm (the original "
        "uses 1.0).", resume="warn")

    def __post_init__(self):
        check_declared(self)
        check_non_negative(self, "warmup_steps")
        if not self.learning_rate > 0:
            raise RunConfigError(f"--learning_rate must be positive, got {self.learning_rate}.")
        if self.weight_decay < 0:
            raise RunConfigError(f"--weight_decay must be >= 0, got {self.weight_decay}.")
        if not self.adam_epsilon > 0:
            raise RunConfigError(f"--adam_epsilon must be positive, got {self.adam_epsilon}.")
        if not self.clip_norm > 0:
            raise RunConfigError(f"--clip_norm must be positive (the original clips to 1.0), "
                                 f"got {self.clip_norm}.")


@dataclasses.dataclass(frozen=True)
class DropoutConfig:
    """Dropout of the backbone (a run-time setting of each stage, never of the model)."""

    dropout: float = setting(
        0.1, "Dropout rate on the embeddings, attention output and feed-forward layers (the "
        "paper uses 0.1).", resume="warn")
    dropatt: float = setting(
        0.1, "Dropout rate on the attention probabilities (the paper uses 0.1).",
        resume="warn")

    def __post_init__(self):
        check_declared(self)
        for name in ("dropout", "dropatt"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
                raise RunConfigError(f"--{name} must be in [0, 1), got {value!r}.")
