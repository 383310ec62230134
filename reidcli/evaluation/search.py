"""``reid eval --search K``: each query's K nearest gallery rows, for stores whose queries or
gallery carry no identities (pid -1 everywhere, e.g. ``reid extract --images`` of an
unlabelled folder), where CMC/mAP have nothing to count (docs/cli.md, "Any image folder").

Distances are exactly ``reid eval``'s (feature normalisation, fitted model, metric:
:mod:`reidcli.evaluation.run`). Queries go in blocks of ``block_rows`` (default: as many as
fit 2^24 distances); each block's [b, G] distances are reduced to their K smallest at once
(``torch.topk`` on the device, ``np.argpartition`` on NumPy), then ordered by (distance,
gallery row), so ties rank the lower store row first. A row that is both a query and a
gallery row is never its own match.
"""
from __future__ import annotations

import csv
import dataclasses
import io
import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from reidcli.evaluation.errors import EvaluationError
from reidcli.evaluation.labelled import check_labelled, unlabelled_roles  # noqa: F401
from reidcli.naming import param
from reidcli.params import Interval, check_param

#: CSV columns of a search result (one line per query and rank)
CSV_COLUMNS = ("query_row", "query_path", "query_pid", "query_camid", "rank", "gallery_row",
               "gallery_path", "gallery_pid", "gallery_camid", "distance")


@dataclasses.dataclass
class SearchResult:
    """``query_rows`` [q] store rows; ``gallery_rows`` [q, k] store rows, nearest first;
    ``distances`` [q, k]; ``meta``: store, feature, distance, trial, k."""

    query_rows: np.ndarray
    gallery_rows: np.ndarray
    distances: np.ndarray
    meta: dict[str, Any]


def topk_smallest(block, k: int, backend=None) -> tuple[np.ndarray, np.ndarray]:
    """(positions [b, k], values [b, k]) of the ``k`` smallest entries of each row of a
    distance block [b, G] (NumPy or a torch tensor on ``backend``), ordered by (value,
    position)."""
    if backend is not None and getattr(backend, "is_torch", False):
        import torch

        values, pos = torch.topk(block, k, dim=1, largest=False, sorted=False)
        kth = values.max(dim=1).values[:, None]
        # a tie across the k-th place: those rows (rare) take the lowest columns of the tie
        bad = torch.nonzero((block == kth).sum(dim=1) > (values == kth).sum(dim=1)).flatten()
        if len(bad):
            tied_values, tied_pos = torch.sort(block[bad], dim=1, stable=True)
            values[bad], pos[bad] = tied_values[:, :k], tied_pos[:, :k]
        values, pos = backend.to_numpy(values), backend.to_numpy(pos).astype(np.int64)
    else:
        block = np.asarray(block)
        if k < block.shape[1]:
            pos = np.argpartition(block, k - 1, axis=1)[:, :k]
            values = np.take_along_axis(block, pos, axis=1)
            kth = values.max(axis=1)[:, None]
            bad = np.flatnonzero((block == kth).sum(axis=1) > (values == kth).sum(axis=1))
            if len(bad):                         # as above: the lowest columns of the tie
                pos[bad] = np.argsort(block[bad], axis=1, kind="stable")[:, :k]
        else:
            pos = np.broadcast_to(np.arange(block.shape[1]), block.shape).copy()
        values = np.take_along_axis(block, pos, axis=1)
    order = np.lexsort((pos, values), axis=1)
    return np.take_along_axis(pos, order, axis=1), np.take_along_axis(values, order, axis=1)


def search_store(store: str | os.PathLike, topk: int, *, model: str | os.PathLike | None = None,
                 feature: str | None = None, trials: str | None = "all",
                 distance: str = "auto", feat_norm: str = "auto", n_parts: int = 6,
                 device: str = "auto", precision: str = "float32", block_rows: int = 0,
                 progress: bool = False) -> SearchResult:
    """The ``topk`` nearest gallery rows of every query of one trial of ``store`` (module
    doc); ``topk`` larger than the gallery gives the whole gallery."""
    from reidcli import fitted
    from reidcli.evaluation.backend import make_backend, resolve_device
    from reidcli.evaluation.distances import QueryGallery
    from reidcli.evaluation.engine import EvalOptions
    from reidcli.evaluation.run import (StoreEvalRequest, _metric_for_trial, _trial_inputs,
                                        _unit_rows, plan_evaluation)
    from reidcli.store import open_store

    check_param("search", "search", topk, Interval(int, 1, None))
    options = EvalOptions(block_rows=block_rows, progress=progress)
    request = StoreEvalRequest(store=Path(store), model=None if model is None else Path(model),
                               feature=feature, trials=trials, distance=distance,
                               feat_norm=feat_norm, n_parts=n_parts, device=device,
                               precision=precision, stream="off", options=options)
    loaded = fitted.load(model) if model is not None else None
    dev = resolve_device(device)
    with open_store(store) as st:
        plan = plan_evaluation(st, request, loaded)
        if len(plan.trials) > 1:
            raise EvaluationError(f"store {store} has {len(plan.trials)} protocol trials and "
                                  "a search ranks one", f"pick it with {param('trials', 0)}")
        k_trial, q_rows, g_rows = plan.trials[0]
        repeat = 0 if loaded is not None and loaded.num_repeats > 1 else None
        backend = make_backend(dev)
        try:
            q_feat = _trial_inputs(st, plan, loaded, k_trial, repeat, q_rows, request, "query")
            g_feat = _trial_inputs(st, plan, loaded, k_trial, repeat, g_rows, request,
                                   "gallery")
            metric, q_feat, g_feat, metric_name = _metric_for_trial(
                loaded, k_trial, repeat, q_feat, g_feat, distance, plan.info, backend,
                precision=precision)
            source = QueryGallery(metric, q_feat, g_feat, owned=True,
                                  normalized=_unit_rows(st, plan, loaded, request))
            del q_feat, g_feat
            ranked, dists = _search(source, q_rows, g_rows, topk, options, backend, progress)
        finally:
            backend.close()
        meta = {"store": str(st.path), "dataset": st.dataset, "feature": plan.feature,
                "distance": metric_name, "trial": int(k_trial), "k": int(ranked.shape[1]),
                "model": None if model is None else str(model), "device": dev,
                "precision": precision}
    return SearchResult(query_rows=np.asarray(q_rows, np.int64), gallery_rows=ranked,
                        distances=dists, meta=meta)


def _search(source, q_rows: np.ndarray, g_rows: np.ndarray, topk: int, options, backend,
            progress: bool) -> tuple[np.ndarray, np.ndarray]:
    """Blocks of queries → (gallery rows [q, k], distances [q, k]); see module doc."""
    from reidcli.progress import track

    g_rows = np.asarray(g_rows, np.int64)
    order = np.argsort(g_rows, kind="stable")
    q_rows = np.asarray(q_rows, np.int64)
    # a query that is also a gallery row: its own column, never its match
    at = np.minimum(np.searchsorted(g_rows[order], q_rows), max(len(g_rows) - 1, 0))
    self_pos = np.where(g_rows[order][at] == q_rows, order[at], -1) if len(g_rows) else \
        np.full(len(q_rows), -1)
    k = min(topk, len(g_rows) - int((self_pos >= 0).any()))
    if k < 1:
        raise EvaluationError("the gallery holds no row besides the queries themselves",
                              "extract gallery images as well")
    step = options.rows_per_block(len(g_rows))
    ranked = np.empty((len(q_rows), k), np.int64)
    dists = None
    starts = range(0, len(q_rows), step)
    for start in track(starts, description="searching", unit="blocks",
                       enabled=progress and len(starts) > 1):
        pos = np.arange(start, min(start + step, len(q_rows)))
        block = source.block(pos, None)
        own = np.flatnonzero(self_pos[pos] >= 0)
        if len(own):
            block[own, self_pos[pos][own]] = float("inf")
        cols, values = topk_smallest(block, k, backend)
        if np.isnan(values).any():
            raise EvaluationError("distances hold NaN values", "check the features or model")
        if dists is None:
            dists = np.empty((len(q_rows), k), values.dtype)
        ranked[pos] = g_rows[cols]
        dists[pos] = values
    return ranked, dists if dists is not None else np.empty((0, k), np.float32)


def _number(value: Any) -> str:
    """A distance as text that reads back to the same float (float32: 9 digits)."""
    if isinstance(value, np.float32):
        return format(float(value), ".9g")
    return repr(float(value))


def search_rows(result: SearchResult, records) -> list[dict[str, Any]]:
    """One dict per (query, rank) with :data:`CSV_COLUMNS` (pid/camid as stored: -1 =
    unlabelled or junk)."""
    paths = records["path"].to_numpy()
    pids = records["pid"].to_numpy(np.int64)
    cams = records["camid"].to_numpy(np.int64)
    rows = []
    for i, q in enumerate(result.query_rows):
        for r, (g, d) in enumerate(zip(result.gallery_rows[i], result.distances[i])):
            rows.append({"query_row": int(q), "query_path": str(paths[q]),
                         "query_pid": int(pids[q]), "query_camid": int(cams[q]),
                         "rank": r + 1, "gallery_row": int(g), "gallery_path": str(paths[g]),
                         "gallery_pid": int(pids[g]), "gallery_camid": int(cams[g]),
                         "distance": d})
    return rows


def search_csv_text(result: SearchResult, records) -> str:
    """The search result as CSV text (:data:`CSV_COLUMNS`, header first)."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for row in search_rows(result, records):
        writer.writerow([_number(row[c]) if c == "distance" else row[c] for c in CSV_COLUMNS])
    return buf.getvalue()


def search_json(result: SearchResult, records, provenance: dict | None = None) -> dict:
    """The search result as a JSON-ready dict: ``meta`` and, per query, its matches."""
    by_query: dict[int, dict[str, Any]] = {}
    for row in search_rows(result, records):
        q = row["query_row"]
        if q not in by_query:
            by_query[q] = {"row": q, "path": row["query_path"], "pid": row["query_pid"],
                           "camid": row["query_camid"], "matches": []}
        by_query[q]["matches"].append({"rank": row["rank"], "row": row["gallery_row"],
                                       "path": row["gallery_path"], "pid": row["gallery_pid"],
                                       "camid": row["gallery_camid"],
                                       "distance": float(_number(row["distance"]))})
    out = {"search": result.meta, "queries": list(by_query.values())}
    if provenance is not None:
        out["provenance"] = provenance
    return out


def write_search(path: str | os.PathLike, text: str, *, force: bool, option: str,
                 inputs: Sequence[str | os.PathLike] = ()) -> Path:
    """Write a search result's text atomically (temp + rename); never over one of
    ``inputs``."""
    from reidcli.io import atomic_output, verify_json, write_text_durable

    verify = verify_json if option == "json_out" else None
    with atomic_output(path, force=force, option=option, inputs=inputs,
                       verify=verify) as tmp:
        write_text_durable(tmp, text)
    return Path(path)


__all__ = ["CSV_COLUMNS", "SearchResult", "check_labelled", "search_csv_text", "search_json",
           "search_store", "store_unlabelled_roles", "topk_smallest", "unlabelled_roles",
           "write_search"]
