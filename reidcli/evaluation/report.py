"""The evaluation report: JSON (docs/evaluation.md), CMC CSV and rich terminal tables.

JSON top level: ``protocol``, ``num_valid_queries``, ``mAP``, ``mINP``, ``cmc`` (rank-1 …
rank-max) as means over trials, ``trials`` (one entry per trial), plus ``std`` (population
std over trials; for the WARCA protocol both are over splits, each the mean of its draws:
``aggregation``), ``pur`` / ``auc`` / ``cmc_full`` for full-curve protocols, skipped-query
counts, ``per_camera`` (keyed by camid, or ``<domain>/<camid>`` when the evaluated rows span
several domains; shown as ``cam N`` / ``<domain>/cam N``), ``nmi`` and ``provenance``. Every
metric is a fraction in [0, 1] (``null`` where a protocol does not define it, e.g. mAP under
cuhk03_sgs). A report of several stores (:func:`build_multi_report`) keeps this top level,
holding the mean ± std over stores, and adds ``num_stores`` and ``stores`` (each store's own
report).
"""
from __future__ import annotations

import csv
import io
import os
from pathlib import PurePath
from typing import Any, Sequence

import numpy as np

from reidcli.cameras import camera_key_name, split_camera_key
from reidcli.evaluation.engine import TrialResult
from reidcli.evaluation.protocols import Protocol
from reidcli.io import atomic_output, write_json_atomic, write_text_durable
from reidcli.naming import param

SHOWN_RANKS = (1, 5, 10, 20)


def mean_std(values: Sequence[float | None]) -> tuple[float | None, float | None]:
    """Mean and population std (ddof 0, ``numpy.std``) of ``values``; ``(None, None)`` when
    there are none or one is None (a metric the protocol does not define)."""
    if not values or any(v is None for v in values):
        return None, None
    arr = np.asarray(values, dtype=np.float64)
    return float(arr.mean()), float(arr.std())


def pad_curves(curves: list[np.ndarray]) -> np.ndarray:
    """Stack curves [R_i] of unequal length into [n, max R_i], extending each with its last
    value."""
    n = max(len(c) for c in curves)
    return np.stack([np.concatenate([c, np.full(n - len(c), c[-1] if len(c) else np.nan)])
                     for c in curves])


def mean_count(values: list[int]) -> int | float:
    """Mean of counts: an int when whole (e.g. the same count in every trial)."""
    mean = float(np.mean(values))
    return int(mean) if mean.is_integer() else mean


def trial_dict(result: TrialResult) -> dict[str, Any]:
    out = {"trial": result.trial, **({"repeat": result.repeat} if result.repeat is not None
                                      else {}), "num_queries": result.num_queries,
           "num_valid_queries": result.num_valid_queries,
           "num_skipped_queries": int(sum(result.skipped.values())),
           "skipped": dict(result.skipped),
           # images, and identities apart (E4's full curve runs over identities)
           "gallery_size": result.gallery_size if result.gallery_images is None
           else result.gallery_images, "gallery_ids": result.gallery_ids,
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
        row = {"num_valid_queries": mean_count([e["num_valid_queries"] for e in entries])}
        for key in keys:
            row[key] = mean_std([e[key] for e in entries])[0]
        return row

    return {"cameras": {c: mean_of([t["cameras"][c] for t in tables if c in t["cameras"]])
                        for c in cams},
            "weighted_mean": mean_of([t["weighted_mean"] for t in tables]),
            "note": "means over trials of each trial's per-camera metrics"}


def split_groups(trials: Sequence[TrialResult], meta: dict[str, Any]) -> list[list[int]] | None:
    """Indices of ``trials`` grouped by split when the store's protocol draws several
    probe/gallery draws per split (the WARCA protocol: trial k = split k // draws), else None.
    The report then averages each split's draws and gives mean ± std over splits (WARCA paper
    Sect. 4.2; docs/datasets.md)."""
    proto = meta.get("dataset_protocol") or {}
    draws = (proto.get("options") or {}).get("draws")
    try:
        draws = int(draws)
    except (TypeError, ValueError):
        return None
    if draws <= 1:
        return None
    groups: dict[int, list[int]] = {}
    for i, t in enumerate(trials):
        groups.setdefault(int(t.trial) // draws, []).append(i)
    return list(groups.values())


def _split_means(values: Sequence[Any], groups: list[list[int]] | None) -> list[Any]:
    """``values`` (one per trial) averaged within each split group (unchanged without
    groups); None stays None."""
    if groups is None:
        return list(values)
    out = []
    for g in groups:
        part = [values[i] for i in g]
        out.append(None if any(v is None for v in part) else
                   np.mean(np.stack([np.asarray(v, dtype=np.float64) for v in part]), axis=0))
    return out


def build_report(protocol: Protocol, trials: list[TrialResult], meta: dict[str, Any],
                 provenance: dict[str, Any] | None = None) -> dict[str, Any]:
    """The JSON-ready report of one evaluation (see module doc). Means and stds are over
    trials, or over splits (each the mean of its draws) for protocols with several draws per
    split (:func:`split_groups`)."""
    groups = split_groups(trials, meta)
    report = _trial_summary(protocol, trials, meta, groups)
    if groups is not None:
        report["aggregation"] = {"over": "splits", "num_splits": len(groups),
                                 "draws_per_split": [len(g) for g in groups],
                                 "note": "each split's draws averaged, then mean ± std "
                                         "(population) over splits"}
    if all(t.cmc_full is not None for t in trials):
        _add_full_curves(report, trials, groups)
    per_camera = _mean_per_camera(trials)
    if per_camera is not None:
        report["per_camera"] = per_camera
    report.update({k: v for k, v in meta.items() if k not in report})
    if provenance is not None:
        report["provenance"] = provenance
    return report


def _trial_summary(protocol: Protocol, trials: list[TrialResult], meta: dict[str, Any],
                   groups) -> dict[str, Any]:
    """The report's first keys: protocol, counts, mean mAP / mINP / CMC [R] and their stds
    (over splits when ``groups`` are given), one entry per trial."""
    cmcs = pad_curves(_split_means(list(pad_curves([t.cmc for t in trials])), groups))
    m_ap, s_ap = mean_std(_split_means([t.mAP for t in trials], groups))
    m_inp, s_inp = mean_std(_split_means([t.mINP for t in trials], groups))
    return {
        "protocol": protocol.name,
        "rule": protocol.rule,
        "num_valid_queries": mean_count([t.num_valid_queries for t in trials]),
        "mAP": m_ap,
        "mINP": m_inp,
        "cmc": cmcs.mean(axis=0).tolist(),
        "trials": [trial_dict(t) for t in trials],
        "num_trials": len(trials),
        "num_queries": mean_count([t.num_queries for t in trials]),
        "num_skipped_queries": mean_count([int(sum(t.skipped.values())) for t in trials]),
        "skipped": {k: mean_count([t.skipped.get(k, 0) for t in trials])
                    for k in trials[0].skipped},
        "std": {"mAP": s_ap, "mINP": s_inp, "cmc": cmcs.std(axis=0).tolist()},
        "max_rank": len(trials[0].cmc),
        "ap_convention": meta.get("options", {}).get("ap"),
    }


def _add_full_curves(report: dict[str, Any], trials: list[TrialResult], groups) -> None:
    """Add PUR, CMC-AUC (with stds), the mean full CMC [G] and the PUR of that mean (None
    when the trials' gallery sizes differ) to ``report``."""
    full = pad_curves(_split_means(list(pad_curves([t.cmc_full for t in trials])),
                                   groups))
    report["pur"], report["std"]["pur"] = mean_std(_split_means([t.pur for t in trials],
                                                                groups))
    report["auc"], report["std"]["auc"] = mean_std(_split_means([t.auc for t in trials],
                                                                groups))
    report["cmc_full"] = full.mean(axis=0).tolist()
    from reidcli.evaluation.scores import pur
    sizes = {t.gallery_size for t in trials}
    report["pur_of_mean_cmc"] = pur(full.mean(axis=0), sizes.pop()) if len(sizes) == 1 \
        else None


#: single-store keys the several-store report keeps where every store has the same value
SHARED_KEYS = ("protocol", "rule", "ap_convention", "dataset", "feature", "feature_metric",
               "distance", "model", "feat_norm", "rerank", "options", "device", "precision")


def build_multi_report(reports: Sequence[dict[str, Any]], aggregate: dict[str, Any],
                       provenance: dict[str, Any] | None = None) -> dict[str, Any]:
    """The JSON-ready report of several stores (docs/cli.md, "Several stores in one `reid
    eval`").

    ``reports`` are the single-store reports (``build_report``, in store order) and
    ``aggregate`` is :func:`reidcli.evaluation.multi.aggregate_reports` of them. The top level
    has the single-store shape, holding the aggregate: ``mAP``, ``mINP``, ``cmc`` [R] (and
    ``pur`` / ``auc`` where every store has them) are means over stores, ``std`` their
    population std over stores, ``trials`` one summary per store (the entries the mean and std
    are over, so ``num_trials`` is the number of stores), plus ``num_stores``,
    ``num_store_trials`` (the stores' trials in all), the :data:`SHARED_KEYS` every store
    agrees on, and ``stores``: ``{"store": path, ...}`` with each store's full report."""
    first = reports[0]
    report: dict[str, Any] = {k: first[k] for k in ("protocol", "rule")}
    report.update(num_stores=aggregate["num_stores"], num_trials=aggregate["num_stores"],
                  num_store_trials=int(sum(r["num_trials"] for r in reports)))
    report.update({k: aggregate[k] for k in ("num_valid_queries", "num_queries",
                                             "num_skipped_queries", "skipped",
                                             "skipped_total") if k in aggregate})
    report.update({k: aggregate[k] for k in ("mAP", "mINP", "cmc", "pur", "auc")
                   if k in aggregate})
    report["std"] = dict(aggregate["std"])
    report["trials"] = [dict(s) for s in aggregate["stores"]]
    report["max_rank"] = len(aggregate["cmc"])
    report["note"] = ("mean and population std (ddof 0) over stores of each store's mean over "
                      "its own trials; 'trials' holds one entry per store")
    report.update({k: first[k] for k in SHARED_KEYS
                   if k in first and k not in report and all(r.get(k) == first[k]
                                                             for r in reports)})
    report["stores"] = [{"store": s["store"], **{k: v for k, v in r.items() if k != "store"}}
                        for s, r in zip(aggregate["stores"], reports)]
    if provenance is not None:
        report["provenance"] = provenance
    return report


def write_json(path: str | os.PathLike, report: dict[str, Any], force: bool,
               inputs: Sequence[str | os.PathLike] = ()) -> None:
    """Write the report atomically (verified to parse); never over one of ``inputs``."""
    write_json_atomic(path, report, force=force, option=param("json_out"), inputs=inputs)


def cmc_csv_text(report: dict[str, Any]) -> str:
    """CSV of the CMC curve: ``rank, cmc, std, trial_<k>...`` (fractions). For a report of
    several stores: the mean curve over stores, its std and one column per store (named by
    the store's path) holding that store's mean curve."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    trials = report["trials"]
    writer.writerow(["rank", "cmc", "std"] + [_curve_column(t) for t in trials])
    for r, (mean, std) in enumerate(zip(report["cmc"], report["std"]["cmc"]), start=1):
        writer.writerow([r, f"{mean:.10g}", f"{std:.10g}"] +
                        [f"{t['cmc'][min(r, len(t['cmc'])) - 1]:.10g}" for t in trials])
    return buf.getvalue()


def _curve_column(entry: dict[str, Any]) -> str:
    if "store" in entry:                                  # a store of a several-store report
        return str(entry["store"])
    return f"trial_{entry['trial']}" + (f"_repeat_{entry['repeat']}" if "repeat" in entry
                                        else "")


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
    """Print the summary (and per-camera) table with rich; for a report of several stores,
    one row per store and the mean ± std over stores (:func:`render_store_table`)."""
    from rich.table import Table

    if "num_stores" in report:
        render_store_table(report, console)
        return
    multi = report["num_trials"] > 1
    agg = report.get("aggregation")
    trials = f"{report['num_trials']} trial(s)" if agg is None else (
        f"{report['num_trials']} trials = {agg['num_splits']} splits × "
        f"{max(agg['draws_per_split'])} draws, mean ± std over splits")
    console.print(f"[bold]reid eval[/bold] — protocol {report['protocol']} ({report['rule']}), "
                  f"{trials}" + (", re-ranked" if report.get("rerank")
                                                         else "")
                  + (f", feature {report['feature']}" if report.get("feature") else "")
                  + (f", distance {report['distance']}" if report.get("distance") else "")
                  + _run_notes(report)
                  + (f", dataset protocol {report['dataset_protocol']['name']}"
                     if report.get("dataset_protocol") else ""))
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


def _run_notes(report: dict[str, Any]) -> str:
    """Header notes on how the distances ran: a reduced precision, a streamed gallery."""
    notes = ""
    if report.get("precision") not in (None, "float32"):
        notes += f", {report['precision']} distances"
    if report.get("gallery_streamed"):
        notes += ", gallery streamed from the store"
    return notes


def render_store_table(report: dict[str, Any], console) -> None:
    """One row per store (its mean over its own trials) and a last row ``mean ± std over N
    stores`` of a :func:`build_multi_report` report."""
    from rich.table import Table

    n = report["num_stores"]
    names, pattern = short_store_names([str(e["store"]) for e in report["trials"]])
    console.print(f"[bold]reid eval[/bold] — protocol {report['protocol']} ({report['rule']}), "
                  f"{n} stores, {report['num_store_trials']} trial(s) in all"
                  + (", re-ranked" if report.get("rerank") else "")
                  + (f", feature {report['feature']}" if report.get("feature") else "")
                  + (f", distance {report['distance']}" if report.get("distance") else "")
                  + _run_notes(report)
                  + (f", dataset protocol {report['dataset_protocol']['name']}"
                     if report.get("dataset_protocol") else ""))
    if pattern:
        console.print(f"stores: {pattern}", markup=False, highlight=False, soft_wrap=True)
    ranks = [r for r in SHOWN_RANKS if r <= len(report["cmc"])]
    metrics = [("mAP", "mAP"), ("mINP", "mINP")] \
        + [(f"rank-{r}", r) for r in ranks] \
        + [(name, key) for name, key in (("PUR", "pur"), ("CMC-AUC", "auc")) if key in report]

    def value(entry: dict[str, Any], key, std: dict[str, Any] | None = None) -> str:
        if isinstance(key, int):
            curve = entry["cmc"]
            return _pct(curve[min(key, len(curve)) - 1],
                        None if std is None else std["cmc"][key - 1], std is not None)
        return _pct(entry.get(key), None if std is None else std.get(key), std is not None)

    table = Table(caption="values in %; a store's value is its mean over its own trials; std: "
                  "population std over stores", caption_justify="left")
    table.add_column("store", overflow="fold")
    table.add_column("trials", justify="right", no_wrap=True)
    for name, _ in metrics:
        table.add_column(name, justify="right", no_wrap=True)
    table.add_column("valid queries", justify="right")
    table.add_column("skipped queries", justify="right")
    for entry, name in zip(report["trials"], names):
        table.add_row(name, str(entry["num_trials"]),
                      *(value(entry, key) for _, key in metrics),
                      str(entry["num_valid_queries"]), skipped_text(entry))
    table.add_row(f"mean ± std over {n} stores", str(report["num_store_trials"]),
                  *(value(report, key, report["std"]) for _, key in metrics),
                  str(report["num_valid_queries"]), skipped_text(report), style="bold")
    # never squeezed into ellipses: a console narrower than the table is widened for it
    from rich.measure import Measurement
    width = Measurement.get(console, console.options.update_width(10_000), table).maximum
    narrow = console.width
    console.width = max(narrow, width)
    try:
        console.print(table)
    finally:
        console.width = narrow
    total = report.get("skipped_total")
    if total is not None:
        counted = _reasons_text(total)
        console.print(f"skipped queries in all {report['num_store_trials']} trial(s) of the "
                      f"{n} stores: {int(sum(total.values()))}"
                      + (f" ({counted})" if counted else "") + f"; {SKIP_NOTE}",
                      markup=False, highlight=False, soft_wrap=True)


#: how the report's skip reasons (reidcli.evaluation.protocols SKIP_*) read in a table
SKIP_REASONS = {"junk_or_distractor_query": "pid 0/-1",
                "no_match": "no gallery match"}
SKIP_NOTE = ("skipped queries: pid 0/-1 = distractor/junk queries (pid 0 means distractor); "
             "no gallery match = no true match left once the rule excludes same-camera "
             "matches")


def _reasons_text(reasons: dict[str, Any]) -> str:
    return ", ".join(f"{SKIP_REASONS.get(k, k.replace('_', ' '))}: {v}"
                     for k, v in reasons.items() if v)


def skipped_text(entry: dict[str, Any]) -> str:
    """``12 (pid 0/-1: 12)``: an entry's skipped-query count and its reasons (the count
    alone where it has no ``skipped`` breakdown)."""
    parts = _reasons_text(entry.get("skipped") or {})
    return f"{entry.get('num_skipped_queries', 0)}" + (f" ({parts})" if parts else "")


def short_store_names(paths: Sequence[str]) -> tuple[list[str], str | None]:
    """Table names of stores: the paths less the folders and file name they all share
    (``runs/regdb_t0/store.h5``, ``runs/regdb_t1/store.h5`` → ``regdb_t0``, ``regdb_t1``) and
    the pattern they were taken from (``runs/<store>/store.h5``; None when nothing is
    shared). Paths that would lose their difference are kept whole."""
    parts = [PurePath(p).parts for p in paths]
    shortest = min(len(p) for p in parts)
    lead = 0
    while lead < shortest - 1 and len({p[lead] for p in parts}) == 1:
        lead += 1
    trail = 0
    while trail < shortest - lead - 1 and len({p[-1 - trail] for p in parts}) == 1:
        trail += 1
    names = [str(PurePath(*p[lead:len(p) - trail])) for p in parts]
    if (lead == 0 and trail == 0) or len(set(names)) < len(names):
        return list(paths), None
    middle = [*parts[0][:lead], "<store>", *parts[0][len(parts[0]) - trail:]]
    return names, str(PurePath(*middle))
