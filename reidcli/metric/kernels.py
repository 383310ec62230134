"""Kernels, kernel-space projections and pair sampling shared by the metric-learning baselines
(docs/methods/kernels.md): kernel LFDA and rPCCA (:mod:`reidcli.metric.lfda`,
:mod:`reidcli.metric.rpcca`), KISSME's negative pairs (:mod:`reidcli.metric.kissme`).

Kernels (docs/methods/kernels.md), x, y ∈ ℝ^D:

* ``linear``  k = xᵀy
* ``chi2``    k = Σ_d 2 x_d y_d / (x_d + y_d)                 (additive χ², Xiong's ``chi2``)
* ``chi2rbf`` k = exp(−γ χ²(x, y)), χ²(x, y) = Σ_d (x_d − y_d)² / (x_d + y_d)   (no ½ factor)
* ``rbf``     k = exp(−γ ‖x − y‖²)
* ``poly``    k = (γ xᵀy + coef0)^degree

Terms with x_d + y_d = 0 are skipped; χ² kernels need non-negative features. ``gamma="auto"``
is 1 / median χ² (``chi2rbf``) or 1 / median ‖x − y‖² (``rbf``) over ≤ 100 000 random distinct
training pairs, and 1 / D for ``poly``; ``gamma="inv_dim"`` is 1 / D for every kernel (the
WARCA authors' C++ default). A kernel model multiplies every kernel value by a stored
``scale`` (rPCCA rescales K to trace N). Kernel matrices are built block-wise in torch (float64,
on ``device``), so no [n, m, D] tensor larger than :data:`BLOCK_ELEMENTS` exists.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from reidcli.errors import FittedModelError, UsageError
from reidcli.fitted import TrialModel
from reidcli.params import Interval, Options, check_param
from reidcli.progress import track

KERNELS = ("linear", "chi2", "chi2rbf", "rbf", "poly")

#: ``--help`` of the kernel parameters every kernel method shares (kLFDA, rPCCA, WARCA)
KERNEL_PARAMETER_HELP = {
    "gamma": "Kernel bandwidth: auto (1 / median distance; poly: 1 / D), inv_dim (1 / D, the "
             "WARCA authors' code) or a number.",
    "degree": "poly kernel degree.", "coef0": "poly kernel offset.",
    "max_kernel_n": "Refuse more training rows than this (N × N kernel)."}
#: kernels with a bandwidth / scale γ
GAMMA_KERNELS = ("chi2rbf", "rbf", "poly")
#: kernels that need non-negative features
CHI2_KERNELS = ("chi2", "chi2rbf")
#: scratch elements per block of an element-wise (χ²) kernel computation
BLOCK_ELEMENTS = 1 << 22
#: pairs used for ``gamma="auto"``
AUTO_GAMMA_PAIRS = 100_000
#: the named bandwidth rules (docs/methods/kernels.md)
GAMMA_RULES = ("auto", "inv_dim")


# -- feature checks --------------------------------------------------------------------------
def check_features(x, what: str, *, min_rows: int = 1) -> np.ndarray:
    """``x`` as float64 [N, D] with N ≥ ``min_rows``, D ≥ 1 and only finite values, else
    UsageError naming ``what``."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] < min_rows or x.shape[1] < 1:
        raise UsageError(f"{what}: expected features of shape [N ≥ {min_rows}, D ≥ 1], got "
                         f"{x.shape}", "pass one feature row per image")
    if not np.isfinite(x).all():
        raise UsageError(f"{what} hold NaN or Inf", "fix or re-extract the features")
    return x


def check_labels(n: int, pids, camids, what: str) -> tuple[np.ndarray, np.ndarray | None]:
    """(pids [n], camids [n] or None) as arrays; UsageError when a shape does not fit ``n``."""
    pids = np.asarray(pids)
    if pids.shape != (n,):
        raise UsageError(f"{what}: {n} feature rows but pids of shape {pids.shape}",
                         "pass one person id per row")
    if camids is not None:
        camids = np.asarray(camids)
        if camids.shape != (n,):
            raise UsageError(f"{what}: {n} feature rows but camids of shape {camids.shape}",
                             "pass one camera id per row")
    return pids, camids


# -- kernels ---------------------------------------------------------------------------------
def _torch():
    import torch
    return torch


def _as_tensor(x, device):
    torch = _torch()
    return torch.as_tensor(np.ascontiguousarray(x, dtype=np.float64), device=torch.device(device))


def _chi2_block(a, b, additive: bool):
    """[p, D] × [q, D] torch → [p, q]: Σ 2ab/(a+b) (additive) or Σ (a−b)²/(a+b) (distance),
    terms with a + b = 0 contribute 0 (features are non-negative)."""
    torch = _torch()
    tiny = torch.finfo(a.dtype).tiny
    den = (a[:, None, :] + b[None, :, :]).clamp_min_(tiny)
    if additive:
        return 2.0 * (a[:, None, :] * b[None, :, :] / den).sum(-1)
    return ((a[:, None, :] - b[None, :, :]).square_() / den).sum(-1)


def chi2_matrix(a, b, additive: bool):
    """Blocked :func:`_chi2_block` with at most BLOCK_ELEMENTS scratch elements per block."""
    torch = _torch()
    p, dim = a.shape
    q = b.shape[0]
    cols = max(1, min(q, BLOCK_ELEMENTS // max(dim, 1)))
    rows = max(1, BLOCK_ELEMENTS // (cols * max(dim, 1)))
    out = torch.empty((p, q), dtype=a.dtype, device=a.device)
    blocks = [(r, c) for r in range(0, p, rows) for c in range(0, q, cols)]
    for r, c in track(blocks, description="χ² kernel blocks", unit="blocks",
                      enabled=None if len(blocks) > 1 else False, inner=True):
        out[r:r + rows, c:c + cols] = _chi2_block(a[r:r + rows], b[c:c + cols], additive)
    return out


def sq_euclidean_matrix(a, b):
    d = (a.square().sum(1)[:, None] + b.square().sum(1)[None, :]) - 2.0 * (a @ b.T)
    return d.clamp_min_(0.0)


def _kernel_tensor(name: str, a, b, gamma: float, degree: float, coef0: float):
    if name == "linear":
        return a @ b.T
    if name == "poly":
        return (gamma * (a @ b.T) + coef0) ** degree
    if name == "rbf":
        return (-gamma * sq_euclidean_matrix(a, b)).exp_()
    if name == "chi2":
        return chi2_matrix(a, b, additive=True)
    if name == "chi2rbf":
        return (-gamma * chi2_matrix(a, b, additive=False)).exp_()
    raise UsageError(f"kernel {name!r} is unknown", f"choose one of {', '.join(KERNELS)}")


def chi2_distances(x, y, device: str = "cpu") -> np.ndarray:
    """χ²(x_a, y_b) = Σ_d (x_ad − y_bd)² / (x_ad + y_bd) (zero-sum terms skipped, no ½):
    x [n, D], y [m, D] non-negative → float64 [n, m]."""
    return chi2_matrix(_as_tensor(x, device), _as_tensor(y, device),
                        additive=False).cpu().numpy()


def paired_distances(x, pairs, kind: str) -> np.ndarray:
    """χ² (``kind="chi2"``) or squared Euclidean (``"sqeuclidean"``) distances of the row
    pairs ``pairs`` [M, 2] of x [N, D] → float64 [M] (blocks of pairs)."""
    x = np.asarray(x, dtype=np.float64)
    pairs = np.asarray(pairs, dtype=np.int64)
    out = np.empty(len(pairs))
    step = max(1, BLOCK_ELEMENTS // max(x.shape[1], 1))
    for s in range(0, len(pairs), step):
        a, b = x[pairs[s:s + step, 0]], x[pairs[s:s + step, 1]]
        if kind == "chi2":
            den = a + b
            out[s:s + step] = np.divide((a - b) ** 2, den, out=np.zeros_like(den),
                                        where=den > 0).sum(1)
        else:
            out[s:s + step] = ((a - b) ** 2).sum(1)
    return out


def random_distinct_pairs(n: int, count: int, rng: np.random.Generator) -> np.ndarray:
    """Up to ``count`` distinct unordered pairs (i < j) of range(n), uniformly at random:
    int64 [min(count, n(n−1)/2), 2] (all pairs when they are few)."""
    total = n * (n - 1) // 2
    if total <= count:
        i, j = np.triu_indices(n, 1)
        return np.stack([i, j], 1).astype(np.int64)
    keys = np.empty(0, dtype=np.int64)
    while len(keys) < count:
        a = rng.integers(0, n, size=2 * count)
        b = rng.integers(0, n, size=2 * count)
        keep = a != b
        lo, hi = np.minimum(a[keep], b[keep]), np.maximum(a[keep], b[keep])
        keys = np.unique(np.concatenate([keys, lo * n + hi]))
    keys = rng.choice(keys, size=count, replace=False)
    return np.stack([keys // n, keys % n], 1)


def auto_gamma(x, kernel: str, seed: int = 0, max_pairs: int = AUTO_GAMMA_PAIRS) -> float:
    """γ for ``gamma="auto"`` (docs/methods/kernels.md): 1 / median χ² (``chi2rbf``) or 1 / median
    ‖x_i − x_j‖² (``rbf``) over ≤ ``max_pairs`` random distinct pairs of x [N, D]; 1 / D for
    ``poly``; 1.0 for kernels without γ."""
    x = np.asarray(x, dtype=np.float64)
    if kernel == "poly":
        return 1.0 / x.shape[1]
    if kernel not in ("chi2rbf", "rbf"):
        return 1.0
    if len(x) < 2:
        raise UsageError("gamma=auto needs at least 2 training rows", "pass an explicit gamma")
    pairs = random_distinct_pairs(len(x), max_pairs, np.random.default_rng(seed))
    d = paired_distances(x, pairs, "chi2" if kernel == "chi2rbf" else "sqeuclidean")
    median = float(np.median(d))
    if not median > 0:
        what = "χ²" if kernel == "chi2rbf" else "squared Euclidean"
        raise UsageError(f"gamma=auto: the median training {what} distance is 0 (duplicate "
                         "rows?)", "pass an explicit gamma")
    return 1.0 / median


@dataclasses.dataclass(frozen=True)
class Kernel:
    """A resolved kernel: ``name`` ∈ :data:`KERNELS`, numeric ``gamma``, ``degree``,
    ``coef0`` and a multiplier ``scale`` applied to every value."""

    name: str
    gamma: float = 1.0
    degree: float = 3.0
    coef0: float = 0.0
    scale: float = 1.0

    def tensor(self, x, y=None, device: str = "cpu"):
        """scale · k(x_a, y_b) as a torch float64 tensor [n, m] on ``device``."""
        a = _as_tensor(x, device)
        b = a if y is None else _as_tensor(y, device)
        check_kernel_input(self.name, a, "features")
        if y is not None:
            check_kernel_input(self.name, b, "kernel support rows")
        k = _kernel_tensor(self.name, a, b, self.gamma, self.degree, self.coef0)
        return k * self.scale if self.scale != 1.0 else k

    def matrix(self, x, y=None, device: str = "cpu") -> np.ndarray:
        """scale · k(x_a, y_b): x [n, D], y [m, D] (default x) → float64 numpy [n, m]."""
        return self.tensor(x, y, device).cpu().numpy()

    def to_arrays(self) -> dict:
        """Arrays stored in a fitted model (``kernel`` as bytes, the rest float64 scalars)."""
        return {"kernel": np.bytes_(self.name), "gamma": np.float64(self.gamma),
                "degree": np.float64(self.degree), "coef0": np.float64(self.coef0),
                "kernel_scale": np.float64(self.scale)}

    @classmethod
    def from_arrays(cls, arrays: dict, what: str) -> "Kernel":
        missing = [k for k in ("kernel", "gamma", "degree", "coef0", "kernel_scale")
                   if k not in arrays]
        if missing:
            raise FittedModelError(f"{what}: kernel model lacks {', '.join(missing)}",
                                   "re-fit the model")
        name = arrays["kernel"]
        name = np.asarray(name).item() if isinstance(name, np.ndarray) else name
        name = name.decode() if isinstance(name, bytes) else str(name)
        if name not in KERNELS:
            raise FittedModelError(f"{what}: unknown kernel {name!r}", "re-fit the model")
        return cls(name, float(arrays["gamma"]), float(arrays["degree"]),
                   float(arrays["coef0"]), float(arrays["kernel_scale"]))


def check_kernel_input(kernel: str, x, what: str) -> None:
    """χ² kernels need non-negative features (docs/methods/kernels.md): UsageError otherwise."""
    if kernel in CHI2_KERNELS:
        low = float(x.min()) if x.numel() else 0.0
        if low < 0:
            raise UsageError(f"the {kernel} kernel needs non-negative {what} (minimum {low:.4g})",
                             "use histogram features, or the rbf / linear kernel")


def resolve_kernel(x, kernel: str, gamma="auto", degree=3, coef0=0.0, seed: int = 0) -> Kernel:
    """Validate the kernel options and resolve ``gamma="auto"`` on the training rows x [N, D]."""
    check_param("kernel", "kernel", kernel, Options(KERNELS))
    if kernel in CHI2_KERNELS and float(np.min(x)) < 0:
        raise UsageError(f"the {kernel} kernel needs non-negative features (minimum "
                         f"{float(np.min(x)):.4g})",
                         "use histogram features, or the rbf / linear kernel")
    if isinstance(gamma, str):
        if gamma not in GAMMA_RULES:
            raise UsageError(f"gamma {gamma!r} must be 'auto', 'inv_dim' or a number > 0",
                             "fix gamma")
        if kernel not in GAMMA_KERNELS:
            gamma = 1.0
        elif gamma == "inv_dim":          # 1 / D: the WARCA authors' C++ default
            gamma = 1.0 / np.asarray(x).shape[1]
        else:
            gamma = auto_gamma(x, kernel, seed)
    gamma = check_param("kernel", "gamma", gamma, Interval(float, 0, None, "neither"))
    degree = check_param("kernel", "degree", degree, Interval(float, 1, None))
    coef0 = check_param("kernel", "coef0", coef0, Interval(float))
    return Kernel(kernel, gamma, degree, coef0, 1.0)


# -- fitted models ---------------------------------------------------------------------------
class KernelProjection(TrialModel):
    """Kernel-space projection z(x) = A κ(x), κ(x) = scale · [k(s_1, x), …, k(s_N, x)] over the
    stored support rows (WARCA paper Eq. 15–17): A [d, N], support [N, D]. ``transform(x [n, D]) ->
    [n, d]`` float64, in row blocks; distances are Euclidean on z."""

    metric = "euclidean"

    def __init__(self, A, support, kernel: Kernel, device: str = "cpu"):
        self.A = np.asarray(A, dtype=np.float64)
        self.support = np.asarray(support, dtype=np.float64)
        self.kernel = kernel
        self.device = device
        if self.A.ndim != 2 or self.support.ndim != 2 or self.A.shape[1] != len(self.support):
            raise FittedModelError(f"kernel projection: A has shape {self.A.shape} and support "
                                   f"{self.support.shape}; expected [d, N] and [N, D]",
                                   "re-fit the model")

    @property
    def input_dim(self) -> int:  # type: ignore[override]
        return int(self.support.shape[1])

    @property
    def output_dim(self) -> int:
        return int(self.A.shape[0])

    def transform(self, features) -> np.ndarray:
        """[n, D] → [n, d] float64: κ(x)ᵀ Aᵀ, computed for blocks of rows."""
        x = self.check_input(features, np.float64)
        n_support = max(len(self.support), 1)
        step = max(1, BLOCK_ELEMENTS // n_support)
        out = np.empty((len(x), self.output_dim))
        starts = range(0, len(x), step)
        for s in track(starts, description="kernel projection", unit="blocks",
                       enabled=None if len(starts) > 1 else False, inner=True):
            out[s:s + step] = self.kernel.matrix(x[s:s + step], self.support,
                                                 self.device) @ self.A.T
        return out


def kernel_arrays(A, support, kernel: Kernel) -> dict:
    """Arrays of a kernel model: ``A`` [d, N], ``support`` [N, D] and the kernel parameters."""
    return {"A": np.asarray(A, dtype=np.float64),
            "support": np.asarray(support, dtype=np.float64), **kernel.to_arrays()}


def linear_from_dual(A, support, scale: float = 1.0) -> np.ndarray:
    """W [D, d] = scale · supportᵀ Aᵀ: a linear-kernel model z = A·scale·X x as x @ W."""
    return scale * (np.asarray(support, dtype=np.float64).T @ np.asarray(A, dtype=np.float64).T)


def projection_model(arrays: dict, what: str):
    """Model of a baseline's arrays: ``W`` [D, d] (+ optional ``mean``) → the built-in
    :class:`reidcli.fitted.LinearProjection`; ``A`` + ``support`` + kernel →
    :class:`KernelProjection`."""
    from reidcli.fitted import LinearProjection
    if "W" in arrays:
        return LinearProjection(arrays["W"], arrays.get("mean"))
    if "A" in arrays and "support" in arrays:
        return KernelProjection(arrays["A"], arrays["support"], Kernel.from_arrays(arrays, what))
    raise FittedModelError(f"{what} trial has neither W nor A + support", "re-fit the model")


# -- pairs -----------------------------------------------------------------------------------
def positive_pairs(pids) -> np.ndarray:
    """All unordered same-pid pairs (i < j) of the rows: int64 [P, 2]."""
    pids = np.asarray(pids)
    order = np.argsort(pids, kind="stable")
    _, starts, counts = np.unique(pids[order], return_index=True, return_counts=True)
    out, cache = [], {}
    for start, n in zip(starts, counts):
        if n < 2:
            continue
        if n not in cache:
            cache[n] = np.triu_indices(n, 1)
        a, b = cache[n]
        rows = order[start:start + n]
        i, j = rows[a], rows[b]
        out.append(np.stack([np.minimum(i, j), np.maximum(i, j)], 1))
    return np.concatenate(out).astype(np.int64) if out else np.zeros((0, 2), np.int64)


def count_pairs(pids) -> tuple[int, int]:
    """(#unordered same-pid pairs, #unordered different-pid pairs)."""
    _, counts = np.unique(np.asarray(pids), return_counts=True)
    n = int(counts.sum())
    same = int((counts * (counts - 1) // 2).sum())
    return same, n * (n - 1) // 2 - same


def negative_pairs(pids, count: int, rng: np.random.Generator) -> np.ndarray:
    """min(count, #negatives) distinct unordered different-pid pairs (i < j), uniformly at
    random without replacement (as GeneratePair of [8]): int64 [M, 2]."""
    pids = np.asarray(pids)
    n = len(pids)
    _, total = count_pairs(pids)
    count = int(min(count, total))
    if count <= 0:
        return np.zeros((0, 2), np.int64)
    if count > total // 4:                                    # few rows: enumerate
        i, j = np.triu_indices(n, 1)
        keep = pids[i] != pids[j]
        pick = rng.choice(int(keep.sum()), size=count, replace=False)
        return np.stack([i[keep][pick], j[keep][pick]], 1).astype(np.int64)
    keys = np.empty(0, dtype=np.int64)
    while len(keys) < count:
        draw = 2 * (count - len(keys)) + 16
        a, b = rng.integers(0, n, size=draw), rng.integers(0, n, size=draw)
        keep = pids[a] != pids[b]
        lo, hi = np.minimum(a[keep], b[keep]), np.maximum(a[keep], b[keep])
        keys = np.unique(np.concatenate([keys, lo * n + hi]))
    keys = rng.choice(keys, size=count, replace=False)        # a uniform subset of the draws
    return np.stack([keys // n, keys % n], 1)
