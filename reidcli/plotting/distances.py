"""Intra- vs inter-class query–gallery distance histograms (DG-VAE paper Fig. 5(b)), split into
same-modality and cross-modality pairs when the store has several modalities, and the gap
δ = mean(inter-class) − mean(intra-class) (DG-VAE paper §4.5 reads δ ≈ 1.4 on RegDB and ≈ 0.4 on
SYSU-MM01 off Fig. 5(b); computed on the cross-modality pairs when there are any).

Distances: by default (``normalize=None`` without a fitted model) the Euclidean distance
between L2-normalised features, on the [0, 2] scale of the paper's figure, so that stores of
different models compare; ``normalize=False`` uses the distance ``reid eval`` ranks by (the
feature's own normalisation and metric, or a fitted model's distance)."""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import numpy as np

from reidcli.errors import ParameterError
from reidcli.evaluation.distances import check_features, l2_normalize
from reidcli.evaluation.protocols import identity_codes
from reidcli.params import Interval, check_param
from reidcli.evaluation.run import trial_distances, trial_rows
from reidcli.plotting.common import finish_figure, pyplot, store_name
from reidcli.store.reader import open_store


@dataclasses.dataclass
class DistancePlot:
    """``groups[name]`` = sampled distances of that pair kind ("intra-class",
    "inter-class", and "… cross-modality" variants); ``gap`` = δ, mean inter-class minus mean
    intra-class distance (cross-modality pairs when there are any; None without both kinds);
    ``normalized``: the distances are Euclidean between L2-normalised features."""

    groups: dict[str, np.ndarray]
    gap: float | None = None
    normalized: bool = False
    path: Path | None = None
    #: the drawn matplotlib Figure (closed in pyplot, its artists kept for inspection)
    figure: Any = dataclasses.field(default=None, repr=False)


#: most histogram bins (bin edges are allocated up front)
MAX_BINS = 10_000


def resolve_normalize(normalize: bool | None, model) -> bool:
    """``None`` (auto): normalise store features, not distances through a fitted model (the
    model defines its own distance); ParameterError for ``True`` with a model."""
    if normalize is None:
        return model is None
    if normalize and model is not None:
        raise ParameterError("distance plot", "normalize", True,
                             "cannot apply through a fitted model (the model defines its own "
                             "distance)", "plot the store's features without the model, or "
                             "turn normalisation off")
    return bool(normalize)


def normalized_distances(store, *, feature: str | None = None, trial: int = 0
                         ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Query rows [q], gallery rows [g] and the Euclidean distances [q, g] between the
    L2-normalised store features of one protocol trial (values in [0, 2])."""
    q_rows, g_rows = trial_rows(store, trial)
    with open_store(store) as st:
        name = st.require_feature(feature) if feature is not None else st.default_feature()
        q = l2_normalize(check_features(st.features(name, q_rows), "query features"))
        g = l2_normalize(check_features(st.features(name, g_rows), "gallery features"))
    q, g = q.astype(np.float64), g.astype(np.float64)
    sq = (q * q).sum(1)[:, None] + (g * g).sum(1)[None, :] - 2 * q @ g.T
    return q_rows, g_rows, np.sqrt(np.maximum(sq, 0.0))


def distance_gap(groups: dict[str, np.ndarray]) -> float | None:
    """δ = mean inter-class − mean intra-class distance, on the cross-modality groups when
    ``groups`` has them (DG-VAE paper Fig. 5(b)); None unless both kinds are present."""
    suffix = " cross-modality" if any(k.endswith(" cross-modality") for k in groups) else ""
    intra, inter = groups.get("intra-class" + suffix), groups.get("inter-class" + suffix)
    if intra is None or inter is None:
        return None
    return float(inter.mean() - intra.mean())


def distance_groups(store, *, model=None, feature: str | None = None, trial: int = 0,
                    max_pairs: int = 200_000, seed: int = 0,
                    normalize: bool | None = None) -> dict[str, np.ndarray]:
    """Query–gallery distances grouped by same/different identity (and modality); see the
    module doc for ``normalize``."""
    check_param("distance plot", "max_pairs", max_pairs, Interval(int, 1))
    check_param("distance plot", "seed", seed, Interval(int, 0, 2**32 - 1))
    if resolve_normalize(normalize, model):
        q_rows, g_rows, dist = normalized_distances(store, feature=feature, trial=trial)
    else:
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
                   normalize: bool | None = None, force: bool = False) -> DistancePlot:
    """Density histograms of the distance groups on one axis, δ in the title."""
    check_param("distance plot", "bins", bins, Interval(int, 1, MAX_BINS))
    normalized = resolve_normalize(normalize, model)
    groups = distance_groups(store, model=model, feature=feature, trial=trial,
                             max_pairs=max_pairs, seed=seed, normalize=normalized)
    gap = distance_gap(groups)
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 4.3), layout="constrained")
    every = np.concatenate(list(groups.values()))
    edges = np.linspace(every.min(), every.max(), bins + 1)
    for name, values in groups.items():
        ax.hist(values, bins=edges, density=True, alpha=0.5, label=f"{name} ({len(values)})")
    ax.set_xlabel("Euclidean distance between L2-normalised features" if normalized
                  else "distance (as reid eval ranks)")
    ax.set_ylabel("density")
    ax.legend(fontsize=8)
    with open_store(store) as st:
        name = store_name(store, st.dataset)
        what = f"model {Path(model).stem}" if model is not None else \
            f"feature {st.require_feature(feature)}"
    cross = " cross-modality" if any(k.endswith(" cross-modality") for k in groups) else ""
    delta = "" if gap is None else f"\nδ{cross} = mean inter − mean intra = {gap:.3f}"
    ax.set_title(f"query–gallery distances — {name}, {what}{delta}", fontsize=9)
    plot = DistancePlot(groups=groups, gap=gap, normalized=normalized, figure=fig)
    plot.path = finish_figure(fig, out, force=force,
                              inputs=[store] + ([model] if model is not None else []))
    return plot


__all__ = ["plot_distances", "distance_groups", "distance_gap", "normalized_distances",
           "resolve_normalize", "DistancePlot"]
