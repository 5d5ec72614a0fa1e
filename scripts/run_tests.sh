#!/usr/bin/env bash
# Sets up .venv (runtime + reference implementation) and runs the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
EXTRA=reference bash scripts/setup_env.sh
export TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-2}"
exec .venv/bin/python -m pytest -q "$@"
