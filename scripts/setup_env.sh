#!/usr/bin/env bash
# Creates (or reuses) a virtual environment and installs everything into it: the pinned runtime
# set, then the package itself (editable, with its console scripts: xlnet-pretrain,
# xlnet-create-tfrecords, ...).
# Usage: source-free; other scripts call it. Settings (environment variables):
#   EXTRA  a comma-separated list of pyproject.toml's extras that have a pinned requirements
#          file: `test` (requirements-test.txt: pytest and the other test tools), `reference`
#          (requirements-reference.txt: the PyTorch reference); scripts/run_tests.sh uses
#          EXTRA=test,reference.
#   BUILD  which TensorFlow: `plain` (default: requirements.txt, the `tensorflow` wheel, into
#          .venv) or `tpu` (requirements-tpu.txt, TensorFlow's TPU build, into .venv-tpu:
#          scripts/setup_tpu_env.sh, where the steps are explained).
#   VENV   the environment's folder (default: .venv, or .venv-tpu for BUILD=tpu).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
BUILD="${BUILD:-plain}"
case "$BUILD" in
  plain) VENV="${VENV:-.venv}"; BASE=requirements.txt ;;
  tpu) VENV="${VENV:-.venv-tpu}"; BASE=requirements-tpu.txt ;;
  *) echo "[setup] BUILD=$BUILD: plain or tpu" >&2; exit 2 ;;
esac
if [ ! -x "$VENV/bin/python" ]; then
  echo "[setup] creating virtual environment in $VENV"
  "$PYTHON" -m venv "$VENV"
fi
REQUIREMENTS=(-r "$BASE")
EXTRAS="${EXTRA:-}"
for extra in ${EXTRAS//,/ }; do
  if [ ! -f "requirements-$extra.txt" ]; then
    echo "[setup] EXTRA=$EXTRAS: no requirements-$extra.txt (extras: test, reference)" >&2
    exit 2
  fi
  REQUIREMENTS+=(-r "requirements-$extra.txt")
done
"$VENV/bin/python" -m pip install --quiet --upgrade pip
echo "[setup] installing $BASE${EXTRAS:+ and the extras $EXTRAS} into $VENV (a few minutes the first time)"
"$VENV/bin/python" -m pip install --quiet "${REQUIREMENTS[@]}"
# The editable install builds in the checkout (xlnet_tf2.egg-info): one venv at a time
# (scripts/run_tests.sh makes two at once).
exec 9>"${TMPDIR:-/tmp}/xlnet-tf2-editable-install.lock"
if [ "$BUILD" = plain ]; then
  # pip checks the pins against the ranges pyproject.toml declares.
  flock 9
  "$VENV/bin/python" -m pip install --quiet -e ".${EXTRAS:+[$EXTRAS]}"
  exit 0
fi
# The TPU build: tensorflow-text and the package without their dependencies, which name the
# plain `tensorflow` wheel (pip cannot see that tensorflow-tpu provides it).
"$VENV/bin/python" -m pip install --quiet --no-deps tensorflow-text==2.20.1
flock 9
"$VENV/bin/python" -m pip install --quiet --no-deps -e .
flock -u 9
if "$VENV/bin/python" -m pip show --quiet tensorflow 2>/dev/null; then
  echo "[setup] the plain tensorflow wheel got installed into $VENV beside tensorflow-tpu;" \
       "remove $VENV and run this again" >&2
  exit 1
fi
echo "[setup] $VENV: $("$VENV/bin/python" -m pip show tensorflow-tpu libtpu jax 2>/dev/null \
  | grep -E '^(Name|Version)' | paste -sd' ')"
