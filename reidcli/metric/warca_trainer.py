"""The WARCA iteration loop: pair and negative sampling, one minibatch update, the training
log (Jose & Fleuret, ECCV 2016, Sect. 3.3–3.4).

Per iteration:

1. B positive pairs (i, j), uniform over unordered same-pid pairs (optionally cross-camera);
2. negatives k drawn uniformly from all rows (same-pid draws rejected and not counted) until
   the first draw n ≤ S_eff = min(S, N) violating γ + d_ij − d_ik > 0 (Eq. 14; with
   ``anchor="both"`` also γ + d_ij − d_jk > 0), vectorised in chunks of candidates per pair;
3. the rank weight of n (:func:`~reidcli.metric.warca_objective.rank_weights`);
4. the gradient of J_B (:mod:`reidcli.metric.warca_objective`), then Adam or SGD (kernel SGD
   is exactly Eq. 25).

The parameters are a torch tensor ``params``: W [D', D] (primal) or A [D', N] (kernel).
"""
from __future__ import annotations

import functools
import logging
import math
import time
import warnings
from typing import Any, Mapping

import numpy as np

from reidcli import progress
from reidcli.cameras import camera_index
from reidcli.errors import UsageError
from reidcli.metric import kernels
from reidcli.metric.constraints import check_device
from reidcli.metric.warca_kernel import distinct_row_pairs, preprocess, training_kernel
from reidcli.metric.warca_objective import (EPS_DIST, AdamState, distance, rank_weights,
                                            regulariser, triplet_terms)
from reidcli.naming import param

log = logging.getLogger(__name__)

#: anchors × rows distance tables up to this many entries
TABLE_MAX = 1 << 22
#: row pairs behind the logged median training distance
MEDIAN_DISTANCE_PAIRS = 10_000
#: iterations behind the running means on the progress row
PROGRESS_WINDOW = 20


def _torch():
    import torch
    return torch


def _rows(table, index):
    """``table[index]`` for a long ``index`` of any shape: rows of table [M, …] →
    [*index.shape, …], through ``index_select`` (a row copy, several times faster on CPU than
    advanced indexing)."""
    flat = table.index_select(0, index.reshape(-1))           # [index.numel(), …]
    return flat.reshape(*index.shape, *flat.shape[1:])


class _RunningMean:
    """Means of (objective, hinge) over the last ``window`` values, for the progress row."""

    def __init__(self, window: int):
        self.window, self.values = window, []

    def add(self, objective: float, hinge: float) -> None:
        self.values = self.values[-(self.window - 1):] + [(objective, hinge)]

    def fields(self) -> dict:
        if not self.values:
            return {}
        objective, hinge = np.mean(self.values, axis=0)
        return {"objective": float(objective), "hinge": float(hinge)}


def _training_rows(x, pids, camids) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(features [N', D], pids [N'], camids [N']) of the rows with a pid ≥ 0; UsageError
    when the shapes disagree or a feature is not finite (camids None: all 0)."""
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
    return x, pids, camids


def _device(torch, device: str):
    """The torch device ``device`` names, once a tensor could be made on it."""
    try:
        dev = torch.device(check_device("warca", device))
        torch.empty(1, device=dev)
    except (RuntimeError, AssertionError) as exc:
        raise UsageError(f"warca device {device!r} is not available ({exc})",
                         "use device=cpu") from None
    return dev


def _warn_dim(dim: int, limit: int, is_kernel: bool) -> None:
    """Warn (at the trainer's caller) that ``dim`` exceeds the input dimension ``limit``."""
    warnings.warn(f"warca {param('dim', dim)} exceeds the "
                  f"{'rows' if is_kernel else 'input'} dimension {limit}, so WWᵀ "
                  f"cannot reach I — use at most {param('dim', limit)}",
                  UserWarning, stacklevel=3)


def _warn_median(median: float, margin: float, normalize: str) -> None:
    """Warn (at the trainer's caller) that the median training distance is far from the
    margin's absolute scale."""
    advice = (f"use {param('normalize', 'l2')} or rescale the features"
              if normalize != "l2" else
              f"set the margin near that distance ({param('margin', f'{median:.2g}')})")
    warnings.warn(f"warca: median pairwise training distance {median:.3g} is outside "
                  f"[0.1, 10] while the margin {param('margin', f'{margin:g}')} is "
                  f"in absolute units — {advice}", UserWarning, stacklevel=3)


class WARCATrainer:
    """The WARCA iteration loop on one training set.

    ``WARCATrainer(x [N, D], pids [N], camids [N] | None, hyper)`` with ``hyper`` the complete,
    validated parameters of :class:`reidcli.metric.warca.WARCA` (``WARCA(...).trainer(x, pids,
    camids)`` builds one): rows with pid < 0 are dropped, ``normalize`` applied, the kernel
    matrix built (kernel variants) and the pair sampler set up, all once. ``step()`` runs one
    iteration and returns its statistics; ``run()`` runs ``iterations`` steps with the
    training log. ``params`` is W [D', D] (primal) or A [D', N] (kernel), a torch tensor on
    ``device``; ``kernel`` the resolved :class:`~reidcli.metric.kernels.Kernel` (None for the
    primal) and ``gamma`` its γ (None when the kernel has none).

    Primal steps cost no O(N) work: only touched rows are projected, unless projecting all
    N rows is cheaper (N ≤ B·(3 + drawn candidates per pair, running estimate)); results do
    not depend on the choice (up to rounding).

    ``precision="bf16"`` (primal only): the GEMMs — projection Z = X Wᵀ, gradient G_Zᵀ X and
    the regulariser's (WWᵀ − I)W — take bfloat16 inputs (``F_low``: X [N, D] in bf16, made
    once; W cast once per step) and their results are cast back to ``dtype``; WWᵀ − I,
    distances, sampling, Adam and W stay in ``dtype`` (docs/methods/warca.md, Cost per
    iteration).
    """

    def __init__(self, x, pids, camids, hyper: Mapping[str, Any]):
        torch = _torch()
        self.hyper = h = dict(hyper)
        x, pids, camids = _training_rows(x, pids, camids)
        self.is_kernel = h["kernel"] != "none"
        x = preprocess(x, h["normalize"])
        kernels.check_kernel_input(h["kernel"], torch.as_tensor(x), "training features")
        n, d = x.shape
        if self.is_kernel and n > h["max_kernel_n"]:
            raise UsageError(f"warca kernel {h['kernel']} on {n} training rows needs an "
                             f"{n}×{n} kernel matrix (max_kernel_n={h['max_kernel_n']})",
                             "use the primal (kernel=none) or raise max_kernel_n")
        self.dtype = getattr(torch, h["dtype"])
        self.device = _device(torch, h["device"])
        self.gen = torch.Generator(device=self.device)
        self.gen.manual_seed(h["seed"])
        self.n, self.d = n, d
        self.batch, self.margin, self.anchor = h["batch_size"], h["margin"], h["anchor"]
        self.s_eff = min(h["max_draws"], n)                       # S_eff = min(S, N)
        self._labels(pids, camids)
        self.support = x
        xt = torch.as_tensor(np.ascontiguousarray(x), dtype=self.dtype, device=self.device)
        self._set_training_matrix(torch, xt, h)
        dim = h["dim"]
        # WARCA.fit refuses such a dim for the user's data; a sub-fit (cv, the held-out check)
        # on fewer kernel rows, or a trainer built directly, only warns
        if dim > (n if self.is_kernel else d):
            _warn_dim(dim, n if self.is_kernel else d, self.is_kernel)
        cols = self.F.shape[1]                                    # D (primal) or N (kernel)
        scale = 1.0 / math.sqrt(n if self.is_kernel else d)       # N(0, 1/N) | N(0, 1/D)
        self.params = torch.randn(dim, cols, generator=self.gen, dtype=self.dtype,
                                  device=self.device) * scale
        self.eye = torch.eye(dim, dtype=self.dtype, device=self.device)
        self.opt = AdamState(self.params, h["lr"], h["adam_bias"]) if h["optimizer"] == "adam" \
            else None
        self.t = 0
        self._draw_estimate = 1.0                                 # counted draws per pair (EMA)
        self._drawn_estimate = 4.0                                # drawn candidates per pair (EMA)
        self._drawn = 0.0
        self._chunk0 = 4                                          # first chunk of candidates
        self.median_distance = self._median_distance(xt)
        log.info("warca: %d training rows, %s, median pairwise training distance %.4g",
                 n, "primal" if not self.is_kernel else f"kernel {h['kernel']}",
                 self.median_distance)
        if not 0.1 <= self.median_distance <= 10:
            _warn_median(self.median_distance, self.margin, h["normalize"])

    def _set_training_matrix(self, torch, xt, h: Mapping[str, Any]) -> None:
        """F: the training matrix the GEMMs read — X [N, D] (primal) or the kernel K [N, N]
        with its γ — and its bf16 copy (``precision`` bf16, primal only)."""
        self.kernel, self.gamma = None, None
        self.low = torch.bfloat16 if h.get("precision", "float32") == "bf16" else None
        if self.low is not None and self.is_kernel:
            raise UsageError(f"warca {param('precision', 'bf16')} is for the primal only, not "
                             f"{param('kernel', h['kernel'])}",
                             f"use {param('precision', 'float32')} with kernels")
        self._xt_low = self._params_low = None
        if self.is_kernel:                                        # K [N, N]
            self.F, self.kernel = training_kernel(xt, h["kernel"], h["gamma"], h["degree"],
                                                  h["coef0"], h["seed"])
            if self.kernel.name in kernels.GAMMA_KERNELS:
                self.gamma = self.kernel.gamma
            self.X = None
        else:
            self.F = self.X = xt                                  # X [N, D]
        # X [N, D] in bf16, made once (precision="bf16"); F_low is what the GEMMs read
        self.F_low = None if self.low is None else self.F.to(self.low)

    # -- setup (O(N), once) --------------------------------------------------------------------
    def _labels(self, pids: np.ndarray, camids: np.ndarray) -> None:
        torch = _torch()
        uniq, lab = np.unique(pids, return_inverse=True)
        counts = np.bincount(lab, minlength=len(uniq)).astype(np.int64)
        order = np.argsort(lab, kind="stable")
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        if self.hyper["positives"] == "cross-camera":
            cam, n_cams = camera_index(camids)     # codes of (domain, camid) cameras
            per = np.bincount(lab * n_cams + cam, minlength=len(uniq) * n_cams)
            same_cam = (per.reshape(len(uniq), n_cams).astype(np.float64) ** 2).sum(1)
            pair_w = (counts.astype(np.float64) ** 2 - same_cam) / 2
        else:
            pair_w = counts * (counts - 1) / 2.0
        if pair_w.sum() <= 0:
            what = "two images of one camera pair" if self.hyper["positives"] == "cross-camera" \
                else "two images"
            raise UsageError(f"warca training set has no identity with {what}",
                             "train on identities with several images")
        if len(uniq) < 2:
            raise UsageError("warca training set has a single identity", "add negatives")
        dev = self.device
        self.labels = torch.as_tensor(lab, dtype=torch.long, device=dev)
        self.cams = torch.as_tensor(camera_index(camids)[0], dtype=torch.long, device=dev)
        self.order = torch.as_tensor(order, dtype=torch.long, device=dev)
        self.starts = torch.as_tensor(starts, dtype=torch.long, device=dev)
        self.counts = torch.as_tensor(counts, dtype=torch.long, device=dev)
        self.cdf = torch.as_tensor(np.cumsum(pair_w), dtype=torch.float64, device=dev)
        self.total_pairs = float(pair_w.sum())
        self.negatives = torch.as_tensor(len(lab) - counts[lab], dtype=torch.long, device=dev)
        self.num_ids = len(uniq)

    def _median_distance(self, xt) -> float:
        """Median pairwise training distance (input space; kernel-space for kernels)."""
        a, b = distinct_row_pairs(self.n, MEDIAN_DISTANCE_PAIRS, self.hyper["seed"])
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

    # -- sampling (Sect. 3.3) --------------------------------------------------------------------
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
            if self.hyper["positives"] != "cross-camera":
                break
            todo = todo[self.cams[ii] == self.cams[jj]]           # same camera: redraw in q
            if todo.numel() == 0:
                break
        return i, j

    def _project(self, rows):
        """Embeddings of the rows ``rows`` (any shape) → [*rows.shape, D'] (bf16 inputs
        under ``precision="bf16"``, result in ``dtype``)."""
        if self.low is not None:
            z = (_rows(self.F_low, rows.reshape(-1)) @ self._low_params().T).to(self.dtype)
        else:
            z = _rows(self.F, rows.reshape(-1)) @ self.params.T
        return z.reshape(*rows.shape, -1)

    def _low_params(self):
        """W [D', D] in bf16, cast once per step (``precision="bf16"``)."""
        if self._params_low is None:
            self._params_low = self.params.to(self.low)
        return self._params_low

    def _xt_low_all(self):
        """Xᵀ [D, N] in bf16, contiguous (made on first use): G_Zᵀ X as (Xᵀ G_Z)ᵀ reads
        both operands along N, measurably faster than G_Zᵀ [D', N] @ X on CPU."""
        if self._xt_low is None:
            self._xt_low = self.F_low.T.contiguous()
        return self._xt_low

    def sample_negatives(self, i, j, zi, zj, embed=None, table=None):
        """First margin-violating negative of each pair (Eq. 14), vectorised in chunks.

        i, j [B], zi, zj [B, D'] → (found bool [B], n long [B] counted draws up to the
        violator (S_eff when none), k long [B], zk [B, D']). ``embed(rows)`` maps row indices
        to embeddings (default: project the touched rows; with all rows projected it is a
        gather from Z [N, D'], so no draw is projected). ``table`` = (d_i [B, N], d_j [B, N])
        precomputed distances of every pair's anchors to all rows (small N only).
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
        thr_all = self.margin + distance(zi - zj)                 # γ + d_ij
        # anchors [B, A, D'] (A = 2 for anchor="both"): one distance pass per chunk
        anchors = torch.stack([zi, zj], 1) if self.anchor == "both" else zi[:, None]
        a_cnt = torch.zeros(B, dtype=torch.long, device=dev)
        remaining = S
        chunk = self._chunk0
        drawn = 0
        while active.numel():
            m = active.numel()
            c = max(1, min(chunk, remaining))
            cand = torch.randint(0, N, (m, c), generator=self.gen, device=dev)
            drawn += m * c
            whole = m == B                                        # no pair resolved yet
            # a draw with the anchor's pid is rejected and not counted
            valid = _rows(self.labels, cand) != (y if whole else y[active])[:, None]
            thr = (thr_all if whole else thr_all[active])[:, None]
            if table is not None:
                viol = table[0][active[:, None], cand] < thr      # γ + d_ij − d_ik > 0
                if self.anchor == "both":
                    viol |= table[1][active[:, None], cand] < thr  # γ + d_ij − d_jk > 0
            else:
                za = anchors if whole else anchors[active]        # [m, A, D']
                zc = embed(cand)                                  # [m, c, D']
                d = distance(za[:, :, None, :] - zc[:, None])     # [m, A, c]: d_ik (, d_jk)
                viol = (d < thr[:, None]).any(1)
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
    def _projects_all_rows(self) -> bool:
        """Whether this step projects all N rows (Z = X Wᵀ, N·D·D' multiply-adds) rather than
        the rows it touches: B anchors i and j, the drawn candidates and the chosen k per pair,
        B·(3 + drawn per pair) rows (running estimate, chunk over-draw and uncounted same-pid
        draws included), each also gathered from X. Kernels always project all rows."""
        return self.is_kernel or self.n <= self.batch * (3.0 + self._drawn_estimate)

    def step(self) -> dict:
        """One minibatch update (Sect. 3.3–3.4). Returns tensors: objective, hinge_mean,
        violation_rate, mean_draws.

        Cost (primal): with all rows projected, two GEMMs of N·D·D' (Z = X Wᵀ and the
        gradient G_Zᵀ X) plus D'²·D for the regulariser; with touched rows only, the same
        with N replaced by the touched rows (projection) and the distinct rows of the
        triplets (gradient). Negatives are scored on the projected rows; everything else is
        O(B·D') elementwise work. ``precision="bf16"``: the three GEMMs read bf16 copies
        (X once, W per step) and their results are cast back to ``dtype``.
        """
        torch = _torch()
        B, P = self.batch, self.params
        low = self.low is not None
        self._params_low = None                                   # W changed: cast again
        i, j = self.sample_pairs(B)
        est = self._draw_estimate                                 # counted draws per pair
        project_all = self._projects_all_rows()
        self._chunk0 = int(min(64, max(2, 2 ** math.ceil(math.log2(max(est, 1.0))))))
        table = None
        if project_all:
            if low:                                               # bf16 inputs, Z in dtype
                Z = (self.F_low @ self._low_params().T).to(self.dtype)
            else:
                Z = self.F @ P.T                                  # [N, D'] (kernel: Z = (AK)ᵀ)
            embed = functools.partial(_rows, Z)                   # a gather, no projection
        else:
            Z, embed = None, self._project
        zi, zj = embed(i), embed(j)
        if project_all and B * self.n <= TABLE_MAX and est * 8 > self.n:
            sq = (Z * Z).sum(1)                                   # anchors × all rows, 2 GEMMs
            table = tuple(((za * za).sum(1)[:, None] + sq[None] - 2.0 * (za @ Z.T))
                          .clamp_min_(0).add_(EPS_DIST).sqrt_() for za in (zi, zj))
        found, n, k, zk = self.sample_negatives(i, j, zi, zj, embed, table)
        self._draw_estimate = 0.8 * est + 0.2 * float(n.to(torch.float64).mean())
        self._drawn_estimate = 0.8 * self._drawn_estimate + 0.2 * self._drawn
        # regulariser (Eq. 10 / 18): WWᵀ or AKAᵀ = A Z
        if self.hyper["reg"] == "fro":
            gram_trace = (P * Z.T).sum() if self.is_kernel else (P * P).sum()
            reg_obj, reg_grad = 0.5 * self.hyper["lam"] * gram_trace, self.hyper["lam"] * P
        else:
            gram = P @ Z if self.is_kernel else P @ P.T          # dtype: WWᵀ − I cancels
            reg_obj, reg_grad = regulariser(P, gram, self.hyper["lam"], "aon", self.eye,
                                            self._low_params() if low else None)
        if not bool(found.any()):                                 # no violator: J_B = reg
            loss = hinge_sum = torch.zeros((), dtype=self.dtype, device=self.device)
            grad = reg_grad
        else:
            # every pair enters with weight 0 unless it found a violator: no gathers by
            # `found`, and a zero weight gives zero loss and exactly zero gradient rows
            kind = self.hyper["rank_weight"]
            negatives = None if kind == "log" else self.negatives[i]
            w = torch.where(found, rank_weights(n, kind, self.s_eff, negatives).to(self.dtype),
                            torch.zeros((), dtype=self.dtype, device=self.device))
            loss, hinge, gi, gj, gk = triplet_terms(zi, zj, zk, w, B, self.margin, self.anchor)
            hinge_sum = torch.where(found, hinge, 0.0).sum()
            rows = torch.cat([i, j, k])
            g = torch.cat([gi, gj, gk])                           # [3B, D'] (0 rows: no violator)
            if self.is_kernel:                                    # Eq. 23–24: G̃ = reg + G_Z
                grad = reg_grad.index_add_(1, rows, g.T)
            elif project_all:                                     # G_Z [N, D'], one GEMM
                gz = torch.zeros(self.n, P.shape[0], dtype=self.dtype, device=self.device)
                gz.index_add_(0, rows, g)
                if low:                                           # (Xᵀ G_Z)ᵀ, bf16 inputs
                    grad = reg_grad.add_((self._xt_low_all() @ gz.to(self.low)).T
                                         .to(self.dtype))
                else:
                    grad = torch.addmm(reg_grad, gz.T, self.F)
            else:                                                 # distinct rows only
                uniq, inverse = torch.unique(rows, return_inverse=True)
                gu = torch.zeros(uniq.numel(), P.shape[0], dtype=self.dtype, device=self.device)
                gu.index_add_(0, inverse, g)
                if low:
                    grad = reg_grad.add_((gu.T.to(self.low) @ self.F_low.index_select(0, uniq))
                                         .to(self.dtype))
                else:
                    grad = torch.addmm(reg_grad, gu.T, self.F.index_select(0, uniq))
        if self.opt is None:                                      # SGD (= Eq. 25 for kernels)
            P.add_(grad, alpha=-self.hyper["lr"])
        else:
            self.opt.step(P, grad)
        self._params_low = None                                   # stale bf16 copy of W
        self.t += 1
        return {"objective": reg_obj + loss,
                "hinge_mean": hinge_sum / B,
                "violation_rate": found.to(self.dtype).mean(),
                "mean_draws": n.to(self.dtype).mean()}

    def run(self, iterations: int | None = None) -> dict:
        """Run ``iterations`` steps (default: the hyperparameter); returns the training log
        ``{iter, wall_s, objective, hinge_mean, violation_rate, mean_draws}`` (numpy arrays,
        one entry every ``log_every`` iterations and at the end) and ``snapshots``.

        Progress: one level per iteration ("warca iterations", :func:`reidcli.progress.task`
        with ``inner=True``: silent unless a command's progress level is open and enabled),
        whose live row shows the running mean of the objective and of the hinge term over the
        last :data:`PROGRESS_WINDOW` iterations beside the elapsed time and the ETA.
        """
        iterations = self.hyper["iterations"] if iterations is None else int(iterations)
        every, snap = self.hyper["log_every"], self.hyper["snapshot_every"]
        entries: dict[str, list] = {k: [] for k in ("iter", "wall_s", "objective", "hinge_mean",
                                                      "violation_rate", "mean_draws")}
        snapshots: dict[str, np.ndarray] = {}
        cuda = self.device.type == "cuda"
        mean = _RunningMean(PROGRESS_WINDOW)
        start = time.perf_counter()
        with progress.task("warca iterations", iterations, inner=True) as level:
            for _ in range(iterations):
                stats = self.step()
                logged = self.t % every == 0 or self.t == iterations
                if logged:
                    if cuda:
                        _torch().cuda.synchronize(self.device)
                    entries["iter"].append(self.t)
                    entries["wall_s"].append(time.perf_counter() - start)
                    for key, value in stats.items():
                        entries[key].append(float(value))
                if snap and self.t % snap == 0:
                    snapshots[str(self.t)] = self.params.detach().cpu().numpy().copy()
                if level.on:
                    if not cuda or logged:                        # no per-step GPU sync
                        mean.add(float(stats["objective"]), float(stats["hinge_mean"]))
                    level.advance(1, **mean.fields())
        self.wall_s = time.perf_counter() - start
        out = {k: np.asarray(v, dtype=np.int64 if k == "iter" else np.float64)
               for k, v in entries.items()}
        return {"log": out, "snapshots": snapshots}

    def singular_values(self) -> np.ndarray:
        """Singular values of W [D'] (kernel: sqrt(eigvalsh(AKAᵀ)), descending); σ_max/σ_min
        is the condition number of the paper's Fig. 2."""
        torch = _torch()
        P = self.params
        if self.is_kernel:
            gram = P @ (self.F @ P.T)
            ev = torch.linalg.eigvalsh(0.5 * (gram + gram.T)).clamp_min(0).sqrt()
            return ev.flip(0).cpu().numpy().astype(np.float64)
        return torch.linalg.svdvals(P).cpu().numpy().astype(np.float64)
