"""Per-camera statistics and camera normalisation (DART3 paper Alg. 1; docs/methods/dart3.md).

Cameras are integer codes ``0..n-1`` (one per distinct camera of the store, see
:mod:`reidcli.adapt.inputs`). For each camera the shift is the mean and the scale the
standard deviation of its embeddings, per dimension:

    μ_c = mean(Λ_c),  σ_c = max(std(Λ_c), ε)                         (App. B.4, Eq 15–17)

with Λ_c the camera's query **and** gallery rows pooled (Alg 1; ``mode="separate"`` uses
each side's own rows). A normalised embedding is ``(z − μ_c) ⊘ σ_c`` (Eq 4/13).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from reidcli.errors import ParameterError, UsageError
from reidcli.naming import param

_CHUNK_ROWS = 8192


@dataclasses.dataclass
class CameraStatistics:
    """Query-side and gallery-side shift/scale, float32 [n_cameras, d] each.

    ``rows_used`` [n_cameras] counts the rows the (query-side) statistics came from.
    """

    mean_q: np.ndarray
    std_q: np.ndarray
    mean_g: np.ndarray
    std_g: np.ndarray
    rows_used: np.ndarray

    @property
    def num_cameras(self) -> int:
        return int(self.mean_q.shape[0])


def _moments(blocks: list[np.ndarray], ddof: int, eps: float) -> tuple[np.ndarray, np.ndarray]:
    """Mean and floored std [d] (float64 accumulation) over the rows of ``blocks``."""
    n = sum(len(b) for b in blocks)
    total = sum(b.sum(axis=0, dtype=np.float64) for b in blocks)
    mean = total / n
    if n - ddof <= 0:                                 # one row with ddof 1: undefined → ε
        return mean, np.full_like(mean, eps)
    sq = sum(np.square(b - mean).sum(axis=0) for b in blocks)   # two-pass, float64
    std = np.sqrt(sq / (n - ddof))
    return mean, np.maximum(std, eps)


def _subsample(rows: np.ndarray, limit: int | None, rng: np.random.Generator) -> np.ndarray:
    if limit is None or len(rows) <= limit:
        return rows
    return np.sort(rng.choice(rows, size=limit, replace=False))


def camera_statistics(q_feats: np.ndarray, q_codes: np.ndarray, g_feats: np.ndarray,
                      g_codes: np.ndarray, num_cameras: int, *, mode: str = "pooled",
                      ddof: int = 0, eps: float = 1e-6, max_per_camera: int | None = None,
                      seed: int = 0, extra_feats: np.ndarray | None = None,
                      extra_codes: np.ndarray | None = None) -> CameraStatistics:
    """Statistics of every camera code ``0..num_cameras-1`` (DART3 paper Alg. 1).

    q_feats [Nq, d], q_codes [Nq]; g_feats [Ng, d], g_codes [Ng]. ``max_per_camera`` draws at
    most that many rows per camera without replacement (seeded; pooled rows are drawn
    together). ``extra_feats``/``extra_codes`` (grounding rows, §3.8) give the statistics of
    cameras that have no query or gallery row.
    """
    q_codes = np.asarray(q_codes, np.int64)
    g_codes = np.asarray(g_codes, np.int64)
    d = q_feats.shape[1] if len(q_feats) else g_feats.shape[1]
    rng = np.random.default_rng([int(seed), 11])
    out = {k: np.zeros((num_cameras, d), np.float64) for k in ("mq", "sq", "mg", "sg")}
    used = np.zeros(num_cameras, np.int64)
    extra_codes = None if extra_codes is None else np.asarray(extra_codes, np.int64)
    for c in range(num_cameras):
        q_rows, g_rows = np.flatnonzero(q_codes == c), np.flatnonzero(g_codes == c)
        if mode == "pooled":
            both = np.concatenate([q_rows, len(q_codes) + g_rows])
            both = _subsample(both, max_per_camera, rng)
            q_pick, g_pick = both[both < len(q_codes)], both[both >= len(q_codes)] - len(q_codes)
            blocks = [b for b in (q_feats[q_pick], g_feats[g_pick]) if len(b)]
            if blocks:
                mean, std = _moments(blocks, ddof, eps)
                out["mq"][c], out["sq"][c], out["mg"][c], out["sg"][c] = mean, std, mean, std
                used[c] = len(both)
                continue
        elif mode == "separate":
            q_pick = _subsample(q_rows, max_per_camera, rng)
            g_pick = _subsample(g_rows, max_per_camera, rng)
            sides = {}
            if len(q_pick):
                sides["q"] = _moments([q_feats[q_pick]], ddof, eps)
            if len(g_pick):
                sides["g"] = _moments([g_feats[g_pick]], ddof, eps)
            if sides:                                   # a missing side takes the other's
                out["mq"][c], out["sq"][c] = sides.get("q", sides.get("g"))
                out["mg"][c], out["sg"][c] = sides.get("g", sides.get("q"))
                used[c] = len(q_pick) if len(q_pick) else len(g_pick)
                continue
        else:
            raise ParameterError("camera statistics", "stats", mode,
                                 "is not pooled or separate", f"use {param('stats', 'pooled')}")
        # no test row: the grounding pool (docs/methods/dart3.md)
        e_rows = np.array([], np.int64) if extra_codes is None else \
            _subsample(np.flatnonzero(extra_codes == c), max_per_camera, rng)
        if not len(e_rows):
            raise UsageError(f"camera code {c} has no query, gallery or grounding row",
                             "this is a bug in the camera table; report it")
        mean, std = _moments([extra_feats[e_rows]], ddof, eps)
        out["mq"][c], out["sq"][c], out["mg"][c], out["sg"][c] = mean, std, mean, std
        used[c] = len(e_rows)
    f32 = {k: v.astype(np.float32) for k, v in out.items()}
    return CameraStatistics(mean_q=f32["mq"], std_q=f32["sq"], mean_g=f32["mg"],
                            std_g=f32["sg"], rows_used=used)


def normalize_by_camera(feats: np.ndarray, codes: np.ndarray, mean: np.ndarray,
                        std: np.ndarray) -> np.ndarray:
    """``(feats − mean[codes]) ⊘ std[codes]`` as float32 [N, d] (Eq 4/13), in row chunks."""
    feats = np.asarray(feats, np.float32)
    codes = np.asarray(codes, np.int64)
    out = np.empty_like(feats)
    for a in range(0, len(feats), _CHUNK_ROWS):
        b = min(a + _CHUNK_ROWS, len(feats))
        np.subtract(feats[a:b], mean[codes[a:b]], out=out[a:b])
        out[a:b] /= std[codes[a:b]]
    return out


__all__ = ["CameraStatistics", "camera_statistics", "normalize_by_camera"]
