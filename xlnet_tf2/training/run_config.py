"""The typed, strict configuration of one pretraining run (the CLI flags, validated)."""

from __future__ import annotations

import dataclasses
import json
from typing import Optional, Tuple

PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16")


class RunConfigError(ValueError):
    """A run setting is invalid; the message names the flag and what to do."""


@dataclasses.dataclass(frozen=True)
class PretrainConfig:
    """Settings of a pretraining run. Defaults follow the paper's pretraining setup where that
    makes sense (XLNET_REFERENCE.md §5); see experiments/run_pretrain.py for each flag's help."""

    model_dir: str
    data_dirs: Tuple[str, ...]
    model_config: str = "base"
    train_batch_size: int = 8192
    train_steps: int = 500_000
    steps_per_loop: int = 1000
    learning_rate: float = 4e-4
    warmup_steps: int = 40_000
    weight_decay: float = 0.01
    adam_epsilon: float = 1e-6
    adam_bias_correction: bool = False
    clip_norm: float = 1.0
    mem_len: int = 384
    precision: str = "float32"
    jit_compile: bool = False
    save_steps: int = 10_000
    keep_checkpoints: int = 5
    log_steps: int = 100
    init_checkpoint: Optional[str] = None
    seed: int = 0
    dropout: Optional[float] = None
    dropatt: Optional[float] = None
    peak_tflops: Optional[float] = None
    record_steps: bool = False

    def __post_init__(self):
        def fail(msg):
            raise RunConfigError(msg)

        if not self.model_dir:
            fail("--model_dir is required: the directory for checkpoints and TensorBoard logs.")
        if not self.data_dirs:
            fail("--data_dir is required: one or more directories written by "
                 "data_prep/create_tfrecords.py.")
        for name in ("train_batch_size", "train_steps", "steps_per_loop", "save_steps",
                     "keep_checkpoints", "log_steps"):
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                fail(f"--{name} must be a positive integer, got {value!r}.")
        for name in ("warmup_steps", "mem_len", "seed"):
            if getattr(self, name) < 0:
                fail(f"--{name} must be >= 0, got {getattr(self, name)!r}.")
        if not self.learning_rate > 0:
            fail(f"--learning_rate must be positive, got {self.learning_rate}.")
        if self.weight_decay < 0:
            fail(f"--weight_decay must be >= 0, got {self.weight_decay}.")
        if not self.adam_epsilon > 0:
            fail(f"--adam_epsilon must be positive, got {self.adam_epsilon}.")
        if not self.clip_norm > 0:
            fail(f"--clip_norm must be positive (the original clips to 1.0), got {self.clip_norm}.")
        if self.precision not in PRECISIONS:
            fail(f"--precision must be one of {PRECISIONS}, got {self.precision!r}.")
        if self.peak_tflops is not None and not self.peak_tflops > 0:
            fail(f"--peak_tflops must be positive, got {self.peak_tflops}.")

    def to_json_string(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True) + "\n"

    def replace(self, **changes) -> "PretrainConfig":
        return dataclasses.replace(self, **changes)
