#!/usr/bin/env bash
# Creates (or reuses) the project's virtual environment in .venv and installs everything into it:
# the pinned runtime set (requirements.txt), then the package itself (editable, with its console
# scripts: xlnet-pretrain, xlnet-create-tfrecords, ...; pip checks the pins against the ranges
# pyproject.toml declares).
# Usage: source-free; other scripts call it. EXTRA: a comma-separated list of pyproject.toml's
# extras that have a pinned requirements file: `test` (requirements-test.txt: pytest and the
# other test tools), `reference` (requirements-reference.txt: the PyTorch reference);
# scripts/run_tests.sh uses EXTRA=test,reference.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  echo "[setup] creating virtual environment in .venv"
  "$PYTHON" -m venv .venv
fi
REQUIREMENTS=(-r requirements.txt)
EXTRAS="${EXTRA:-}"
for extra in ${EXTRAS//,/ }; do
  if [ ! -f "requirements-$extra.txt" ]; then
    echo "[setup] EXTRA=$EXTRAS: no requirements-$extra.txt (extras: test, reference)" >&2
    exit 2
  fi
  REQUIREMENTS+=(-r "requirements-$extra.txt")
done
.venv/bin/python -m pip install --quiet --upgrade pip
echo "[setup] installing requirements (this takes a few minutes the first time)"
.venv/bin/python -m pip install --quiet "${REQUIREMENTS[@]}"
.venv/bin/python -m pip install --quiet -e ".${EXTRAS:+[$EXTRAS]}"
