"""Intra- vs inter-class query–gallery distance histograms (DG-VAE Fig. 5(b)), split into
same-modality and cross-modality pairs when the store has several modalities."""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import numpy as np

from reidcli.evaluation.protocols import identity_codes
from reidcli.params import Interval, check_param
from reidcli.evaluation.run import trial_distances
from reidcli.plotting.common import finish_figure, pyplot
from reidcli.store.reader import open_store


@dataclasses.dataclass
class DistancePlot:
    """``groups[name]`` = sampled distances of that pair kind ("intra-class",
    "inter-class", and "… cross-modality" variants)."""

    groups: dict[str, np.ndarray]
    path: Path | None = None
    #: the drawn matplotlib Figure (closed in pyplot, its artists kept for inspection)
    figure: Any = dataclasses.field(default=None, repr=False)


#: most histogram bins (bin edges are allocated up front)
MAX_BINS = 10_000


def distance_groups(store, *, model=None, feature: str | None = None, trial: int = 0,
                    max_pairs: int = 200_000, seed: int = 0) -> dict[str, np.ndarray]:
    """Query–gallery distances grouped by same/different identity (and modality)."""
    check_param("distance plot", "max_pairs", max_pairs, Interval(int, 1))
    check_param("distance plot", "seed", seed, Interval(int, 0, 2**32 - 1))
    q_rows, g_rows, dist = trial_distances(store, model=model, feature=feature, trial=trial)
    with open_store(store) as st:
        records = st.records
    codes = identity_codes(records)
    valid_q = records["pid"].to_numpy()[q_rows] > 0
    valid_g = records["pid"].to_numpy()[g_rows] >= 0
    same = codes[q_rows][:, None] == codes[g_rows][None, :]
    keep = valid_q[:, None] & valid_g[None, :]
    modality = records["modality"].astype(str).to_numpy() if "modality" in records else \
        np.array(["visible"] * len(records))
    cross = modality[q_rows][:, None] != modality[g_rows][None, :]
    multi = len(np.unique(modality[np.concatenate([q_rows, g_rows])])) > 1
    rng = np.random.default_rng(seed)
    groups = {}
    kinds = [("intra-class", same), ("inter-class", ~same)]
    for name, mask in kinds:
        for suffix, extra in ((("", ~cross), (" cross-modality", cross)) if multi
                              else (("", np.ones_like(cross)),)):
            values = dist[keep & mask & extra]
            if len(values) > max_pairs:
                values = rng.choice(values, max_pairs, replace=False)
            if len(values):
                groups[name + suffix] = values
    return groups


def plot_distances(store: str | os.PathLike, out: str | os.PathLike | None = None, *,
                   model=None, feature: str | None = None, trial: int = 0,
                   max_pairs: int = 200_000, bins: int = 60, seed: int = 0,
                   force: bool = False) -> DistancePlot:
    """Density histograms of the distance groups on one axis."""
    check_param("distance plot", "bins", bins, Interval(int, 1, MAX_BINS))
    groups = distance_groups(store, model=model, feature=feature, trial=trial,
                             max_pairs=max_pairs, seed=seed)
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    every = np.concatenate(list(groups.values()))
    edges = np.linspace(every.min(), every.max(), bins + 1)
    for name, values in groups.items():
        ax.hist(values, bins=edges, density=True, alpha=0.5, label=f"{name} ({len(values)})")
    ax.set_xlabel("distance")
    ax.set_ylabel("density")
    ax.legend(fontsize=8)
    what = f"model {Path(model).name}" if model is not None else f"feature {feature or 'default'}"
    ax.set_title(f"query–gallery distances — {Path(store).name}, {what}", fontsize=9)
    plot = DistancePlot(groups=groups, figure=fig)
    plot.path = finish_figure(fig, out, force=force,
                              inputs=[store] + ([model] if model is not None else []))
    return plot


__all__ = ["plot_distances", "distance_groups", "DistancePlot"]
