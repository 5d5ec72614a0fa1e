#!/usr/bin/env bash
# The test suite. With no setting (CI: .ci/run), the whole suite, split between TensorFlow 2.20's
# two builds so each test runs once: the tests marked `xla` (they compile XLA programs on the CPU)
# or `plain_wheel` (they check the plain wheel's install) under the plain `tensorflow` wheel in
# .venv, every other test under the TPU build
# (`tensorflow-tpu` 2.20.0 with libtpu 0.0.30, in .venv-tpu made by scripts/setup_tpu_env.sh, the
# README's TPU install), which has no XLA for the CPU. Both venvs get the test tools and the
# PyTorch reference (EXTRA=test,reference).
# FAST=1 runs only the quick tier, `-m "not slow"` (no test that starts a Python process or takes
# more than ~20 s: the marker's rule, kept by tests/fixtures/slow_tier.py), all of it in .venv.
# Arguments go to pytest (a path, -k ...), in each leg.
set -euo pipefail
cd "$(dirname "$0")/.."
export TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-2}"
# Python's default: the checkout's compiled modules (xlnet_tf2, and the tests as pytest rewrites
# them) are cached in __pycache__. Where PYTHONDONTWRITEBYTECODE is set (this project's build
# machine sets it), every process compiled them again: a pytest worker's collection took
# 13.4 CPU-s against 9.9 with the cache, importing the pretraining command's modules 5.5
# against 5.0 (2026-12-05).
unset PYTHONDONTWRITEBYTECODE
if [ "${FAST:-0}" != "1" ]; then
    # Both venvs are made before any test runs, the TPU build's meanwhile (mostly downloads
    # and unpacking; its output follows .venv's), so the tests do not share the two cores with
    # pip: making .venv-tpu over a test leg took about 90 CPU-seconds from it (2026-12-06).
    setup_started=$(date +%s)
    tpu_log=$(mktemp)
    (EXTRA=test,reference bash scripts/setup_tpu_env.sh >"$tpu_log" 2>&1) &
    tpu_setup=$!
fi
EXTRA=test,reference bash scripts/setup_env.sh
if [ "${FAST:-0}" != "1" ]; then
    tpu_status=0
    wait "$tpu_setup" || tpu_status=$?
    cat "$tpu_log"
    rm -f "$tpu_log"
    if [ "$tpu_status" != 0 ]; then
        echo "[tests] making .venv-tpu failed (status $tpu_status): no test run" >&2
        exit 1
    fi
    echo "[tests] set-up (.venv and .venv-tpu) took $(( $(date +%s) - setup_started )) s"
fi
# Worker processes on two cores, each test file on one of them (module fixtures are built
# once; tests/fixtures/schedule.py hands out the longest files first). In the full suite much
# of a worker's time is spent waiting on the commands it starts (TensorFlow's TPU build alone
# waits 4 s for a TPU platform at each start off a TPU), and a third worker fills those waits:
# leg 2 took 1,155 s at 186% CPU, against 1,352 s at 164% with two workers; a fourth worker
# adds CPU, not speed (927 s at 192% against 903 s at 186%, 2026-12-06). Leg 1 waits on few
# processes (its tests compile in-process) and runs faster on two: 336 s and 610 CPU-s against
# 344 s and about 670 CPU-s with three; 325 s with its longest file, the Base-shape step,
# handed out first (2026-12-06). The quick tier starts no process, and two workers run it
# faster (407 s against 425 s; 2026-12-05).
# --strict-skips: a test that skips for what the set-up installs (torch, triton, jax, ...)
# fails the run; the skips CI expects are listed in tests/fixtures/expected_skips.py.
# --durations=30: the 30 slowest tests of each leg, in every run's log.
PYTEST=(-m pytest -q --dist loadfile --strict-skips --durations=30)
if [ "${FAST:-0}" = "1" ]; then
    exec .venv/bin/python "${PYTEST[@]}" -n 2 -m "not slow" "$@"
fi
status=0
echo "[tests] 1 of 2: the tests marked xla or plain_wheel, under the plain tensorflow 2.20 (.venv)"
.venv/bin/python "${PYTEST[@]}" -n 2 -m "xla or plain_wheel" "$@" || status=$?
echo "[tests] 2 of 2: every other test, under tensorflow-tpu 2.20 with libtpu 0.0.30 (.venv-tpu)"
# Off a TPU VM the TPU build's `import tensorflow` waits minutes for the TPU metadata server
# without these (scripts/setup_tpu_env.sh).
TPU_SKIP_MDS_QUERY=1 TPU_WORKER_HOSTNAMES=localhost \
    .venv-tpu/bin/python "${PYTEST[@]}" -n 3 -m "not xla and not plain_wheel" "$@" || status=$?
exit "$status"
