"""A literal, per-query reading of docs/datasets.md — slow on purpose, for checking the engine.

Each query: ``np.argsort(row, kind="stable")``, drop what the rule drops, then CMC / AP /
INP straight from the ranked list (the Market official trapezoid AP as its loop).
"""
from __future__ import annotations

import numpy as np

from reidcli.evaluation.protocols import sysu_location
from reidcli.evaluation.sgs import sampling_priority


def _keep(rule, qid, qcam, g_ids, g_pids, g_cams):
    keep = g_pids != -1
    if rule in ("market", "single-shot", "camera-split", "cuhk03_sgs"):
        keep &= ~((g_ids == qid) & (g_cams == qcam))
    elif rule == "sysu":
        keep &= sysu_location(g_cams) != sysu_location(np.array([qcam]))[0]
    return keep


def market_official_ap(matches: np.ndarray) -> float:
    """The Market-1501 release's AP loop on a ranked match vector (junk already removed)."""
    ngood = matches.sum()
    ap, old_recall, old_precision, hits = 0.0, 0.0, 1.0, 0
    for j, m in enumerate(matches):
        if m:
            hits += 1
        recall = hits / ngood
        precision = hits / (j + 1)
        ap += (recall - old_recall) * (old_precision + precision) / 2
        old_recall, old_precision = recall, precision
        if hits == ngood:
            break
    return ap


def reference_eval(distmat, q_pids, q_cams, g_pids, g_cams, rule="market", max_rank=50,
                   ap="sum-of-precisions", q_ids=None, g_ids=None):
    """Per-query reference. Returns dict with per-query arrays and the aggregated metrics."""
    q_pids, q_cams = np.asarray(q_pids), np.asarray(q_cams)
    g_pids, g_cams = np.asarray(g_pids), np.asarray(g_cams)
    q_ids = q_pids if q_ids is None else np.asarray(q_ids)
    g_ids = g_pids if g_ids is None else np.asarray(g_ids)
    nq = len(q_pids)
    first = np.full(nq, -1)
    aps = np.full(nq, np.nan)
    inps = np.full(nq, np.nan)
    for i in range(nq):
        if q_pids[i] <= 0:
            continue
        order = np.argsort(distmat[i], kind="stable")
        keep = _keep(rule, q_ids[i], q_cams[i], g_ids, g_pids, g_cams)
        order = order[keep[order]]
        matches = g_ids[order] == q_ids[i]
        if not matches.any():
            continue
        hits = np.flatnonzero(matches)
        if rule == "sysu":
            ranked_ids = g_ids[order]
            _, first_idx = np.unique(ranked_ids, return_index=True)
            dedup = ranked_ids[np.sort(first_idx)]
            first[i] = int(np.flatnonzero(dedup == q_ids[i])[0])
        else:
            first[i] = hits[0]
        if ap == "market-official":
            aps[i] = market_official_ap(matches)
        else:
            aps[i] = np.mean(np.arange(1, len(hits) + 1) / (hits + 1))
        inps[i] = len(hits) / (hits[-1] + 1)
    valid = first >= 0
    cmc = np.array([(first[valid] < k).mean() for k in range(1, max_rank + 1)])
    return {"first": first, "ap": aps, "inp": inps, "valid": valid, "cmc": cmc,
            "mAP": np.nanmean(aps[valid]), "mINP": np.nanmean(inps[valid])}


def reference_sgs(distmat, q_ids, q_cams, g_ids, g_cams, split, repeats, seed, max_rank):
    """E2 per query and repeat, drawing with the engine's seeded priorities."""
    nq, ng = distmat.shape
    ranks = np.full((nq, repeats), -1)
    for i in range(nq):
        order = np.argsort(distmat[i], kind="stable")
        keep = ~((g_ids == q_ids[i]) & (g_cams == q_cams[i]))
        if not (keep & (g_ids == q_ids[i])).any():
            continue
        for r in range(repeats):
            prio = sampling_priority(seed, split, np.array([i]), r, ng)[0]
            chosen = np.zeros(ng, bool)
            for pid in np.unique(g_ids[keep]):
                cand = np.flatnonzero(keep & (g_ids == pid))
                chosen[cand[np.argmax(prio[cand])]] = True
            sampled = order[chosen[order]]
            ranks[i, r] = int(np.flatnonzero(g_ids[sampled] == q_ids[i])[0])
    valid = ranks[:, 0] >= 0
    flat = ranks[valid].reshape(-1)
    cmc = np.array([(flat < k).mean() for k in range(1, max_rank + 1)])
    return {"ranks": ranks, "valid": valid, "cmc": cmc}
