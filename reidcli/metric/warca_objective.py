"""WARCA's formulas (Jose & Fleuret, ECCV 2016): distances, the rank-weighted triplet hinge,
the regularisers, the rank weights and the Adam step. No sampling, no state beyond Adam's.

Notation: W [D', D] (primal, embedding z = Wx) or A [D', N] (kernel, z_n = Aκ_n with κ_n the
n-th column of K [N, N], Eqs. 15–17); B = minibatch size (number of sampled pairs); γ = margin;
λ = regulariser weight. All tensors are torch; the choices behind the defaults are explained in
``docs/methods/warca.md``.
"""
from __future__ import annotations

import numpy as np

from reidcli.errors import UsageError

#: d = sqrt(‖u‖² + EPS_DIST): the non-squared distance of Eq. 5, differentiable at u = 0
EPS_DIST = 1e-12
_EULER_GAMMA = 0.5772156649015329


def _torch():
    import torch
    return torch


def distance(u):
    """d = sqrt(‖u‖² + 1e-12) over the last axis: u [..., D'] → [...] (Eq. 5, non-squared)."""
    return ((u * u).sum(-1) + EPS_DIST).sqrt()


def triplet_terms(zi, zj, zk, w, batch: int, margin: float, anchor: str = "both"):
    """Loss and embedding gradients of sampled triplets (the summand of Eq. 12 as minimised).

    zi, zj, zk [T, D'] embeddings, w [T] rank weights, ``batch`` = B. The hinge of a triplet
    is h = [γ + d_ij − d_ik]_+ (ξ_ijk of Eq. 13) plus, for ``anchor="both"``,
    [γ + d_ij − d_jk]_+. Returns ``(loss, hinge [T], g_i, g_j, g_k [T, D'])`` with
    loss = (2/B) Σ w h (the factor 2 of Eqs. 20/23/25) and, c = 2w/B,
    g_i = c[(a_ik+a_jk) u_ij/d_ij − a_ik u_ik/d_ik], g_j = c[−(a_ik+a_jk) u_ij/d_ij
    − a_jk u_jk/d_jk], g_k = c[a_ik u_ik/d_ik + a_jk u_jk/d_jk] (a = 1 where a hinge is
    active, u_pq = z_p − z_q).
    """
    torch = _torch()
    u_ij, u_ik = zi - zj, zi - zk                              # [T, D'] each
    d_ij, d_ik = distance(u_ij), distance(u_ik)
    h_ik = margin + d_ij - d_ik
    a_ik = (h_ik > 0).to(zi.dtype)
    c = 2.0 * w.to(zi.dtype) / batch
    # coefficients per triplet [T] first, so that few passes run over [T, D']
    q = c * a_ik / d_ik                                        # g_k's weight of u_ik
    if anchor == "both":
        u_jk = zj - zk
        d_jk = distance(u_jk)
        h_jk = margin + d_ij - d_jk
        a_jk = (h_jk > 0).to(zi.dtype)
        hinge = torch.relu(h_ik) + torch.relu(h_jk)
        p = (c * (a_ik + a_jk) / d_ij)[:, None]                # c·s/d_ij
        r = (c * a_jk / d_jk)[:, None]
        g_i = torch.addcmul(p * u_ij, q[:, None], u_ik, value=-1.0)
        g_k = torch.addcmul(q[:, None] * u_ik, r, u_jk)
        g_j = torch.addcmul(-p * u_ij, r, u_jk, value=-1.0)
    else:
        hinge = torch.relu(h_ik)
        p = (c * a_ik / d_ij)[:, None]
        g_k = q[:, None] * u_ik
        g_j = -p * u_ij
        g_i = g_j.neg().sub_(g_k)                              # g_i + g_j + g_k = 0
    return (c * hinge).sum(), hinge, g_i, g_j, g_k


def regulariser(P, gram, lam: float, reg: str, identity, P_low=None):
    """(objective, gradient wrt P) of the regulariser; P [D', ·], ``gram`` [D', D'] = WWᵀ
    (primal) or AKAᵀ (kernel), ``identity`` = I [D', D'].

    ``aon``: (λ/2)‖gram − I‖²_F (Eqs. 10, 18), gradient 2λ(gram − I)P; ``fro``:
    (λ/2) tr(gram), gradient λP. For kernels both gradients are the preconditioned ones
    (right-multiplied by K⁻¹, Eq. 23). ``P_low``: a low-precision copy of P [D', ·] (bf16);
    when given, the product 2λ(gram − I)·P runs on it (gram − I rounded after the
    subtraction, so the cancellation near WWᵀ ≈ I stays exact) and returns P's dtype.
    """
    if reg == "aon":
        r = gram - identity                                     # [D', D']: scale it, not P
        if P_low is not None:
            return 0.5 * lam * (r * r).sum(), \
                (((2.0 * lam) * r).to(P_low.dtype) @ P_low).to(P.dtype)
        return 0.5 * lam * (r * r).sum(), ((2.0 * lam) * r) @ P
    return 0.5 * lam * gram.diagonal().sum(), lam * P


def minibatch_objective(P, F, triplets, weights, *, lam: float, margin: float = 1.0,
                        batch: int | None = None, anchor: str = "both", reg: str = "aon",
                        kernel: bool = False):
    """J_B = regulariser + (2/B) Σ w h and its (preconditioned) gradient for fixed triplets.

    P: W [D', D] (primal, F = X [N, D]) or A [D', N] (kernel, F = K [N, N], z_n = Aκ_n);
    triplets: int [T, 3] rows (i, j, k); weights [T]; ``batch`` = B (default T).
    Returns (J_B scalar, gradient [D', ·]): primal ∇_W J_B = reg + Σ_p g_p x_pᵀ; kernel
    G̃_A = reg + G_Z, the preconditioned gradient of Eqs. 23–24 (K⁻¹ never formed: the loss
    part touches only the columns i, j, k of each triplet, the nine non-zeros of E_ijk).
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
    reg_obj, reg_grad = regulariser(P, gram, lam, reg, eye)
    if kernel:                                                 # E_ijk: columns i, j, k only
        g_loss = torch.zeros_like(P).index_add_(1, t.reshape(-1), g.T)
    else:
        g_loss = g.T @ rows
    return reg_obj + loss, reg_grad + g_loss


def rank_weights(n, kind: str, s_eff: int, negatives=None):
    """Weight L(r̂) of a pair whose first margin violator was counted draw n (Eqs. 8, 14).

    ``log``: 1 + ln(S_eff/n) (the authors' code); ``harmonic``: L(r̂) = H_r̂ = Σ_{s≤r̂} 1/s,
    the paper's choice, with the rank estimate r̂ = max(1, ⌊|T_y|/n⌋); ``uniform``: r̂.
    ``negatives`` = |T_{y_i}| (Eq. 4; needed by harmonic and uniform). n [T] (numpy, scalar
    or torch) → weights [T] float64 of the same kind.
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
    """Adam (the paper's ref. [31]) on one tensor: β₁ = .9, β₂ = .999, ε = 1e-8, fixed η.

    ``bias="constant"`` (the authors' code): θ ← θ − η (m_t/(1−β₁)) / (sqrt(v_t/(1−β₂)) + ε);
    ``"standard"``: the usual (1 − β^t) corrections. ``step(param, grad)`` updates ``param``
    (any shape, like ``like``) in place.
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
