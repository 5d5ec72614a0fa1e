#!/usr/bin/env bash
# The install on a Cloud TPU VM: a virtual environment with TensorFlow's TPU build and the package.
#   bash scripts/setup_tpu_env.sh                        # makes (or reuses) .venv-tpu
#   VENV=DIR bash scripts/setup_tpu_env.sh               # another folder
#   EXTRA=test,reference bash scripts/setup_tpu_env.sh   # + the test tools (CI's TPU-build leg)
# What it installs (requirements-tpu.txt says why each pin):
#   1. requirements-tpu.txt: tensorflow-tpu 2.20.0 (the last TensorFlow built for TPUs: the plain
#      `tensorflow` wheel has no TPU runtime), libtpu 0.0.30 (the newest libtpu that build imports
#      with and that a JAX release pairs with), the `tpu` extra's JAX 0.8.1, the rest of the
#      runtime set;
#   2. tensorflow-text 2.20.1 without its dependencies: it requires `tensorflow`, which would
#      install the plain wheel over the TPU build (both write the same `tensorflow` package);
#   3. the package itself (editable, with its console scripts), without dependencies for the
#      same reason: its `tensorflow` requirement is met by tensorflow-tpu, which pip cannot see.
# Off a TPU VM (CI), `import tensorflow` under this build waits minutes for the TPU metadata
# server unless TPU_SKIP_MDS_QUERY=1 TPU_WORKER_HOSTNAMES=localhost are set; on a TPU VM leave
# them unset.
set -euo pipefail
BUILD=tpu exec bash "$(dirname "$0")/setup_env.sh"
