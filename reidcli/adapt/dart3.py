"""DART3 and DART3 LITE (Bhattacharya et al.; DART3 paper §3).

Per camera c, a learnable query shift/scale ``M_q[c], Σ_q[c]`` and a frozen gallery pair
``M_g[c], Σ_g[c]``, all initialised to the camera statistics (Alg 1). The gallery is
normalised once, ``G̃ = (G − M_g) ⊘ Σ_g``; each query batch is corrected,
``ẑ = (z − M_q[c]) ⊘ Σ_q[c]`` (Eq 5/14), and DART3's loss (Eq 2/11,
:func:`reidcli.adapt.losses.dart3_loss`) is minimised over ``M_q, Σ_q`` (LITE, z = stored
embeddings) or over ``M_q, Σ_q`` and the backbone's BN γ/β (full, z = f_θ(images)).
"""
from __future__ import annotations

import numpy as np
import torch
from torch import nn

from reidcli.adapt.base import Adapter, BackboneRunner, Batch
from reidcli.adapt.losses import PreparedGallery, dart3_loss
from reidcli.adapt.config import TAU_RANGE, count
from reidcli.adapt.statistics import CameraStatistics
from reidcli.errors import UsageError
from reidcli.naming import param
from reidcli.params import BOOL, PRECISION, Interval, Options
from reidcli.registry import Parameter, register_info


class CameraShiftScale(nn.Module):
    """``M_q, Σ_q`` (trainable, one d-vector per camera) and ``M_g, Σ_g`` (frozen buffers).

    Each camera's vectors are separate parameters and a batch only touches the cameras it
    contains, so an absent camera gets no gradient (``None``) and no optimiser update —
    no drift from stale Adam moments (docs/methods/dart3.md).
    """

    def __init__(self, stats: CameraStatistics, device: torch.device | str = "cpu",
                 eps: float = 1e-6):
        super().__init__()
        as_t = lambda a: torch.as_tensor(np.asarray(a), dtype=torch.float32, device=device)
        self.mean_q = nn.ParameterList([nn.Parameter(as_t(v).clone()) for v in stats.mean_q])
        self.std_q = nn.ParameterList([nn.Parameter(as_t(v).clone()) for v in stats.std_q])
        self.register_buffer("mean_g", as_t(stats.mean_g))
        self.register_buffer("std_g", as_t(stats.std_g))
        self.register_buffer("mean_q_init", as_t(stats.mean_q))
        self.register_buffer("std_q_init", as_t(stats.std_q))
        self.eps = float(eps)

    def correct(self, z: torch.Tensor, codes: torch.Tensor) -> torch.Tensor:
        """ẑ = (z − M_q[c]) ⊘ Σ_q[c] for rows z [B, d] of cameras ``codes`` [B] (Eq 5/14)."""
        present, inverse = torch.unique(codes, return_inverse=True)
        idx = present.tolist()
        mean = torch.stack([self.mean_q[c] for c in idx])
        std = torch.stack([self.std_q[c] for c in idx])
        # index_select, not mean[inverse]: the backward of advanced indexing sums the rows of
        # a camera with atomic adds in whatever order the intra-op threads reach them (the
        # result changed from run to run); index_select's backward (index_add_) adds them
        # in row order, the same bits whatever the thread count
        return (z - mean.index_select(0, inverse)) / std.index_select(0, inverse)

    @torch.no_grad()
    def clamp_scales_(self) -> None:
        """Σ_q ← max(Σ_q, ε) after each step (docs/methods/dart3.md)."""
        for p in self.std_q:
            p.clamp_(min=self.eps)

    @torch.no_grad()
    def reset(self) -> None:
        for c, (m, s) in enumerate(zip(self.mean_q, self.std_q)):
            m.copy_(self.mean_q_init[c])
            s.copy_(self.std_q_init[c])

    def arrays(self) -> dict[str, np.ndarray]:
        q = lambda ps: torch.stack([p.detach() for p in ps]).cpu().numpy()
        return {"M_q": q(self.mean_q), "S_q": q(self.std_q),
                "M_q_init": self.mean_q_init.cpu().numpy(),
                "S_q_init": self.std_q_init.cpu().numpy(),
                "M_g": self.mean_g.cpu().numpy(), "S_g": self.std_g.cpu().numpy()}


class DART3Adapter(Adapter):
    """DART3 in ``lite`` mode (stored embeddings ``queries`` [Nq, d]) or ``full`` mode
    (``runner`` re-encodes the batch images; BN γ/β learnable too).

    ``gallery`` [Ng, d] is G̃ (or the raw G with ``external=False``, the Tab 4 ablation
    "loss without M, Σ", which needs full mode). ``grounding`` [Np, d] are the grounding
    rows' stored embeddings (LITE).
    """

    def __init__(self, gallery: np.ndarray, *, shift_scale: CameraShiftScale | None,
                 queries: np.ndarray | None = None, grounding: np.ndarray | None = None,
                 runner: BackboneRunner | None = None, tau: float = 100.0, k: int = 3,
                 distance: str = "euclidean", device: torch.device | str = "cpu",
                 batch_size: int = 8, precision: str = "fp32"):
        self.device = torch.device(device)
        self.shift_scale = shift_scale
        self.runner = runner
        self.gallery = PreparedGallery(gallery, device=self.device, batch_size=batch_size,
                                       precision=precision)
        self.tau, self.k, self.distance = float(tau), int(k), distance
        to_t = lambda a: None if a is None else torch.as_tensor(a, dtype=torch.float32,
                                                                 device=self.device)
        self.queries, self.grounding = to_t(queries), to_t(grounding)

    def parameters(self) -> list[torch.Tensor]:
        params = list(self.shift_scale.parameters()) if self.shift_scale is not None else []
        return params + (self.runner.bn.params if self.runner is not None else [])

    def _embed(self, batch: Batch) -> torch.Tensor:
        if self.runner is not None:
            return self.runner.forward(batch.images)[0]
        rows = [self.queries[torch.as_tensor(batch.query_pos, device=self.device)]]
        if len(batch.ground_pos):
            rows.append(self.grounding[torch.as_tensor(batch.ground_pos, device=self.device)])
        return torch.cat(rows) if len(rows) > 1 else rows[0]

    def loss_and_embeddings(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        z = self._embed(batch)
        zhat = self.shift_scale.correct(z, batch.codes) if self.shift_scale is not None else z
        loss = dart3_loss(zhat, self.gallery, self.tau, self.k, self.distance)
        return loss, zhat[:batch.num_queries].detach()

    def after_step(self) -> None:
        if self.shift_scale is not None:
            self.shift_scale.clamp_scales_()

    def reset(self) -> None:
        if self.shift_scale is not None:
            self.shift_scale.reset()
        if self.runner is not None:
            self.runner.bn.reset()

    def arrays(self) -> dict[str, np.ndarray]:
        out = self.shift_scale.arrays() if self.shift_scale is not None else {}
        if self.runner is not None:
            out.update(self.runner.arrays())
        return out


def build(cfg, inputs, stats, runner, gallery_normalized, device):
    """(adapter, scoring gallery) of ``reid adapt dart3``: G̃ with the external shift/scale
    (the stored gallery with ``--no-external``)."""
    shift_scale = CameraShiftScale(stats, device, cfg.eps) if cfg.external else None
    gallery = gallery_normalized() if cfg.external else inputs.gallery.copy()
    adapter = DART3Adapter(gallery, shift_scale=shift_scale,
                           queries=None if runner else inputs.queries,
                           grounding=None if runner else inputs.grounding, runner=runner,
                           tau=cfg.tau, k=cfg.topk, distance=cfg.distance, device=device,
                           batch_size=cfg.batch_size + cfg.grounding,
                           precision=cfg.precision)
    return adapter, gallery


def _check(cfg) -> None:
    """Checks between DART3's parameters (each value's own range: its declaration)."""
    if not cfg.external and cfg.mode == "lite":
        raise UsageError(f"{param('external', False)} with {param('mode', 'lite')} leaves "
                         "nothing to learn",
                         f"use {param('mode', 'full')} (BN γ/β only, the Tab 4 ablation)")


#: DART3's own parameters (docs/methods/dart3.md); the shared settings: reidcli.adapt.config
PARAMETERS = (
    Parameter("mode", "lite", (Options(("lite", "full")),),
              "lite (stored embeddings) | full (also the backbone's BN γ/β; needs --model)."),
    Parameter("tau", 100.0, (Interval(float, *TAU_RANGE),), "Softmax temperature τ."),
    Parameter("topk", 3, (count(1),), "Nearest gallery entries k in the loss."),
    Parameter("distance", "euclidean", (Options(("euclidean", "cosine")),),
              "euclidean | cosine (Tab 7 ablation; re-tune --tau)."),
    Parameter("external", True, (BOOL,), "Full mode: --no-external learns without M, Σ "
              "(loss on raw features, BN γ/β only; Tab 4)."),
    Parameter("precision", "float32", (PRECISION,),
              "float32 (or fp32) | bf16 (gallery GEMMs in bfloat16: ~3× faster on CPUs with "
              "AVX-512 BF16 and on GPUs, ≈0.4 % error)."),
)
_DART3 = dict(paper="Bhattacharya et al. (DART3)",
              defaults=dict(batch_size=8, lr=1e-4, bn_mode="batch"))
register_info("dart3", stage="adapt", parameters=PARAMETERS,
              summary="DART3 (default --mode lite: stored embeddings; --mode full: also the "
                      "backbone's BN γ/β on the query images, needs --model).",
              extras={"build": build, "needs_model": {"mode": ("full",)},
                      "settings": ("stats",), "check": _check,
                      "hints": {"tau": "the paper uses 100 with Euclidean distances "
                                       "(docs/methods/dart3.md)",
                                "external": "give true or false (also yes/no, 1/0)",
                                "lr": "give a small positive learning rate (dart3 1e-4)"},
                      "label": lambda s: "DART3 LITE" if s.get("mode", "lite") == "lite"
                      else "DART3"}, **_DART3)
register_info("dart3-lite", stage="adapt",          # no network: no bn_mode to list
              summary="DART3 LITE (= dart3 --mode lite): black-box, stored embeddings only.",
              extras={"alias_of": ("dart3", {"mode": "lite"}), "spellings": ("dart3_lite",),
                      "hidden": ("external",), "label": "DART3 LITE"},
              paper=_DART3["paper"],
              defaults={k: v for k, v in _DART3["defaults"].items() if k != "bn_mode"})

__all__ = ["CameraShiftScale", "DART3Adapter"]
