"""The evaluation report: JSON (ARCHITECTURE.md form), CMC CSV and rich terminal tables.

JSON top level: ``protocol``, ``num_valid_queries``, ``mAP``, ``mINP``, ``cmc`` (rank-1 …
rank-max) as means over trials, ``trials`` (one entry per trial), plus ``std`` (population
std over trials), ``pur`` / ``auc`` / ``cmc_full`` for full-curve protocols, skipped-query
counts, ``per_camera`` (keyed by camid, or ``<domain>/<camid>`` when the evaluated rows span
several domains; shown as ``cam N`` / ``<domain>/cam N``), ``nmi`` and ``provenance``. Every
metric is a fraction in [0, 1] (``null`` where a protocol does not define it, e.g. mAP under
cuhk03_sgs).
"""
from __future__ import annotations

import csv
import io
import os
from typing import Any, Sequence

import numpy as np

from reidcli.cameras import camera_key_name, split_camera_key
from reidcli.evaluation.engine import TrialResult
from reidcli.evaluation.protocols import Protocol
from reidcli.io import atomic_output, write_json_atomic, write_text_durable
from reidcli.naming import param

SHOWN_RANKS = (1, 5, 10, 20)


def _mean_std(values: Sequence[float | None]) -> tuple[float | None, float | None]:
    if not values or any(v is None for v in values):
        return None, None
    arr = np.asarray(values, dtype=np.float64)
    return float(arr.mean()), float(arr.std())


def _pad(curves: list[np.ndarray]) -> np.ndarray:
    """Stack curves of unequal length, extending each with its last value."""
    n = max(len(c) for c in curves)
    return np.stack([np.concatenate([c, np.full(n - len(c), c[-1] if len(c) else np.nan)])
                     for c in curves])


def _count(values: list[int]) -> int | float:
    mean = float(np.mean(values))
    return int(mean) if mean.is_integer() else mean


def trial_dict(result: TrialResult) -> dict[str, Any]:
    out = {"trial": result.trial, **({"repeat": result.repeat} if result.repeat is not None
                                      else {}), "num_queries": result.num_queries,
           "num_valid_queries": result.num_valid_queries,
           "num_skipped_queries": int(sum(result.skipped.values())),
           "skipped": dict(result.skipped), "gallery_size": result.gallery_size,
           "mAP": result.mAP, "mINP": result.mINP, "cmc": result.cmc.tolist()}
    if result.cmc_full is not None:
        out.update(pur=result.pur, auc=result.auc, cmc_full=result.cmc_full.tolist())
    if result.per_camera is not None:
        out["per_camera"] = result.per_camera
    return out


def _mean_per_camera(trials: list[TrialResult]) -> dict[str, Any] | None:
    tables = [t.per_camera for t in trials if t.per_camera is not None]
    if not tables:
        return None
    if len(tables) == 1:
        return tables[0]
    cams = sorted({c for t in tables for c in t["cameras"]}, key=split_camera_key)
    keys = ("mAP", "mINP", "rank1", "rank5")

    def mean_of(entries):
        row = {"num_valid_queries": _count([e["num_valid_queries"] for e in entries])}
        for key in keys:
            row[key] = _mean_std([e[key] for e in entries])[0]
        return row

    return {"cameras": {c: mean_of([t["cameras"][c] for t in tables if c in t["cameras"]])
                        for c in cams},
            "weighted_mean": mean_of([t["weighted_mean"] for t in tables]),
            "note": "means over trials of each trial's per-camera metrics"}


def build_report(protocol: Protocol, trials: list[TrialResult], meta: dict[str, Any],
                 provenance: dict[str, Any] | None = None) -> dict[str, Any]:
    """The JSON-ready report of one evaluation (see module doc)."""
    cmcs = _pad([t.cmc for t in trials])
    m_ap, s_ap = _mean_std([t.mAP for t in trials])
    m_inp, s_inp = _mean_std([t.mINP for t in trials])
    report: dict[str, Any] = {
        "protocol": protocol.name,
        "rule": protocol.rule,
        "num_valid_queries": _count([t.num_valid_queries for t in trials]),
        "mAP": m_ap,
        "mINP": m_inp,
        "cmc": cmcs.mean(axis=0).tolist(),
        "trials": [trial_dict(t) for t in trials],
        "num_trials": len(trials),
        "num_queries": _count([t.num_queries for t in trials]),
        "num_skipped_queries": _count([int(sum(t.skipped.values())) for t in trials]),
        "skipped": {k: _count([t.skipped.get(k, 0) for t in trials])
                    for k in trials[0].skipped},
        "std": {"mAP": s_ap, "mINP": s_inp, "cmc": cmcs.std(axis=0).tolist()},
        "max_rank": len(trials[0].cmc),
        "ap_convention": meta.get("options", {}).get("ap"),
    }
    if all(t.cmc_full is not None for t in trials):
        full = _pad([t.cmc_full for t in trials])
        report["pur"], report["std"]["pur"] = _mean_std([t.pur for t in trials])
        report["auc"], report["std"]["auc"] = _mean_std([t.auc for t in trials])
        report["cmc_full"] = full.mean(axis=0).tolist()
        from reidcli.evaluation.scores import pur
        sizes = {t.gallery_size for t in trials}
        report["pur_of_mean_cmc"] = pur(full.mean(axis=0), sizes.pop()) if len(sizes) == 1 \
            else None
    per_camera = _mean_per_camera(trials)
    if per_camera is not None:
        report["per_camera"] = per_camera
    report.update({k: v for k, v in meta.items() if k not in report})
    if provenance is not None:
        report["provenance"] = provenance
    return report


def write_json(path: str | os.PathLike, report: dict[str, Any], force: bool,
               inputs: Sequence[str | os.PathLike] = ()) -> None:
    """Write the report atomically (verified to parse); never over one of ``inputs``."""
    write_json_atomic(path, report, force=force, option=param("json_out"), inputs=inputs)


def cmc_csv_text(report: dict[str, Any]) -> str:
    """CSV of the CMC curve: ``rank, cmc, std, trial_<k>...`` (fractions)."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    trials = report["trials"]
    writer.writerow(["rank", "cmc", "std"] + [
        f"trial_{t['trial']}" + (f"_repeat_{t['repeat']}" if "repeat" in t else "")
        for t in trials])
    for r, (mean, std) in enumerate(zip(report["cmc"], report["std"]["cmc"]), start=1):
        writer.writerow([r, f"{mean:.10g}", f"{std:.10g}"] +
                        [f"{t['cmc'][r - 1]:.10g}" for t in trials])
    return buf.getvalue()


def write_csv(path: str | os.PathLike, report: dict[str, Any], force: bool,
              inputs: Sequence[str | os.PathLike] = ()) -> None:
    """Write the CMC CSV atomically (flushed); never over one of ``inputs``."""
    with atomic_output(path, force=force, option=param("csv_out"), inputs=inputs) as tmp:
        write_text_durable(tmp, cmc_csv_text(report))


# -- terminal ------------------------------------------------------------------------------------
def _pct(value: float | None, std: float | None = None, multi: bool = False) -> str:
    if value is None:
        return "—"
    text = f"{100 * value:.2f}"
    return f"{text} ± {100 * std:.2f}" if multi and std is not None else text


def render_tables(report: dict[str, Any], console) -> None:
    """Print the summary (and per-camera) table with rich."""
    from rich.table import Table

    multi = report["num_trials"] > 1
    console.print(f"[bold]reid eval[/bold] — protocol {report['protocol']} ({report['rule']}), "
                  f"{report['num_trials']} trial(s)" + (", re-ranked" if report.get("rerank")
                                                         else "")
                  + (f", feature {report['feature']}" if report.get("feature") else "")
                  + (f", distance {report['distance']}" if report.get("distance") else ""))
    table = Table()
    table.add_column("metric")
    table.add_column("value (%)" + (" mean ± std" if multi else ""), justify="right")
    std = report["std"]
    table.add_row("mAP", _pct(report["mAP"], std["mAP"], multi))
    table.add_row("mINP", _pct(report["mINP"], std["mINP"], multi))
    for r in SHOWN_RANKS:
        if r <= len(report["cmc"]):
            table.add_row(f"rank-{r}", _pct(report["cmc"][r - 1], std["cmc"][r - 1], multi))
    if "pur" in report:
        table.add_row("PUR", _pct(report["pur"], std.get("pur"), multi))
        table.add_row("CMC-AUC", _pct(report["auc"], std.get("auc"), multi))
    if report.get("nmi"):
        table.add_row(f"NMI (k={report['nmi']['k']})", f"{100 * report['nmi']['nmi']:.2f}")
    table.add_row("valid queries", str(report["num_valid_queries"]))
    skipped = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in report["skipped"].items() if v)
    table.add_row("skipped queries", f"{report['num_skipped_queries']}"
                  + (f" ({skipped})" if skipped else ""))
    console.print(table)
    per_camera = report.get("per_camera")
    if per_camera:
        cams = Table(title="per query camera", title_justify="left")
        for col in ("camera", "valid queries", "mAP", "mINP", "rank-1", "rank-5"):
            cams.add_column(col, justify="right")
        rows = [(camera_key_name(cam), row) for cam, row in per_camera["cameras"].items()] \
            + [("weighted mean", per_camera["weighted_mean"])]
        for cam, row in rows:
            cams.add_row(str(cam), str(row["num_valid_queries"]), _pct(row["mAP"]),
                         _pct(row["mINP"]), _pct(row["rank1"]), _pct(row["rank5"]))
        console.print(cams)
