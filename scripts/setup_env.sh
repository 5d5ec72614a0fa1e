#!/usr/bin/env bash
# Creates (or reuses) the project's virtual environment in .venv and installs everything into it.
# Usage: source-free; other scripts call it.  EXTRA=reference also installs the PyTorch reference.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  echo "[setup] creating virtual environment in .venv"
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
echo "[setup] installing requirements (this takes a few minutes the first time)"
.venv/bin/python -m pip install --quiet -r requirements.txt
if [ "${EXTRA:-}" = "reference" ]; then
  .venv/bin/python -m pip install --quiet -r requirements-reference.txt
fi
.venv/bin/python -m pip install --quiet --no-deps -e .
