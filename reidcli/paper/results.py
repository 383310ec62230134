"""What every paper comparison shares (docs/papers.md): the paper's tables shipped as
``reidcli/paper/<name>.csv``, our ``reid eval --json`` reports summarised in percent, and the
PASS/FAIL/SKIP lines of a paper's claims."""
from __future__ import annotations

import csv
import json
import re
from importlib import resources
from pathlib import Path

from rich.console import Console

from reidcli.errors import InputFileError

RANKS = (1, 5, 10, 20)


def paper_table(name: str) -> list[dict[str, str]]:
    """Rows of ``reidcli/paper/<name>.csv``."""
    text = resources.files("reidcli.paper").joinpath(f"{name}.csv").read_text()
    return list(csv.DictReader(text.splitlines()))


def load_result(path: Path) -> dict:
    """Summary of a ``reid eval --json`` report (percent): cmc@ranks, mAP, mINP and their stds,
    PUR, AUC; ``trials`` and ``stores`` (how many stores an across-store report averages, 0
    for a one-store report)."""
    try:
        report = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise InputFileError(f"cannot read result {path} ({exc.__class__.__name__})",
                             "pass a JSON evaluation report (as written by reid eval)") from None
    cmc, std = report.get("cmc", []), report.get("std", {}).get("cmc", [])
    agg = report.get("aggregation")
    out = {"trials": report.get("num_trials", 1)}
    out["trials_label"] = str(out["trials"]) if not agg else \
        f"{agg['num_splits']} splits × {max(agg['draws_per_split'])}"
    for r in RANKS:
        out[f"r{r}"] = 100 * cmc[r - 1] if len(cmc) >= r else None
        out[f"s{r}"] = 100 * std[r - 1] if len(std) >= r else None
    for key, name in (("minp", "mINP"), ("map", "mAP")):
        value, spread = report.get(name), report.get("std", {}).get(name)
        out[key] = None if value is None else 100 * value
        out[f"{key}_std"] = None if spread is None else 100 * spread
    out["stores"] = len(report.get("stores") or [])
    out["pur"] = None if report.get("pur") is None else 100 * report["pur"]
    out["auc"] = None if report.get("auc") is None else 100 * report["auc"]
    return out


def run_label(run: str | Path) -> str:
    """How a note names a run directory: its name, or ``VARIANT/seedS`` for a seed's run of
    ``reid paper ablation`` (``OUT/VARIANT/seedS``)."""
    run = Path(run)
    return f"{run.parent.name}/{run.name}" if re.fullmatch(r"seed\d+", run.name) else run.name


def fmt(mean, std=None) -> str:
    if mean is None:
        return "—"
    return f"{mean:.1f}" if not std else f"{mean:.1f} ± {std:.1f}"


#: metric key of :func:`load_result` → the key of its std
STD_KEYS = {**{f"r{r}": f"s{r}" for r in RANKS}, "map": "map_std", "minp": "minp_std"}


def within_noise(a: dict, b: dict, metric: str) -> float | None:
    """The larger std of ``metric`` of two across-store results (e.g. one store per seed)
    when their means differ by less than it, else None (also for one-store results, whose
    std is over trials, not seeds)."""
    if a.get("stores", 0) < 2 or b.get("stores", 0) < 2:
        return None
    spread = max(a.get(STD_KEYS.get(metric, ""), None) or 0.0,
                 b.get(STD_KEYS.get(metric, ""), None) or 0.0)
    return spread if abs(a[metric] - b[metric]) < spread else None


def check_claims(claims, ours: dict[str, dict], metric: str, console: Console,
                 label: str = "", digits: int = 1,
                 noise: str | None = None) -> list[tuple[str, bool | None]]:
    """Print PASS/FAIL/SKIP for each (claim, better, worse, allow equality) on ``metric`` of
    our results; returns ``[(claim, passed or None when a method was not run)]``.

    ``noise`` (e.g. ``"seed"``: each result averages one store per seed) marks a verdict
    whose difference of means is below the larger std of the two (:func:`within_noise`):
    ``PASS  claim (mAP) (within seed noise, std 1.20): 12.00 vs 11.50`` — the line keeps
    the ``VERDICT  claim…: a vs b`` form."""
    verdicts = []
    for claim, better, worse, allow_equal in claims:
        if better not in ours or worse not in ours:
            verdicts.append((claim, None))
            console.print(f"SKIP  {claim} (not run)")
            continue
        a, b = ours[better][metric], ours[worse][metric]
        ok = a >= b if allow_equal else a > b
        verdicts.append((claim, ok))
        spread = within_noise(ours[better], ours[worse], metric) if noise else None
        note = "" if spread is None else f" (within {noise} noise, std {spread:.{digits}f})"
        console.print(f"{'PASS' if ok else 'FAIL'}  {claim}{label}{note}: {a:.{digits}f} vs "
                      f"{b:.{digits}f}", markup=False)
    return verdicts


__all__ = ["RANKS", "STD_KEYS", "paper_table", "load_result", "fmt", "check_claims",
           "within_noise", "run_label"]
