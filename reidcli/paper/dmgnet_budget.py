"""Say how a DMG-Net run's training budget departs from the paper's (used by
``recipes/dmgnet_*.sh`` after their tables).

``reid paper budget dmgnet RUN_DIR ...`` reads each run directory's
``config.json`` (written by ``reid train dmgnet``; its ``config`` holds ``epochs``,
``iters_per_epoch``, ``p``, ``k``, ``sources``, ``no_meta``, ``md_weight``, ``meta_order``)
and prints one ``budget override: ...`` line per group of runs whose schedule is below the
paper's — 120 epochs of ⌊N/(2·P·K)⌋ iterations with P = 16 identities × K = 4 images in
both the support and the query set (DMG-Net paper §5, "Implementation Details"; one epoch ≈ one
pass over the N training images). Keys it does not find are left out of the line, never
guessed.
"""
from __future__ import annotations

import json
from pathlib import Path

from reidcli.errors import InputFileError
from reidcli.paper.results import run_label
from reidcli.paper.script import budget_main

#: the paper's schedule (DMG-Net paper §5): epochs, identities per set, images per identity
PAPER_EPOCHS = 120
PAPER_P, PAPER_K = 16, 4
PAPER_BUDGET = ("paper: 120 epochs × ⌊N/(2PK)⌋ iterations/epoch with P=16, K=4 "
                "(64 support + 64 query images)")
#: the paper's BoT baseline (BoT's schedule, DMG-Net paper §5 and docs/methods/bot.md)
PAPER_BUDGET_BOT = ("paper: 120 epochs × one pass over the images in P×K batches with P=16, "
                    "K=4 (64 images)")
#: top-level or ``config`` keys that may hold the number of training images
IMAGE_COUNT_KEYS = ("num_images", "num_train_images", "train_images")


def read_run(run_dir: str | Path) -> tuple[dict, dict]:
    """(``config`` of ``run_dir/config.json``, the whole file) — InputFileError if absent."""
    path = Path(run_dir) / "config.json"
    try:
        whole = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise InputFileError(f"cannot read {path} ({exc.__class__.__name__})",
                             "give a run directory written by reid train dmgnet") from None
    if not isinstance(whole, dict):
        raise InputFileError(f"{path} holds no JSON object",
                             "give a run directory written by reid train dmgnet")
    config = whole.get("config")
    return (config if isinstance(config, dict) else {}), whole


#: a reid train dmgnet run with no meta step and no L_MD: not the paper's BoT (a run of
#: reid train bot) but BoT's losses on DMG-Net's paired camera-split batches
PAIRED_CONTROL = "DMG-Net w/o meta, w/o L_MD (paired batches)"


def variant_name(config: dict, method: str | None = None) -> str:
    """The Table 6 row a run makes (DMG-Net paper Table 6): ``BoT`` (a ``reid train bot`` run,
    ``method == "bot"``), ``Meta-discrimination`` (no meta step), ``Meta-generalization`` (no
    L_MD), ``DMG-Net``, or :data:`PAIRED_CONTROL` (no meta step, no L_MD)."""
    if method == "bot":
        return "BoT"
    no_meta = bool(config.get("no_meta", False))
    no_md = config.get("md_weight", 1) in (0, 0.0)
    if no_meta and no_md:
        return PAIRED_CONTROL
    if no_meta:
        return "Meta-discrimination"
    return "Meta-generalization" if no_md else "DMG-Net"


def num_images(config: dict, whole: dict) -> int | None:
    """The run's training image count where config.json records one (else None)."""
    for source in (whole, config):
        for key in IMAGE_COUNT_KEYS:
            value = source.get(key)
            if isinstance(value, int) and value > 0:
                return value
    return None


def paper_iterations(images: int | None) -> int | None:
    """⌊N/(2PK)⌋ with the paper's P and K (None when N is unknown)."""
    return None if images is None else images // (2 * PAPER_P * PAPER_K)


def budget_departures(run_dir: str | Path) -> list[str]:
    """How a run's schedule departs from the paper's: fewer epochs, an explicit iteration
    count other than ⌊N/(2PK)⌋ (or any explicit count when N is unknown), another P or K, a
    preset, a first-order meta-gradient (empty when it follows the paper)."""
    config, whole = read_run(run_dir)
    parts = []
    epochs = config.get("epochs")
    if isinstance(epochs, (int, float)) and epochs != PAPER_EPOCHS:
        parts.append(f"epochs {epochs:g}")
    iters = config.get("iters_per_epoch")
    wanted = paper_iterations(num_images(config, whole))
    if whole.get("method") == "bot":           # BoT's epoch: one pass in P×K batches
        if isinstance(iters, int):
            parts.append(f"{iters} iterations/epoch of P×K images")
    elif isinstance(iters, int) and iters != wanted:
        parts.append(f"{iters} iterations/epoch" + (f" (paper's ⌊N/(2PK)⌋ = {wanted})"
                                                    if wanted is not None else ""))
    p, k = config.get("p"), config.get("k")
    if (p is not None and p != PAPER_P) or (k is not None and k != PAPER_K):
        parts.append(f"P={p}, K={k}")
    if config.get("max_iters") is not None:
        parts.append(f"stopped after {config['max_iters']} iterations")
    if config.get("preset"):
        parts.append(f"preset {config['preset']}")
    if config.get("meta_order") == 1 and not config.get("no_meta"):
        parts.append("first-order meta-gradient")
    return parts


def budget_lines(run_dirs: list[str | Path]) -> list[str]:
    """One ``budget override (run: variant, ...): …`` line per distinct departure — runs
    trained under one budget (e.g. DMG-Net and BoT of a recipe) share a line; none for a run
    on the paper's schedule."""
    grouped: dict[tuple, list[str]] = {}
    for run in map(Path, run_dirs):
        parts = budget_departures(run)
        if parts:
            config, whole = read_run(run)
            paper = PAPER_BUDGET_BOT if whole.get("method") == "bot" else PAPER_BUDGET
            grouped.setdefault((paper, *parts), []).append(
                f"{run_label(run)}: {variant_name(config, whole.get('method'))}")
    return [f"budget override ({', '.join(names)}): {', '.join(parts)} ({paper})"
            for (paper, *parts), names in grouped.items()]


def main(argv: list[str] | None = None) -> int:
    return budget_main("reid paper budget dmgnet", __doc__.split("\n\n")[0], "dmgnet",
                       budget_lines, argv)
