"""t-SNE of stored embeddings coloured by camera / identity / modality / domain (DART3 Fig. 1,
DG-VAE App. G), optionally beside the same rows of another store (before/after adaptation),
both panels in one frame: one joint embedding of both stores' rows when they hold the same
feature, else the second map aligned to the first.

Uses scikit-learn's ``TSNE``: already a dependency (NMI, k-means), well kept, exact and
Barnes-Hut variants, seeded — openTSNE would add a package for speed we do not need at the
few thousand points a readable plot holds.
"""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from reidcli.errors import InputFileError, ParameterError, UsageError
from reidcli.evaluation.distances import normalize_features
from reidcli.naming import param
from reidcli.params import Interval, check_param
from reidcli.plotting.common import (adapt_label, finish_figure, pyplot, store_name,
                                     vectors_label)
from reidcli.store.reader import open_store

COLOR_BY = ("camid", "pid", "modality", "domain", "split", "dataset")


@dataclasses.dataclass
class TSNEPlot:
    """``rows`` [n] store rows shown; ``points`` one [n, 2] array per panel; ``colors`` [n]
    category of each point; ``markers`` [n] or None; ``titles`` per panel."""

    rows: np.ndarray
    points: list[np.ndarray]
    colors: np.ndarray
    markers: np.ndarray | None
    titles: list[str]
    #: True when both panels come from one t-SNE of both stores' rows (else the second map
    #: was aligned to the first)
    joint: bool = False
    path: Path | None = None
    #: the drawn matplotlib Figure (closed in pyplot, its artists kept for inspection)
    figure: Any = dataclasses.field(default=None, repr=False)


def _store_features(st, feature: str | None, rows: np.ndarray) -> tuple[str, np.ndarray]:
    name = st.require_feature(feature)
    feats = st.features(name, rows)
    bad = ~np.isfinite(feats).all(axis=1)
    if bad.any():
        raise InputFileError(f"store {st.path}: feature {name!r} has {int(bad.sum())} of the "
                             f"{len(rows)} plotted row(s) holding NaN or Inf values (first: "
                             f"store row {int(rows[np.flatnonzero(bad)[0]])})",
                             "re-extract or fix those features (t-SNE needs finite values)")
    attrs = st.feature_attrs(name)
    mode = str(attrs.get("feat_norm", "global"))
    return name, normalize_features(feats, mode, int(attrs.get("n_parts", 1)))


def choose_rows(records, max_points: int, seed: int, splits: Sequence[str] | None = None
                ) -> np.ndarray:
    """Rows to show: those of ``splits`` (all when None), junk (pid < 0) left out, a seeded
    subsample of at most ``max_points``, in ascending order."""
    keep = records["pid"].to_numpy() >= 0
    if splits:
        keep &= records["split"].isin(list(splits)).to_numpy()
    rows = np.flatnonzero(keep)
    if len(rows) > max_points:
        rows = np.sort(np.random.default_rng(seed).choice(rows, max_points, replace=False))
    if len(rows) < 5:
        present = ", ".join(sorted(map(str, records["split"].unique())))
        raise UsageError(f"only {len(rows)} rows to embed"
                         + (f" in split(s) {', '.join(splits)} (the store has: {present})"
                            if splits else ""),
                         f"give a store with more rows or other {param('splits')} values")
    return rows


#: the record columns that must agree row by row between a store and its ``compare`` store
SAME_ROW_COLUMNS = ("path", "pid", "camid")


def check_same_rows(records, other, store: str | os.PathLike,
                    compare: str | os.PathLike) -> None:
    """UsageError naming both stores unless ``other`` holds the rows of ``records`` in the
    same order (equal :data:`SAME_ROW_COLUMNS`): a point of one panel is then the same image
    in the other."""
    what = f"{param('compare', compare)} holds other rows than {store}"
    todo = "compare a store with its adapted copy (same records, same order)"
    if len(other) != len(records):
        raise UsageError(f"{what} ({len(other)} rows, not {len(records)})", todo)
    for column in SAME_ROW_COLUMNS:
        mine, theirs = records[column].to_numpy(), other[column].to_numpy()
        differ = np.flatnonzero(mine != theirs)
        if len(differ):
            i = int(differ[0])
            a, b = (getattr(v, "item", lambda v=v: v)() for v in (mine[i], theirs[i]))
            raise UsageError(f"{what} ({len(differ)} row(s) differ in {column}; first: row "
                             f"{i}, {a!r} vs {b!r})", todo)


#: dimensions kept by the PCA that precedes t-SNE (van der Maaten & Hinton 2008, §5 reduce
#: to 30–50 dimensions first): neighbour search and affinities cost O(D), the map barely moves
PCA_DIMS = 50
#: gradient-descent iterations (scikit-learn's minimum is 250; 250 of them use early
#: exaggeration): a PCA-initialised Barnes-Hut map is settled well before the default 1000
TSNE_ITERATIONS = 500


#: perplexity when none is given (sklearn's default); capped below n/3 without a word
DEFAULT_PERPLEXITY = 30.0


def embed_2d(features: np.ndarray, seed: int, perplexity: float | None = None) -> np.ndarray:
    """[n, D] → [n, 2] t-SNE: PCA to :data:`PCA_DIMS` dimensions, PCA initialisation,
    Barnes-Hut gradient on one OpenMP thread (its sums then run in one order: the same
    seed gives the same map whatever the thread count), :data:`TSNE_ITERATIONS` steps,
    perplexity capped below n/3 (a given ``perplexity`` that is capped warns; None is
    :data:`DEFAULT_PERPLEXITY`)."""
    from sklearn.decomposition import PCA
    from sklearn.manifold import TSNE
    from threadpoolctl import threadpool_limits

    from reidcli.progress import activity

    n = len(features)
    given = perplexity is not None
    perplexity = DEFAULT_PERPLEXITY if perplexity is None else perplexity
    perp = float(min(perplexity, max(2.0, (n - 1) / 3.0)))
    if given and perp < perplexity:
        import warnings

        warnings.warn(f"{param('perplexity')} {perplexity:g} is above what {n} points allow "
                      f"(below n/3): the map uses {perp:g}", stacklevel=2)
    x = features.astype(np.float64)
    with activity(f"t-SNE of {n} points", inner=True), threadpool_limits(1):
        if x.shape[1] > PCA_DIMS and n > PCA_DIMS:
            x = PCA(PCA_DIMS, svd_solver="full").fit_transform(x)
        return TSNE(n_components=2, perplexity=perp, init="pca", random_state=seed,
                    learning_rate="auto", method="barnes_hut", max_iter=TSNE_ITERATIONS
                    ).fit_transform(x.astype(np.float32))


def align_2d(points: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """``points`` [n, 2] rotated/reflected, scaled and shifted onto ``reference`` [n, 2]
    (the same rows) by orthogonal Procrustes — a t-SNE map is defined up to exactly such a
    similarity, so the aligned map shows the same neighbourhoods in the reference's frame."""
    a = reference - reference.mean(0)
    b = points - points.mean(0)
    u, sing, vt = np.linalg.svd(b.T @ a)
    rotation = u @ vt
    scale = sing.sum() / max(float((b ** 2).sum()), np.finfo(float).tiny)
    return scale * b @ rotation + reference.mean(0)


def panel_title(provenance: dict | None, feature: str, adapt_groups: Sequence[str]) -> str:
    """What a panel shows, from its store: vectors (network + feature) and adaptation, e.g.
    ``BoT tiny bnneck`` or ``BoT tiny bnneck + DART3 LITE``."""
    what = vectors_label(provenance, feature) or feature
    adapted = adapt_label(provenance) or (",".join(adapt_groups) if adapt_groups else None)
    return f"{what} + {adapted}" if adapted else what


#: most legend entries of the colour grouping (alone, or beside a marker grouping) and of
#: the marker grouping; the least frequent categories beyond them are drawn grey as "other"
MAX_COLORS = 10
MAX_COLORS_WITH_MARKERS = 7
MAX_MARKERS = 3
SHAPES = ("o", "^", "s", "D")
OTHER_COLOR = "#9e9e9e"


def legend_groups(values: np.ndarray, most: int, by: str) -> tuple[np.ndarray, list[str]]:
    """``values`` [n] of the column ``by`` → (group index [n], legend label per group): one
    group per category (``camid 3``) when there are at most ``most``, else the ``most`` − 1
    most frequent (ties: sorted order) and one ``other camid values (k)`` group for the
    rest — a legend a reader can match by colour."""
    cats, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    keep = np.arange(len(cats)) if len(cats) <= most else \
        np.sort(np.argsort(-counts, kind="stable")[:most - 1])
    slot = np.full(len(cats), len(keep), np.int64)
    slot[keep] = np.arange(len(keep))
    names = [f"{by} {cats[i]}" for i in keep]
    if len(keep) < len(cats):
        names.append(f"other {by} values ({len(cats) - len(keep)})")
    return slot[np.asarray(inverse).ravel()], names


def _color(i: int, name: str, palette) -> Any:
    return OTHER_COLOR if name.startswith("other ") else palette[i % len(palette)]


def _legend_handles(color_names: list[str], marker_names: list[str]) -> list:
    """One filled-circle entry per colour group (``camid 3``), then one dark entry per
    marker group (``domain market``)."""
    from matplotlib.lines import Line2D

    palette = _palette()
    handles = [Line2D([], [], linestyle="none", marker="o", markersize=6,
                      color=_color(i, n, palette), label=n) for i, n in enumerate(color_names)]
    handles += [Line2D([], [], linestyle="none", marker=SHAPES[i], markersize=6,
                       color="#333333", label=n) for i, n in enumerate(marker_names)]
    return handles


def _palette() -> list:
    return [pyplot().get_cmap("tab10")(i) for i in range(10)]


def feature_change(before: np.ndarray, after: np.ndarray) -> float:
    """Mean ‖after − before‖ / mean ‖before‖ over the rows, in percent ([n, D] each, as
    embedded): says how much an adaptation moved the vectors, so two panels that look
    alike are read as "little changed", not as a broken plot."""
    scale = float(np.linalg.norm(before, axis=1).mean()) or 1.0
    return 100.0 * float(np.linalg.norm(after - before, axis=1).mean()) / scale


def plot_tsne(store: str | os.PathLike, out: str | os.PathLike | None = None, *,
              feature: str | None = None, color_by: str = "camid",
              marker_by: str | None = None, max_points: int = 2000,
              compare: str | os.PathLike | None = None, splits: Sequence[str] | None = None,
              seed: int = 0, perplexity: float | None = None, force: bool = False
              ) -> TSNEPlot:
    """One panel per store (``compare`` adds the second: "before" = ``store``, "after" =
    ``compare``), same rows and colours in both. Two stores of the same feature and
    dimension are embedded jointly (one t-SNE of the 2n rows, split in two), so distances
    across the panels compare; otherwise (another descriptor) the second map is aligned
    to the first (:func:`align_2d`). Both panels share their axis limits."""
    _check_tsne_params(max_points, perplexity, seed, color_by, marker_by)
    stores = [store] + ([compare] if compare is not None else [])
    with open_store(store) as first:
        records = first.records
        rows = choose_rows(records, max_points, seed, splits)
        colors = records[color_by].to_numpy()[rows]
        markers = records[marker_by].to_numpy()[rows] if marker_by else None
    features, names, titles = _read_panels(stores, records, feature, rows,
                                           compared=compare is not None)
    joint = len(features) == 2 and names[0] == names[1] \
        and features[0].shape[1] == features[1].shape[1]
    panels = _embed_panels(features, len(rows), joint, seed, perplexity)
    plt = pyplot()
    fig, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels) + 1.9, 4.8),
                             squeeze=False, layout="constrained")
    color_keys, color_names = legend_groups(colors, MAX_COLORS if markers is None
                                            else MAX_COLORS_WITH_MARKERS, color_by)
    marker_keys, marker_names = legend_groups(markers, MAX_MARKERS, marker_by) \
        if markers is not None else (None, [None])
    palette = _palette()
    every = np.concatenate(panels)
    pad = 0.05 * (every.max(0) - every.min(0))
    for ax, pts, title in zip(axes[0], panels, titles):
        _scatter_groups(ax, pts, color_keys, color_names, marker_keys, marker_names, palette)
        ax.set_title(title, fontsize=9)
        ax.set_xlim(every[:, 0].min() - pad[0], every[:, 0].max() + pad[0])
        ax.set_ylim(every[:, 1].min() - pad[1], every[:, 1].max() + pad[1])
        ax.set_xticks([])
        ax.set_yticks([])
    axes[0][-1].legend(handles=_legend_handles(color_names, [m for m in marker_names if m]),
                       fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0),
                       borderaxespad=0.0, frameon=False, handletextpad=0.3)
    with open_store(store) as st:
        name = store_name(store, st.dataset)
    fig.suptitle(f"t-SNE of {name} — {names[0]}", fontsize=10)
    fig.supxlabel(_caption(len(rows), splits, color_by, marker_by, store, compare, joint, seed,
                           features), fontsize=8)
    plot = TSNEPlot(rows=rows, points=panels, colors=colors, markers=markers, titles=titles,
                    joint=joint, figure=fig)
    plot.path = finish_figure(fig, out, force=force,
                              inputs=stores)
    return plot


def _check_tsne_params(max_points: int, perplexity: float | None, seed: int, color_by: str,
                       marker_by: str | None) -> None:
    """ParameterError on a bad ``max_points``, ``perplexity``, ``seed``, ``color_by`` or
    ``marker_by``."""
    check_param("t-SNE plot", "max_points", max_points, Interval(int, 5))
    if perplexity is not None:
        check_param("t-SNE plot", "perplexity", perplexity,
                    Interval(float, 0, None, "neither"))
    check_param("t-SNE plot", "seed", seed, Interval(int, 0, 2**32 - 1))
    for name, value in (("color_by", color_by), ("marker_by", marker_by)):
        if value is not None and value not in COLOR_BY:
            raise ParameterError("t-SNE plot", name, value, "is unknown",
                                 f"use one of {', '.join(COLOR_BY)}")


def _read_panels(stores: list, records, feature: str | None, rows: np.ndarray,
                 compared: bool) -> tuple[list[np.ndarray], list[str], list[str]]:
    """(features [len(rows), D] of each store, their feature names, panel titles); a
    compared store must hold the same rows as the first."""
    features, names, titles = [], [], []
    roles = ["before: ", "after: "] if compared else [""]
    for path, role in zip(stores, roles):
        with open_store(path) as st:
            if path is not stores[0]:
                check_same_rows(records, st.records, stores[0], path)
            name, feats = _store_features(st, feature, rows)
            features.append(feats)
            names.append(name)
            titles.append(f"{role}{panel_title(st.provenance, name, st.adapt_methods)}\n"
                          f"{Path(path).name}")
    return features, names, titles


def _embed_panels(features: list[np.ndarray], n: int, joint: bool, seed: int,
                  perplexity: float | None) -> list[np.ndarray]:
    """The 2-D points [n, 2] of each panel: one t-SNE of both stores' rows when ``joint``,
    else one per store with the later ones aligned to the first."""
    if joint:
        both = embed_2d(np.concatenate(features), seed, perplexity)
        return [both[:n], both[n:]]
    panels = [embed_2d(f, seed, perplexity) for f in features]
    panels[1:] = [align_2d(p, panels[0]) for p in panels[1:]]
    return panels


def _scatter_groups(ax, pts: np.ndarray, color_keys, color_names, marker_keys, marker_names,
                    palette) -> None:
    """One scatter per (colour, marker) group of the points [n, 2] of a panel."""
    for ci, cname in enumerate(color_names):
        for mi, mname in enumerate(marker_names):
            sel = color_keys == ci
            if marker_keys is not None:
                sel &= marker_keys == mi
            if not sel.any():
                continue
            ax.scatter(pts[sel, 0], pts[sel, 1], s=9, color=_color(ci, cname, palette),
                       marker=SHAPES[mi], alpha=0.8, linewidths=0.6,
                       label=f"_{cname}, {mname}")


def _caption(n: int, splits, color_by: str, marker_by: str | None, store, compare,
             joint: bool, seed: int, features: list[np.ndarray]) -> str:
    """The figure's caption: points, splits, colour and marker; for a comparison, which
    store is where, how the maps were made and (joint) how far the features moved."""
    what = (f"{n} points" + (f" of {', '.join(splits)}" if splits else "")
            + f", colour = {color_by}" + (f", marker = {marker_by}" if marker_by else ""))
    if compare is not None:
        same = (f"same rows, one joint t-SNE (seed {seed}), shared axes" if joint else
                f"same rows, right map aligned to the left (seed {seed}), shared axes")
        what += f"; left: {Path(store).stem}, right: {Path(compare).stem} — {same}"
        if joint:
            what += f"; features moved by {feature_change(*features):.3g} % on average"
    return what


__all__ = ["plot_tsne", "TSNEPlot", "check_same_rows", "choose_rows", "embed_2d", "align_2d",
           "panel_title", "legend_groups", "feature_change", "COLOR_BY", "MAX_COLORS", "MAX_MARKERS"]
