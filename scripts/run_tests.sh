#!/usr/bin/env bash
# Sets up .venv (runtime, test tools, the reference implementation) and runs the whole test
# suite (CI). FAST=1 runs only the quick tier, `-m "not slow"`: no test that starts a Python
# process or takes more than ~20 s (the marker's rule, kept by tests/fixtures/slow_tier.py).
set -euo pipefail
cd "$(dirname "$0")/.."
EXTRA=test,reference bash scripts/setup_env.sh
export TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-2}"
# Two worker processes, each test file on one of them (module fixtures are built once): the
# suite is dominated by single-threaded tracing and subprocess start-up, so 2 CPU cores run it
# in about two thirds of the serial time.
TIER=()
if [ "${FAST:-0}" = "1" ]; then
    TIER=(-m "not slow")
fi
# --strict-skips: a test that skips for what the set-up installs (torch, triton, jax, ...)
# fails the run; the skips CI expects are listed in tests/fixtures/expected_skips.py.
# --durations=30: the 30 slowest tests, in every run's log.
exec .venv/bin/python -m pytest -q -n 2 --dist loadfile --strict-skips --durations=30 \
    ${TIER[@]+"${TIER[@]}"} "$@"
