"""Which TensorFlow build is installed: the plain wheel or the TPU build, and what each cannot run.

TensorFlow 2.20 comes as two builds (README, "On a Cloud TPU"):

  tensorflow       XLA for the CPU and GPUs; no TPU runtime (its library has no libtpu loader),
                   so `--tpu` cannot work with it.
  tensorflow-tpu   the TPU runtime (it loads libtpu); XLA only for the TPU: a `jit_compile`
                   function placed on the CPU fails ("could not find registered transfer manager
                   for platform Host"), so an XLA step must run on the TPU.

Read from the installed distributions, not by starting TensorFlow: a strategy and deterministic
execution must be set before TensorFlow's runtime starts (training/distribution.py).
"""

from __future__ import annotations

import functools
import importlib.metadata
from typing import Optional

TPU_INSTALL = "bash scripts/setup_tpu_env.sh (README, \"On a Cloud TPU\")"


def _version(distribution: str) -> Optional[str]:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


@functools.lru_cache(maxsize=1)
def installed() -> str:
    """"tensorflow-tpu" when the TPU build is installed (and the plain wheel is not: both write
    the same `tensorflow` package, and the plain wheel's files win once it is installed over
    the TPU build), else "tensorflow"."""
    if _version("tensorflow-tpu") is not None and _version("tensorflow") is None:
        return "tensorflow-tpu"
    return "tensorflow"


def is_tpu_build() -> bool:
    return installed() == "tensorflow-tpu"


def tpu_runtime_missing() -> Optional[str]:
    """Why this TensorFlow cannot drive a TPU (one sentence), or None when it can."""
    if is_tpu_build():
        return None
    version = _version("tensorflow") or "?"
    return (f"this TensorFlow is the plain `tensorflow` {version} wheel, which has no TPU "
            f"runtime; on a Cloud TPU VM install TensorFlow's TPU build: {TPU_INSTALL}")


def xla_on_cpu_missing() -> Optional[str]:
    """Why this TensorFlow cannot compile an XLA program for the CPU (one sentence), or None
    when it can."""
    if not is_tpu_build():
        return None
    return (f"this TensorFlow is the TPU build (tensorflow-tpu {_version('tensorflow-tpu')}), "
            "which compiles XLA programs only for the TPU, not for the CPU")
