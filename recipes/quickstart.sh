#!/usr/bin/env bash
# Fresh machine → reidcli installed → `reid demo` on the synthetic dataset.
# Usage: bash recipes/quickstart.sh [demo options, e.g. --preset tiny]
# The environment is the one `bash .ci/run` uses (.ci/venv: cached under
# $REIDCLI_CI_CACHE or ~/.cache/reidcli-ci, keyed by the declared dependencies), so the two
# set-up commands install torch once; ./.venv is a link to it, and this checkout is installed
# into it in editable mode. A ./.venv that is a real folder (an earlier quickstart) is used as
# it is. Afterwards `source .venv/bin/activate` puts `reid` on the shell's PATH.
# TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu installs PyTorch's CPU-only torch and
# torchvision from that index first (PyTorch's documented CPU route, ~0.5 GB instead of the
# ~6 GB CUDA build) when the environment is created; without it pip takes the newest torch of
# the default index.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -d .venv ] && [ ! -L .venv ]; then
    if [ ! -x .venv/bin/reid ]; then
        .venv/bin/python -m pip install -q -e '.[dev]'
    fi
else
    venv=$(bash .ci/venv)
    ln -sfn "$venv" .venv
    # this checkout, editable (`bash .ci/run` reinstalls its own clone before its tests)
    .venv/bin/python -m pip install -q --no-deps --no-build-isolation -e .
fi
echo "quickstart: reid is in .venv ($(readlink -f .venv)); run \`source .venv/bin/activate\`" \
     "to use it from this shell" >&2
.venv/bin/reid demo "$@"
