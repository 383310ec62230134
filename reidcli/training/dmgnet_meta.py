"""One DMG-Net meta-iteration: base loss on the support set, a functional inner step, the
generalisation loss on the query set and the meta-discrimination loss (docs/methods/dmgnet.md).

DMG-Net paper (Bai et al., "Person30K: A Dual-Meta Generalization Network for Person
Re-Identification", CVPR 2021) §4, Eq. 1–7 and Algorithm 1:

* Eq. 1  L_B(θ)  = L_soft(D_s; θ) + L_tri(D_s; θ)                       (:func:`base_loss`)
* Eq. 2  θ'      = θ − α ∇_θ L_B(θ)                                       (:func:`inner_step`)
* Eq. 3  L_G(θ') = L_soft(D_q; θ') + L_tri(D_q; θ')
* Eq. 4  min_θ L_G(θ − α ∇_θ L_B(θ))   (second order: ∇ = (I − α∇²L_B) ∇L_G(θ'))
* Eq. 5–6 L_MD: P-way cosine classification of the query features against the support
  identity centres                                                          (:func:`md_loss`)
* Eq. 7  L_All = L_G + L_MD   (+ β L_B(θ), β = 0 by default)               (:func:`dmg_step_loss`)

The model is the BoT of :mod:`reidcli.models.bot` (paper §5); any module whose ``forward(x)``
returns an object with ``.pool5`` [B, d], ``.bnneck`` [B, d] and ``.logits`` [B, N_id] works.
θ is the set of its parameters with ``requires_grad``; θ' is never registered anywhere — it
lives only inside the autograd graph of the returned loss.
"""
from __future__ import annotations

import dataclasses

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

from reidcli.errors import ParameterError, UsageError
from reidcli.naming import param
from reidcli.training.losses import batch_hard_triplet, label_smoothing_cross_entropy

META_ORDERS = (1, 2)
INNER_OPTS = ("sgd", "adam1")
MD_FEATURES = ("theta", "adapted")
#: ε of the normalised "adam1" inner step g / (|g| + ε) (one Adam step from zero moments)
ADAM1_EPS = 1e-8


@dataclasses.dataclass
class MetaConfig:
    """DMG-Net paper §4 plus the decisions of docs/methods/dmgnet.md (D-numbers there)."""

    #: 2: full derivative of Eq. 4 (Hessian-vector term kept); 1: Hessian term dropped (D2)
    meta_order: int = 2
    #: "sgd": θ' = θ − α g (Eq. 2); "adam1": θ' = θ − α g / (|g| + 1e-8) (D1)
    inner_opt: str = "sgd"
    #: α of Eq. 2; None = the caller's current scheduled learning rate (Alg. 1, D1)
    inner_lr: float | None = None
    #: λ_MD, weight of L_MD in Eq. 7 (0 = meta-generalisation only, Table 6)
    md_weight: float = 1.0
    #: s, scale of the cosine logits in Eq. 6 (paper: none, i.e. 1; D6)
    md_scale: float = 1.0
    #: query features of L_MD computed with θ ("theta", Eq. 5–6 write f_θ) or θ' (D4)
    md_features: str = "theta"
    #: β: + β L_B(θ) in the outer loss (paper: 0, Eq. 7; D3)
    outer_base_weight: float = 0.0
    #: Table 6 "meta-discrimination only": L = L_B(D_s;θ) + L_B(D_q;θ) + λ_MD L_MD(θ)
    no_meta: bool = False
    #: ε of the label-smoothed softmax loss (BoT)
    label_smooth: float = 0.1
    #: margin m of the batch-hard triplet loss (BoT)
    triplet_margin: float = 0.3
    #: weight of L_tri inside L_B and L_G (paper: 1, Eq. 1 and 3; D8). 0 makes θ' a smooth
    #: function of θ, which the gradient check of the tests needs
    triplet_weight: float = 1.0

    def validate(self) -> None:
        """Raise :class:`ParameterError` for a value outside its domain."""
        if self.meta_order not in META_ORDERS:
            raise ParameterError("dmgnet", "meta_order", self.meta_order, "must be 1 or 2",
                                 "use 2 (full second-order meta-gradient) or 1 (first order)")
        if self.inner_opt not in INNER_OPTS:
            raise ParameterError("dmgnet", "inner_opt", self.inner_opt,
                                 f"must be one of {', '.join(INNER_OPTS)}")
        if self.md_features not in MD_FEATURES:
            raise ParameterError("dmgnet", "md_features", self.md_features,
                                 f"must be one of {', '.join(MD_FEATURES)}")
        if self.inner_lr is not None and not self.inner_lr >= 0:
            raise ParameterError("dmgnet", "inner_lr", self.inner_lr, "must be ≥ 0",
                                 "leave it unset to use the scheduled learning rate")
        for name in ("md_weight", "outer_base_weight", "label_smooth", "triplet_weight"):
            value = getattr(self, name)
            if not value >= 0:
                raise ParameterError("dmgnet", name, value, "must be ≥ 0")
        if not self.md_scale > 0:
            raise ParameterError("dmgnet", "md_scale", self.md_scale, "must be > 0")


def _at_least_fp32(x: torch.Tensor) -> torch.Tensor:
    """fp16/bf16 (AMP) → fp32; fp32 and fp64 unchanged."""
    return x if x.dtype in (torch.float32, torch.float64) else x.float()


def md_loss(support_features: torch.Tensor, support_labels: torch.Tensor,
            query_features: torch.Tensor, query_labels: torch.Tensor,
            scale: float = 1.0) -> torch.Tensor:
    """Meta-discrimination loss, DMG-Net paper Eq. 5–6, averaged over the query images.

    ``support_features`` [B_s, d], ``support_labels`` [B_s], ``query_features`` [B_q, d],
    ``query_labels`` [B_q] (every query label must occur in the support set) → scalar.

    m_p = normalize((1/N_p) Σ_{y_s = p} f(x_s)) for the P support identities (Eq. 5; raw
    features averaged, then L2-normalised; not detached, so L_MD also trains the support
    features); L_MD = −(1/B_q) Σ_j log softmax_p(s ⟨f̂(x_q,j), m_p⟩)[y_q,j] (Eq. 6, ⟨·,·⟩ the
    cosine similarity). Bounds: log P when all features are equal;
    ≥ log(1 + (P − 1) e^{−2s}) always.
    """
    ids, support_index = torch.unique(support_labels, return_inverse=True)      # [P], [B_s]
    query_index = torch.searchsorted(ids, query_labels)
    present = (query_index < len(ids)) & \
        (ids[query_index.clamp_max(len(ids) - 1)] == query_labels)
    if not bool(present.all()):
        raise UsageError("meta-discrimination loss: a query identity has no support image",
                         "sample the support and query sets from the same P identities")
    sf, qf = _at_least_fp32(support_features), _at_least_fp32(query_features)
    members = F.one_hot(support_index, len(ids)).t().to(sf.dtype)              # [P, B_s]
    centres = (members @ sf) / members.sum(dim=1, keepdim=True)                  # [P, d]
    logits = scale * F.normalize(qf, dim=1) @ F.normalize(centres, dim=1).t()    # [B_q, P]
    return F.cross_entropy(logits, query_index)


def base_loss(output, labels: torch.Tensor, cfg: MetaConfig) -> torch.Tensor:
    """L_soft(z) + w_tri L_tri(f_t) of one set (DMG-Net paper Eq. 1 / Eq. 3); ``output`` has
    ``.logits`` [B, N_id] and ``.pool5`` [B, d], ``labels`` [B] → scalar."""
    loss = label_smoothing_cross_entropy(output.logits, labels, cfg.label_smooth)
    if cfg.triplet_weight > 0:
        loss = loss + cfg.triplet_weight * batch_hard_triplet(output.pool5, labels,
                                                              cfg.triplet_margin)
    return loss


def trainable_parameters(model: nn.Module) -> dict[str, torch.Tensor]:
    """θ: name → parameter, for the parameters with ``requires_grad`` (module order)."""
    return {n: p for n, p in model.named_parameters() if p.requires_grad}


def inner_step(theta: dict[str, torch.Tensor], loss: torch.Tensor, alpha: float,
               cfg: MetaConfig, keep_graph: bool) -> dict[str, torch.Tensor]:
    """θ' = θ − α step(∇_θ L_B) (DMG-Net paper Eq. 2), as new tensors; θ is not modified.

    ``step`` is g ("sgd") or g / (|g| + 1e-8) ("adam1"). With ``cfg.meta_order == 2`` the
    gradient keeps its graph (``create_graph``), so θ' is differentiable twice back to θ; with
    order 1 it is detached (θ' − θ is a constant). ``keep_graph`` retains the graph of
    ``loss`` for a later backward through it (L_MD and β L_B reuse the support forward).
    A parameter that ``loss`` does not reach gets a zero gradient.
    """
    second = cfg.meta_order == 2
    names = list(theta)
    grads = torch.autograd.grad(loss, [theta[n] for n in names], create_graph=second,
                                retain_graph=second or keep_graph, allow_unused=True)
    adapted = {}
    for name, grad in zip(names, grads):
        p = theta[name]
        if grad is None:
            adapted[name] = p
            continue
        if not second:
            grad = grad.detach()
        step = grad if cfg.inner_opt == "sgd" else grad / (grad.abs() + ADAM1_EPS)
        adapted[name] = p - alpha * step
    return adapted


def virtual_forward(model: nn.Module, adapted: dict[str, torch.Tensor],
                    images: torch.Tensor):
    """``model(images)`` with the parameters ``adapted`` (θ', Eq. 3) in the model's current
    mode, leaving the model's buffers alone (D25): BatchNorm normalises with the statistics
    of ``images`` in train mode as usual, but its running-statistic update goes to copies
    that are dropped, so the running statistics estimate the activations of θ — the weights
    that are kept — and the query batch is not counted a second time."""
    scratch = {name: b.clone() for name, b in model.named_buffers()}
    return functional_call(model, {**scratch, **adapted}, (images,))


def _refuse_fp16_autocast(device: torch.device) -> None:
    """The inner gradient ∇L_B (Eq. 2) is taken here, outside any GradScaler: under fp16
    autocast it would be unscaled and underflow, so the meta step refuses fp16 (D30; e.g.
    ``--amp auto`` on a GPU without bf16). bf16 and fp32 pass."""
    if torch.is_autocast_enabled(device.type) and \
            torch.get_autocast_dtype(device.type) == torch.float16:
        raise ParameterError("dmgnet", "amp", "fp16",
                             "is not supported with the meta step: its inner gradient "
                             "would be taken without loss scaling",
                             f"use {param('amp', 'bf16')} or {param('amp', 'off')} "
                             f"({param('no_meta', True)} may use fp16)")


def _logged(**values: torch.Tensor) -> dict[str, float]:
    """The step's scalars as floats, copied to the host at once (one sync, not one each)."""
    floats = torch.stack([v.detach().float().reshape(()) for v in values.values()]).tolist()
    return dict(zip(values, floats))


def dmg_step_loss(model: nn.Module, support_images: torch.Tensor,
                  support_labels: torch.Tensor, query_images: torch.Tensor,
                  query_labels: torch.Tensor, lr: float, cfg: MetaConfig
                  ) -> tuple[torch.Tensor, dict[str, float]]:
    """L_All of one DMG-Net iteration (DMG-Net paper Eq. 7, Algorithm 1 lines 5–10).

    ``support_images`` [B_s, 3, H, W], ``support_labels`` [B_s], ``query_images``
    [B_q, 3, H, W], ``query_labels`` [B_q] (the same P identities, other cameras), ``lr`` the
    current scheduled learning rate (α of Eq. 2 unless ``cfg.inner_lr`` is set).

    Returns (L_All, {"L_B", "L_G", "L_MD", "L_all"} as floats). ``L_All.backward()`` puts
    ∇_θ[L_G(θ') + λ_MD L_MD(θ) + β L_B(θ)] into the ``.grad`` of the model's trainable
    parameters — second order (Eq. 4) when ``cfg.meta_order == 2``. The inner update is
    functional: no parameter of ``model`` changes before the caller's optimiser step; frozen
    parameters (the BNNeck bias) and buffers keep their value in θ'. Every forward runs in
    the model's current mode (train: batch statistics of its own batch); the running
    statistics are updated by the forwards with θ (support; query for L_MD with θ features)
    and not by the virtual θ' forward (:func:`virtual_forward`, D25). ``"L_MD"`` is 0 when
    λ_MD = 0 (not computed).

    ``cfg.no_meta`` (Table 6 "meta-discrimination"): L = L_B(D_s;θ) + L_B(D_q;θ) +
    λ_MD L_MD(θ); ``"L_B"`` is then the sum over both sets and ``"L_G"`` is absent.
    """
    cfg.validate()
    alpha = float(lr if cfg.inner_lr is None else cfg.inner_lr)
    support = model(support_images)
    loss_b = base_loss(support, support_labels, cfg)
    if cfg.no_meta:
        query = model(query_images)
        loss_b = loss_b + base_loss(query, query_labels, cfg)
        loss_md = (md_loss(support.bnneck, support_labels, query.bnneck, query_labels,
                           cfg.md_scale) if cfg.md_weight > 0 else loss_b.new_zeros(()))
        total = loss_b + cfg.md_weight * loss_md
        return total, _logged(L_B=loss_b, L_MD=loss_md, L_all=total)

    _refuse_fp16_autocast(support_images.device)
    theta = trainable_parameters(model)
    reuse_support = cfg.md_weight > 0 or cfg.outer_base_weight > 0
    adapted = inner_step(theta, loss_b, alpha, cfg, keep_graph=reuse_support)
    query_adapted = virtual_forward(model, adapted, query_images)
    loss_g = base_loss(query_adapted, query_labels, cfg)
    loss_md = loss_g.new_zeros(())
    if cfg.md_weight > 0:
        query_features = (model(query_images).bnneck if cfg.md_features == "theta"
                          else query_adapted.bnneck)
        loss_md = md_loss(support.bnneck, support_labels, query_features, query_labels,
                          cfg.md_scale)
    total = loss_g + cfg.md_weight * loss_md
    if cfg.outer_base_weight > 0:
        total = total + cfg.outer_base_weight * loss_b
    return total, _logged(L_B=loss_b, L_G=loss_g, L_MD=loss_md, L_all=total)


class DMGStepModule(nn.Module):
    """``model`` and the DMG-Net step loss in one module, so that a DDP wrapper sees a single
    forward per iteration; ``forward`` is :func:`dmg_step_loss` on ``self.model``."""

    def __init__(self, model: nn.Module, cfg: MetaConfig):
        super().__init__()
        cfg.validate()
        self.model = model
        self.cfg = cfg

    def forward(self, support_images: torch.Tensor, support_labels: torch.Tensor,
                query_images: torch.Tensor, query_labels: torch.Tensor, lr: float
                ) -> tuple[torch.Tensor, dict[str, float]]:
        return dmg_step_loss(self.model, support_images, support_labels, query_images,
                             query_labels, lr, self.cfg)


__all__ = ["MetaConfig", "md_loss", "base_loss", "inner_step", "trainable_parameters",
           "dmg_step_loss", "DMGStepModule", "virtual_forward", "META_ORDERS", "INNER_OPTS",
           "MD_FEATURES", "ADAM1_EPS"]
