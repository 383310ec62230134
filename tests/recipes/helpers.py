"""Run a recipe (recipes/*.sh) as CI does and check what it prints: the table's labels, one
PASS/FAIL line per claim of the paper, and the notice of a shrunk run."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

RECIPES = Path(__file__).resolve().parents[2] / "recipes"

#: a shrunk recipe takes 10–60 s alone; the bound only catches a hang on a busy machine
SHRUNK_TIMEOUT_S = 900
#: a full-size synthetic recipe takes minutes alone (tests marked slow)
FULL_TIMEOUT_S = 3600
#: one OpenMP/BLAS thread per child: on a busy 2-core machine spinning threads made a 1 s
#: fit-pooling trial take 30 s
ONE_THREAD = {"OMP_NUM_THREADS": "1"}


def recipe_env(**extra) -> dict:
    """The environment of a recipe: ``reid`` of this interpreter first on PATH, wide tables."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.update(COLUMNS="160", **extra)
    return env


def run_recipe(script: str, *args, timeout: float = SHRUNK_TIMEOUT_S, **env) -> str:
    """Run ``bash recipes/SCRIPT ARGS`` with ``env`` added; assert it succeeds; its stdout."""
    proc = subprocess.run(["bash", str(RECIPES / script), *map(str, args)],
                          capture_output=True, text=True, timeout=timeout,
                          env=recipe_env(**env))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def claim_verdicts(out: str, claims) -> dict[str, str]:
    """Claim → ``PASS`` | ``FAIL`` as printed in ``out``, for each (claim, ...) of ``claims``
    (reidcli.paper.compare's CDPCF_CLAIMS / DART3_CLAIMS); asserts every claim is printed."""
    verdicts = {}
    for claim, *_ in claims:
        found = re.search(rf"^(PASS|FAIL)  {re.escape(claim)}[^:]*: [\d.]+ vs [\d.]+$", out,
                          flags=re.M)
        assert found, (claim, out[-2000:])
        verdicts[claim] = found.group(1)
    return verdicts


def shrunk_notice(out: str) -> str:
    """The one ``SHRUNK run (...)`` line of ``out`` (asserts there is exactly one)."""
    lines = [line for line in out.splitlines() if line.startswith("SHRUNK run (")]
    assert len(lines) == 1, out[-2000:]
    assert "departs from the paper's protocol" in lines[0]
    return lines[0]
