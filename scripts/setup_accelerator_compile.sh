#!/usr/bin/env bash
# Creates the venvs benchmarks/accelerator_compile.py compiles an exported step in, for an
# accelerator this machine does not have (no GPU or TPU needed; neither is the project's .venv,
# nor CI: the command runs its compile in these).
#   gpu: .venv-aot-gpu with "jax[cuda12]==0.10.2" (JAX's CUDA plugin, ptxas, the nvidia-*
#        wheels: about 5.5 GB) for --target=h100; 0.10.2 is the newest JAX with a CUDA 12
#        plugin here.
#   tpu: .venv-aot-tpu with the libtpu a TPU user's TensorFlow loads, 0.0.30, and the JAX that
#        pairs with it, "jax[tpu]==0.8.1" (the `tpu` extra's pins; about 1.3 GB) for
#        --target=tpu_v5e, tpu_v4, tpu_v5p: the compiler that compiles the step on a Cloud TPU
#        with tensorflow-tpu 2.20 (README, "On a Cloud TPU").
#   tpu-jax0.10.2: .venv-aot-tpu-jax0.10.2 with "jax[tpu]==0.10.2" (libtpu 0.0.42.1), a newer
#        libtpu to compare with (`accelerator_compile.py --venv=.venv-aot-tpu-jax0.10.2`); a
#        TPU's TensorFlow cannot load it (from libtpu 0.0.32.1 on, `import tensorflow` aborts).
# Usage: bash scripts/setup_accelerator_compile.sh [gpu|tpu|tpu-jax0.10.2|all]  (default: all:
#        gpu and tpu)
# Elsewhere: XLNET_TF2_AOT_GPU_VENV / XLNET_TF2_AOT_TPU_VENV / XLNET_TF2_AOT_TPU_NEWER_VENV name
# other folders (the command reads the first two; give the third as --venv); PYTHON picks the
# interpreter the venvs are made from (python3). A venv that exists is reused; pip only adds
# what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
WHICH="${1:-all}"
PYTHON="${PYTHON:-python3}"
GPU_VENV="${XLNET_TF2_AOT_GPU_VENV:-.venv-aot-gpu}"
TPU_VENV="${XLNET_TF2_AOT_TPU_VENV:-.venv-aot-tpu}"
TPU_NEWER_VENV="${XLNET_TF2_AOT_TPU_NEWER_VENV:-.venv-aot-tpu-jax0.10.2}"

make_venv() {  # make_venv DIR REQUIREMENT...
  local dir="$1"
  shift
  if [ ! -x "$dir/bin/python" ]; then
    echo "[setup_accelerator_compile] creating $dir"
    "$PYTHON" -m venv "$dir"
  fi
  echo "[setup_accelerator_compile] installing $* into $dir"
  "$dir/bin/python" -m pip install --quiet --upgrade pip
  "$dir/bin/python" -m pip install --quiet "$@"
  echo "[setup_accelerator_compile] $dir: $("$dir/bin/python" -c 'import jax, jaxlib
from importlib import metadata
try:
    extra = ", libtpu " + metadata.version("libtpu")
except metadata.PackageNotFoundError:
    extra = ""
print("jax", jax.__version__, "jaxlib", jaxlib.__version__ + extra)')"
}

case "$WHICH" in
  gpu|tpu|tpu-jax0.10.2|all) ;;
  *) echo "usage: $0 [gpu|tpu|tpu-jax0.10.2|all] (got '$WHICH')" >&2; exit 2 ;;
esac
if [ "$WHICH" = tpu ] || [ "$WHICH" = all ]; then
  make_venv "$TPU_VENV" "jax[tpu]==0.8.1" "jax==0.8.1" "jaxlib==0.8.1" "libtpu==0.0.30"
fi
if [ "$WHICH" = tpu-jax0.10.2 ]; then
  make_venv "$TPU_NEWER_VENV" "jax[tpu]==0.10.2" "libtpu==0.0.42.1"
fi
if [ "$WHICH" = gpu ] || [ "$WHICH" = all ]; then
  make_venv "$GPU_VENV" "jax[cuda12]==0.10.2"
fi
