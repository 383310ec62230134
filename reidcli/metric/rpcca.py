"""rPCCA — kernel PCCA (Mignon & Jurie, CVPR 2012) with the λ-regulariser of Xiong et al. ECCV
2014 [8], as docs/methods/rpcca.md describes it.

Parametrisation as kernel WARCA (WARCA paper Eq. 15–17): A [d, N] acts on kernel columns, z(x) = A κ(x),
κ(x) = c · [k(x_1, x), …, k(x_N, x)] with c = N / tr(K) (K rescaled to trace N, as [8]).
Pairs: all unordered same-pid pairs (y = +1) plus ``neg_ratio`` × as many random distinct
different-pid pairs (y = −1), drawn once. With D_n = ‖A(κ_i − κ_j)‖² = ‖z_i − z_j‖²:

    J(A) = Σ_n ℓ_β(y_n (D_n − 1)) + λ tr(A K Aᵀ),   ℓ_β(x) = (1/β) ln(1 + e^{βx})

(a **sum** over pairs, as [8]'s code). Gradient ∇_A J = 2 A (K C + λ I) K with
C = Σ_n σ(β y_n (D_n − 1)) y_n (e_i − e_j)(e_i − e_j)ᵀ; the preconditioned gradient (× K⁻¹,
never formed) is G̃ = 2 (Z C + λ A), Z = A K, and costs O(dN²) for Z plus O(#pairs · d).

Optimisers:

* ``adaptive`` ([8], default): full-batch A ← A − η G̃, η starts at ``lr`` (0.1); a step that
  raises J is rejected and retried with η × 0.9, an accepted one sets η × 1.1; stop when both
  the decrease of J and ‖ΔA‖_F / ‖A‖_F are < ``tol`` (1e-4), when η < 1e-50, or after
  ``max_iter`` attempts (accepted + rejected). A₀ ~ N(0, ``init_std``²), init_std = 1e-4.
* ``adam``: ``max_iter`` Adam steps (size ``lr``) on G̃ estimated from ``batch_size`` pairs
  drawn uniformly (the loss part scaled by #pairs / batch, so it estimates the full sum), as
  the WARCA loop (docs/methods/warca.md: β₁ .9, β₂ .999, ε 1e-8, ``adam_bias`` constant | standard). Each step costs
  O(d N · batch) — no N² work — which is what the Fig. 3 time comparison needs.

Arrays: kernel models ``A`` [d, N], ``support`` [N, D], kernel parameters (incl.
``kernel_scale`` = c); the linear kernel (rPCCA-L) is collapsed to ``W`` = c Xᵀ Aᵀ [D, d].
``log/{iter, wall_s, objective, lr, converged, attempts}`` (iter counts attempts for
``adaptive``, steps for ``adam``; wall_s excludes ``adam``'s logging) and, with
``snapshot_every`` = s > 0, ``snapshots/<iter>`` (A or W) every s accepted steps / steps, each
also a log row — test accuracy vs training time for Fig. 3.
"""
from __future__ import annotations

import time

import numpy as np

from reidcli.errors import UsageError
from reidcli.estimator import Estimator, store_params
from reidcli.metric.kernels import (GAMMA_RULES, KERNEL_PARAMETER_HELP, KERNELS, Kernel,
                                    KernelProjection,
                                    check_features, check_labels, count_pairs, kernel_arrays,
                                    linear_from_dual, negative_pairs, positive_pairs,
                                    projection_model, resolve_kernel)
from reidcli.metric.constraints import (COUNT, COUNT_OR_ZERO, DEVICE, DIM, SEED, check_device,
                                        check_dim)
from reidcli.params import Interval, Options
from reidcli.progress import track
from reidcli.registry import register

OPTIMIZERS = ("adaptive", "adam")
ADAM_BIAS = ("constant", "standard")


# -- objective and gradients -------------------------------------------------------------------
def training_pairs(pids, neg_ratio: float, rng: np.random.Generator
                   ) -> tuple[np.ndarray, np.ndarray]:
    """(pairs int64 [M, 2], y float64 [M] = ±1): all same-pid pairs, then
    round(neg_ratio × #positives) distinct random different-pid pairs."""
    pos = positive_pairs(pids)
    if len(pos) == 0:
        raise UsageError("rPCCA: no two training rows share a person id",
                         "train on persons with at least two images")
    if count_pairs(pids)[1] == 0:
        raise UsageError("rPCCA: all training rows share one person id",
                         "train on at least two persons")
    neg = negative_pairs(pids, int(round(neg_ratio * len(pos))), rng)
    pairs = np.concatenate([pos, neg])
    y = np.concatenate([np.ones(len(pos)), -np.ones(len(neg))])
    return pairs, y


def _torch():
    import torch
    return torch


class _Pairs:
    """Pairs on the device: i, j int64 [M], y float64 [M]."""

    def __init__(self, pairs: np.ndarray, y: np.ndarray, device):
        torch = _torch()
        self.i = torch.as_tensor(pairs[:, 0], dtype=torch.int64, device=device)
        self.j = torch.as_tensor(pairs[:, 1], dtype=torch.int64, device=device)
        self.y = torch.as_tensor(y, dtype=torch.float64, device=device)

    def take(self, pick) -> "_Pairs":
        out = _Pairs.__new__(_Pairs)
        out.i, out.j, out.y = self.i[pick], self.j[pick], self.y[pick]
        return out


def _pair_terms(Z, P: _Pairs, beta: float):
    """Δ [d, M] = z_i − z_j, D [M] = ‖Δ‖², c [M] = y σ(β y (D − 1)) (torch)."""
    delta = Z[:, P.i] - Z[:, P.j]
    dist = delta.square().sum(0)
    coef = P.y * (beta * P.y * (dist - 1.0)).sigmoid()
    return delta, dist, coef


def _objective(A, Z, P: _Pairs, beta: float, lam: float) -> float:
    """J = Σ_n (1/β) ln(1 + exp(β y_n (D_n − 1))) + λ tr(A K Aᵀ), with Z = A K."""
    torch = _torch()
    _, dist, _ = _pair_terms(Z, P, beta)
    arg = beta * P.y * (dist - 1.0)
    loss = torch.logaddexp(torch.zeros_like(arg), arg).sum() / beta
    return float(loss + lam * (A * Z).sum())


def _zc(Z, P: _Pairs, beta: float, n: int):
    """Z C = Σ_n c_n (z_i − z_j)(e_i − e_j)ᵀ [d, n] (scatter-add over the pairs)."""
    delta, _, coef = _pair_terms(Z, P, beta)
    weighted = delta * coef[None, :]
    out = Z.new_zeros((Z.shape[0], n))
    out.index_add_(1, P.i, weighted)
    out.index_add_(1, P.j, -weighted)
    return out


def _precond(A, Z, P: _Pairs, beta: float, lam: float):
    """G̃ = 2 (Z C + λ A) [d, N] = ∇_A J · K⁻¹ (torch)."""
    return 2.0 * (_zc(Z, P, beta, A.shape[1]) + lam * A)


def _tensors(A, K, pairs, y):
    torch = _torch()
    return (torch.as_tensor(np.asarray(A, dtype=np.float64)),
            torch.as_tensor(np.asarray(K, dtype=np.float64)),
            _Pairs(np.asarray(pairs, dtype=np.int64), np.asarray(y, dtype=np.float64), "cpu"))


def objective(A, K, pairs, y, beta: float, lam: float) -> float:
    """J(A) for A [d, N], K [N, N], pairs [M, 2], y [M] = ±1 (numpy in, float out)."""
    a, k, p = _tensors(A, K, pairs, y)
    return _objective(a, a @ k, p, beta, lam)


def preconditioned_gradient(A, K, pairs, y, beta: float, lam: float) -> np.ndarray:
    """G̃ = 2 (A K C + λ A) = 2 A [Σ_n c_n (κ_i − κ_j)(e_i − e_j)ᵀ + λ I] [d, N] (numpy)."""
    a, k, p = _tensors(A, K, pairs, y)
    return _precond(a, a @ k, p, beta, lam).numpy()


def gradient(A, K, pairs, y, beta: float, lam: float) -> np.ndarray:
    """Plain gradient ∇_A J = G̃ K [d, N] (numpy)."""
    a, k, p = _tensors(A, K, pairs, y)
    return (_precond(a, a @ k, p, beta, lam) @ k).numpy()


# -- optimisers --------------------------------------------------------------------------------
class _Log:
    def __init__(self):
        self.iters, self.wall, self.objective, self.lr = [], [], [], []

    def add(self, it, wall, obj, lr):
        self.iters.append(it)
        self.wall.append(wall)
        self.objective.append(obj)
        self.lr.append(lr)

    def arrays(self, converged: bool, attempts: int) -> dict:
        return {"iter": np.asarray(self.iters, dtype=np.int64),
                "wall_s": np.asarray(self.wall, dtype=np.float64),
                "objective": np.asarray(self.objective, dtype=np.float64),
                "lr": np.asarray(self.lr, dtype=np.float64),
                "converged": np.bool_(converged), "attempts": np.int64(attempts)}


def _adaptive(A, K, P, beta, lam, lr, tol, max_iter, snapshot, snapshot_every, log_every):
    """[8]'s full-batch adaptive-step descent on the preconditioned gradient (torch A, K)."""
    start = time.perf_counter()
    log, snaps = _Log(), {}
    Z = A @ K
    f_old = _objective(A, Z, P, beta, lam)
    log.add(0, 0.0, f_old, lr)
    eta, attempts, accepted, converged = lr, 0, 0, False
    grad = _precond(A, Z, P, beta, lam)
    for attempts in track(range(1, max_iter + 1), description="rpcca iterations", inner=True):
        step = eta * grad
        A_new = A - step
        Z_new = A_new @ K
        f_new = _objective(A_new, Z_new, P, beta, lam)
        if not f_new <= f_old:                    # worse (or NaN): retry with η × 0.9
            eta *= 0.9
            if eta < 1e-50:
                break
            continue
        eta *= 1.1
        accepted += 1
        change = float(step.norm()) / max(float(A.norm()), 1e-300)
        converged = f_old - f_new < tol and change < tol
        A, Z, f_old = A_new, Z_new, f_new
        snap = bool(snapshot_every) and accepted % snapshot_every == 0
        if accepted % log_every == 0 or converged or snap:
            log.add(attempts, time.perf_counter() - start, f_new, eta)
        if snap:
            snaps[str(attempts)] = snapshot(A)
        if converged:
            break
        grad = _precond(A, Z, P, beta, lam)
    if log.iters[-1] != attempts:
        log.add(attempts, time.perf_counter() - start, f_old, eta)
    return A, log.arrays(converged, attempts), snaps


def _adam(A, K, P, beta, lam, lr, max_iter, batch, bias, rng, snapshot, snapshot_every,
          log_every):
    """Adam on minibatch estimates of G̃ (docs/methods/warca.md settings); O(d N · batch) a step."""
    torch = _torch()
    b1, b2, eps = 0.9, 0.999, 1e-8
    m, v = torch.zeros_like(A), torch.zeros_like(A)
    log, snaps = _Log(), {}
    start = time.perf_counter()
    log.add(0, 0.0, _objective(A, A @ K, P, beta, lam), lr)
    excluded = time.perf_counter() - start
    n_pairs = len(P.y)
    for t in track(range(1, max_iter + 1), description="rpcca iterations", inner=True):
        pick = torch.as_tensor(rng.integers(0, n_pairs, size=batch), device=A.device)
        batch_pairs = P.take(pick)
        touched, local = torch.unique(torch.cat([batch_pairs.i, batch_pairs.j]),
                                      return_inverse=True)
        batch_pairs.i, batch_pairs.j = local[:batch], local[batch:]
        z_t = A @ K[:, touched]                                        # [d, |T|]
        g = 2.0 * lam * A
        g[:, touched] += 2.0 * (n_pairs / batch) * _zc(z_t, batch_pairs, beta, len(touched))
        m.mul_(b1).add_(g, alpha=1 - b1)
        v.mul_(b2).addcmul_(g, g, value=1 - b2)
        if bias == "constant":
            A = A - lr * (m / (1 - b1)) / ((v / (1 - b2)).sqrt() + eps)
        else:
            A = A - lr * (m / (1 - b1 ** t)) / ((v / (1 - b2 ** t)).sqrt() + eps)
        snap = bool(snapshot_every) and t % snapshot_every == 0
        if t % log_every == 0 or t == max_iter or snap:
            pause = time.perf_counter()
            log.add(t, pause - start - excluded, _objective(A, A @ K, P, beta, lam), lr)
            if snap:
                snaps[str(t)] = snapshot(A)
            excluded += time.perf_counter() - pause
    return A, log.arrays(False, max_iter), snaps


# -- estimator ---------------------------------------------------------------------------------
@register("rpcca", stage="train", paper="Xiong et al., ECCV 2014 (Mignon & Jurie 2012)",
          summary="Regularised kernel PCCA (χ²-RBF kernel by default).",
          hidden=["gamma", "degree", "coef0", "beta", "neg_ratio", "optimizer", "tol",
                  "adam_bias", "init_std", "log_every", "snapshot_every", "max_kernel_n",
                  "device"])
class RPCCA(Estimator):
    """rPCCA (kernel PCCA + λ tr(AKAᵀ)).

    ``RPCCA(dim=40, kernel="chi2rbf", gamma="auto", degree=3, coef0=0.0, beta=3.0, lam=0.01,
    neg_ratio=10, optimizer="adaptive", lr=0.1, tol=1e-4, max_iter=2000, batch_size=512,
    adam_bias="constant", init_std=1e-4, log_every=50, snapshot_every=0, max_kernel_n=20000,
    device="cpu", seed=0).fit(X [N, D], pids [N])`` sets ``A_`` [d, N], ``support_`` [N, D],
    ``kernel_`` (resolved, with scale N / tr K), ``log_`` and ``snapshots_``.
    ``transform(X [n, D]) -> [n, d]`` = A κ(x).
    """

    _parameter_constraints = {
        "dim": [DIM], "kernel": [Options(KERNELS)],
        "gamma": [Options(GAMMA_RULES), Interval(float, 0, None, "neither")],
        "degree": [Interval(float, 1, None)], "coef0": [Interval(float)],
        "beta": [Interval(float, 0, None, "neither")], "lam": [Interval(float, 0, None)],
        "neg_ratio": [Interval(float, 0, None)], "optimizer": [Options(OPTIMIZERS)],
        "lr": [Interval(float, 0, None, "neither")], "tol": [Interval(float, 0, None)],
        "max_iter": [COUNT], "batch_size": [COUNT],
        "adam_bias": [Options(ADAM_BIAS)], "init_std": [Interval(float, 0, None, "neither")],
        "log_every": [COUNT], "snapshot_every": [COUNT_OR_ZERO],
        "max_kernel_n": [COUNT], "device": [DEVICE],
        "seed": [SEED]}
    _parameter_help = {
        "dim": "Output dimension d.", "kernel": "Kernel: " + " | ".join(KERNELS) + ".",
        **KERNEL_PARAMETER_HELP,
        "beta": "Sharpness β of the generalised logistic loss.",
        "lam": "rPCCA's λ: regulariser weight of tr(A K Aᵀ).",
        "neg_ratio": "Negative pairs per positive pair.",
        "optimizer": "adaptive (full-batch, [8]) | adam (minibatch).",
        "lr": "Initial / Adam step size.", "tol": "Convergence tolerance (adaptive).",
        "max_iter": "Iterations (adaptive: attempts).", "batch_size": "Pairs per Adam step.",
        "adam_bias": "Adam bias correction: constant | standard.",
        "init_std": "Std of the random initial A.", "log_every": "Log period (iterations).",
        "snapshot_every": "Keep A every s steps (0 = never).",
        "device": "torch device.", "seed": "Seed of pairs, init and minibatches."}

    _quick_params = {"dim": 8, "kernel": "rbf", "max_iter": 20}

    def __init__(self, dim: int = 40, kernel: str = "chi2rbf", gamma="auto", degree: float = 3,
                 coef0: float = 0.0, beta: float = 3.0, lam: float = 0.01,
                 neg_ratio: float = 10, optimizer: str = "adaptive", lr: float = 0.1,
                 tol: float = 1e-4, max_iter: int = 2000, batch_size: int = 512,
                 adam_bias: str = "constant", init_std: float = 1e-4, log_every: int = 50,
                 snapshot_every: int = 0, max_kernel_n: int = 20000, device: str = "cpu",
                 seed: int = 0):
        store_params(self, locals())

    def fit(self, X, pids, camids=None) -> "RPCCA":
        h = self._validated_params()
        x = check_features(X, "rPCCA training features", min_rows=2)
        pids, _ = check_labels(len(x), pids, camids, "rPCCA training set")
        n = len(x)
        if n > h["max_kernel_n"]:
            raise UsageError(f"rPCCA: {n} training rows exceed max_kernel_n={h['max_kernel_n']} "
                             f"(the kernel matrix would need {n * n * 8 / 2**30:.1f} GiB)",
                             "train on fewer rows, or raise max_kernel_n")
        h["device"] = check_device("rPCCA", h["device"])
        rng = np.random.default_rng(h["seed"])
        pairs, y = training_pairs(pids, h["neg_ratio"], rng)
        kernel = resolve_kernel(x, h["kernel"], h["gamma"], h["degree"], h["coef0"], h["seed"])
        check_dim("rPCCA", h["dim"], n, "the kernel space (one dimension per training image)")
        torch = _torch()
        K = kernel.tensor(x, device=h["device"])
        K = 0.5 * (K + K.T)
        trace = float(K.diagonal().sum())
        if not trace > 0:
            raise UsageError("rPCCA: the kernel matrix has a non-positive trace",
                             "check the features and the kernel")
        scale = n / trace                                           # K ← K · N / tr K
        K *= scale
        kernel = Kernel(kernel.name, kernel.gamma, kernel.degree, kernel.coef0, scale)
        A = torch.as_tensor(rng.standard_normal((h["dim"], n)) * h["init_std"], device=K.device)
        P = _Pairs(pairs, y, K.device)
        if kernel.name == "linear":
            snapshot = lambda a: linear_from_dual(a.cpu().numpy(), x, scale)   # noqa: E731
        else:
            snapshot = lambda a: a.cpu().numpy().copy()                        # noqa: E731
        if h["optimizer"] == "adaptive":
            A, log, snaps = _adaptive(A, K, P, h["beta"], h["lam"], h["lr"], h["tol"],
                                      h["max_iter"], snapshot, h["snapshot_every"],
                                      h["log_every"])
        else:
            A, log, snaps = _adam(A, K, P, h["beta"], h["lam"], h["lr"], h["max_iter"],
                                  h["batch_size"], h["adam_bias"], rng, snapshot,
                                  h["snapshot_every"], h["log_every"])
        A = A.cpu().numpy()
        self.A_, self.support_, self.kernel_ = A, x, kernel
        self.log_, self.snapshots_ = log, snaps
        self.n_pairs_ = (int((y > 0).sum()), int((y < 0).sum()))
        self.n_features_in_ = x.shape[1]
        return self

    def transform(self, X) -> np.ndarray:
        self._check_fitted("A_")
        return KernelProjection(self.A_, self.support_, self.kernel_, self.device).transform(X)

    def fitted_arrays(self) -> dict:
        """Kernel arrays (``W`` for the linear kernel) plus ``log`` and ``snapshots``."""
        self._check_fitted("A_")
        if self.kernel_.name == "linear":
            out = {"W": linear_from_dual(self.A_, self.support_, self.kernel_.scale)}
        else:
            out = kernel_arrays(self.A_, self.support_, self.kernel_)
        out["log"] = dict(self.log_)
        if self.snapshots_:
            out["snapshots"] = dict(self.snapshots_)
        return out

    @classmethod
    def model_from_arrays(cls, arrays, hyperparameters):
        return projection_model(arrays, "rpcca")
