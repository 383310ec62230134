"""Rank lists: each query image beside its top-k gallery images, green border = same person,
red = another (Person30K paper, Fig. 4). Distances and the gallery rule (junk and same
person + same camera removed, E1) are exactly those of ``reid eval``. A store whose queries
or gallery are unlabelled (pid -1, ``reid extract --images``) is drawn without correctness:
the top-k of the whole gallery, grey borders, each tile titled with its distance — what
``reid eval --search`` lists."""
from __future__ import annotations

import dataclasses
import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from reidcli.errors import ParameterError, UsageError
from reidcli.naming import param
from reidcli.params import Interval, check_param
from reidcli.evaluation.protocols import (TrialLabels, auto_protocol, identity_codes,
                                          make_groups)
from reidcli.evaluation.run import trial_distances, trial_rows
from reidcli.evaluation.search import unlabelled_roles
from reidcli.plotting.common import finish_figure, pyplot, store_name
from reidcli.store.reader import open_store


@dataclasses.dataclass
class RankListPlot:
    """``queries`` [n] store rows; ``ranked`` [n, k] gallery store rows, best first;
    ``correct`` [n, k] bool (same identity), None for an unlabelled store;
    ``distances`` [n, k]."""

    queries: np.ndarray
    ranked: np.ndarray
    correct: np.ndarray | None
    distances: np.ndarray
    #: image files that could not be read (grey 'image not found' tiles), set by
    #: plot_ranklist
    missing: list[str] = dataclasses.field(default_factory=list)
    path: Path | None = None
    #: the drawn matplotlib Figure (closed in pyplot, its artists kept for inspection)
    figure: Any = dataclasses.field(default=None, repr=False)


def image_file(path: str, images_root: str | os.PathLike | None = None) -> Path:
    """The file of a record's image path, by the rule of ``reid adapt``'s image reader: a
    relative path under ``images_root`` (default: the current directory); an absolute one
    as stored, or — when it is gone and ``images_root`` is given — the first existing
    ``images_root/<its last 1, 2, 3 parts>``. Always absolute, so that a message names the
    place that was tried."""
    p = Path(path)
    root = Path(images_root).absolute() if images_root is not None else None
    if not p.is_absolute():
        return (root if root is not None else Path.cwd()) / p
    if root is not None and not p.is_file():
        for k in range(1, min(4, len(p.parts))):
            moved = root / Path(*p.parts[-k:])
            if moved.is_file():
                return moved
    return p


def _thumbnail(path: str | os.PathLike, size: tuple[int, int], missing: list[str]
               ) -> np.ndarray:
    """[h, w, 3] uint8 thumbnail; an unreadable file becomes a grey tile and is appended
    to ``missing`` (once per path)."""
    from PIL import Image

    path = str(path)
    try:
        with Image.open(path) as img:
            return np.asarray(img.convert("RGB").resize((size[1], size[0])))
    except OSError:
        if path not in missing:
            missing.append(path)
        return np.full((*size, 3), 200, np.uint8)


def rank_lists(store: str | os.PathLike, *, model=None, feature: str | None = None,
               trial: int = 0, queries: int = 5, query_index=None, topk: int = 10,
               seed: int = 0) -> RankListPlot:
    """The top-``topk`` gallery rows of ``queries`` seeded random scorable queries (or the
    store rows ``query_index``) under the store's protocol; for a store whose queries or
    gallery are unlabelled, of any queries over the whole gallery (``correct`` None)."""
    check_param("rank-list plot", "queries", queries, Interval(int, 1, 1000))
    check_param("rank-list plot", "topk", topk, Interval(int, 1, 1000))
    check_param("rank-list plot", "seed", seed, Interval(int, 0, 2**32 - 1))
    with open_store(store) as st:
        records, dataset = st.records, st.dataset
        proto = st.protocol
        rule = proto.eval_rule if proto is not None else None
        num_trials = proto.num_trials if proto is not None else 1
    protocol = auto_protocol(dataset, rule, num_trials)
    q_all, g_rows = trial_rows(store, trial)
    unlabelled = unlabelled_roles(records["pid"].to_numpy(np.int64), q_all, g_rows) is not None
    labels = TrialLabels.from_records(records, identity_codes(records), q_all, g_rows)
    groups = [] if unlabelled else make_groups(protocol, labels)
    scorable = np.arange(len(q_all)) if unlabelled else \
        np.concatenate([g.query_pos for g in groups]) if groups else np.array([], int)
    pos = _query_positions(store, q_all, scorable, query_index, queries, seed)
    q_rows, _, dist = trial_distances(store, model=model, feature=feature, trial=trial,
                                      query_rows=q_all[pos])
    gallery_of = {int(q): g.gallery_pos for g in groups for q in g.query_pos}
    ranked, correct, dists = [], [], []
    for i, qp in enumerate(pos):
        cols = _gallery_columns(qp, len(g_rows), gallery_of, labels, protocol, unlabelled)
        order = cols[np.argsort(dist[i, cols], kind="stable")[:topk]]
        ranked.append(g_rows[order])
        correct.append(labels.gallery_ids[order] == labels.query_ids[qp])
        dists.append(dist[i, order])
    k = min(len(r) for r in ranked)
    return RankListPlot(queries=q_rows, ranked=np.array([r[:k] for r in ranked]),
                        correct=None if unlabelled else np.array([c[:k] for c in correct]),
                        distances=np.array([d[:k] for d in dists]))


def _query_positions(store, q_all: np.ndarray, scorable: np.ndarray, query_index,
                     queries: int, seed: int) -> np.ndarray:
    """Positions in ``q_all`` of the queries shown: those of the store rows
    ``query_index``, else ``queries`` seeded random ones of ``scorable`` (sorted)."""
    if query_index is not None:
        wanted = np.asarray(query_index, np.int64)
        pos = np.flatnonzero(np.isin(q_all, wanted))
        if len(pos) != len(np.unique(wanted)):
            raise ParameterError("rank list", "query_index", ",".join(map(str, wanted.tolist())),
                                 "names rows that are not queries of this trial",
                                 "give store rows listed in the trial's query_idx")
        return pos
    if len(scorable) == 0:
        raise UsageError(f"store {store} has no scorable query", "check its protocol")
    return np.sort(np.random.default_rng(seed).choice(scorable, min(queries, len(scorable)),
                                                      replace=False))


def _gallery_columns(qp, num_gallery: int, gallery_of: dict, labels, protocol,
                     unlabelled: bool) -> np.ndarray:
    """Gallery positions query ``qp`` is ranked against: the whole gallery when unlabelled,
    else its group's gallery without same-identity same-camera images where the protocol
    drops them."""
    cols = np.arange(num_gallery) if unlabelled else \
        gallery_of.get(int(qp), np.flatnonzero(labels.gallery_pids != -1))
    if protocol.same_camera_removal and not unlabelled:
        same = (labels.gallery_ids[cols] == labels.query_ids[qp]) & \
            (labels.gallery_cams[cols] == labels.query_cams[qp])
        cols = cols[~same]
    return cols


def plot_ranklist(store: str | os.PathLike, out: str | os.PathLike | None = None, *,
                  model=None, feature: str | None = None, trial: int = 0, queries: int = 5,
                  query_index=None, topk: int = 10, seed: int = 0, force: bool = False,
                  images_root: str | os.PathLike | None = None) -> RankListPlot:
    """Draw :func:`rank_lists`: one row per query (query tile black-bordered), then the
    top-k tiles, each titled ``rank · d distance`` / ``pid P cam C``, bordered green (same
    person), red (another) or grey (unlabelled). The store's relative image paths are read
    under ``images_root`` (default: the current directory); a file that cannot be read is
    a grey tile saying 'image not found', listed in ``missing`` (the path tried) and
    counted in one warning (:func:`missing_images_message`)."""
    data = rank_lists(store, model=model, feature=feature, trial=trial, queries=queries,
                      query_index=query_index, topk=topk, seed=seed)
    with open_store(store) as st:
        paths = st.records["path"].to_numpy()
        pids = st.records["pid"].to_numpy()
        cams = st.records["camid"].to_numpy()
        name = store_name(store, st.dataset)
        what = f"model {Path(model).stem}" if model is not None else \
            f"feature {st.require_feature(feature)}"
    plt = pyplot()
    n, k = data.ranked.shape
    fig, axes = plt.subplots(n, k + 1, figsize=(TILE_WIDTH * (k + 1) + 0.2, 2.05 * n + 0.6),
                             squeeze=False, layout="constrained")
    fig.get_layout_engine().set(w_pad=0.02, h_pad=0.02, wspace=0.04, hspace=0.06)
    size = (128, 64)
    tried: set[str] = set()

    def draw(ax, row: int) -> None:
        file = image_file(paths[row], images_root)
        tried.add(str(file))
        ax.imshow(_thumbnail(file, size, data.missing))
        if str(file) in data.missing:
            ax.text(0.5, 0.5, "image\nnot found", transform=ax.transAxes, ha="center",
                    va="center", fontsize=TILE_POINTS, color="#555555")

    for i in range(n):
        q = data.queries[i]
        draw(axes[i][0], q)
        axes[i][0].set_title(f"query\npid {pids[q]} cam {cams[q]}" if data.correct is not None
                             else f"query (row {q})\ncam {cams[q]}", fontsize=TILE_POINTS,
                             fontweight="bold")
        for spine in axes[i][0].spines.values():
            spine.set_edgecolor(QUERY_COLOR)
            spine.set_linewidth(3)
        for j in range(k):
            ax = axes[i][j + 1]
            g = data.ranked[i, j]
            draw(ax, g)
            if data.correct is None:            # unlabelled: no correctness
                color = GREY
            else:
                color = GREEN if data.correct[i, j] else RED
            for spine in ax.spines.values():
                spine.set_edgecolor(color)
                spine.set_linewidth(3)
            ax.set_title(tile_label(j + 1, pids[g], cams[g], data.distances[i, j]),
                         fontsize=TILE_POINTS, color=color)
    for ax in axes.ravel():
        ax.set_xticks([])
        ax.set_yticks([])
    fig.suptitle(f"rank lists — {name}, {what}, trial {trial}", fontsize=10)
    fig.supxlabel("tile: rank · distance / pid · camera; border: green = same person, "
                  "red = another" if data.correct is not None else
                  "tile: rank · distance / pid · camera; unlabelled queries: grey borders, "
                  "no correctness", fontsize=8)
    if data.missing:
        warnings.warn(missing_images_message(data.missing, images_root,
                                             total=len(tried)), stacklevel=2)
    data.figure = fig
    data.path = finish_figure(fig, out, force=force,
                              inputs=[store] + ([model] if model is not None else []))
    return data


#: tile width (inches), tile text size (points) and border colours
TILE_WIDTH = 0.95
TILE_POINTS = 6.5
GREEN, RED, GREY, QUERY_COLOR = "#1a9850", "#d73027", "#777777", "#000000"


def tile_label(rank: int, pid, camid, distance: float) -> str:
    """Two short lines over a gallery tile: ``3 · d 0.412`` / ``pid 17 cam 2`` (``pid ?`` for
    an unlabelled image, pid −1)."""
    who = f"pid {pid}" if int(pid) >= 0 else "pid ?"
    return f"{rank} · d {distance:.3g}\n{who} cam {camid}"


def missing_images_message(missing: list[str], images_root: str | os.PathLike | None,
                           total: int | None = None) -> str:
    """One line, ``<what> — <what to do>``: how many of the ``total`` images tried were not
    found (or that none was), the first path tried, and the parameter that says where the
    store's relative image paths start."""
    where = (f"under {param('images_root', images_root)}" if images_root is not None
             else "relative to the current directory")
    if total is not None and len(missing) >= total:
        what = (f"rank list: none of the {len(missing)} image file(s) found (missing or "
                "unreadable), drawn as 'image not found' tiles")
    else:
        what = (f"rank list: {len(missing)} image file(s) missing or unreadable"
                + (f" of {total}" if total else "") + ", drawn as 'image not found' tiles")
    return (f"{what} (first tried: {missing[0]}; relative paths are read {where}) — pass "
            f"{param('images_root', 'DIR')}, the folder the store's image paths are relative "
            "to")


__all__ = ["plot_ranklist", "rank_lists", "RankListPlot", "image_file",
           "missing_images_message", "tile_label"]
