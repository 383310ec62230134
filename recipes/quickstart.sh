#!/usr/bin/env bash
# Fresh machine → reidcli installed in ./.venv → `reid demo` on the synthetic dataset.
# Usage: bash recipes/quickstart.sh [demo options, e.g. --preset tiny]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/reid ]; then
    "$PY" -m venv .venv
    .venv/bin/python -m pip install -q --upgrade "setuptools>=64" wheel
    .venv/bin/python -m pip install -q -e '.[dev]'
fi
.venv/bin/reid demo "$@"
