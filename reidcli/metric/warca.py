"""WARCA — Weighted Approximate Rank Component Analysis (Jose & Fleuret, ECCV 2016): the
registered estimator ``warca`` (``reid train warca``).

WARCA learns a low-rank map W [D', D] (metric M = WᵀW, Eq. 1; embedding z = Wx) by minibatch
Adam on the rank-weighted triplet hinge of Eq. 12 plus the approximate-orthonormal regulariser
(λ/2)‖WWᵀ − I‖²_F (Eq. 10); kernel WARCA learns A [D', N] on kernel columns (Eqs. 15–18) with
the preconditioned gradient of Eqs. 23–24. The pieces:

* :mod:`reidcli.metric.warca_objective` — the formulas (hinge, gradients, regulariser, rank
  weights, Adam);
* :mod:`reidcli.metric.warca_kernel` — preprocessing, kernel values, γ = ``auto``;
* :mod:`reidcli.metric.warca_trainer` — sampling and the iteration loop;
* :mod:`reidcli.metric.warca_model` — the fitted model ``reid eval`` gets;
* this module — parameters, cross-validation of (λ, η), the fitted arrays.

Defaults and the choices behind them: ``docs/methods/warca.md``. Rows with pid < 0 are
dropped; camera ids are only used by ``positives="cross-camera"``.
"""
from __future__ import annotations

import json
import logging
import os
import warnings
from typing import Any, Mapping

import numpy as np

from reidcli.errors import FittedModelError, ParameterError, UsageError
from reidcli.estimator import Estimator, store_params
from reidcli.metric.constraints import (COUNT, COUNT_OR_ZERO, DEVICE, SEED, check_device,
                                        check_dim)
from reidcli.metric.kernels import GAMMA_RULES, KERNEL_PARAMETER_HELP
from reidcli.metric.warca_kernel import KERNELS, NORMALIZE
from reidcli.metric.warca_model import WARCAModel
from reidcli.metric.warca_trainer import WARCATrainer
from reidcli.naming import param
from reidcli.params import BOOL, PRECISION, FloatList, Interval, Options
from reidcli.registry import register

log = logging.getLogger(__name__)

RANK_WEIGHTS = ("log", "harmonic", "uniform")
ANCHORS = ("both", "first")
REGULARISERS = ("aon", "fro")
OPTIMIZERS = ("adam", "sgd")
ADAM_BIAS = ("constant", "standard")
POSITIVES = ("all", "cross-camera")
DTYPES = ("float32", "float64")
PRECISIONS = PRECISION.values            # reidcli.params.PRECISION (fp32 is accepted too)

#: cross-validation grids of the paper (λ: 1e-8 … 1, η: 1e-3 … 1)
CV_LAMS = tuple(10.0 ** e for e in range(-8, 1))
CV_LRS = (1e-3, 1e-2, 1e-1, 1.0)


class _OptionsOrNone(Options):
    """:class:`Options` that also accepts None, read as ``"none"`` (what ``--param
    kernel=none`` parses to); an alias may map ``none`` onto another option."""

    def accepts(self, value: Any) -> bool:
        return value is None or super().accepts(value)


_INT_POSITIVE = COUNT


class Diverged(UsageError):
    """The iterations left W (A) non-finite: the step size η is too large."""

_INT_NONNEGATIVE = COUNT_OR_ZERO


@register("warca", stage="train", paper="Jose & Fleuret, ECCV 2016",
          summary="WARCA: low-rank metric (linear or kernel) from a rank-weighted triplet "
                  "hinge with the approximate-orthonormal regulariser, minibatch Adam.",
          hidden=["margin", "max_draws", "rank_weight", "anchor", "reg", "optimizer",
                  "adam_bias", "gamma", "degree", "coef0", "normalize", "positives", "seed",
                  "device", "dtype", "max_kernel_n", "cv", "cv_val_frac", "cv_lams", "cv_lrs",
                  "holdout_check", "snapshot_every", "log_every", "precision", "threads"])
class WARCA(Estimator):
    """WARCA estimator.

    ``WARCA(dim=40, lam=1e-3, lr=0.1, …).fit(X [N, D], pids [N], camids [N] | None)`` sets
    ``W_`` [D', D] (primal) or ``A_`` [D', N], ``support_`` [N, D] (the preprocessed training
    rows) and ``gamma_`` (kernel), plus ``kernel_`` (name), ``singular_values_`` [D'],
    ``log_`` (training log), ``snapshots_``, ``median_distance_``, ``train_seconds_``,
    ``hyper_`` (the validated parameters, with the selected λ and η when ``cv``) and ``cv_``
    (grid scores, or None) and ``holdout_`` (the held-out check against the identity, or
    None). ``transform(X [n, D]) -> [n, D']``; ``model_`` is the
    :class:`~reidcli.metric.warca_model.WARCAModel`.
    """

    _parameter_constraints = {
        "dim": [_INT_POSITIVE], "lam": [Interval(float, 0, None)],
        "lr": [Interval(float, 0, None, "neither")], "margin": [Interval(float)],
        "iterations": [_INT_NONNEGATIVE], "batch_size": [_INT_POSITIVE],
        "max_draws": [_INT_POSITIVE], "rank_weight": [Options(RANK_WEIGHTS)],
        "anchor": [Options(ANCHORS)],
        "reg": [Options(REGULARISERS, aliases={"frobenius": "fro"})],
        "optimizer": [Options(OPTIMIZERS)], "adam_bias": [Options(ADAM_BIAS)],
        "kernel": [_OptionsOrNone(KERNELS)],
        "gamma": [_OptionsOrNone(GAMMA_RULES, aliases={"none": "auto"}),
                  Interval(float, 0, None, "neither")],
        "degree": [_INT_POSITIVE], "coef0": [Interval(float)],
        "normalize": [_OptionsOrNone(NORMALIZE)], "positives": [Options(POSITIVES)],
        "seed": [SEED], "device": [DEVICE], "dtype": [Options(DTYPES)],
        "max_kernel_n": [_INT_POSITIVE], "cv": [BOOL],
        "cv_val_frac": [Interval(float, 0, 1, "neither")], "cv_lams": [FloatList()],
        "cv_lrs": [FloatList()], "holdout_check": [Interval(float, 0, 1, "left")],
        "snapshot_every": [_INT_NONNEGATIVE],
        "log_every": [_INT_POSITIVE], "precision": [PRECISION],
        "threads": [_INT_NONNEGATIVE]}
    _parameter_help = {
        "dim": "Output dimension D'.", "lam": "WARCA's λ: weight of the orthonormality regulariser.",
        "lr": "Learning rate η.", "margin": "Margin γ of the hinge (absolute distance units).",
        "iterations": "Minibatch updates.", "batch_size": "Positive pairs per minibatch B.",
        "max_draws": "Negative draws per pair S (capped at N).",
        "rank_weight": "Rank weight: log (authors' code) | harmonic (paper) | uniform.",
        "anchor": "Hinge anchors: both (code) | first (paper).",
        "reg": "Regulariser: aon (‖WWᵀ − I‖²) | fro (‖W‖², ablation).",
        "optimizer": "adam | sgd (for kernels, the paper's Eq. 25).",
        "adam_bias": "Adam bias correction: constant (code) | standard.",
        "kernel": "Kernel: none (primal W) | " + " | ".join(KERNELS[1:]) + " (WARCA-χ²: chi2rbf).",
        **KERNEL_PARAMETER_HELP,
        "normalize": "Row preprocessing at training and test time: none | l2.",
        "positives": "Positive pairs: all | cross-camera.",
        "seed": "Seed of initialisation and sampling.", "device": "torch device.",
        "dtype": "float32 | float64.",
        "cv": "Select (λ, η) on validation ids carved from the training ids.",
        "cv_val_frac": "Fraction of training ids held out by cv.",
        "cv_lams": "λ grid of cv (comma-separated).", "cv_lrs": "η grid of cv.",
        "holdout_check": "Fraction of training ids held out to check the learned metric "
                         "against plain Euclidean distance (one-line warning when worse; "
                         "costs a second fit; 0 = off; with cv its validation ids are used).",
        "snapshot_every": "Keep W (or A) every K iterations (0 = never).",
        "log_every": "Training-log period (iterations).",
        "precision": "GEMM inputs of the primal loop: float32 | bf16 (bfloat16 copies of X "
                     "and W in the projection, gradient and regulariser products; W, Adam "
                     "and distances stay float32; primal only).",
        "threads": "torch CPU threads during fit (0 = leave as is; 1 on a busy machine)."}

    def __init__(self, dim: int = 40, lam: float = 1e-3, lr: float = 0.1, margin: float = 1.0,
                 iterations: int = 2000, batch_size: int = 512, max_draws: int = 512,
                 rank_weight: str = "log", anchor: str = "both", reg: str = "aon",
                 optimizer: str = "adam", adam_bias: str = "constant", kernel: str = "none",
                 gamma="auto", degree: int = 3, coef0: float = 0.0, normalize: str = "none",
                 positives: str = "all", seed: int = 0, device: str = "cpu",
                 dtype: str = "float32", max_kernel_n: int = 20000, cv: bool = False,
                 cv_val_frac: float = 0.2, cv_lams=CV_LAMS, cv_lrs=CV_LRS,
                 holdout_check: float = 0.1, snapshot_every: int = 0, log_every: int = 10,
                 precision: str = "float32", threads: int = 0):
        store_params(self, locals())

    # -- fitting -------------------------------------------------------------------------------
    def trainer(self, X, pids, camids=None) -> WARCATrainer:
        """The iteration loop of these parameters on X [N, D], pids [N], camids [N] | None
        (set up, not run; no cross-validation)."""
        return WARCATrainer(X, pids, camids, self._validated_params())

    def fit(self, X, pids, camids=None) -> "WARCA":
        h = self._validated_params()
        h["device"] = check_device("warca", h["device"])         # auto → cpu | cuda
        if not h["threads"]:
            return self._fit(X, pids, camids, h)
        cpus = os.cpu_count() or 1
        if h["threads"] > cpus:          # thousands of OpenMP threads exhaust memory (abort)
            raise ParameterError("warca", "threads", h["threads"],
                                 f"is above this machine's {cpus} CPUs",
                                 f"use at most {param('threads', cpus)} (0 = torch's setting)")
        import torch
        before = torch.get_num_threads()
        torch.set_num_threads(h["threads"])             # for this fit only
        try:
            return self._fit(X, pids, camids, h)
        finally:
            torch.set_num_threads(before)

    def _fit(self, X, pids, camids, h: dict) -> "WARCA":
        x = np.asarray(X)
        pids = np.asarray(pids).reshape(-1)
        camids = None if camids is None else np.asarray(camids).reshape(-1)
        self.cv_ = self.holdout_ = None
        if x.ndim == 2:                 # before cv / the held-out check fit anything
            kernel = h["kernel"] != "none"
            check_dim("warca", h["dim"], int((pids >= 0).sum()) if kernel else x.shape[1],
                      "the kernel space (one dimension per training row)" if kernel
                      else "the input features")
        if h["cv"]:
            h = self._cross_validate(x, pids, camids, h)
        elif h["holdout_check"] > 0:
            self.holdout_ = self._holdout_check(x, pids, camids, h)
        trainer = WARCATrainer(x, pids, camids, h)
        result = trainer.run()
        if not bool(trainer.params.isfinite().all()):      # a step size too large: W blew up
            raise Diverged(f"warca diverged: W holds NaN or Inf after {trainer.t} iterations "
                             f"with {param('lr', h['lr'])}",
                             f"use a smaller {param('lr')} (the paper's grid: 0.001 … 1), or "
                             f"{param('cv', 'true')} to pick it")
        self.hyper_ = h
        self.log_, self.snapshots_ = result["log"], result["snapshots"]
        self.singular_values_ = trainer.singular_values()
        self.train_seconds_ = trainer.wall_s
        self.median_distance_ = trainer.median_distance
        params = trainer.params.detach().cpu().numpy()
        self.kernel_ = h["kernel"]
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

    @staticmethod
    def _validation_split(pids, frac: float, seed: list[int]):
        """(training mask [N], validation rows [n], gallery mask over them [n], validation
        ids), or None with too few ids: ``frac`` of the ids (≥ 2 images) held out, drawn with
        ``default_rng(seed)``; per held-out id one random image is the gallery entry and the
        others are probes."""
        rng = np.random.default_rng(seed)
        ok = pids >= 0
        ids, counts = np.unique(pids[ok], return_counts=True)
        multi = ids[counts >= 2]
        n_val = int(round(frac * len(ids)))
        n_val = min(max(n_val, 2), len(multi) - 1)
        if n_val < 2:
            return None
        val_ids = rng.choice(multi, n_val, replace=False)
        is_val = np.isin(pids, val_ids) & ok
        vp = pids[is_val]
        gal = np.zeros(len(vp), bool)
        for q in val_ids:
            gal[rng.choice(np.flatnonzero(vp == q))] = True
        return ~is_val, np.flatnonzero(is_val), gal, val_ids

    def _holdout_check(self, x, pids, camids, h) -> dict | None:
        """Train a copy of these parameters on all but ``holdout_check`` of the training ids
        and compare its rank-1 on the held-out ids with the identity map's (plain Euclidean
        distance on the preprocessed features); one-line warning when the learned metric is
        worse. Returns ``{rank1, rank1_identity, val_ids}`` (None when there are too few
        ids)."""
        split = self._validation_split(pids, h["holdout_check"], [h["seed"], 13])
        if split is None:
            return None
        train, rows, gal, val_ids = split
        sub = {**h, "holdout_check": 0.0, "snapshot_every": 0}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = WARCA(**sub).fit(x[train], pids[train],
                                     None if camids is None else camids[train]).model_
        return self._against_identity(model, x[rows], pids[rows], gal, val_ids, h,
                                      f"{len(val_ids)} held-out training ids")

    def _against_identity(self, model, vx, vp, gal, val_ids, h, what: str) -> dict:
        """Rank-1 of ``model`` and of the identity on validation rows vx [n, D] (pids vp [n],
        gallery mask gal [n]); warns when the model is worse."""
        from reidcli.metric.warca_kernel import preprocess

        z = model.transform(vx).astype(np.float64)
        learned = _rank_scores(z[~gal], vp[~gal], z[gal], vp[gal])[0] \
            if np.isfinite(z).all() else -1.0
        plain = np.asarray(preprocess(np.asarray(vx, dtype=np.float64), h["normalize"]),
                           dtype=np.float64)
        identity = _rank_scores(plain[~gal], vp[~gal], plain[gal], vp[gal])[0]
        if learned < identity:
            warnings.warn(f"warca: the learned metric ranks worse than plain Euclidean "
                          f"distance on {what} (rank-1 {100 * learned:.1f} % vs "
                          f"{100 * identity:.1f} %) — try other {param('lam')} / "
                          f"{param('lr')} values (or cv), more iterations, or "
                          f"{param('normalize', 'l2')}", stacklevel=3)
        return {"rank1": np.float64(learned), "rank1_identity": np.float64(identity),
                "val_ids": np.asarray(val_ids)}

    def _cross_validate(self, x, pids, camids, h) -> dict:
        """Carve ``cv_val_frac`` of the training ids (with ≥ 2 images) as validation ids,
        train each (λ, η) of the grid on the rest, score validation rank-1 (ties: rank-5) with
        one random gallery image per id and the other images as probes; returns h with the
        best pair and sets ``cv_`` (``docs/methods/warca.md``: cross-validation)."""
        split = self._validation_split(pids, h["cv_val_frac"], [h["seed"], 11])
        if split is None:
            raise UsageError("warca cv needs at least 3 training ids with 2+ images",
                             "train without cv")
        tr, rows, gal, val_ids = split
        vx, vp = x[rows], pids[rows]
        scores = np.zeros((len(h["cv_lams"]), len(h["cv_lrs"]), 2))
        models: list[list] = [[None] * len(h["cv_lrs"]) for _ in h["cv_lams"]]
        for a, lam in enumerate(h["cv_lams"]):
            for b, lr in enumerate(h["cv_lrs"]):
                sub = {**h, "lam": lam, "lr": lr, "cv": False, "holdout_check": 0.0,
                       "snapshot_every": 0}
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    try:
                        model = WARCA(**sub).fit(x[tr], pids[tr],
                                                 None if camids is None else camids[tr]).model_
                    except Diverged:            # this η is too large: the worst score
                        scores[a, b] = -1
                        continue
                z = model.transform(vx).astype(np.float64)
                if not np.isfinite(z).all():
                    scores[a, b] = -1
                    continue
                models[a][b] = model
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
        best_model = models[a][b]
        if best_model is not None:
            self.holdout_ = self._against_identity(best_model, vx, vp, gal, val_ids, h,
                                                   f"the {len(val_ids)} cv validation ids")
        return {**h, "lam": h["cv_lams"][a], "lr": h["cv_lrs"][b]}

    def transform(self, X) -> np.ndarray:
        """[n, D] → [n, D'] embeddings (Wx, or A·k(support, x))."""
        self._check_fitted("model_")
        return self.model_.transform(X)

    # -- the save/load pair --------------------------------------------------------------------
    def fitted_arrays(self) -> dict:
        """One trial's arrays: linear ``W`` [D', D] or kernel ``A`` [D', N] + ``support``
        [N, D]; ``gamma`` (NaN without one), ``degree``, ``coef0``; ``singular_values`` [D'];
        ``log/{iter, wall_s, objective, hinge_mean, violation_rate, mean_draws}``; metadata
        (``variant``, ``kernel``, ``normalize``, ``dim_in``, ``dim_out``, ``seed``,
        ``train_config`` JSON of ``hyper_`` plus ``gamma_resolved``); optional
        ``snapshots/<iter>``, ``cv/{lams, lrs, rank1, rank5, val_ids}`` and
        ``holdout_check/{rank1, rank1_identity, val_ids}``."""
        self._check_fitted("model_")
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
        if getattr(self, "holdout_", None) is not None:
            arrays["holdout_check"] = dict(self.holdout_)
        return arrays

    @classmethod
    def model_from_arrays(cls, arrays: Mapping[str, Any],
                          hyperparameters: Mapping[str, Any]) -> WARCAModel:
        """The :class:`~reidcli.metric.warca_model.WARCAModel` of :meth:`fitted_arrays` (files
        without the metadata arrays fall back on ``hyperparameters``)."""
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


def _rank_scores(zq, yq, zg, yg, ranks=(1, 5)) -> tuple[float, ...]:
    """CMC at ``ranks`` for queries zq [q, d] (pids yq [q]) against a gallery zg [g, d]
    (pids yg [g]), squared Euclidean distances."""
    d = (zq * zq).sum(1)[:, None] + (zg * zg).sum(1)[None] - 2 * zq @ zg.T
    pos = np.where(yq[:, None] == yg[None, :], d, np.inf).min(1)   # nearest true match
    rank = (d < pos[:, None]).sum(1)                           # 0 = first
    return tuple(float((rank < r).mean()) for r in ranks)


def _text(value, default: str = "") -> str:
    """A stored string (bytes, 0-d array or str) as str; ``default`` when absent."""
    if value is None:
        return default
    if isinstance(value, np.ndarray):
        value = value.item() if value.shape == () else value
    if isinstance(value, (bytes, np.bytes_)):
        return value.decode()
    return str(value)
