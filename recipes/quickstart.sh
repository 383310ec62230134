#!/usr/bin/env bash
# Fresh machine → reidcli installed in ./.venv → `reid demo` on the synthetic dataset.
# Usage: bash recipes/quickstart.sh [demo options, e.g. --preset tiny]
# TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu installs PyTorch's CPU-only torch and
# torchvision from that index first (PyTorch's documented CPU route, ~0.5 GB instead of the
# ~6 GB CUDA build); without it pip takes the newest torch of the default index.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/reid ]; then
    "$PY" -m venv .venv
    .venv/bin/python -m pip install -q --upgrade "setuptools>=64" wheel
    if [ -n "${TORCH_INDEX_URL:-}" ]; then
        .venv/bin/python -m pip install -q torch torchvision --index-url "$TORCH_INDEX_URL"
    fi
    .venv/bin/python -m pip install -q -e '.[dev]'
fi
.venv/bin/reid demo "$@"
