"""WARCA — Weighted Approximate Rank Component Analysis (Jose & Fleuret, ECCV 2016), as
``shared/specs/warca.md`` §2 states it.

WARCA learns a low-rank map W [D', D] (metric M = WᵀW, embedding z = Wx) by minibatch Adam on
a WARP-style rank-weighted triplet hinge plus the *approximate orthonormal* (AON) regulariser
(λ/2)‖WWᵀ − I‖²_F. Per iteration (§2.3–2.4):

1. B positive pairs (i, j), uniform over unordered same-pid pairs (optionally cross-camera);
2. negatives k drawn uniformly from all rows (same-pid draws rejected and not counted) until
   the first draw n ≤ S_eff = min(S, N) violating γ + d_ij − d_ik > 0 (or, for
   ``anchor="both"``, γ + d_ij − d_jk > 0); vectorised in chunks of candidates per pair;
3. weight w = 1 + ln(S_eff/n) (``log``), H_⌊|T|/n⌋ (``harmonic``) or ⌊|T|/n⌋ (``uniform``);
4. J_B = (λ/2)‖WWᵀ − I‖²_F + (2/B) Σ_b w_b h_b with h_b the (one or two) hinges (§2.4),
   gradient of §2.5, Adam (§2.7, ``constant`` bias correction by default) or SGD.

d(x_p, x_q) = ‖W(x_p − x_q)‖ is the **non-squared** norm, computed as sqrt(‖u‖² + 1e-12).

Kernel WARCA (§2.6): W = AΦ, A [D', N] acts on kernel columns, z_n = Aκ_n, and the
*preconditioned* gradient (Eqs. 23–24, K⁻¹ never formed) G̃_A = 2λ(AKAᵀ − I)A + G_Z, whose
loss part only touches the columns i, j, k of each triplet (the nine non-zeros of E_ijk).
``optimizer="sgd"`` is exactly Eq. 25; Adam (default) runs on G̃_A (A5).

Public API
----------
* :data:`HYPERPARAMETERS` — defaults (spec §3; names are the CLI's ``--param`` keys);
* :func:`fit_warca_arrays` ``(x [N, D], pids [N], camids [N], **hyper) -> dict`` — one trial's
  arrays for :func:`reidcli.fitted.save` (linear: ``W`` [D', D]; kernel: ``A`` [D', N],
  ``support`` [N, D], kernel parameters; both: ``singular_values`` [D'], ``log/…``);
* :class:`WARCA` — estimator (``fit`` / ``transform``); :class:`WARCATrainer` — the
  iteration loop (``step()``), used by the tests and the benchmark;
* :class:`WARCAModel` — what ``reid eval`` gets for ``method="warca"`` (``transform``,
  ``metric = "sqeuclidean"``);
* :func:`triplet_terms`, :func:`minibatch_objective`, :func:`rank_weights`,
  :func:`kernel_matrix`, :class:`AdamState` — the formulas the tests check.

Rows with pid < 0 are dropped. Camera ids are only used by ``positives="cross-camera"``.
"""
from __future__ import annotations

import json
import logging
import math
import time
import warnings
from typing import Any, Mapping

import numpy as np

from reidcli.errors import FittedModelError, UsageError

log = logging.getLogger(__name__)

KERNELS = ("none", "linear", "chi2rbf", "chi2", "rbf", "poly")
RANK_WEIGHTS = ("log", "harmonic", "uniform")
ANCHORS = ("both", "first")
REGULARISERS = ("aon", "fro")
OPTIMIZERS = ("adam", "sgd")
ADAM_BIAS = ("constant", "standard")
NORMALIZE = ("none", "l2")
POSITIVES = ("all", "cross-camera")
DTYPES = ("float32", "float64")

#: §3 cross-validation grids (λ: 1e-8 … 1, η: 1e-3 … 1)
CV_LAMS = tuple(10.0 ** e for e in range(-8, 1))
CV_LRS = (1e-3, 1e-2, 1e-1, 1.0)

#: defaults of spec §3 (toolkit column) and of the §1 flags; keys are ``--param`` names
HYPERPARAMETERS: dict[str, Any] = {
    "dim": 40,                  # D'
    "lam": 1e-3,                # λ (regulariser weight)
    "lr": 0.1,                  # η
    "margin": 1.0,              # γ, absolute distance units
    "iterations": 2000,
    "batch_size": 512,          # B
    "max_draws": 512,           # S (capped at N)
    "rank_weight": "log",       # A1: log | harmonic | uniform
    "anchor": "both",           # A2: both | first
    "reg": "aon",               # aon | fro (Fig. 2 ablation)
    "optimizer": "adam",        # A4/A5: adam | sgd (= Eq. 25 for kernels)
    "adam_bias": "constant",    # constant (code) | standard
    "kernel": "none",           # none (primal W) | linear | chi2rbf | chi2 | rbf | poly
    "gamma": "auto",            # kernel bandwidth: auto | float
    "degree": 3,                # poly
    "coef0": 0.0,               # poly
    "normalize": "none",        # A15: none | l2
    "positives": "all",         # all | cross-camera
    "seed": 0,
    "device": "cpu",
    "dtype": "float32",
    "max_kernel_n": 20000,
    "cv": False,                # A11: select (λ, η) on ids carved from the training ids
    "cv_val_frac": 0.2,
    "cv_lams": list(CV_LAMS),
    "cv_lrs": list(CV_LRS),
    "snapshot_every": 0,        # write W (or A) every K iterations (Fig. 3); 0 = never
    "log_every": 10,            # training-log period (iterations)
}

_EPS_DIST = 1e-12               # §2.1 d = sqrt(‖u‖² + 1e-12)
_MEDIAN_PAIRS = 100_000         # §2.10 bandwidth from ≤ 100 000 distinct pairs
_EULER_GAMMA = 0.5772156649015329
_TABLE_MAX = 1 << 22            # anchors × rows distance tables up to this many entries


def _torch():
    import torch
    return torch


# -- hyperparameters ---------------------------------------------------------------------------
def _choice(name: str, value, allowed: tuple) -> str:
    if value is None and "none" in allowed:
        value = "none"                       # --param kernel=none parses to None
    value = str(value).lower()
    if value not in allowed:
        raise UsageError(f"warca {name}={value!r} is unknown",
                         f"choose one of {', '.join(allowed)}")
    return value


def _number(name: str, value, *, low=None, integer=False, positive=False) -> float | int:
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise UsageError(f"warca {name}={value!r} is not a number", "give a number") from None
    if not math.isfinite(out) or (integer and out != int(out)) or (positive and out <= 0) \
            or (low is not None and out < low):
        what = "an integer" if integer else "a number"
        bound = " > 0" if positive else (f" ≥ {low}" if low is not None else "")
        raise UsageError(f"warca {name}={value!r} must be {what}{bound}",
                         f"use e.g. the default {HYPERPARAMETERS.get(name)!r}")
    return int(out) if integer else out


def _float_list(name: str, value) -> list[float]:
    if isinstance(value, str):
        value = [v for v in value.replace(";", ",").split(",") if v.strip()]
    elif isinstance(value, (int, float)):
        value = [value]
    out = [_number(name, v, positive=True) for v in value]
    if not out:
        raise UsageError(f"warca {name} is empty", "give comma-separated values")
    return out


def resolve_hyperparameters(hyper: Mapping[str, Any] | None = None, **more) -> dict:
    """Defaults updated with ``hyper`` / ``more``, validated (UsageError, one line).

    ``lambda`` is accepted for ``lam``, ``iters`` for ``iterations``, ``batch`` for
    ``batch_size`` (the spec's flag names).
    """
    given = {**dict(hyper or {}), **more}
    for alias, key in (("lambda", "lam"), ("iters", "iterations"), ("batch", "batch_size")):
        if alias in given:
            given[key] = given.pop(alias)
    unknown = sorted(set(given) - set(HYPERPARAMETERS))
    if unknown:
        raise UsageError(f"warca has no hyperparameter {unknown[0]!r}",
                         f"its hyperparameters: {', '.join(sorted(HYPERPARAMETERS))}")
    h = {**HYPERPARAMETERS, **given}
    out = dict(h)
    out["dim"] = _number("dim", h["dim"], integer=True, low=1)
    out["lam"] = _number("lam", h["lam"], low=0.0)
    out["lr"] = _number("lr", h["lr"], positive=True)
    out["margin"] = _number("margin", h["margin"])
    out["iterations"] = _number("iterations", h["iterations"], integer=True, low=0)
    out["batch_size"] = _number("batch_size", h["batch_size"], integer=True, low=1)
    out["max_draws"] = _number("max_draws", h["max_draws"], integer=True, low=1)
    out["rank_weight"] = _choice("rank_weight", h["rank_weight"], RANK_WEIGHTS)
    out["anchor"] = _choice("anchor", h["anchor"], ANCHORS)
    out["reg"] = _choice("reg", {"frobenius": "fro"}.get(str(h["reg"]).lower(), h["reg"]),
                         REGULARISERS)
    out["optimizer"] = _choice("optimizer", h["optimizer"], OPTIMIZERS)
    out["adam_bias"] = _choice("adam_bias", h["adam_bias"], ADAM_BIAS)
    out["kernel"] = _choice("kernel", h["kernel"], KERNELS)
    gamma = h["gamma"]
    if gamma is None or str(gamma).lower() == "auto":
        out["gamma"] = "auto"
    else:
        out["gamma"] = _number("gamma", gamma, positive=True)
    out["degree"] = _number("degree", h["degree"], integer=True, low=1)
    out["coef0"] = _number("coef0", h["coef0"])
    out["normalize"] = _choice("normalize", h["normalize"], NORMALIZE)
    out["positives"] = _choice("positives", h["positives"], POSITIVES)
    out["seed"] = _number("seed", h["seed"], integer=True, low=0)
    out["device"] = str(h["device"] or "cpu")
    out["dtype"] = _choice("dtype", h["dtype"], DTYPES)
    out["max_kernel_n"] = _number("max_kernel_n", h["max_kernel_n"], integer=True, low=1)
    out["cv"] = bool(h["cv"])
    out["cv_val_frac"] = _number("cv_val_frac", h["cv_val_frac"], positive=True)
    if out["cv_val_frac"] >= 1:
        raise UsageError(f"warca cv_val_frac={h['cv_val_frac']!r} must be in (0, 1)",
                         "use e.g. 0.2")
    out["cv_lams"] = _float_list("cv_lams", h["cv_lams"])
    out["cv_lrs"] = _float_list("cv_lrs", h["cv_lrs"])
    out["snapshot_every"] = _number("snapshot_every", h["snapshot_every"], integer=True, low=0)
    out["log_every"] = _number("log_every", h["log_every"], integer=True, low=1)
    return out


# -- preprocessing and kernels -----------------------------------------------------------------
def preprocess(x: np.ndarray, normalize: str) -> np.ndarray:
    """Rows as WARCA sees them (A15): ``none`` leaves x [n, D] as is, ``l2`` scales each row
    to unit L2 norm (zero rows stay zero). Same at train and test time."""
    x = np.asarray(x)
    if normalize == "l2":
        x = np.asarray(x, dtype=np.float64)
        x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    return x


def chi2_distances(a, b):
    """χ²(a_p, b_q) = Σ_d (a−b)²/(a+b), terms with a+b = 0 skipped, no ½ factor (§2.10).

    a [n, D], b [m, D] torch tensors (non-negative) → [n, m], in bounded blocks.
    """
    from reidcli.metric.kernels import chi2_matrix
    return chi2_matrix(a, b, additive=False)


def _additive_chi2(a, b):
    """Σ_d 2 a_d b_d / (a_d + b_d) (Xiong's additive χ² kernel), [n, D] × [m, D] → [n, m]."""
    from reidcli.metric.kernels import chi2_matrix
    return chi2_matrix(a, b, additive=True)


def _sq_euclidean(a, b):
    """‖a_p − b_q‖², [n, D] × [m, D] → [n, m] (GEMM form, clamped ≥ 0)."""
    from reidcli.metric.kernels import sq_euclidean_matrix
    return sq_euclidean_matrix(a, b)


def _base_distances(a, b, kernel: str):
    """The distance the bandwidth γ multiplies: χ² (chi2rbf) or ‖·‖² (rbf)."""
    return chi2_distances(a, b) if kernel == "chi2rbf" else _sq_euclidean(a, b)


def kernel_from_base(base, a, b, kernel: str, gamma: float, degree: int, coef0: float):
    """k(a_p, b_q) [n, m] given the γ-free base term (distances for chi2rbf/rbf)."""
    torch = _torch()
    if kernel in ("chi2rbf", "rbf"):
        return torch.exp(-gamma * base)
    if kernel == "chi2":
        return _additive_chi2(a, b)
    if kernel == "linear":
        return a @ b.T
    if kernel == "poly":
        return (gamma * (a @ b.T) + coef0) ** degree
    raise UsageError(f"warca kernel {kernel!r} has no kernel matrix", f"use one of {KERNELS[1:]}")


def kernel_matrix(a, b, kernel: str, gamma: float = 1.0, degree: int = 3, coef0: float = 0.0):
    """k(a_p, b_q) for a [n, D], b [m, D] torch tensors → [n, m] (§2.10 kernels).

    chi2rbf: exp(−γχ²); chi2: Σ2ab/(a+b); rbf: exp(−γ‖a−b‖²); poly: (γ aᵀb + coef0)^degree;
    linear: aᵀb.
    """
    base = _base_distances(a, b, kernel) if kernel in ("chi2rbf", "rbf") else None
    return kernel_from_base(base, a, b, kernel, gamma, degree, coef0)


def _random_distinct_pairs(n: int, count: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """All unordered distinct pairs when there are ≤ count, else ``count`` random ones."""
    total = n * (n - 1) // 2
    if total <= count:
        a, b = np.triu_indices(n, 1)
        return a, b
    rng = np.random.default_rng([seed, 7])
    a = rng.integers(0, n, count)
    b = rng.integers(0, n - 1, count)
    b = b + (b >= a)
    return a, b


def _check_nonnegative(x: np.ndarray, kernel: str) -> None:
    if kernel in ("chi2rbf", "chi2") and len(x) and float(np.min(x)) < 0:
        raise UsageError(f"warca kernel {kernel} needs non-negative features (min "
                         f"{float(np.min(x)):.4g})",
                         "use histogram-like features, or --kernel rbf / none")


# -- the formulas of §2.4–2.7 ------------------------------------------------------------------
def _dist(u):
    """d = sqrt(‖u‖² + 1e-12) over the last axis."""
    return ((u * u).sum(-1) + _EPS_DIST).sqrt()


def triplet_terms(zi, zj, zk, w, batch: int, margin: float, anchor: str = "both"):
    """Loss and embedding gradients of sampled triplets (§2.4–2.5).

    zi, zj, zk [T, D'] embeddings, w [T] rank weights, ``batch`` = B. Returns
    ``(loss, hinge [T], g_i, g_j, g_k [T, D'])`` with loss = (2/B) Σ w h and
    g_i = c[(a_ik+a_jk) u_ij/d_ij − a_ik u_ik/d_ik], g_j = c[−(a_ik+a_jk) u_ij/d_ij
    − a_jk u_jk/d_jk], g_k = c[a_ik u_ik/d_ik + a_jk u_jk/d_jk], c = 2w/B.
    """
    torch = _torch()
    u_ij, u_ik = zi - zj, zi - zk
    d_ij, d_ik = _dist(u_ij), _dist(u_ik)
    h_ik = margin + d_ij - d_ik
    a_ik = (h_ik > 0).to(zi.dtype)
    e_ij, e_ik = u_ij / d_ij[:, None], u_ik / d_ik[:, None]
    c = 2.0 * w.to(zi.dtype) / batch
    if anchor == "both":
        u_jk = zj - zk
        d_jk = _dist(u_jk)
        h_jk = margin + d_ij - d_jk
        a_jk = (h_jk > 0).to(zi.dtype)
        e_jk = u_jk / d_jk[:, None]
        hinge = torch.relu(h_ik) + torch.relu(h_jk)
        s = (a_ik + a_jk)[:, None]
        g_i = c[:, None] * (s * e_ij - a_ik[:, None] * e_ik)
        g_j = c[:, None] * (-s * e_ij - a_jk[:, None] * e_jk)
        g_k = c[:, None] * (a_ik[:, None] * e_ik + a_jk[:, None] * e_jk)
    else:
        hinge = torch.relu(h_ik)
        g_i = c[:, None] * a_ik[:, None] * (e_ij - e_ik)
        g_j = -c[:, None] * a_ik[:, None] * e_ij
        g_k = c[:, None] * a_ik[:, None] * e_ik
    return (c * hinge).sum(), hinge, g_i, g_j, g_k


def _regulariser(P, gram, lam: float, reg: str, identity):
    """(objective, gradient wrt P) of the regulariser; ``gram`` = WWᵀ (primal) or AKAᵀ
    (kernel), [D', D']. AON: (λ/2)‖gram − I‖², grad 2λ(gram − I)P; fro: (λ/2)tr(gram), grad
    λP (for kernels both are the *preconditioned* gradients, Eq. 23)."""
    if reg == "aon":
        r = gram - identity
        return 0.5 * lam * (r * r).sum(), (2.0 * lam) * (r @ P)
    return 0.5 * lam * gram.diagonal().sum(), lam * P


def minibatch_objective(P, F, triplets, weights, *, lam: float, margin: float = 1.0,
                        batch: int | None = None, anchor: str = "both", reg: str = "aon",
                        kernel: bool = False):
    """J_B and its (preconditioned) gradient for fixed triplets (§2.4–2.6).

    P: W [D', D] (primal, F = X [N, D]) or A [D', N] (kernel, F = K [N, N], z_n = Aκ_n);
    triplets: int [T, 3] rows (i, j, k); weights [T]; ``batch`` = B (default T).
    Returns (J_B scalar, grad [D', ·]): primal ∇_W J_B = reg + Σ g_p x_pᵀ; kernel
    G̃_A = reg + G_Z (columns i, j, k only). torch tensors in, torch out.
    """
    torch = _torch()
    t = torch.as_tensor(np.asarray(triplets), dtype=torch.long, device=P.device).reshape(-1, 3)
    w = torch.as_tensor(np.asarray(weights), dtype=P.dtype, device=P.device).reshape(-1)
    batch = len(t) if batch is None else batch
    rows = F[t.reshape(-1)]                                    # [3T, ·]
    z = (rows @ P.T).reshape(len(t), 3, -1)
    loss, _, gi, gj, gk = triplet_terms(z[:, 0], z[:, 1], z[:, 2], w, batch, margin, anchor)
    g = torch.stack([gi, gj, gk], 1).reshape(-1, P.shape[0])   # [3T, D']
    eye = torch.eye(P.shape[0], dtype=P.dtype, device=P.device)
    gram = P @ (F @ P.T) if kernel else P @ P.T
    reg_obj, reg_grad = _regulariser(P, gram, lam, reg, eye)
    if kernel:                                                 # E_ijk: columns i, j, k only
        g_loss = torch.zeros_like(P).index_add_(1, t.reshape(-1), g.T)
    else:
        g_loss = g.T @ rows
    return reg_obj + loss, reg_grad + g_loss


def rank_weights(n, kind: str, s_eff: int, negatives=None):
    """Weight of a pair whose first violator was counted draw n (§2.3 step 3, A1).

    ``log``: 1 + ln(S_eff/n); ``harmonic``: H_r̂ with r̂ = max(1, ⌊|T_y|/n⌋);
    ``uniform``: r̂. ``negatives`` = |T_{y_i}| (needed by harmonic/uniform). numpy or torch.
    """
    if kind == "log":
        if isinstance(n, np.ndarray) or np.isscalar(n):
            return 1.0 + np.log(s_eff / np.asarray(n, dtype=np.float64))
        return 1.0 + (s_eff / n.double()).log()
    if negatives is None:
        raise UsageError(f"rank weight {kind!r} needs the negative counts |T_y|",
                         "pass negatives=")
    if isinstance(n, np.ndarray) or np.isscalar(n):
        from scipy.special import digamma
        r = np.maximum(1, np.floor_divide(np.asarray(negatives), np.asarray(n)))
        return r.astype(np.float64) if kind == "uniform" else digamma(r + 1.0) + _EULER_GAMMA
    torch = _torch()
    r = torch.clamp(torch.div(negatives, n, rounding_mode="floor"), min=1).double()
    return r if kind == "uniform" else torch.special.digamma(r + 1.0) + _EULER_GAMMA


class AdamState:
    """Adam on one tensor (§2.7): β₁ = .9, β₂ = .999, ε = 1e-8, fixed η.

    ``bias="constant"`` (the code): θ ← θ − η (m_t/(1−β₁)) / (sqrt(v_t/(1−β₂)) + ε);
    ``"standard"``: the usual (1 − β^t) corrections. ``step(param, grad)`` updates in place.
    """

    def __init__(self, like, lr: float, bias: str = "constant", beta1: float = 0.9,
                 beta2: float = 0.999, eps: float = 1e-8):
        torch = _torch()
        self.m, self.v = torch.zeros_like(like), torch.zeros_like(like)
        self.lr, self.bias, self.b1, self.b2, self.eps, self.t = lr, bias, beta1, beta2, eps, 0

    def step(self, param, grad) -> None:
        self.t += 1
        self.m.mul_(self.b1).add_(grad, alpha=1 - self.b1)
        self.v.mul_(self.b2).addcmul_(grad, grad, value=1 - self.b2)
        if self.bias == "constant":
            c1, c2 = 1 - self.b1, 1 - self.b2
        else:
            c1, c2 = 1 - self.b1 ** self.t, 1 - self.b2 ** self.t
        denom = (self.v / c2).sqrt_().add_(self.eps)
        param.addcdiv_(self.m, denom, value=-self.lr / c1)


# -- training ----------------------------------------------------------------------------------
class WARCATrainer:
    """The WARCA iteration loop on prepared rows (§2.3–2.9).

    ``WARCATrainer(x [N, D], pids [N], camids [N] | None, **hyper)``: rows with pid < 0 are
    dropped, ``normalize`` applied, the kernel matrix built (kernel variants) and the pair
    sampler set up, all once. ``step()`` runs one iteration and returns its statistics;
    ``run()`` runs ``iterations`` steps with the training log. ``params`` is W [D', D]
    (primal) or A [D', N] (kernel), a torch tensor on ``device``.

    Primal steps cost no O(N) work: only touched rows are projected, unless projecting all
    N rows is cheaper (N < B·(2 + draws per pair, running estimate)); results do not depend
    on the choice.
    """

    def __init__(self, x, pids, camids=None, **hyper):
        torch = _torch()
        self.h = h = resolve_hyperparameters(hyper)
        x = np.asarray(x)
        pids = np.asarray(pids).reshape(-1)
        camids = np.zeros(len(pids), np.int64) if camids is None else np.asarray(camids).reshape(-1)
        if x.ndim != 2 or len(x) != len(pids) or len(camids) != len(pids):
            raise UsageError(f"warca needs features [N, D] with one pid and camid per row, got "
                             f"{x.shape}, {pids.shape}, {camids.shape}",
                             "pass one feature row per image")
        keep = pids >= 0
        x, pids, camids = x[keep], pids[keep], camids[keep]
        if not np.isfinite(x).all():
            raise UsageError("warca training features hold NaN or Inf", "fix the features")
        self.kernel = h["kernel"]
        self.is_kernel = self.kernel != "none"
        x = preprocess(x, h["normalize"])
        _check_nonnegative(x, self.kernel)
        n, d = x.shape
        if self.is_kernel and n > h["max_kernel_n"]:
            raise UsageError(f"warca --kernel {self.kernel} on {n} training rows needs an "
                             f"{n}×{n} kernel matrix (max_kernel_n={h['max_kernel_n']})",
                             "use the primal (kernel=none) or raise max_kernel_n")
        self.dtype = getattr(torch, h["dtype"])
        try:
            self.device = torch.device(h["device"])
            torch.empty(1, device=self.device)
        except (RuntimeError, AssertionError) as exc:
            raise UsageError(f"warca device {h['device']!r} is not available ({exc})",
                             "use device=cpu") from None
        self.gen = torch.Generator(device=self.device)
        self.gen.manual_seed(h["seed"])
        self.n, self.d = n, d
        self.batch, self.margin, self.anchor = h["batch_size"], h["margin"], h["anchor"]
        self.s_eff = min(h["max_draws"], n)                       # S_eff = min(S, N)
        self._labels(pids, camids)
        self.support = x
        xt = torch.as_tensor(np.ascontiguousarray(x), dtype=self.dtype, device=self.device)
        self.gamma = None
        if self.is_kernel:
            self.F = self._kernel(xt)                             # K [N, N]
            self.X = None
        else:
            self.F = self.X = xt                                  # X [N, D]
        dim = h["dim"]
        if dim > (n if self.is_kernel else d):
            warnings.warn(f"warca dim={dim} exceeds the {'rows' if self.is_kernel else 'input'}"
                          f" dimension {n if self.is_kernel else d}; WWᵀ cannot reach I",
                          UserWarning, stacklevel=2)
        cols = self.F.shape[1]                                    # D (primal) or N (kernel)
        scale = 1.0 / math.sqrt(n if self.is_kernel else d)       # §2.8 N(0,1/N) | N(0,1/D)
        self.params = torch.randn(dim, cols, generator=self.gen, dtype=self.dtype,
                                  device=self.device) * scale
        self.eye = torch.eye(dim, dtype=self.dtype, device=self.device)
        self.opt = AdamState(self.params, h["lr"], h["adam_bias"]) if h["optimizer"] == "adam" \
            else None
        self.t = 0
        self._draw_estimate = 1.0                                 # counted draws per pair (EMA)
        self._chunk0 = 4                                          # first chunk of candidates
        self.median_distance = self._median_distance(xt)
        log.info("warca: %d training rows, %s, median pairwise training distance %.4g",
                 n, "primal" if not self.is_kernel else f"kernel {self.kernel}",
                 self.median_distance)
        if not 0.1 <= self.median_distance <= 10:
            warnings.warn(f"warca: median pairwise training distance {self.median_distance:.3g} "
                          f"is outside [0.1, 10] while the margin is {self.margin:g} in absolute "
                          "units; consider normalize=l2 or rescaling", UserWarning, stacklevel=2)

    # -- setup (O(N), once) --------------------------------------------------------------------
    def _labels(self, pids: np.ndarray, camids: np.ndarray) -> None:
        torch = _torch()
        uniq, lab = np.unique(pids, return_inverse=True)
        counts = np.bincount(lab, minlength=len(uniq)).astype(np.int64)
        order = np.argsort(lab, kind="stable")
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        if self.h["positives"] == "cross-camera":
            _, cam = np.unique(camids, return_inverse=True)
            n_cams = int(cam.max()) + 1
            per = np.bincount(lab * n_cams + cam, minlength=len(uniq) * n_cams)
            same_cam = (per.reshape(len(uniq), n_cams).astype(np.float64) ** 2).sum(1)
            pair_w = (counts.astype(np.float64) ** 2 - same_cam) / 2
        else:
            pair_w = counts * (counts - 1) / 2.0
        if pair_w.sum() <= 0:
            what = "two images of one camera pair" if self.h["positives"] == "cross-camera" \
                else "two images"
            raise UsageError(f"warca training set has no identity with {what}",
                             "train on identities with several images")
        if len(uniq) < 2:
            raise UsageError("warca training set has a single identity", "add negatives")
        dev = self.device
        self.labels = torch.as_tensor(lab, dtype=torch.long, device=dev)
        self.cams = torch.as_tensor(camids, dtype=torch.long, device=dev)
        self.order = torch.as_tensor(order, dtype=torch.long, device=dev)
        self.starts = torch.as_tensor(starts, dtype=torch.long, device=dev)
        self.counts = torch.as_tensor(counts, dtype=torch.long, device=dev)
        self.cdf = torch.as_tensor(np.cumsum(pair_w), dtype=torch.float64, device=dev)
        self.total_pairs = float(pair_w.sum())
        self.negatives = torch.as_tensor(len(lab) - counts[lab], dtype=torch.long, device=dev)
        self.num_ids = len(uniq)

    def _kernel(self, xt):
        """K [N, N] (§2.10), γ = 1/median over ≤ 100 000 distinct pairs when ``auto``."""
        torch = _torch()
        h = self.h
        kernel, gamma = self.kernel, h["gamma"]
        base = _base_distances(xt, xt, kernel) if kernel in ("chi2rbf", "rbf") else None
        if kernel in ("chi2rbf", "rbf", "poly"):
            if gamma == "auto":
                if kernel == "poly":
                    gamma = 1.0 / xt.shape[1]
                else:
                    a, b = _random_distinct_pairs(len(xt), _MEDIAN_PAIRS, h["seed"])
                    med = float(torch.quantile(base[a, b], 0.5)) if len(a) else 0.0
                    if not med > 0:
                        raise UsageError(f"warca kernel {kernel}: the median pairwise distance "
                                         "is 0, γ auto is undefined",
                                         "give gamma=FLOAT or check the features")
                    gamma = 1.0 / med
            self.gamma = float(gamma)
        else:
            self.gamma = None
        K = kernel_from_base(base, xt, xt, kernel, self.gamma or 1.0, h["degree"], h["coef0"])
        return 0.5 * (K + K.T)

    def _median_distance(self, xt) -> float:
        """Median pairwise training distance (input space; kernel-space for kernels)."""
        a, b = _random_distinct_pairs(self.n, 10_000, self.h["seed"])
        if not len(a):
            return float("nan")
        torch = _torch()
        ta = torch.as_tensor(a, device=self.device)
        tb = torch.as_tensor(b, device=self.device)
        if self.is_kernel:
            K = self.F
            sq = (K[ta, ta] + K[tb, tb] - 2 * K[ta, tb]).clamp_min(0)
        else:
            sq = ((xt[ta] - xt[tb]) ** 2).sum(1)
        return float(sq.sqrt().median())

    # -- sampling (§2.3) -----------------------------------------------------------------------
    def sample_pairs(self, count: int):
        """``count`` positive pairs (i, j), uniform over unordered same-pid pairs (or
        cross-camera pairs); the order within a pair is random. Two long tensors [count]."""
        torch = _torch()
        dev = self.device
        u = torch.rand(count, generator=self.gen, dtype=torch.float64, device=dev)
        q = torch.searchsorted(self.cdf, u * self.total_pairs, right=True)
        q = q.clamp_(max=self.num_ids - 1)                        # identity ∝ its pair count
        i = torch.empty(count, dtype=torch.long, device=dev)
        j = torch.empty_like(i)
        todo = torch.arange(count, device=dev)
        for _ in range(10_000):
            qt = q[todo]
            nq = self.counts[qt]
            m = todo.numel()
            a = (torch.rand(m, generator=self.gen, dtype=torch.float64, device=dev)
                 * nq).long().clamp_(max=nq - 1)
            b = (torch.rand(m, generator=self.gen, dtype=torch.float64, device=dev)
                 * (nq - 1)).long().clamp_(max=nq - 2)
            b = b + (b >= a).long()                               # two distinct members
            ii, jj = self.order[self.starts[qt] + a], self.order[self.starts[qt] + b]
            i[todo], j[todo] = ii, jj
            if self.h["positives"] != "cross-camera":
                break
            todo = todo[self.cams[ii] == self.cams[jj]]           # same camera: redraw in q
            if todo.numel() == 0:
                break
        return i, j

    def _project(self, rows):
        """Embeddings of the rows ``rows`` (any shape) → [*rows.shape, D']."""
        return (self.F[rows.reshape(-1)] @ self.params.T).reshape(*rows.shape, -1)

    def sample_negatives(self, i, j, zi, zj, embed=None, table=None):
        """First violating negative of each pair (§2.3 step 2), vectorised in chunks.

        i, j [B], zi, zj [B, D'] → (found bool [B], n long [B] counted draws up to the
        violator (S_eff when none), k long [B], zk [B, D']). ``embed(rows)`` maps row indices
        to embeddings (default: project the touched rows). ``table`` = (d_i [B, N], d_j
        [B, N]) precomputed distances of every pair's anchors to all rows (small N only).
        Candidates are drawn per unresolved pair in chunks (doubling); only draws with another
        pid are counted, and the first counted violator ≤ S_eff wins, as in the sequential rule.
        """
        torch = _torch()
        embed = embed or self._project
        B, S, N = i.numel(), self.s_eff, self.n
        dev = self.device
        found = torch.zeros(B, dtype=torch.bool, device=dev)
        n = torch.full((B,), S, dtype=torch.long, device=dev)
        k = torch.zeros(B, dtype=torch.long, device=dev)
        active = torch.arange(B, device=dev)
        y = self.labels[i]
        thr_all = self.margin + _dist(zi - zj)                    # γ + d_ij
        a_cnt = torch.zeros(B, dtype=torch.long, device=dev)
        remaining = S
        chunk = self._chunk0
        drawn = 0
        while active.numel():
            m = active.numel()
            c = max(1, min(chunk, remaining))
            cand = torch.randint(0, N, (m, c), generator=self.gen, device=dev)
            drawn += m * c
            valid = self.labels[cand] != y[active][:, None]       # same pid: not counted
            thr = thr_all[active][:, None]
            if table is not None:
                viol = table[0][active[:, None], cand] < thr      # γ + d_ij − d_ik > 0
                if self.anchor == "both":
                    viol |= table[1][active[:, None], cand] < thr  # γ + d_ij − d_jk > 0
            else:
                zc = embed(cand)                                  # [m, c, D']
                viol = _dist(zi[active][:, None, :] - zc) < thr
                if self.anchor == "both":
                    viol |= _dist(zj[active][:, None, :] - zc) < thr
            pos = a_cnt[:, None] + valid.cumsum(1)                # counted-draw number
            hit = valid & viol & (pos <= S)
            any_hit = hit.any(1)
            first = hit.to(torch.uint8).argmax(1)                 # first violator in draw order
            rows = torch.nonzero(any_hit).reshape(-1)
            if rows.numel():
                f = first[rows]
                dst = active[rows]
                found[dst] = True
                n[dst] = pos[rows, f]
                k[dst] = cand[rows, f]
            cnt = pos[:, -1].clamp_(max=S)
            keep = ~any_hit & (cnt < S)
            active, a_cnt = active[keep], cnt[keep]
            if not active.numel():
                break
            remaining = S - int(a_cnt.min())
            chunk *= 2
        self._drawn = drawn / max(B, 1)
        return found, n, k, embed(k)

    # -- one iteration -------------------------------------------------------------------------
    def step(self) -> dict:
        """One minibatch update (§2.3–2.7). Returns tensors: objective, hinge_mean,
        violation_rate, mean_draws."""
        torch = _torch()
        B, P = self.batch, self.params
        i, j = self.sample_pairs(B)
        est = self._draw_estimate                                 # counted draws per pair
        # project all N rows when that is cheaper than the ≈ B(2 + draws) touched rows
        project_all = self.is_kernel or self.n <= B * (2 + est)
        self._chunk0 = int(min(64, max(2, 2 ** math.ceil(math.log2(max(est, 1.0))))))
        table = None
        if project_all:
            Z = self.F @ P.T                                      # [N, D'] (kernel: Z = (AK)ᵀ)
            embed = Z.__getitem__
        else:
            Z, embed = None, self._project
        zi, zj = embed(i), embed(j)
        if project_all and B * self.n <= _TABLE_MAX and est * 8 > self.n:
            sq = (Z * Z).sum(1)                                   # anchors × all rows, 2 GEMMs
            table = tuple(((za * za).sum(1)[:, None] + sq[None] - 2.0 * (za @ Z.T))
                          .clamp_min_(0).add_(_EPS_DIST).sqrt_() for za in (zi, zj))
        found, n, k, zk = self.sample_negatives(i, j, zi, zj, embed, table)
        self._draw_estimate = 0.8 * est + 0.2 * float(n.to(torch.float64).mean())
        sel = torch.nonzero(found).reshape(-1)
        w = torch.zeros(B, dtype=self.dtype, device=self.device)
        if sel.numel():
            kind = self.h["rank_weight"]
            w[sel] = rank_weights(n[sel], kind, self.s_eff,
                                  None if kind == "log" else self.negatives[i[sel]]).to(self.dtype)
        loss, hinge, gi, gj, gk = triplet_terms(zi[sel], zj[sel], zk[sel], w[sel], B,
                                                self.margin, self.anchor)
        # regulariser (Eq. 10 / 18): WWᵀ or AKAᵀ = A Z
        if self.h["reg"] == "fro":
            gram_trace = (P * Z.T).sum() if self.is_kernel else (P * P).sum()
            reg_obj, reg_grad = 0.5 * self.h["lam"] * gram_trace, self.h["lam"] * P
        else:
            gram = P @ Z if self.is_kernel else P @ P.T
            reg_obj, reg_grad = _regulariser(P, gram, self.h["lam"], "aon", self.eye)
        rows = torch.cat([i[sel], j[sel], k[sel]])
        g = torch.cat([gi, gj, gk])                               # [3T, D']
        if self.is_kernel:                                        # Eq. 23–24: G̃ = reg + G_Z
            grad = reg_grad.index_add_(1, rows, g.T)
        elif self.n < rows.numel():                               # scatter to N rows, one GEMM
            gz = torch.zeros(self.n, P.shape[0], dtype=self.dtype, device=self.device)
            grad = reg_grad.add_((self.F.T @ gz.index_add_(0, rows, g)).T)
        else:
            grad = reg_grad.add_((self.F[rows].T @ g).T)
        if self.opt is None:                                      # SGD (= Eq. 25 for kernels)
            P.add_(grad, alpha=-self.h["lr"])
        else:
            self.opt.step(P, grad)
        self.t += 1
        return {"objective": reg_obj + loss, "hinge_mean": hinge.sum() / B,
                "violation_rate": found.to(self.dtype).mean(),
                "mean_draws": n.to(self.dtype).mean()}

    def run(self, iterations: int | None = None) -> dict:
        """Run ``iterations`` steps (default: the hyperparameter); returns the training log
        ``{iter, wall_s, objective, hinge_mean, violation_rate, mean_draws}`` (numpy arrays,
        one entry every ``log_every`` iterations and at the end) and ``snapshots``."""
        iterations = self.h["iterations"] if iterations is None else int(iterations)
        every, snap = self.h["log_every"], self.h["snapshot_every"]
        entries: dict[str, list] = {k: [] for k in ("iter", "wall_s", "objective", "hinge_mean",
                                                      "violation_rate", "mean_draws")}
        snapshots: dict[str, np.ndarray] = {}
        start = time.perf_counter()
        for _ in range(iterations):
            stats = self.step()
            if self.t % every == 0 or self.t == iterations:
                if self.device.type == "cuda":
                    _torch().cuda.synchronize(self.device)
                entries["iter"].append(self.t)
                entries["wall_s"].append(time.perf_counter() - start)
                for key, value in stats.items():
                    entries[key].append(float(value))
            if snap and self.t % snap == 0:
                snapshots[str(self.t)] = self.params.detach().cpu().numpy().copy()
        self.wall_s = time.perf_counter() - start
        out = {k: np.asarray(v, dtype=np.int64 if k == "iter" else np.float64)
               for k, v in entries.items()}
        return {"log": out, "snapshots": snapshots}

    def singular_values(self) -> np.ndarray:
        """Singular values of W [D'] (kernel: sqrt(eigvalsh(AKAᵀ)), descending) (A16)."""
        torch = _torch()
        P = self.params
        if self.is_kernel:
            gram = P @ (self.F @ P.T)
            ev = torch.linalg.eigvalsh(0.5 * (gram + gram.T)).clamp_min(0).sqrt()
            return ev.flip(0).cpu().numpy().astype(np.float64)
        return torch.linalg.svdvals(P).cpu().numpy().astype(np.float64)


# -- estimator ---------------------------------------------------------------------------------
def _rank_scores(zq, yq, zg, yg, ranks=(1, 5)) -> tuple[float, ...]:
    """CMC at ``ranks`` for queries zq [q, d] against a gallery zg [g, d] (sq. Euclidean)."""
    d = (zq * zq).sum(1)[:, None] + (zg * zg).sum(1)[None] - 2 * zq @ zg.T
    pos = np.array([d[r][yg == yq[r]].min() for r in range(len(zq))])
    rank = (d < pos[:, None]).sum(1)                           # 0 = first
    return tuple(float((rank < r).mean()) for r in ranks)


class WARCA:
    """WARCA estimator (scikit-learn style).

    ``WARCA(**hyper).fit(X [N, D], pids [N], camids [N] | None)`` sets ``W_`` [D', D]
    (primal) or ``A_`` [D', N], ``support_`` [N, D] and ``gamma_`` (kernel), plus
    ``singular_values_`` [D'], ``log_`` (training log), ``snapshots_``, ``hyper_`` (resolved,
    after cross-validation when ``cv``) and ``cv_`` (grid scores). ``transform(X [n, D]) ->
    [n, D']``; ``model_`` is the :class:`WARCAModel`; :meth:`to_arrays` gives the
    fitted-model arrays.
    """

    def __init__(self, **hyper):
        self.hyper = resolve_hyperparameters(hyper)

    def fit(self, X, pids, camids=None) -> "WARCA":
        x = np.asarray(X)
        pids = np.asarray(pids).reshape(-1)
        camids = None if camids is None else np.asarray(camids).reshape(-1)
        h = dict(self.hyper)
        self.cv_ = None
        if h["cv"]:
            h = self._cross_validate(x, pids, camids, h)
        trainer = WARCATrainer(x, pids, camids, **h)
        result = trainer.run()
        self.hyper_ = h
        self.log_, self.snapshots_ = result["log"], result["snapshots"]
        self.singular_values_ = trainer.singular_values()
        self.train_seconds_ = trainer.wall_s
        self.median_distance_ = trainer.median_distance
        params = trainer.params.detach().cpu().numpy()
        self.kernel_ = trainer.kernel
        self.gamma_ = trainer.gamma
        if trainer.is_kernel:
            self.A_, self.support_ = params, np.asarray(trainer.support, dtype=params.dtype)
            self.W_ = None
        else:
            self.W_, self.A_, self.support_ = params, None, None
        self.n_features_in_ = x.shape[1]
        self.model_ = WARCAModel(W=self.W_, A=self.A_, support=self.support_,
                                 kernel=self.kernel_, gamma=self.gamma_, degree=h["degree"],
                                 coef0=h["coef0"], normalize=h["normalize"], device=h["device"])
        return self

    def _cross_validate(self, x, pids, camids, h) -> dict:
        """A11: carve ``cv_val_frac`` of the training ids (with ≥ 2 images) as validation,
        train each (λ, η) on the rest, score validation rank-1 (ties: rank-5) with one random
        gallery image per id and the other images as probes; return h with the best pair."""
        rng = np.random.default_rng([h["seed"], 11])
        ok = pids >= 0
        ids, counts = np.unique(pids[ok], return_counts=True)
        multi = ids[counts >= 2]
        n_val = int(round(h["cv_val_frac"] * len(ids)))
        n_val = min(max(n_val, 2), len(multi) - 1)
        if n_val < 2:
            raise UsageError("warca cv needs at least 3 training ids with 2+ images",
                             "train without cv")
        val_ids = rng.choice(multi, n_val, replace=False)
        is_val = np.isin(pids, val_ids) & ok
        vx, vp = x[is_val], pids[is_val]
        gal = np.zeros(len(vp), bool)
        for q in val_ids:
            members = np.flatnonzero(vp == q)
            gal[rng.choice(members)] = True
        tr = ~is_val
        scores = np.zeros((len(h["cv_lams"]), len(h["cv_lrs"]), 2))
        for a, lam in enumerate(h["cv_lams"]):
            for b, lr in enumerate(h["cv_lrs"]):
                sub = {**h, "lam": lam, "lr": lr, "cv": False, "snapshot_every": 0}
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    model = WARCA(**sub).fit(x[tr], pids[tr],
                                             None if camids is None else camids[tr]).model_
                z = model.transform(vx).astype(np.float64)
                if not np.isfinite(z).all():
                    scores[a, b] = -1
                    continue
                scores[a, b] = _rank_scores(z[~gal], vp[~gal], z[gal], vp[gal])
        flat = [(scores[a, b, 0], scores[a, b, 1], -a, -b) for a in range(scores.shape[0])
                for b in range(scores.shape[1])]
        best = max(flat)
        a, b = -best[2], -best[3]
        self.cv_ = {"lams": np.asarray(h["cv_lams"]), "lrs": np.asarray(h["cv_lrs"]),
                    "rank1": scores[..., 0], "rank5": scores[..., 1],
                    "val_ids": np.asarray(val_ids)}
        log.info("warca cv: λ=%g η=%g (validation rank-1 %.3f)", h["cv_lams"][a],
                 h["cv_lrs"][b], scores[a, b, 0])
        return {**h, "lam": h["cv_lams"][a], "lr": h["cv_lrs"][b]}

    def _fitted(self) -> None:
        if not hasattr(self, "model_"):
            raise UsageError("this WARCA is not fitted yet", "call fit(X, pids, camids) first")

    def transform(self, X) -> np.ndarray:
        """[n, D] → [n, D'] embeddings (Wx, or A·k(support, x))."""
        self._fitted()
        return self.model_.transform(X)

    def to_arrays(self) -> dict:
        """Fitted-model arrays of one trial (§2.11 inside a ``reidcli.fitted`` trial group)."""
        self._fitted()
        h = self.hyper_
        config = {**h, "gamma_resolved": self.gamma_}
        arrays: dict[str, Any] = {
            "variant": np.bytes_("kernel" if self.A_ is not None else "linear"),
            "kernel": np.bytes_(self.kernel_),
            "normalize": np.bytes_(h["normalize"]),
            "gamma": np.float64(np.nan if self.gamma_ is None else self.gamma_),
            "degree": np.int64(h["degree"]), "coef0": np.float64(h["coef0"]),
            "dim_in": np.int64(self.n_features_in_),
            "dim_out": np.int64(h["dim"]), "seed": np.int64(h["seed"]),
            "train_config": np.bytes_(json.dumps(config, sort_keys=True, default=str)),
            "singular_values": self.singular_values_,
            "log": dict(self.log_),
        }
        if self.A_ is not None:
            arrays["A"], arrays["support"] = self.A_, self.support_
        else:
            arrays["W"] = self.W_
        if self.snapshots_:
            arrays["snapshots"] = dict(self.snapshots_)
        if self.cv_ is not None:
            arrays["cv"] = dict(self.cv_)
        return arrays


def fit_warca_arrays(x: np.ndarray, pids: np.ndarray, camids: np.ndarray | None = None,
                     **hyper) -> dict:
    """Fit WARCA on x [N, D] (pids [N], camids [N]) and return one trial's arrays:
    linear ``W`` [D', D] or kernel ``A`` [D', N] + ``support`` [N, D] + ``gamma``/``degree``/
    ``coef0``; ``singular_values`` [D'], ``log/{iter, wall_s, objective, hinge_mean,
    violation_rate, mean_draws}``, metadata (``variant``, ``kernel``, ``normalize``,
    ``train_config`` JSON), optional ``snapshots/<iter>`` and ``cv/…``."""
    return WARCA(**hyper).fit(x, pids, camids).to_arrays()


# -- fitted model ------------------------------------------------------------------------------
def _text(value, default: str = "") -> str:
    if value is None:
        return default
    if isinstance(value, np.ndarray):
        value = value.item() if value.shape == () else value
    if isinstance(value, (bytes, np.bytes_)):
        return value.decode()
    return str(value)


class WARCAModel:
    """A fitted WARCA trial: ``transform(x [n, D]) -> [n, D']`` then squared Euclidean
    distances (the ranking of the Mahalanobis distance with M = WᵀW).

    Linear: ``WARCAModel(W=[D', D])``, z = W·pre(x). Kernel: ``WARCAModel(A=[D', N],
    support=[N, D], kernel, gamma, degree, coef0)``, z = A·k(support, pre(x)), computed in
    row blocks. ``normalize`` (``none``/``l2``) is applied to x first, as at training.
    """

    metric = "sqeuclidean"

    def __init__(self, W=None, A=None, support=None, kernel: str = "none",
                 gamma: float | None = None, degree: int = 3, coef0: float = 0.0,
                 normalize: str = "none", device: str | None = None):
        self.kernel = _choice("kernel", kernel, KERNELS)
        self.normalize = _choice("normalize", normalize, NORMALIZE)
        if self.kernel == "none":
            if W is None or np.ndim(W) != 2:
                raise FittedModelError("warca linear model needs W [D', D]", "re-fit the model")
            self.W, self.A, self.support = np.asarray(W), None, None
        else:
            if A is None or support is None or np.ndim(A) != 2 or np.ndim(support) != 2 \
                    or np.shape(A)[1] != np.shape(support)[0]:
                raise FittedModelError("warca kernel model needs A [D', N] and support [N, D]",
                                       "re-fit the model")
            self.W, self.A, self.support = None, np.asarray(A), np.asarray(support)
        self.gamma = None if gamma is None or not np.isfinite(gamma) else float(gamma)
        if self.kernel in ("chi2rbf", "rbf", "poly") and self.gamma is None:
            raise FittedModelError(f"warca {self.kernel} model lacks gamma", "re-fit the model")
        self.degree, self.coef0 = int(degree), float(coef0)
        self.device = device or "cpu"

    @property
    def input_dim(self) -> int:
        return int((self.W if self.W is not None else self.support).shape[1])

    @property
    def output_dim(self) -> int:
        return int((self.W if self.W is not None else self.A).shape[0])

    def _torch_device(self):
        torch = _torch()
        dev = torch.device(self.device)
        if dev.type == "cuda" and not torch.cuda.is_available():
            dev = torch.device("cpu")
        return torch, dev

    def transform(self, features) -> np.ndarray:
        """[n, D] → [n, D'] in the parameters' dtype (float32 or float64)."""
        x = np.asarray(features)
        if x.ndim != 2 or x.shape[1] != self.input_dim:
            raise FittedModelError(f"warca expects {self.input_dim}-dimensional features, got "
                                   f"shape {x.shape}",
                                   "evaluate the store feature the model was fit on")
        x = preprocess(x, self.normalize)
        torch, dev = self._torch_device()
        params = self.W if self.W is not None else self.A
        dt = torch.float64 if params.dtype == np.float64 else torch.float32
        P = torch.as_tensor(params, dtype=dt, device=dev)
        if self.W is not None:
            out = torch.as_tensor(np.ascontiguousarray(x), dtype=dt, device=dev) @ P.T
            return out.cpu().numpy()
        _check_nonnegative(x, self.kernel)
        sup = torch.as_tensor(self.support, dtype=dt, device=dev)
        out = np.empty((len(x), P.shape[0]), dtype=params.dtype if dt == torch.float64
                       else np.float32)
        step = 2048
        for s in range(0, len(x), step):
            xb = torch.as_tensor(np.ascontiguousarray(x[s:s + step]), dtype=dt, device=dev)
            kb = kernel_matrix(xb, sup, self.kernel, self.gamma or 1.0, self.degree, self.coef0)
            out[s:s + step] = (kb @ P.T).cpu().numpy()           # (A κ(x))ᵀ
        return out


def _factory(arrays: dict, hyperparameters: dict) -> WARCAModel:
    hp = dict(hyperparameters or {})
    variant = _text(arrays.get("variant"), "kernel" if "A" in arrays else "linear")
    kernel = _text(arrays.get("kernel"), str(hp.get("kernel") or "none"))
    normalize = _text(arrays.get("normalize"), str(hp.get("normalize") or "none"))
    if variant == "linear":
        if "W" not in arrays:
            raise FittedModelError("warca trial lacks the array W", "re-fit the model")
        return WARCAModel(W=arrays["W"], normalize=normalize, device=hp.get("device"))
    missing = [k for k in ("A", "support") if k not in arrays]
    if missing:
        raise FittedModelError(f"warca kernel trial lacks {', '.join(missing)}",
                               "re-fit the model")
    gamma = arrays.get("gamma")
    return WARCAModel(A=arrays["A"], support=arrays["support"], kernel=kernel,
                      gamma=None if gamma is None else float(gamma),
                      degree=int(arrays.get("degree", hp.get("degree", 3))),
                      coef0=float(arrays.get("coef0", hp.get("coef0", 0.0))),
                      normalize=normalize, device=hp.get("device"))


def _register() -> None:
    from reidcli import fitted
    fitted.register_method("warca", _factory)


_register()
