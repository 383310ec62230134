"""CMC curves of several ``reid eval --json`` results on one axis (mean ± std band)."""
from __future__ import annotations

import dataclasses
import json
import math
import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from reidcli.errors import InputFileError
from reidcli.params import Interval, check_param
from reidcli.plotting.common import finish_figure, pyplot


@dataclasses.dataclass
class CMCPlot:
    """``curves[label] = (mean [R], std [R] or None)`` in percent, ranks 1..R."""

    curves: dict[str, tuple[np.ndarray, np.ndarray | None]]
    labels: list[str]
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
    return report


def _check_curve(path: Path, field: str, values) -> None:
    """InputFileError naming the file and field unless ``values`` is a non-empty list of
    finite fractions in [0, 1] (a CMC curve; NaN would draw nothing and say nothing)."""
    if not isinstance(values, list) or not values:
        raise InputFileError(f"{path}: field '{field}' is not a non-empty list",
                             "give a JSON evaluation report (as written by reid eval)")
    for i, v in enumerate(values):
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) \
            and 0.0 <= v <= 1.0
        if not ok:
            raise InputFileError(f"{path}: field '{field}[{i}]' is {v!r}, not a fraction in "
                                 "[0, 1]",
                                 "re-run reid eval --json for this result (a CMC value must be "
                                 "a finite number)")


#: how the papers write the fitted methods' names
METHOD_NAMES = {"cdpcf": "C-DPCF", "dpcf": "DPCF", "avgp": "AvgP+XQDA",
                "avgp-pad": "AvgP+pad.+XQDA", "xqda": "XQDA", "warca": "WARCA",
                "kissme": "KISSME", "lfda": "LFDA", "klfda": "kLFDA", "rpcca": "rPCCA",
                "pca": "PCA"}


def result_label(report: dict, path: str | os.PathLike) -> str:
    """Method name of a result: its fitted model's method, else the feature, else the stem."""
    model = report.get("model") or {}
    name = model.get("method") if isinstance(model, dict) else None
    if name:
        return METHOD_NAMES.get(name, name)
    return report.get("feature") or Path(path).stem


def cmc_curves(report: dict, max_rank: int) -> tuple[np.ndarray, np.ndarray | None]:
    """Mean CMC [R] and the std over trials [R] (None for one trial), in percent."""
    trials = [t.get("cmc") for t in report.get("trials", []) if t.get("cmc")]
    if len(trials) > 1:
        r = min(max_rank, min(len(c) for c in trials))
        stack = np.array([c[:r] for c in trials], dtype=float) * 100
        return stack.mean(0), stack.std(0)
    mean = np.asarray(report["cmc"][:max_rank], dtype=float) * 100
    return mean, None


def plot_cmc(results: Sequence[str | os.PathLike], out: str | os.PathLike | None = None, *,
             labels: Sequence[str] | None = None, max_rank: int = 20, title: str | None = None,
             force: bool = False) -> CMCPlot:
    """One CMC curve per result (legend "method (R1 xx.x%)", as in the papers' figures)."""
    check_param("CMC plot", "max_rank", max_rank, Interval(int, 1))
    plt = pyplot()
    reports = [read_result(p) for p in results]
    names = list(labels or [])
    names += [result_label(r, p) for r, p in zip(reports[len(names):], results[len(names):])]
    fig, ax = plt.subplots(figsize=(6, 4.5))
    curves: dict[str, tuple[np.ndarray, np.ndarray | None]] = {}
    legend = []
    for name, report in zip(names, reports):
        mean, std = cmc_curves(report, max_rank)
        ranks = np.arange(1, len(mean) + 1)
        key = name if name not in curves else f"{name} ({len(curves)})"
        curves[key] = (mean, std)
        label = f"{key} (R1 {mean[0]:.1f}%)"
        legend.append(label)
        ax.plot(ranks, mean, marker="o", markersize=3, label=label)
        if std is not None:
            ax.fill_between(ranks, mean - std, mean + std, alpha=0.2)
    ax.set_xlabel("rank")
    ax.set_ylabel("matching rate (%)")
    ax.set_ylim(0, 100)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    first = reports[0]
    ax.set_title(title or f"CMC — {first.get('dataset') or 'dataset'}, protocol "
                          f"{first.get('protocol', '?')}"
                          + (f", {first.get('num_trials')} trials" if first.get("num_trials", 1) > 1
                             else ""))
    plot = CMCPlot(curves=curves, labels=legend, figure=fig)
    plot.path = finish_figure(fig, out, force=force,
                              metadata={"inputs": ",".join(map(str, results))},
                              inputs=list(results))
    return plot


__all__ = ["plot_cmc", "CMCPlot", "read_result", "cmc_curves", "result_label"]
