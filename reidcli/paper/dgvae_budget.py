"""Say how a DG-VAE run's training budget departs from the paper's (used by
``recipes/dgvae_*.sh`` after their tables).

``reid paper budget dgvae RUN_DIR ...`` reads each run directory's
``config.json`` and ``metrics.csv`` (written by ``reid train dgvae``) and prints one
``budget override: ...`` line per run whose schedule is not the paper's — 100, 50 and 100
epochs of ⌈max(N_vis, N_ir)/(P·K)⌉ iterations with P = K = 4 (DG-VAE paper §4.2) — then the
note on λ_ambi in stage 1, which this implementation sets to zero (the paper remarks that a
large λ_ambi is unstable in stage 1 and gives values only for stages 2 and 3).
"""
from __future__ import annotations

import json
from pathlib import Path

from reidcli.errors import InputFileError
from reidcli.paper.results import run_label
from reidcli.paper.script import budget_main

#: the paper's schedule (DG-VAE paper §4.2): epochs of stages 1, 2, 3; identities and images
#: per identity and modality in a batch
PAPER_STAGE_EPOCHS = (100, 50, 100)
PAPER_P, PAPER_K = 4, 4
PAPER_BUDGET = ("paper: 100,50,100 epochs × ⌈max(N_vis, N_ir)/(P·K)⌉ iterations/epoch with "
                "P=K=4, i.e. 1392 iterations/epoch on SYSU-MM01 and 129 on RegDB")
STAGE1_AMBI_NOTE = ("note: stage 1 applies no L_ambi (λ_ambi = 0: stage 1 trains no IAI "
                    "branch); the paper finds a large λ_ambi unstable in stage 1 and uses "
                    "λ_ambi = 0.001 in stage 2 and 0.01 in stage 3")


def _read_config(run_dir: Path) -> dict:
    path = run_dir / "config.json"
    try:
        return json.loads(path.read_text()).get("config", {})
    except (OSError, ValueError) as exc:
        raise InputFileError(f"cannot read {path} ({exc.__class__.__name__})",
                             "give a run directory written by reid train dgvae") from None


def iterations_run(run_dir: Path) -> int | None:
    """The last logged iteration of ``run_dir/metrics.csv`` (None when nothing was logged)."""
    path = run_dir / "metrics.csv"
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return None
    if len(lines) < 2:
        return None
    header = lines[0].split(",")
    if "iteration" not in header:
        return None
    return int(float(lines[-1].split(",")[header.index("iteration")]))


def budget_departures(run_dir: str | Path) -> list[str]:
    """How a run's schedule departs from the paper's: stage epochs, iterations per epoch, an
    iteration cap, a preset, P or K (empty when it follows the paper)."""
    cfg = _read_config(Path(run_dir))
    epochs = cfg.get("stage_epochs")
    parts = []
    if epochs is not None and tuple(epochs) != PAPER_STAGE_EPOCHS:
        parts.append(f"epochs {','.join(map(str, epochs))}")
    if cfg.get("iters_per_epoch") is not None:
        parts.append(f"{cfg['iters_per_epoch']} iterations/epoch")
    if cfg.get("max_iters") is not None:
        parts.append(f"stopped after {cfg['max_iters']} iterations")
    if cfg.get("preset"):
        parts.append(f"preset {cfg['preset']}")
    if (cfg.get("p"), cfg.get("k")) not in ((PAPER_P, PAPER_K), (None, None)):
        parts.append(f"P={cfg.get('p')}, K={cfg.get('k')}")
    return parts


def budget_lines(run_dirs: list[str | Path]) -> list[str]:
    """One ``budget override (runs: variant): …`` line per distinct departure (runs of one
    schedule, e.g. RegDB's ten trials, share a line); no line for a run on the paper's."""
    grouped: dict[tuple, list[str]] = {}
    for run in map(Path, run_dirs):
        parts = budget_departures(run)
        if not parts:
            continue
        variant = _read_config(run).get("variant", "dgvae")
        key = (variant, tuple(parts), iterations_run(run))
        grouped.setdefault(key, []).append(run_label(run))
    lines = []
    for (variant, parts, done), names in grouped.items():
        total = f"; {done} iterations in all" if done is not None else ""
        lines.append(f"budget override ({', '.join(names)}: {variant}): {', '.join(parts)}"
                     f"{total}{' each' if total and len(names) > 1 else ''} ({PAPER_BUDGET})")
    return lines


def main(argv: list[str] | None = None) -> int:
    return budget_main("reid paper budget dgvae", __doc__.split("\n\n")[0], "dgvae",
                       budget_lines, argv, notes=(STAGE1_AMBI_NOTE,))
