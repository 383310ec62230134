"""Closed-form cross-camera pair covariances Σ_S, Σ_D (C-DPCF paper Eq. 9, App. B).

Each image i carries a matrix Q_i [E, T] (E rows; E = 1 is XQDA's case with T = feature
dimension), a person id p_i and a camera c_i — a camera is (domain, camid), so callers pass
the codes of :func:`reidcli.cameras.camera_codes` (or camids when the images share one
domain). Over **ordered** cross-camera pairs

    S = {(i, j): p_i = p_j, c_i ≠ c_j},   D = {(i, j): p_i ≠ p_j, c_i ≠ c_j},
    Σ_S = (1/N_S) Σ_{(i,j)∈S} (Q_i − Q_j)^T (Q_i − Q_j),   Σ_D likewise over D   [T, T].

Expanding the product gives two "self" terms and two cross terms; counting partners:

    a^S_i = n_{p_i} − n_{p_i,c_i},  a^A_i = N − N_{c_i},  a^D_i = a^A_i − a^S_i
    Z_S = 2·[Σ_i a^S_i Q_i^T Q_i − Σ_p Σ_{c≠c'} Y_{p,c}^T Y_{p,c'}]
    Z_A = 2·[Σ_i a^A_i Q_i^T Q_i − Σ_{c≠c'} Y_c^T Y_{c'}]
    Σ_S = Z_S / N_S,  Σ_D = (Z_A − Z_S) / N_D,
    N_S = Σ_p (n_p² − Σ_c n_{p,c}²),  N_D = N² − Σ_c N_c² − N_S,

with group sums Y_{p,c} = Σ_{p_i=p, c_i=c} Q_i and Y_c = Σ_p Y_{p,c} (Σ_p Y_p^T Y_p − Σ_{p,c}
Y_{p,c}^T Y_{p,c} is the same cross sum, used when it is cheaper). The self terms are Ψ^T Ψ
products over chunks of ≤ 256 images; images with equal partner counts share one Gram, so
balanced data cost one pass of N·E·T² multiply-adds. Group sums are sparse one-hot products
(torch: ``index_add_``). Nothing enumerates pairs.

Optional per-image ``weights`` w_i ≥ 0 weight pair (i, j) by w_i·w_j: every count above
becomes the matching sum of weights (n_{p,c} → Σ w_i, …), Y_{p,c} = Σ w_i Q_i and the self
coefficient of image i is w_i·a_i. ``weights=None`` is the plain (unit-weight) definition.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from reidcli.cameras import camera_index
from reidcli.errors import UsageError
from reidcli.progress import track

#: images per block when building Ψ^T Ψ (bounds memory: block·E·T floats)
CHUNK = 256


@dataclasses.dataclass
class PairCovariances:
    """Σ_S, Σ_D float64 [T, T] (symmetric) and the pair counts N_S, N_D (ordered pairs;
    sums of w_i·w_j when weighted)."""

    sigma_same: np.ndarray
    sigma_diff: np.ndarray
    n_same: float
    n_diff: float


def _labels(pids, camids, weights, context: str):
    pids = np.asarray(pids)
    camids = np.asarray(camids)
    if pids.ndim != 1 or camids.shape != pids.shape:
        raise UsageError(f"{context}: pids and camids must be 1-D arrays of equal length "
                         f"(got shapes {pids.shape} and {camids.shape})",
                         "pass one person id and one camera id per image")
    if weights is not None:
        weights = np.asarray(weights, dtype=np.float64)
        if weights.shape != pids.shape:
            raise UsageError(f"{context}: weights have shape {weights.shape}, expected "
                             f"({len(pids)},)", "pass one weight per image")
        if not np.all(np.isfinite(weights)) or (weights < 0).any():
            raise UsageError(f"{context}: weights must be finite and ≥ 0",
                             "fix the image weights")
    return pids, camids, weights


class PairCovarianceAccumulator:
    """Streams images into the sufficient statistics of :func:`cross_camera_pair_covariances`.

    ``pids``, ``camids`` [N] (camera codes, :func:`reidcli.cameras.camera_codes`; and
    ``weights`` [N]) label all N images up front: they fix the partner counts. Feed every
    image exactly once with :meth:`add` (any order, any block size); :meth:`result` returns
    :class:`PairCovariances`. With ``device`` (e.g. ``"cuda"``) the products run in torch
    float64 there; otherwise numpy float64. Memory: two T × T
    accumulators plus the group sums Y_{p,c} [groups, E·T].
    """

    def __init__(self, pids, camids, *, weights=None, device=None, chunk: int = CHUNK,
                 context: str = "training set"):
        pids, camids, weights = _labels(pids, camids, weights, context)
        self.context = context
        self.chunk = max(1, int(chunk))
        n = len(pids)
        cam_index, num_c = camera_index(camids)
        self.num_cameras = num_c
        self.persons, person_index = np.unique(pids, return_inverse=True)
        w = np.ones(n) if weights is None else weights
        # (person, camera) groups present in the data
        group_key = person_index * num_c + cam_index
        self.group_keys, self.group_of = np.unique(group_key, return_inverse=True)
        self.group_person = self.group_keys // num_c
        self.group_camera = self.group_keys % num_c
        n_pc = np.bincount(self.group_of, weights=w, minlength=len(self.group_keys))  # n_{p,c}
        n_p = np.bincount(self.group_person, weights=n_pc, minlength=len(self.persons))
        n_c = np.bincount(self.group_camera, weights=n_pc, minlength=num_c)          # N_c
        total = n_c.sum()                                                             # N
        # partner counts per image: a^S_i = n_p − n_{p,c}, a^D_i = (N − N_c) − a^S_i
        a_same = n_p[person_index] - n_pc[self.group_of]
        a_diff = (total - n_c[cam_index]) - a_same
        n_same = (n_p ** 2).sum() - (n_pc ** 2).sum()                                 # N_S
        n_all = total ** 2 - (n_c ** 2).sum()                                         # N_A
        if weights is None:
            self.n_same, self.n_diff = int(round(n_same)), int(round(n_all - n_same))
        else:
            self.n_same, self.n_diff = float(n_same), float(n_all - n_same)
        if num_c < 2 or self.n_same <= 0:
            raise UsageError(f"{context} has no same-person cross-camera pairs ({len(pids)} "
                             f"images, {len(self.persons)} persons, {num_c} camera(s))",
                             "train on persons seen by at least two cameras")
        if self.n_diff <= 0:
            raise UsageError(f"{context} has no different-person cross-camera pairs "
                             f"({len(self.persons)} person(s))",
                             "train on at least two persons seen by different cameras")
        # self coefficients w_i·a_i (Ψ rows are √(w_i a_i)·Q_i)
        self.coef_same = w * np.maximum(a_same, 0.0)
        self.coef_diff = w * np.maximum(a_diff, 0.0)
        self.weights = w
        self.num_images = n
        self.device = device
        self._torch = None
        if device is not None:
            import torch
            self._torch = torch
            self._device = torch.device(device)
        self._shape: tuple[int, int] | None = None
        self._self_same = self._self_diff = self._sums = None
        self._seen = np.zeros(n, dtype=bool)

    # -- backend helpers ---------------------------------------------------------------------
    def _array(self, x):
        """numpy float64, or a torch float64 tensor on the device (accepts either input)."""
        if self._torch is None:
            if hasattr(x, "detach"):                       # a torch tensor
                x = x.detach().cpu().numpy()
            return np.asarray(x, dtype=np.float64)
        if isinstance(x, self._torch.Tensor):
            return x.to(device=self._device, dtype=self._torch.float64)
        return self._torch.as_tensor(np.asarray(x), dtype=self._torch.float64,
                                     device=self._device)

    def _zeros(self, *shape):
        if self._torch is None:
            return np.zeros(shape)
        return self._torch.zeros(shape, dtype=self._torch.float64, device=self._device)

    def _numpy(self, x) -> np.ndarray:
        return x if self._torch is None else x.cpu().numpy()

    # -- streaming ---------------------------------------------------------------------------
    def add(self, index, q) -> None:
        """Add images ``index`` [n] (positions in the label arrays) with Q [n, E, T]."""
        index = np.asarray(index, dtype=np.int64).reshape(-1)
        shape = getattr(q, "shape", None)
        if shape is None or len(shape) != 3 or shape[0] != len(index):
            raise UsageError(f"{self.context}: Q must have shape [n, E, T] with n = "
                             f"{len(index)} images, got {shape}", "pass one E × T matrix per image")
        if self._shape is None:
            self._shape = (int(shape[1]), int(shape[2]))
            e, t = self._shape
            self._self_same = self._zeros(t, t)
            self._self_diff = self._zeros(t, t)
            self._sums = self._zeros(len(self.group_keys), e * t)
        elif tuple(shape[1:]) != self._shape:
            raise UsageError(f"{self.context}: Q blocks have shape {tuple(shape[1:])} and "
                             f"{self._shape}", "pass blocks of one E × T shape")
        if len(index) == 0:
            return
        if index.min() < 0 or index.max() >= self.num_images:
            raise UsageError(f"{self.context}: image index out of range 0..{self.num_images - 1}",
                             "index images by their position in pids/camids")
        if self._seen[index].any() or len(np.unique(index)) != len(index):
            raise UsageError(f"{self.context}: an image was added twice", "add each image once")
        self._seen[index] = True
        # images with equal (a^S, a^D) share one Gram: sort so blocks are homogeneous
        order = np.lexsort((self.coef_diff[index], self.coef_same[index]))
        starts = range(0, len(index), self.chunk)
        for start in track(starts, description="pair covariances", unit="chunks",
                           enabled=None if len(starts) > 1 else False, inner=True):
            pick = np.sort(order[start:start + self.chunk])
            block = q[pick[0]:pick[-1] + 1] if _is_range(pick) else q[pick]
            self._add_block(index[pick], block)

    def _add_block(self, idx: np.ndarray, qb) -> None:
        import scipy.sparse  # here, not at the top: `reid train --help` need not load it
        e, t = self._shape
        qb = self._array(qb)
        if self._torch is None:
            if not np.isfinite(qb).all():
                raise UsageError(f"{self.context}: Q holds NaN or Inf", "fix the input features")
        elif not bool(self._torch.isfinite(qb).all()):
            raise UsageError(f"{self.context}: Q holds NaN or Inf", "fix the input features")
        n = len(idx)
        flat = qb.reshape(n * e, t)
        cs, cd = self.coef_same[idx], self.coef_diff[idx]
        keys = np.stack([cs, cd], 1)
        uniq, inverse = np.unique(keys, axis=0, return_inverse=True)
        inverse = inverse.reshape(-1)
        if len(uniq) <= max(2, n // 8):
            # Σ a_i Q_i^T Q_i = Σ_v a_v G_v, G_v = Σ_{i: a_i = v} Q_i^T Q_i   (one Gram per value)
            for v, (vs, vd) in enumerate(uniq):
                rows = np.flatnonzero(inverse == v)
                if len(rows) == n:
                    block = flat
                elif _is_range(rows):
                    block = flat[rows[0] * e:(rows[-1] + 1) * e]
                else:
                    block = qb[self._index(rows)].reshape(len(rows) * e, t)
                gram = block.T @ block
                if vs:
                    self._self_same += vs * gram
                if vd:
                    self._self_diff += vd * gram
        else:
            # Ψ = √(w_i a_i)·Q_i stacked row-wise; Σ_i w_i a_i Q_i^T Q_i = Ψ^T Ψ
            for coef, acc in ((cs, self._self_same), (cd, self._self_diff)):
                psi = flat * self._array(np.repeat(np.sqrt(coef), e))[:, None]
                acc += psi.T @ psi
        # group sums Y_{p,c} += Σ w_i Q_i (one-hot product)
        groups = self.group_of[idx]
        rowsum = qb.reshape(n, e * t)
        if self._torch is None:
            uniq_g, inv_g = np.unique(groups, return_inverse=True)
            onehot = scipy.sparse.csr_matrix((self.weights[idx], (inv_g.reshape(-1),
                                                                  np.arange(n))),
                                             shape=(len(uniq_g), n))
            self._sums[uniq_g] += onehot @ rowsum
        else:
            scaled = rowsum * self._array(self.weights[idx])[:, None]
            self._sums.index_add_(0, self._index(groups), scaled)

    def _index(self, rows):
        if self._torch is None:
            return rows
        return self._torch.as_tensor(rows, dtype=self._torch.int64, device=self._device)

    def result(self) -> PairCovariances:
        """Σ_S = Z_S / N_S, Σ_D = (Z_A − Z_S) / N_D (C-DPCF paper Eq. 9) as float64 numpy."""
        if self._shape is None or not self._seen.all():
            missing = self.num_images - int(self._seen.sum())
            raise UsageError(f"{self.context}: {missing} image(s) were never added",
                             "add every labelled image before asking for the result")
        e, t = self._shape
        num_c = self.num_cameras
        sums = self._sums                                  # [G, E·T] rows = groups (p, c)
        cross_same = self._person_cross(sums, e, t)        # Σ_p Σ_{c≠c'} Y_{p,c}^T Y_{p,c'}
        # Y_c = Σ_p Y_{p,c} (one-hot over groups), then Σ_{c≠c'} Y_c^T Y_{c'}
        cam_sums = self._zeros(num_c, e * t)
        for c in range(num_c):
            rows = np.flatnonzero(self.group_camera == c)
            if len(rows):
                cam_sums[c] = sums[self._index(rows)].sum(0)
        cam_blocks = cam_sums.reshape(num_c * e, t)
        if num_c * (num_c - 1) // 2 <= num_c + 1:          # pairwise camera products
            cross_all = self._zeros(t, t)
            for a in range(num_c):
                for b in range(a + 1, num_c):
                    prod = cam_blocks[a * e:(a + 1) * e].T @ cam_blocks[b * e:(b + 1) * e]
                    cross_all += prod + prod.T
        else:                                              # Y^T Y − Σ_c Y_c^T Y_c
            total = cam_sums.sum(0).reshape(e, t)
            cross_all = total.T @ total - cam_blocks.T @ cam_blocks
        z_same = 2.0 * (self._self_same - cross_same)                   # Z_S
        z_diff = 2.0 * (self._self_diff - cross_all + cross_same)       # Z_A − Z_S
        sigma_same = self._numpy(z_same) / self.n_same
        sigma_diff = self._numpy(z_diff) / self.n_diff
        return PairCovariances(sigma_same=0.5 * (sigma_same + sigma_same.T),
                               sigma_diff=0.5 * (sigma_diff + sigma_diff.T),
                               n_same=self.n_same, n_diff=self.n_diff)

    def _person_cross(self, sums, e: int, t: int):
        """Σ_p Σ_{c≠c'} Y_{p,c}^T Y_{p,c'} over persons seen by ≥ 2 cameras, by the cheaper of
        camera-pair products and Σ_p Y_p^T Y_p − Σ_{p,c} Y_{p,c}^T Y_{p,c}."""
        import scipy.sparse  # here, not at the top: `reid train --help` need not load it
        num_c = self.num_cameras
        table = np.full((len(self.persons), num_c), -1, dtype=np.int64)  # group of (p, c)
        table[self.group_person, self.group_camera] = np.arange(len(self.group_keys))
        multi = (table >= 0).sum(1) >= 2
        table = table[multi]
        out = self._zeros(t, t)
        if len(table) == 0:
            return out
        pairs = [(a, b) for a in range(num_c) for b in range(a + 1, num_c)]
        shared = [int(((table[:, a] >= 0) & (table[:, b] >= 0)).sum()) for a, b in pairs]
        cost_pairwise = sum(shared)
        cost_subtract = len(table) + int((table >= 0).sum())
        if cost_pairwise <= cost_subtract:
            for (a, b), m in zip(pairs, shared):
                if m == 0:
                    continue
                both = (table[:, a] >= 0) & (table[:, b] >= 0)
                ya = sums[self._index(table[both, a])].reshape(m * e, t)
                yb = sums[self._index(table[both, b])].reshape(m * e, t)
                prod = ya.T @ yb
                out += prod + prod.T
            return out
        groups = table[table >= 0]
        owner = np.nonzero(table >= 0)[0]
        ypc = sums[self._index(groups)]                                 # [g, E·T]
        if self._torch is None:
            onehot = scipy.sparse.csr_matrix((np.ones(len(groups)), (owner, np.arange(
                len(groups)))), shape=(len(table), len(groups)))
            yp = onehot @ ypc
        else:
            yp = self._zeros(len(table), e * t)
            yp.index_add_(0, self._index(owner), ypc)
        yp = yp.reshape(len(table) * e, t)
        ypc = ypc.reshape(len(groups) * e, t)
        return yp.T @ yp - ypc.T @ ypc


def _is_range(idx: np.ndarray) -> bool:
    return len(idx) > 0 and idx[-1] - idx[0] == len(idx) - 1 and bool(np.all(np.diff(idx) == 1))


def cross_camera_pair_covariances(Q, pids, camids, *, weights=None, device=None,
                                  chunk: int = CHUNK,
                                  context: str = "training set") -> PairCovariances:
    """Σ_S, Σ_D [T, T] over ordered cross-camera pairs of Q [N, E, T] (C-DPCF paper Eq. 9).

    ``pids``, ``camids``: [N] labels (any sortable dtype, usually int; ``camids`` are camera
    codes of :func:`reidcli.cameras.camera_codes` when the images span several domains);
    ``weights``: optional
    float [N] ≥ 0 (pair weight w_i·w_j).
    E = 1 and T = d gives XQDA's Σ_I, Σ_E (§4.2). ``device`` runs the products in torch
    float64 on that device; ``chunk`` bounds the images per Ψ block. Raises
    :class:`~reidcli.errors.UsageError` naming ``context`` when there are no same-person or
    no different-person cross-camera pairs.
    """
    shape = getattr(Q, "shape", None)
    if shape is None or len(shape) != 3:
        raise UsageError(f"{context}: Q must be a 3-D array [N, E, T], got shape {shape}",
                         "pass features as [N, 1, d] or matrices as [N, E, T]")
    if len(pids) != shape[0] or len(camids) != shape[0]:
        raise UsageError(f"{context}: Q has {shape[0]} images but {len(pids)} pids and "
                         f"{len(camids)} camids", "pass one label per image")
    acc = PairCovarianceAccumulator(pids, camids, weights=weights, device=device, chunk=chunk,
                                    context=context)
    acc.add(np.arange(shape[0]), Q)
    return acc.result()
