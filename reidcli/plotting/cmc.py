"""CMC curves of several ``reid eval --json`` results on one axis (mean ± std band).

Each curve has its own (marker, linestyle) pair and markers on shifted ranks, so two equal
curves stay visible; the x ticks are whole ranks; a legend entry gives rank-1 and mAP; a
curve's default name is built from its report (:func:`report_label`)."""
from __future__ import annotations

import dataclasses
import json
import math
import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from reidcli.errors import InputFileError, UsageError
from reidcli.naming import param
from reidcli.params import Interval, check_param
from reidcli.plotting.common import adapt_label, finish_figure, pyplot, vectors_label


@dataclasses.dataclass
class CMCPlot:
    """``curves[label] = (mean [R], std [R] or None)`` in percent, ranks 1..R."""

    curves: dict[str, tuple[np.ndarray, np.ndarray | None]]
    #: the legend entries (``name — R1 …, mAP …``), one per result
    labels: list[str]
    #: the curve names (keys of ``curves``), one per result
    names: list[str] = dataclasses.field(default_factory=list)
    path: Path | None = None
    #: the drawn matplotlib Figure (closed in pyplot, its artists kept for inspection)
    figure: Any = dataclasses.field(default=None, repr=False)


def read_result(path: str | os.PathLike) -> dict:
    """A ``reid eval --json`` report; InputFileError naming the file otherwise."""
    path = Path(path)
    try:
        report = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise InputFileError(f"cannot read result {path} ({exc.__class__.__name__})",
                             "give JSON evaluation reports (as written by reid eval)") from None
    if not isinstance(report, dict) or not isinstance(report.get("cmc"), list):
        raise InputFileError(f"{path} has no CMC curve",
                             "give a JSON evaluation report (as written by reid eval)")
    _check_curve(path, "cmc", report["cmc"])
    _check_metrics(path, "", report)
    num_trials = report.get("num_trials", 1)
    if isinstance(num_trials, bool) or not isinstance(num_trials, int) or num_trials < 1:
        raise InputFileError(f"{path}: field 'num_trials' is {num_trials!r}, not a count ≥ 1",
                             "give a JSON evaluation report (as written by reid eval)")
    trials = report.get("trials", [])
    if not isinstance(trials, list):
        raise InputFileError(f"{path}: field 'trials' is not a list",
                             "give a JSON evaluation report (as written by reid eval)")
    for i, trial in enumerate(trials):
        if not isinstance(trial, dict):
            raise InputFileError(f"{path}: field 'trials[{i}]' is not an object",
                                 "give a JSON evaluation report (as written by reid eval)")
        if trial.get("cmc") is not None:
            _check_curve(path, f"trials[{i}].cmc", trial["cmc"])
        _check_metrics(path, f"trials[{i}].", trial)
    return report


#: the single-number metrics of a report, each a fraction in [0, 1] or null (undefined)
METRIC_KEYS = ("mAP", "mINP")


def _is_fraction(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) \
        and math.isfinite(value) and 0.0 <= value <= 1.0


def _check_metrics(path: Path, prefix: str, entry: dict) -> None:
    """InputFileError naming the file and key unless each of :data:`METRIC_KEYS` present in
    ``entry`` is null or a finite fraction in [0, 1] (a string, a percentage or NaN would
    print a wrong or empty legend)."""
    for key in METRIC_KEYS:
        value = entry.get(key)
        if value is not None and not _is_fraction(value):
            raise InputFileError(f"{path}: field '{prefix}{key}' is {value!r}, not a fraction "
                                 "in [0, 1] or null",
                                 "evaluate again and plot the new JSON report (metrics are "
                                 "numbers, not text or percentages)")


def _check_curve(path: Path, field: str, values) -> None:
    """InputFileError naming the file and field unless ``values`` is a non-empty list of
    finite fractions in [0, 1] (a CMC curve; NaN would draw nothing and say nothing)."""
    if not isinstance(values, list) or not values:
        raise InputFileError(f"{path}: field '{field}' is not a non-empty list",
                             "give a JSON evaluation report (as written by reid eval)")
    for i, v in enumerate(values):
        if not _is_fraction(v):
            raise InputFileError(f"{path}: field '{field}[{i}]' is {v!r}, not a fraction in "
                                 "[0, 1]",
                                 "evaluate again and plot the new JSON report (a CMC value "
                                 "must be a finite number)")


#: how the papers write the fitted methods' names
METHOD_NAMES = {"cdpcf": "C-DPCF", "dpcf": "DPCF", "avgp": "AvgP+XQDA",
                "avgp-pad": "AvgP+pad.+XQDA", "xqda": "XQDA", "warca": "WARCA",
                "kissme": "KISSME", "lfda": "LFDA", "klfda": "kLFDA", "rpcca": "rPCCA",
                "pca": "PCA"}
#: one (marker, linestyle) pair per curve: curve i gets MARKERS[i % 8] and
#: LINESTYLES[(i + i // 8) % 4], so the first 32 curves all differ in the pair
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
LINESTYLES = ("-", "--", "-.", ":")


def report_label(report: dict) -> str:
    """Legend name of a ``reid eval --json`` report, built from the report alone: what made
    the vectors, the adaptation, the fitted method (or the distance when none) and the
    re-ranking — e.g. ``hsv-stripes (euclidean)``, ``hsv-stripes + XQDA``, ``color-grid +
    C-DPCF``, ``BoT tiny bnneck + DART3 LITE (euclidean)``, ``BoT resnet50 bnneck
    (euclidean) + k-reciprocal re-ranking``. ``"results"`` when the report names nothing."""
    prov = report.get("store_provenance")
    parts = [p for p in (vectors_label(prov, report.get("feature")), adapt_label(prov)) if p]
    model = report.get("model")
    method = model.get("method") if isinstance(model, dict) else None
    if method:
        parts.append(METHOD_NAMES.get(method, str(method)))
        label = " + ".join(parts)
    else:
        label = " + ".join(parts) or "results"
        if parts and report.get("distance"):
            label += f" ({report['distance']})"
    if report.get("rerank"):
        label += " + k-reciprocal re-ranking"
    return label


def distinct_labels(names: Sequence[str], paths: Sequence[str | os.PathLike],
                    stores: Sequence[str | None] | None = None) -> list[str]:
    """``names`` with every clashing one suffixed by what tells its report apart: the name
    of the store it evaluated (``stores``, the reports' ``store`` field) when those differ
    within each clash, else the file name stem, else the parent folder/stem, else the whole
    path (never a counter alone)."""
    out = list(names)
    if stores is not None:
        _tag_by_store(out, names, stores)
    _tag_by_path(out, names, paths)
    seen: dict[str, int] = {}
    for i, name in enumerate(out):                    # the very same file given twice
        seen[name] = seen.get(name, 0) + 1
        if seen[name] > 1:
            out[i] = f"{name} [copy {seen[name]}]"
    return out


def _tag_by_store(out: list[str], names: Sequence[str],
                  stores: Sequence[str | None]) -> None:
    """Suffix each clash of ``out`` by its stores' stems, where those differ within it."""
    tags = [Path(s).stem if s else None for s in stores]
    for name in {n for n in out if out.count(n) > 1}:
        group = [i for i, n in enumerate(names) if n == name]
        if all(tags[i] for i in group) and len({tags[i] for i in group}) == len(group):
            for i in group:
                out[i] = f"{name} [{tags[i]}]"


def _tag_by_path(out: list[str], names: Sequence[str],
                 paths: Sequence[str | os.PathLike]) -> None:
    """Suffix each remaining clash of ``out`` by the file stem, else the parent folder/stem,
    else the whole path."""
    for depth in (1, 2, None):
        clashes = {n for n in out if out.count(n) > 1}
        if not clashes:
            break
        for i, (name, path) in enumerate(zip(names, paths)):
            if out[i] in clashes:
                out[i] = f"{name} [{_path_tag(Path(path), depth)}]"


def _path_tag(p: Path, depth: int | None) -> str:
    return p.stem if depth == 1 else (f"{p.parent.name}/{p.stem}" if depth == 2 else str(p))


def result_label(report: dict, path: str | os.PathLike) -> str:
    """:func:`report_label` (kept for callers of the earlier name; ``path`` is unused)."""
    return report_label(report)


def cmc_curves(report: dict, max_rank: int) -> tuple[np.ndarray, np.ndarray | None]:
    """Mean CMC [R] and the std over trials [R] (None for one trial), in percent."""
    trials = [t.get("cmc") for t in report.get("trials", []) if t.get("cmc")]
    if len(trials) > 1:
        r = min(max_rank, min(len(c) for c in trials))
        stack = np.array([c[:r] for c in trials], dtype=float) * 100
        return stack.mean(0), stack.std(0)
    mean = np.asarray(report["cmc"][:max_rank], dtype=float) * 100
    return mean, None


def legend_entry(name: str, mean: np.ndarray, report: dict) -> str:
    """``name — R1 55.9 %, mAP 43.3 %`` (mAP ``—`` where the protocol defines none)."""
    m_ap = report.get("mAP")
    ap = f"{100 * m_ap:.1f} %" if isinstance(m_ap, (int, float)) and math.isfinite(m_ap) \
        else "—"
    return f"{name} — R1 {mean[0]:.1f} %, mAP {ap}"


def line_style(i: int, num_ranks: int, num_curves: int = 1) -> dict[str, Any]:
    """Marker, linestyle and marker positions of curve ``i`` of ``num_curves``: a marker
    every ``step`` ranks (step ≥ the number of curves, so up to that many equal curves
    put their markers on different ranks; ≥ R/10, at most R/3), shifted by ``i``."""
    step = max(1, min(max(num_ranks // 10, num_curves), num_ranks // 3))
    style = {"marker": MARKERS[i % len(MARKERS)],
             "linestyle": LINESTYLES[(i + i // len(MARKERS)) % len(LINESTYLES)],
             "markevery": (i % step, step), "markersize": 5}
    if i % 2:                                  # every other curve: hollow markers
        style["markerfacecolor"] = "none"
    return style


def rank_ticks(num_ranks: int) -> list[int]:
    """Integer x ticks for ranks 1..R: 1 and the multiples of the smallest step in 1, 5,
    10, 20, 50, 100 … that leaves at most 10 of them (R = 20: 1, 5, 10, 15, 20)."""
    steps = [1] + [m * 10 ** e for e in range(7) for m in (5, 10, 20) if m * 10 ** e >= 5]
    step = next(s for s in sorted(set(steps)) if num_ranks / s <= 10)
    return sorted({1, *range(step, num_ranks + 1, step)})


#: figure width in inches (a printed column/page width: ≥ 6.5 in) and legend font size
FIGURE_WIDTH = 6.5
LEGEND_POINTS = 9


def default_title(report: dict, path: str | os.PathLike) -> str:
    """``CMC — market1501, protocol market, 10 trials`` from the first report; the report's
    file stem where it names no dataset, no protocol part where it names none."""
    parts = [str(report.get("dataset") or Path(path).stem)]
    if report.get("protocol"):
        parts.append(f"protocol {report['protocol']}")
    trials = report.get("num_trials", 1)
    if isinstance(trials, int) and trials > 1:
        parts.append(f"{trials} trials")
    return "CMC — " + ", ".join(parts)


def plot_cmc(results: Sequence[str | os.PathLike], out: str | os.PathLike | None = None, *,
             labels: Sequence[str] | None = None, max_rank: int = 20, title: str | None = None,
             force: bool = False) -> CMCPlot:
    """One CMC curve per result, each with its own (marker, linestyle); legend ``name — R1
    x %, mAP y %`` with ``name`` from ``labels`` or else :func:`report_label`; clashing
    names are told apart by their stores or file names (:func:`distinct_labels`)."""
    check_param("CMC plot", "max_rank", max_rank, Interval(int, 1))
    if not results:
        raise UsageError("no result to plot", "give one or more JSON evaluation reports")
    labels = list(labels or [])
    if len(labels) > len(results):
        raise UsageError(f"{len(labels)} {param('labels')} values for {len(results)} "
                         f"result{'s' * (len(results) != 1)}",
                         f"give at most one {param('labels')} per result, in order")
    for label in labels:
        if not str(label).strip():
            raise UsageError(f"a {param('labels')} value is empty",
                             "give each curve a name, or leave its label out for the default")
    plt = pyplot()
    reports = [read_result(p) for p in results]
    names = labels[:len(reports)]
    names += [report_label(r) for r in reports[len(names):]]
    names = distinct_labels(names, results, [r.get("store") for r in reports])
    fig, ax = plt.subplots(figsize=(FIGURE_WIDTH, 4.6 + 0.22 * len(reports)),
                           layout="constrained")
    curves: dict[str, tuple[np.ndarray, np.ndarray | None]] = {}
    legend = []
    longest = 1
    for i, (name, report) in enumerate(zip(names, reports)):
        mean, std = cmc_curves(report, max_rank)
        ranks = np.arange(1, len(mean) + 1)
        longest = max(longest, len(mean))
        curves[name] = (mean, std)
        label = legend_entry(name, mean, report)
        legend.append(label)
        line, = ax.plot(ranks, mean, label=label, linewidth=1.4,
                        **line_style(i, len(mean), len(reports)))
        if std is not None:
            ax.fill_between(ranks, mean - std, mean + std, alpha=0.15, color=line.get_color())
    ax.set_xticks(rank_ticks(longest))
    ax.set_xlim(0.5, longest + 0.5)
    ax.set_xlabel("rank")
    ax.set_ylabel("matching rate (%)")
    ax.set_ylim(0, 100)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.13), fontsize=LEGEND_POINTS,
              frameon=False, ncols=1)                 # below the axes: never over a curve
    ax.set_title(title or default_title(reports[0], results[0]), fontsize=11)
    plot = CMCPlot(curves=curves, labels=legend, names=names, figure=fig)
    plot.path = finish_figure(fig, out, force=force,
                              metadata={"inputs": ",".join(map(str, results))},
                              inputs=list(results))
    return plot


__all__ = ["plot_cmc", "CMCPlot", "read_result", "cmc_curves", "report_label",
           "result_label", "distinct_labels", "legend_entry", "rank_ticks", "default_title",
           "METHOD_NAMES", "FIGURE_WIDTH", "LEGEND_POINTS"]
