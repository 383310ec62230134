"""Camera-specific (C-DPCF) and shared (DPCF) weight maps from cross-camera pair statistics
(C-DPCF paper Eq. 9 and Appendices A–B).

The projected maps Q_i are streamed chunk by chunk into per-camera sufficient statistics —
weighted self products Σ a_i q_i^T q_i and per-(person, camera) sums y_{p,c} — so Σ_S and Σ_D
come out in closed form without enumerating pairs or keeping every image's q in memory.
"""
from __future__ import annotations

import dataclasses
import itertools
import warnings

import numpy as np
import scipy.linalg

from reidcli.cameras import camera_index
from reidcli.errors import ParameterError, UsageError
from reidcli.naming import param
from reidcli.pooling.projection import image_blocks, readonly_tensor
from reidcli.workers import ReusedThreadPool, one_intra_op_thread

#: images per task of :meth:`CrossCameraScatter.add_maps` (the unit of work of one thread;
#: fixed, so the float64 sums of the tasks' partial statistics, merged in task order, do not
#: depend on the thread count)
TASK_IMAGES = 32
#: bytes of one block of maps converted to float32 at a time inside a task (bounded scratch)
TASK_BLOCK_BYTES = 8 << 20


@dataclasses.dataclass
class PairScatter:
    """Σ_S, Σ_D [T, T] over ordered cross-camera pairs and the pair counts N_S, N_D."""

    sigma_same: np.ndarray
    sigma_diff: np.ndarray
    n_same: int
    n_diff: int


class CrossCameraScatter:
    """Accumulates the closed-form cross-camera pair covariances of projected maps.

    ``pids``, ``camids``: int [N] labels of the training images (``camids``: camera codes of
    :func:`reidcli.cameras.camera_codes`, a camera being (domain, camid)), known up front
    (they fix the partner counts a^S_i = n_{p_i} − n_{p_i,c_i} and a^A_i = N − N_{c_i}). Feed
    every image's q_i [E, S] once via :meth:`add`; :meth:`result` gives Σ_S, Σ_D of size T × T with
    T = C·S when ``camera_specific`` (C-DPCF: Q_i = q_i in column block c_i, Eq. 6) else T = S
    (DPCF). ``mask`` (S × S) multiplies every product elementwise — the "w/o R" masked Gram
    path (§3.2), where q_i are the raw maps F^o_i.
    """

    def __init__(self, pids: np.ndarray, camids: np.ndarray, positions: int, *,
                 camera_specific: bool = True, mask: np.ndarray | None = None,
                 context: str = "training set"):
        pids = np.asarray(pids, dtype=np.int64)
        camids = np.asarray(camids, dtype=np.int64)
        if pids.shape != camids.shape or pids.ndim != 1:
            raise ValueError("pids and camids must be 1-D arrays of equal length")
        self.cam_index, self.num_cameras = camera_index(camids)
        self.persons, self.person_index = np.unique(pids, return_inverse=True)
        n_cams, n_persons = self.num_cameras, len(self.persons)
        counts = np.zeros((n_persons, n_cams), dtype=np.int64)       # n_{p,c}
        np.add.at(counts, (self.person_index, self.cam_index), 1)
        n_p, n_c, n = counts.sum(1), counts.sum(0), len(pids)
        self.n_same = int((n_p ** 2 - (counts ** 2).sum(1)).sum())    # N_S
        n_all = int(n ** 2 - (n_c ** 2).sum())                        # N_A
        self.n_diff = n_all - self.n_same                             # N_D
        if n_cams < 2 or self.n_same == 0:
            raise UsageError(f"{context} has no same-person cross-camera pairs "
                             f"({len(self.persons)} persons, {n_cams} cameras)",
                             "train on persons seen by at least two cameras")
        if self.n_diff == 0:
            raise UsageError(f"{context} has no different-person cross-camera pairs",
                             "train on at least two persons")
        self.weight_same = (n_p[self.person_index]
                            - counts[self.person_index, self.cam_index]).astype(np.float64)
        self.weight_all = (n - n_c[self.cam_index]).astype(np.float64)
        self.positions = int(positions)
        self.camera_specific = camera_specific
        self.mask = mask
        self._rows: int | None = None
        self._self_same = None            # [C, S, S]  Σ_{i∈c} a^S_i q_i^T q_i
        self._self_all = None             # [C, S, S]  Σ_{i∈c} a^A_i q_i^T q_i
        self._sums = None                 # [P, C, E·S] y_{p,c}
        self._seen = np.zeros(len(pids), dtype=bool)

    def add(self, index: np.ndarray, q: np.ndarray) -> None:
        """Add images ``index`` (positions in the label arrays) with projections q [n, E, S]."""
        index = np.asarray(index, dtype=np.int64)
        q = np.asarray(q)
        n, rows, s = q.shape
        if s != self.positions:
            raise ValueError(f"q has {s} positions, expected {self.positions}")
        self._start(rows, s)
        if self._seen[index].any() or len(np.unique(index)) != len(index):
            raise ValueError("an image was added twice")
        self._seen[index] = True
        cams = self.cam_index[index]
        for c in np.unique(cams):
            pick = np.flatnonzero(cams == c)
            gram = self._gram(q, pick)                                 # Σ_{i∈c} q_i^T q_i
            self._self_all[c] += self.weight_all[index[pick[0]]] * gram  # a^A const. in c
            w_same = self.weight_same[index[pick]]
            if np.all(w_same == w_same[0]):                            # balanced: one product
                self._self_same[c] += w_same[0] * gram
            else:
                self._self_same[c] += self._gram(q, pick, np.sqrt(w_same))
        # y_{p,c} += q_i: images sorted by (person, camera) group, one segment sum per group
        groups = self.person_index[index] * self.num_cameras + cams
        order = np.argsort(groups, kind="stable")
        ordered = groups[order]
        starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
        flat_q = q.reshape(n, rows * s)
        if np.any(order != np.arange(n)):
            flat_q = flat_q[order]
        flat = self._sums.reshape(-1, rows * s)
        flat[ordered[starts]] += np.add.reduceat(flat_q, starts, axis=0, dtype=np.float64)

    def add_maps(self, index: np.ndarray, maps: np.ndarray, projection: np.ndarray,
                 positions: list[np.ndarray]) -> None:
        """Add images ``index`` from their conv maps [n, D', H, W] (or [n, D', S]): q_i =
        R^T F*_i (Eq. 8) is projected and accumulated task by task, never kept for the chunk.

        Same statistics as :meth:`add` with q = :func:`~reidcli.pooling.projection.project_maps`
        (float32 products of the float16 maps, float64 sums), at a different rounding. The
        chunk is cut into tasks of :data:`TASK_IMAGES` images that run on torch's threads,
        each task on one thread with single-threaded GEMMs; the tasks' partial Grams and
        person sums are added in task order, so the result does not depend on the thread
        count. Per task and area g, F[task][:, :, A_g] is converted block by block into a
        [D', b·|A_g|] scratch and projected by one GEMM R_g^T [E, D'] × [D', b·|A_g|]
        (oneDNN where torch has it, else torch.mm)."""
        import torch

        index = np.asarray(index, dtype=np.int64)
        maps = np.asarray(maps)
        n, channels = maps.shape[:2]
        flat = maps.reshape(n, channels, -1)
        s, rank = flat.shape[2], projection.shape[1]
        if s != self.positions:
            raise ValueError(f"maps have {s} positions, expected {self.positions}")
        if len(index) != n:
            raise ValueError(f"{len(index)} image indices for {n} maps")
        wide = maps.dtype == np.float64
        dtype = torch.float64 if wide else torch.float32
        self._start(rank, s)
        if self._seen[index].any() or len(np.unique(index)) != len(index):
            raise ValueError("an image was added twice")
        self._seen[index] = True
        proj_t = torch.from_numpy(np.ascontiguousarray(projection.T, dtype=np.float64)
                                  ).to(dtype)                          # R^T [E, G·D']
        blocks_t = [proj_t[:, g * channels:(g + 1) * channels].contiguous()
                    for g in range(len(positions))]                    # R_g^T [E, D']
        areas = [(slice(int(p[0]), int(p[-1]) + 1) if len(p) and p[-1] - p[0] + 1 == len(p)
                  else torch.from_numpy(np.asarray(p, dtype=np.int64))) for p in positions]
        source = readonly_tensor(flat)
        linear = None if wide else _onednn_linear()
        tasks = [slice(a, min(a + TASK_IMAGES, n)) for a in range(0, n, TASK_IMAGES)]

        def task(part: slice):
            q = _project_task(source[part], blocks_t, areas, positions, rank, s, dtype, linear)
            return self._task_statistics(index[part], q, linear)

        for grams, sums in _run_tasks(task, tasks):                    # in task order
            for c, (g_all, g_same) in grams.items():
                self._self_all[c] += g_all
                self._self_same[c] += g_same
            ids, values = sums
            self._sums.reshape(-1, rank * s)[ids] += values

    def _start(self, rows: int, s: int) -> None:
        if self._rows is None:
            self._rows = rows
            c, p = self.num_cameras, len(self.persons)
            self._self_same = np.zeros((c, s, s))
            self._self_all = np.zeros((c, s, s))
            self._sums = np.zeros((p, c, rows * s))
        elif rows != self._rows:
            raise ValueError(f"q has {rows} rows, expected {self._rows}")

    def _task_statistics(self, index: np.ndarray, q, linear=None) -> tuple[dict, tuple]:
        """One task's per-camera (a^A-weighted, a^S-weighted) Grams [S, S] and its person
        sums (group ids, float64 [groups, E·S]) of q [n, E, S] (a torch tensor); ``linear``
        the oneDNN op for float32 Grams (else torch.mm)."""
        import torch

        def gram_of(x):                                                # x^T x, float64
            if linear is not None:
                return linear(x.t(), x.t(), None, "none", [], "").double().numpy()
            return torch.mm(x.t(), x).double().numpy()

        n, rows, s = q.shape
        cams = self.cam_index[index]
        grams = {}
        for c in np.unique(cams).tolist():
            pick = np.flatnonzero(cams == c)
            qc = q if len(pick) == n else q.index_select(0, torch.from_numpy(pick))
            qc = qc.reshape(-1, s)                                     # [(b·E), S]
            gram = gram_of(qc)                                         # Σ q_i^T q_i
            w_same = self.weight_same[index[pick]]
            if np.all(w_same == w_same[0]):
                same = w_same[0] * gram
            else:
                scale = torch.from_numpy(np.repeat(np.sqrt(w_same), rows)).to(q.dtype)
                a = qc * scale[:, None]
                same = gram_of(a)
            grams[c] = (self.weight_all[index[pick[0]]] * gram, same)
        groups = self.person_index[index] * self.num_cameras + cams
        order = np.argsort(groups, kind="stable")
        ordered = groups[order]
        starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
        flat_q = q.reshape(n, rows * s).numpy()
        if np.any(order != np.arange(n)):
            flat_q = flat_q[order]
        return grams, (ordered[starts], np.add.reduceat(flat_q, starts, axis=0,
                                                         dtype=np.float64))

    @staticmethod
    def _gram(q: np.ndarray, pick: np.ndarray, scale: np.ndarray | None = None) -> np.ndarray:
        """Σ_{i∈pick} (b_i q_i)^T (b_i q_i) [S, S] in float64 (b_i = ``scale`` [len(pick)] or 1).

        q [n, E, S] is taken one block of images at a time (bounded scratch,
        :data:`reidcli.pooling.projection.BLOCK_BYTES`): float32 q (the projected maps) by a
        float32 product per block, the blocks summed in float64; any other dtype (float64,
        or the raw float16 maps of "w/o R") is converted to float64 per block.
        """
        s, rows = q.shape[2], q.shape[1]
        dtype = np.float32 if q.dtype == np.float32 else np.float64
        total = np.zeros((s, s))
        for part in image_blocks(len(pick), rows * s * np.dtype(dtype).itemsize):
            chosen = pick[part]
            qc = q[chosen] if len(chosen) < len(q) else q
            qc = qc.astype(dtype, copy=False).reshape(-1, s)           # [(b·E), S]
            if scale is not None:
                qc = qc * np.repeat(scale[part], rows).astype(dtype)[:, None]
            total += qc.T @ qc                                         # Σ q_i^T q_i (syrk)
        return total

    def result(self) -> PairScatter:
        """Σ_S = Z_S / N_S and Σ_D = (Z_A − Z_S) / (N_A − N_S) (C-DPCF paper Eq. 9)."""
        if self._rows is None or not self._seen.all():
            raise ValueError(f"{int((~self._seen).sum())} training images were never added")
        c, s, rows = self.num_cameras, self.positions, self._rows
        sums = self._sums.reshape(len(self.persons), c, rows, s)
        per_cam = sums.sum(0)                                          # y_c [C, E, S]
        blocks_same = np.zeros((c, c, s, s))
        blocks_all = np.zeros((c, c, s, s))
        with one_intra_op_thread():               # float64 GEMMs: torch's BLAS, one thread
            for a in range(c):
                blocks_same[a, a] = 2.0 * self._self_same[a]
                blocks_all[a, a] = 2.0 * self._self_all[a]
                ya = np.ascontiguousarray(sums[:, a]).reshape(-1, s)
                for b in range(a + 1, c):
                    yb = np.ascontiguousarray(sums[:, b]).reshape(-1, s)
                    cross = _gram_t(ya, yb)                            # Σ_p y_{p,a}^T y_{p,b}
                    blocks_same[a, b] = -2.0 * cross
                    blocks_same[b, a] = -2.0 * cross.T
                    cross = _gram_t(per_cam[a], per_cam[b])            # y_a^T y_b
                    blocks_all[a, b] = -2.0 * cross
                    blocks_all[b, a] = -2.0 * cross.T
        if self.mask is not None:
            blocks_same *= self.mask
            blocks_all *= self.mask
        if self.camera_specific:
            z_same = blocks_same.transpose(0, 2, 1, 3).reshape(c * s, c * s)
            z_all = blocks_all.transpose(0, 2, 1, 3).reshape(c * s, c * s)
        else:
            z_same, z_all = blocks_same.sum((0, 1)), blocks_all.sum((0, 1))
        return PairScatter(sigma_same=z_same / self.n_same,
                           sigma_diff=(z_all - z_same) / self.n_diff,
                           n_same=self.n_same, n_diff=self.n_diff)


def _onednn_linear():
    """torch's oneDNN float32 linear, ``op(x, w, None, "none", [], "")`` = x wᵀ, or None
    where torch has no oneDNN or lets it round float32 products to a lower precision."""
    import torch
    try:
        if not torch.backends.mkldnn.is_available():
            return None
        mode = getattr(getattr(torch.backends.mkldnn, "matmul", None), "fp32_precision",
                       "none")
        return torch.ops.mkldnn._linear_pointwise if mode in ("none", "ieee") else None
    except (AttributeError, RuntimeError):
        return None


def _gram_t(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """x^T y [S, S] of float64 x, y [m, S] by torch's BLAS (numpy's may spin its threads
    against torch's on a shared CPU); called on one torch thread."""
    import torch
    return torch.mm(torch.from_numpy(x).t(), torch.from_numpy(y)).numpy()


def _project_task(maps, blocks_t, areas, positions, rank: int, s: int, dtype, linear):
    """q [n, E, S] (torch, ``dtype``) of one task's maps [n, D', S] (torch, any float
    dtype), per block of b images (scratch ≤ :data:`TASK_BLOCK_BYTES`) and area g: one GEMM
    R_g^T [E, D'] × F[block][:, :, A_g] laid out [D', b·|A_g|] (Eq. 8). Equal stripes in
    order (the default grids) are converted and laid out [D', G, b, |A_g|] by one copy per
    block (three times faster than one per area), then each area's slab copied dense (a
    GEMM operand with a leading dimension of b·|A_g| sent oneDNN to a slow path); other
    areas one converting copy per area."""
    import torch

    n, channels = maps.shape[:2]
    q = torch.empty((n, rank, s), dtype=dtype)
    width = len(positions[0])
    stripes = all(isinstance(c, slice) and c.start == g * width and c.stop == (g + 1) * width
                  for g, c in enumerate(areas)) and len(areas) * width == s
    itemsize = torch.empty((), dtype=dtype).element_size()
    per_image = channels * (s if stripes else max(len(p) for p in positions)) * itemsize
    step = max(1, TASK_BLOCK_BYTES // per_image)
    scratch = torch.empty(per_image // itemsize * min(step, n), dtype=dtype)
    dense = torch.empty(channels * width * min(step, n), dtype=dtype) if stripes else None

    def project(block_t, flat):                                        # [E, N]
        return linear(block_t, flat.t(), None, "none", [], "") if linear is not None \
            else torch.mm(block_t, flat)

    for a in range(0, n, step):
        b = min(step, n - a)
        if stripes:                                   # [D', G, b, w], convert + transpose
            buf = scratch[:channels * s * b].view(channels, len(areas), b, width)
            buf.copy_(maps[a:a + b].reshape(b, channels, len(areas), width)
                      .permute(1, 2, 0, 3))
            for g, block_t in enumerate(blocks_t):     # area g dense [D', b·w]: GEMM operand
                slab = dense[:channels * b * width].view(channels, b * width)
                slab.copy_(buf[:, g].reshape(channels, b * width))     # contiguous rows
                res = project(block_t, slab)
                q[a:a + b, :, areas[g]] = res.view(rank, b, width).permute(1, 0, 2)
            continue
        for block_t, cols, pos in zip(blocks_t, areas, positions):
            w = len(pos)
            part = maps[a:a + b, :, cols] if isinstance(cols, slice) else \
                maps[a:a + b].index_select(2, cols)                    # [b, D', |A_g|]
            buf = scratch[:channels * b * w].view(channels, b, w)
            buf.copy_(part.permute(1, 0, 2))                           # convert + transpose
            res = project(block_t, buf.view(channels, b * w)).view(rank, b, w)
            if isinstance(cols, slice):
                q[a:a + b, :, cols] = res.permute(1, 0, 2)
            else:
                q[a:a + b].index_copy_(2, cols, res.permute(1, 0, 2))
    return q


#: the threads of :meth:`CrossCameraScatter.add_maps`
_TASK_WORKERS = ReusedThreadPool("cdpcf-task")


def _run_tasks(fn, tasks: list):
    """``fn(task)`` for every task, on up to torch's thread count of workers (each task on
    one thread), the results in task order."""
    with one_intra_op_thread() as threads:
        workers = min(threads, len(tasks))
        if workers <= 1:
            return [fn(t) for t in tasks]
        out: list = [None] * len(tasks)
        claim = itertools.count()

        def work():
            for i in iter(claim.__next__, None):
                if i >= len(tasks):
                    return
                out[i] = fn(tasks[i])

        pool = _TASK_WORKERS.get(workers)
        for f in [pool.submit(work) for _ in range(workers)]:
            f.result()
        return out


def top_eigenvectors(scatter: PairScatter, k: int, context: str = "") -> tuple[
        np.ndarray, np.ndarray]:
    """Weight maps W [T, K] and eigenvalues [K] of Σ_D − Σ_S (Eq. 9), descending.

    Each column is sign-fixed so its largest-|·| entry is positive (docs/methods/cdpcf.md);
    a warning names kept eigenvalues ≤ 0 (such maps are not discriminative).
    """
    diff = scatter.sigma_diff - scatter.sigma_same
    diff = 0.5 * (diff + diff.T)
    t = diff.shape[0]
    if not 1 <= k <= t:
        raise ParameterError("pooling", "K", k, f"is out of range for {t}-dimensional weight "
                             "maps", f"use K between 1 and {t}")
    values, vectors = scipy.linalg.eigh(diff, subset_by_index=[t - k, t - 1])
    values, vectors = values[::-1], vectors[:, ::-1]
    peak = np.argmax(np.abs(vectors), axis=0)
    signs = np.sign(vectors[peak, np.arange(k)])
    signs[signs == 0] = 1.0
    vectors = vectors * signs[None, :]
    if (values <= 0).any():
        bad = int((values <= 0).sum())
        advice = (f"use {param('K', k - bad)} (the positive ones)" if bad < k else
                  "check that the layer's maps differ between identities across cameras")
        warnings.warn(f"{context}: {bad} of the {param('K', k)} kept eigenvalues of Σ_D − Σ_S "
                      f"are ≤ 0, so those weight maps are not discriminative — {advice}",
                      stacklevel=2)
    return np.ascontiguousarray(vectors), values.copy()


def camera_block_covariances(q: np.ndarray, pids: np.ndarray, camids: np.ndarray, *,
                                  camera_specific: bool = False) -> PairScatter:
    """Σ_S, Σ_D of in-memory projections q [N, E, S] in one call (the streaming
    :class:`CrossCameraScatter`; the general dense form for any Q is
    :func:`reidcli.metric.pair_covariances.cross_camera_pair_covariances`).

    ``camera_specific`` places q_i in column block c_i (C-DPCF, T = C·S); else T = S.
    """
    q = np.asarray(q, dtype=np.float64)
    scatter = CrossCameraScatter(pids, camids, q.shape[2], camera_specific=camera_specific)
    scatter.add(np.arange(len(q)), q)
    return scatter.result()
