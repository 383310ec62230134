"""Training curves from a run directory's ``metrics.csv`` (written by the training engine):
every ``loss*`` column, the learning rate, and accuracy when logged, against iterations."""
from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from reidcli.errors import InputFileError
from reidcli.plotting.common import finish_figure, pyplot


@dataclasses.dataclass
class TrainingPlot:
    """``series[column]`` = (iterations [n], values [n]) of every plotted column."""

    series: dict[str, tuple[np.ndarray, np.ndarray]]
    path: Path | None = None
    #: the drawn matplotlib Figure (closed in pyplot, its artists kept for inspection)
    figure: Any = dataclasses.field(default=None, repr=False)


def read_metrics(run_dir: str | os.PathLike) -> pd.DataFrame:
    path = Path(run_dir) / "metrics.csv"
    try:
        frame = pd.read_csv(path)
    except (OSError, ValueError) as exc:
        raise InputFileError(f"cannot read {path} ({exc.__class__.__name__})",
                             "give a run directory written by reid train") from None
    if "iteration" not in frame or frame.empty:
        raise InputFileError(f"{path} has no logged iterations",
                             "train longer or log more often (a smaller log_every)")
    return frame


def plot_training(run_dir: str | os.PathLike, out: str | os.PathLike | None = None, *,
                  force: bool = False) -> TrainingPlot:
    """Panels: losses, learning rate, accuracy (if logged); epoch boundaries dotted."""
    frame = read_metrics(run_dir)
    x = frame["iteration"].to_numpy()
    losses = [c for c in frame.columns if c.startswith("loss")]
    panels = [("loss", losses), ("learning rate", ["lr"] if "lr" in frame else []),
              ("accuracy", [c for c in ("acc",) if c in frame])]
    panels = [(t, cols) for t, cols in panels if cols]
    plt = pyplot()
    fig, axes = plt.subplots(1, len(panels), figsize=(4.5 * len(panels), 3.6), squeeze=False)
    series = {}
    ends = frame.groupby("epoch")["iteration"].max().to_numpy() if "epoch" in frame else []
    for ax, (title, cols) in zip(axes[0], panels):
        for col in cols:
            y = pd.to_numeric(frame[col], errors="coerce").to_numpy(dtype=float)
            series[col] = (x, y)
            ax.plot(x, y, label=col)
        for end in ends[:-1]:
            ax.axvline(end, color="grey", linestyle=":", linewidth=0.7)
        if title == "learning rate":
            ax.set_yscale("log")
        ax.set_xlabel("iteration")
        ax.set_title(title, fontsize=9)
        if len(cols) > 1:
            ax.legend(fontsize=8)
    config_path = Path(run_dir) / "config.json"
    name = Path(run_dir).name
    if config_path.exists():
        cfg = json.loads(config_path.read_text()).get("config", {})
        name = f"{cfg.get('method', '?')} on {cfg.get('dataset', '?')} ({cfg.get('backbone', '?')})"
    fig.suptitle(f"training — {name}", fontsize=10)
    plot = TrainingPlot(series=series, figure=fig)
    plot.path = finish_figure(fig, out, force=force,
                              inputs=[Path(run_dir) / "metrics.csv"])
    return plot


__all__ = ["plot_training", "read_metrics", "TrainingPlot"]
