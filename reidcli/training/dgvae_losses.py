"""DG-VAE losses: every term of Eq. 6–19, the Table 2 variants and one training step's
weighted objective (docs/methods/dgvae.md).

Batch: B images in any order, ``labels`` [B] (0-based training identities), ``infrared``
bool [B]. Every image is an anchor of one cross-modality triplet (positive: same identity,
other modality; negative: other identity, other modality). Codes are drawn once per step
by reparameterisation, d = μ_φ + σ_φ ⊙ ε, a = μ_ψ + σ_ψ ⊙ ε′, and that one sample is used by
every term of the step. Log-variances, exponentials, KL terms and Mahalanobis distances are
computed in fp32, also under autocast.

Terms (unweighted; the step log uses these names, :data:`LOSS_TERMS`):

========== ======================================================================
id         Eq. 16  mean CE(D^C(μ_φ), y) + λ_aux · CE(D^C(d), y)
cmtl       Eq. 17  cross-modality triplet ℓ on μ_φ (+ λ_aux ℓ on d), mean per anchor modality
gmm        Eq. 6   KL(N(μ_φ, σ²_φ) ‖ N(μ_y, I)) (analytic; "mc": −Σ log σ + ½‖d − μ_y‖²),
                   divided by l with ``disc_scale="per_dim"`` (default, D30)
lmc        Eq. 7–8 CE over logits −‖d − μ_c‖², target −(‖d − μ_y‖² + α_y) (``lmc_form``, D2);
                   squared distances divided by l with ``disc_scale="per_dim"``
lmc_alpha_reg      −mean α_y over the batch's identities (keeps margins from shrinking)
ambi       Eq. 11  Σ_l (μ²_ψ + σ²_ψ − log σ²_ψ − 1), mean over images
ambi_d     Eq. 11 on the IDI code (μ_φ, σ_φ): Table 2 row 10's N(0, I) prior on d only
rec        Eq. 12  ℓ1 self and positive-swap reconstructions of the (detached) trunk maps
cyc        Eq. 13  ℓ1(sg(a_u), μ_ψ(f̂_uv)) + ℓ1(sg(d_v), μ_φ(f̂_uv)), f̂_uv = G(d_v ⊕ a_u)
idc        Eq. 14  CE(D^C(μ_φ(f̂_uv)), y_v)
========== ======================================================================

Weighted total (Eq. 9, 15, 18, 19): L_task = λ_id id + λ_cmtl cmtl;
L_disc = λ_gmm gmm + λ_lmc (lmc + λ_α lmc_alpha_reg); L_tsr = λ_idc idc + λ_cyc cyc + λ_rec rec;
stage 1: L_task + λ_disc L_disc; stage 2: λ_tsr L_tsr + λ_ambi ambi;
stage 3: L_task + λ_tsr L_tsr + λ_ambi ambi + λ_disc L_disc. Row 10 (``vae2_tsr``) adds
λ ambi_d in stages 1 (λ = ``ambi_d_stage1``) and 3 (λ_ambi), where E^D trains (D28).
"""
from __future__ import annotations

import dataclasses
from typing import Iterable

import torch
import torch.nn.functional as F

from reidcli.errors import ParameterError, UsageError
from reidcli.models.dgvae import DGVAE
from reidcli.naming import param
from reidcli.params import BOOL, TEXT, Interval, Options, validate_params

LOSS_TERMS = ("id", "cmtl", "gmm", "lmc", "lmc_alpha_reg", "ambi", "ambi_d", "rec", "cyc",
              "idc")
#: diagnostics logged next to the terms: mean α, mean σ of d and of a
DIAGNOSTICS = ("alpha_mean", "sigma_d", "sigma_a")
GMM_ESTIMATORS = ("analytic", "mc")
TRIPLET_MINING = ("hard", "random")
#: target distance D_M of the ALMC term (docs/methods/dgvae.md D2; :func:`almc_logits`)
LMC_FORMS = ("component", "posterior_var", "printed")
#: how L_gmm and the ALMC distances treat the l code dimensions (docs/methods/dgvae.md D30)
DISC_SCALES = ("per_dim", "sum")
#: encoders whose parameters the optional per-term gradient norms are taken on
GRAD_NORM_MODULES = ("idi_encoder", "iai_encoder")
CYC_PAIRS = ("all", "swap_only")
IDI_PRIORS = ("mog", "normal", "none")
STAGES = (1, 2, 3)


# --------------------------------------------------------------------------- variants

@dataclasses.dataclass(frozen=True)
class Variant:
    """One row of the DG-VAE paper's Table 2 ablation (docs/methods/dgvae.md, "Variants").

    ``aux``: λ_aux = 0.1 (else 0); ``sample_idi`` / ``sample_iai``: reparameterised codes
    (else the posterior means); ``gmm``, ``lmc``: the MoG prior terms of L_disc;
    ``decoder``: the model has E^A and G, i.e. stage 2 exists; ``ambi``: the N(0, I) prior
    on a; ``idi_prior``: "mog" (Eq. 2), "normal" (an N(0, I) prior on d too, row 10: the
    term ``ambi_d``, in the stages that train E^D, 1 and 3; docs/methods/dgvae.md D28) or
    "none"; ``rec``, ``idc``, ``cyc``: the TSR terms (Eq. 12–14)."""

    name: str
    aux: bool
    sample_idi: bool
    gmm: bool
    lmc: bool
    decoder: bool
    sample_iai: bool
    ambi: bool
    idi_prior: str
    rec: bool
    idc: bool
    cyc: bool
    table_row: int

    def __post_init__(self) -> None:
        if self.idi_prior not in IDI_PRIORS:
            raise ParameterError("DG-VAE variant", "idi_prior", self.idi_prior, "is unknown",
                                 f"use one of {', '.join(IDI_PRIORS)}")
        if self.gmm != (self.idi_prior == "mog"):
            raise ParameterError("DG-VAE variant", "gmm", self.gmm,
                                 "must be true exactly when idi_prior is 'mog'")
        if (self.lmc and not self.gmm) or (self.lmc and not self.sample_idi):
            raise ParameterError("DG-VAE variant", "lmc", self.lmc,
                                 "needs the MoG prior and sampled IDI codes")
        if not self.decoder and (self.rec or self.idc or self.cyc or self.ambi
                                 or self.sample_iai):
            raise ParameterError("DG-VAE variant", "decoder", self.decoder,
                                 "is required by the rec/idc/cyc/ambi terms and IAI sampling")
        if self.idi_prior == "normal" and not (self.sample_idi and self.ambi):
            raise ParameterError("DG-VAE variant", "idi_prior", self.idi_prior,
                                 "needs sampled IDI codes and the ambi term")

    def stages(self) -> tuple[int, ...]:
        """(1, 2, 3); (1, 3) without a decoder, stage 3 repeating stage 1's losses."""
        return (1, 2, 3) if self.decoder else (1, 3)


def _variant(name: str, row: int, *, aux=True, sample_idi=False, gmm=False, lmc=False,
             decoder=False, sample_iai=False, ambi=False, idi_prior="none", rec=False,
             idc=False, cyc=False) -> Variant:
    return Variant(name=name, aux=aux, sample_idi=sample_idi, gmm=gmm, lmc=lmc,
                   decoder=decoder, sample_iai=sample_iai, ambi=ambi, idi_prior=idi_prior,
                   rec=rec, idc=idc, cyc=cyc, table_row=row)


_TSR = dict(decoder=True, rec=True)
_VAE1 = dict(_TSR, sample_iai=True, ambi=True)
_FULL = dict(_VAE1, sample_idi=True, idi_prior="mog", gmm=True, idc=True, cyc=True)
#: Table 2 rows 1–12 (rows 5/6, 8/9, 11 inferred from the paper's §4.4 prose)
VARIANTS: dict[str, Variant] = {v.name: v for v in (
    _variant("baseline", 1, aux=False),
    _variant("mog", 2, sample_idi=True, gmm=True, idi_prior="mog"),
    _variant("mog_lmc", 3, sample_idi=True, gmm=True, lmc=True, idi_prior="mog"),
    _variant("ae_tsr", 4, **_TSR),
    _variant("ae_tsr_idc", 5, **_TSR, idc=True),
    _variant("ae_tsr_idc_cyc", 6, **_TSR, idc=True, cyc=True),
    _variant("vae1_tsr", 7, **_VAE1),
    _variant("vae1_tsr_idc", 8, **_VAE1, idc=True),
    _variant("vae1_tsr_idc_cyc", 9, **_VAE1, idc=True, cyc=True),
    _variant("vae2_tsr", 10, **dict(_VAE1, sample_idi=True, idi_prior="normal", idc=True,
                                    cyc=True)),
    _variant("dgvae_nolmc", 11, **_FULL),
    _variant("dgvae", 12, **dict(_FULL, lmc=True)),
)}


def get_variant(name: str) -> Variant:
    """The Table 2 variant called ``name``."""
    if name not in VARIANTS:
        raise ParameterError("DG-VAE", "variant", name, "is unknown",
                             f"use one of {', '.join(VARIANTS)}")
    return VARIANTS[name]


# --------------------------------------------------------------------------- weights

@dataclasses.dataclass
class DGVAEWeights:
    """Loss weights and estimator choices (DG-VAE paper §4.2; docs/methods/dgvae.md).

    Values are checked and made canonical on construction (numeric strings become floats).
    ``lmc_margin``: "learned" (α_y = softplus(ρ_y)) or "fixed:VALUE" (every α_y = VALUE,
    no margin regulariser)."""

    id: float = 1.0
    cmtl: float = 1.0
    aux: float = 0.1
    margin: float = 0.1
    gmm: float = 1.0
    lmc: float = 0.1
    disc: float = 0.2
    idc: float = 0.5
    cyc: float = 0.5
    rec: float = 0.5
    ambi_stage2: float = 0.001
    ambi_stage3: float = 0.01
    #: weight of row 10's N(0, I) prior on d (``ambi_d``) in stage 1 (D28; stage 3 uses
    #: ``ambi_stage3``)
    ambi_d_stage1: float = 0.001
    tsr: float = 1.0
    alpha_reg: float = 0.01
    gmm_estimator: str = "analytic"
    triplet_mining: str = "hard"
    cyc_pairs: str = "all"
    lmc_margin: str = "learned"
    #: whether the reconstructed maps re-encoded for L_cyc / L_idc update the BatchNorm
    #: running statistics of E^D and E^A (D29; default: they do not)
    recon_bn_update: bool = False
    #: target distance of L_lmc (D2): "component" ‖d − μ_y‖² + α_y, "posterior_var"
    #: Σ (d − μ_y)²/σ² + α_y (before), "printed" Eq. 8 Σ (d − μ_φ)²/σ − α_y
    lmc_form: str = "component"
    #: "per_dim" (L_gmm and the ALMC squared distances divided by the code size l) or
    #: "sum" over the l code dimensions (Eq. 6–8 as printed); D30
    disc_scale: str = "per_dim"
    #: log ``gradnorm_<term>``: ‖∂(w_t · term_t)/∂θ‖ over the trained encoder parameters
    #: (E^D, E^A) each log step (a diagnostic; off: the numbers and speed of a run are
    #: unchanged)
    grad_norms: bool = False

    def __post_init__(self) -> None:
        constraints = {f.name: [Interval(float, 0.0, None)] for f in dataclasses.fields(self)
                       if isinstance(f.default, float)}
        constraints.update(gmm_estimator=[Options(GMM_ESTIMATORS)],
                           triplet_mining=[Options(TRIPLET_MINING)],
                           cyc_pairs=[Options(CYC_PAIRS)], lmc_margin=[TEXT],
                           recon_bn_update=[BOOL], lmc_form=[Options(LMC_FORMS)],
                           disc_scale=[Options(DISC_SCALES)],
                           grad_norms=[BOOL])
        values = validate_params("DG-VAE", dataclasses.asdict(self), constraints)
        for name, value in values.items():      # canonical: "0.5" → 0.5 (``--set`` strings)
            setattr(self, name, value)
        self.fixed_margin()                     # validates lmc_margin

    def fixed_margin(self) -> float | None:
        """VALUE of ``lmc_margin="fixed:VALUE"``; None when the margins are learned."""
        text = str(self.lmc_margin)
        if text == "learned":
            return None
        if text.startswith("fixed:"):
            try:
                value = float(text[len("fixed:"):])
            except ValueError:
                value = -1.0
            if value >= 0 and value != float("inf"):
                return value
        raise ParameterError("DG-VAE", "lmc_margin", self.lmc_margin,
                             "must be 'learned' or 'fixed:VALUE' with VALUE ≥ 0",
                             "e.g. fixed:1.0")

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def active_terms(variant: Variant, stage: int, weights: DGVAEWeights) -> tuple[str, ...]:
    """The terms one step of ``stage`` optimises (in :data:`LOSS_TERMS` order).

    Stage 1: L_task + L_disc; stage 2 (decoder variants only): L_tsr + L_ambi; stage 3: all
    of the variant's terms (without a decoder: stage 1's). Row 10's N(0, I) prior on d
    (``ambi_d``) stands in for the MoG prior of L_disc, so it acts where E^D trains: stages
    1 and 3 (D28)."""
    if stage not in STAGES:
        raise ParameterError("DG-VAE", "stage", stage, "must be 1, 2 or 3")
    if stage not in variant.stages():
        raise ParameterError("DG-VAE", "stage", stage,
                             f"does not exist for variant {variant.name!r} (no decoder)",
                             f"run stages {', '.join(map(str, variant.stages()))}")
    task = {"id", "cmtl"}
    disc = ({"gmm"} if variant.gmm else set()) | ({"lmc"} if variant.lmc else set())
    if variant.lmc and weights.fixed_margin() is None:
        disc.add("lmc_alpha_reg")
    tsr = {t for t in ("rec", "idc", "cyc") if getattr(variant, t)}
    ambi = {"ambi"} if variant.ambi else set()
    prior_d = {"ambi_d"} if variant.idi_prior == "normal" else set()
    chosen = {1: task | disc | prior_d, 2: tsr | ambi,
              3: task | disc | tsr | ambi | prior_d}[stage]
    return tuple(t for t in LOSS_TERMS if t in chosen)


def term_weights(stage: int, weights: DGVAEWeights) -> dict[str, float]:
    """Effective weight of every term in stage ``stage``'s total (Eq. 9, 15, 18, 19)."""
    return {"id": weights.id, "cmtl": weights.cmtl,
            "gmm": weights.disc * weights.gmm, "lmc": weights.disc * weights.lmc,
            "lmc_alpha_reg": weights.disc * weights.lmc * weights.alpha_reg,
            "ambi": weights.ambi_stage2 if stage == 2 else weights.ambi_stage3,
            "ambi_d": {1: weights.ambi_d_stage1, 2: weights.ambi_stage2,
                       3: weights.ambi_stage3}[stage],
            "rec": weights.tsr * weights.rec, "cyc": weights.tsr * weights.cyc,
            "idc": weights.tsr * weights.idc}


# --------------------------------------------------------------------------- Gaussian terms

def _fp32(device: torch.device):
    """A region where autocast is off (fp32 maths for KLs and distances)."""
    return torch.autocast(device_type=device.type, enabled=False)


def reparameterise(mu: torch.Tensor, logvar: torch.Tensor,
                   generator: torch.Generator | None = None) -> torch.Tensor:
    """One sample μ + exp(½ log σ²) ⊙ ε, ε ~ N(0, I) [B, l] (fp32; reparameterisation trick,
    DG-VAE paper §3.1). ``generator`` drives ε (None: the global RNG)."""
    mu, logvar = mu.float(), logvar.float()
    if generator is None:
        eps = torch.randn(mu.shape, device=mu.device)
    else:
        eps = torch.randn(mu.shape, generator=generator, device=generator.device).to(mu.device)
    return mu + torch.exp(0.5 * logvar) * eps


def mog_kl(mu: torch.Tensor, logvar: torch.Tensor,
           component_means: torch.Tensor) -> torch.Tensor:
    """KL(N(μ, diag σ²) ‖ N(m, I)) per row [B] = ½ Σ_l (σ² + (μ − m)² − 1 − log σ²): the MoG
    prior term of Eq. 5 with a one-hot q(y|d) (analytic form of Eq. 6).
    ``mu``, ``logvar``, ``component_means`` (the rows μ_{y_i}) are [B, l]."""
    with _fp32(mu.device):
        mu, logvar, m = mu.float(), logvar.float(), component_means.float()
        return 0.5 * (logvar.exp() + (mu - m).pow(2) - 1.0 - logvar).sum(dim=1)


def mog_kl_mc(d: torch.Tensor, logvar: torch.Tensor,
              component_means: torch.Tensor) -> torch.Tensor:
    """One-sample estimate of Eq. 6 with the corrected sign (docs/methods/dgvae.md D1):
    −Σ_l log σ_l + ½‖d − m‖² per row [B]; its expectation is the analytic KL + l/2.
    ``d`` [B, l] is a sample of q_φ."""
    with _fp32(d.device):
        d, logvar, m = d.float(), logvar.float(), component_means.float()
        return -0.5 * logvar.sum(dim=1) + 0.5 * (d - m).pow(2).sum(dim=1)


def gmm_loss(mu: torch.Tensor, logvar: torch.Tensor, d: torch.Tensor, labels: torch.Tensor,
             prior_means: torch.Tensor, estimator: str = "analytic",
             per_dim: bool = False) -> torch.Tensor:
    """L_gmm (Eq. 6): mean over the batch of the KL to the own identity's component
    N(μ_{y_i}, I); ``prior_means`` [N_y, l], ``labels`` [B]. ``per_dim``: divided by l
    (docs/methods/dgvae.md D30)."""
    means = prior_means[labels]
    if estimator == "mc":
        kl = mog_kl_mc(d, logvar, means).mean()
    else:
        kl = mog_kl(mu, logvar, means).mean()
    return kl / mu.shape[1] if per_dim else kl


def standard_gaussian_kl(mu: torch.Tensor, logvar: torch.Tensor) -> torch.Tensor:
    """KL(N(μ, diag σ²) ‖ N(0, I)) per row [B] = ½ Σ_l (μ² + σ² − 1 − log σ²) (Eq. 10)."""
    return mog_kl(mu, logvar, torch.zeros_like(mu, dtype=torch.float32))


def ambi_loss(mu: torch.Tensor, logvar: torch.Tensor) -> torch.Tensor:
    """L_ambi (Eq. 11, as printed, without the ½; docs/methods/dgvae.md D4):
    (1/B) Σ_i Σ_l (μ² + σ² − log σ² − 1) = 2 × the mean KL to N(0, I). ``mu``, ``logvar`` [B, l]."""
    return 2.0 * standard_gaussian_kl(mu, logvar).mean()


def almc_logits(d: torch.Tensor, logvar: torch.Tensor, labels: torch.Tensor,
                prior_means: torch.Tensor, margins: torch.Tensor, form: str = "component",
                mu: torch.Tensor | None = None, per_dim: bool = False) -> torch.Tensor:
    """ALMC logits [B, N_y] (Eq. 7–8; docs/methods/dgvae.md D2, D3): z_c = −‖d − μ_c‖² for
    c ≠ y (Eq. 7 as printed) and z_y = −D_M, by ``form`` (:data:`LMC_FORMS`):

    * ``"component"`` (default): D_M = ‖d − μ_y‖² + α_y, the squared Mahalanobis distance to
      the own component N(μ_y, I) of Eq. 2 (whose covariance is I) plus the margin;
    * ``"posterior_var"``: D_M = Σ_l (d_l − μ_{y,l})² / σ²_l + α_y (σ of q_φ; the form used
      before, kept to reproduce earlier runs);
    * ``"printed"``: D_M = Σ_l (d_l − μ_{φ,l})² / σ_l − α_y, Eq. 8 / Eq. 34 as printed
      (needs ``mu`` = μ_φ).

    ``per_dim``: every squared distance (not α) divided by l (D30).
    ``d``, ``logvar``, ``mu`` [B, l]; ``margins`` α [N_y]."""
    if form not in LMC_FORMS:
        raise ParameterError("DG-VAE", "lmc_form", form, "is unknown",
                             f"use one of {', '.join(LMC_FORMS)}")
    if form == "printed" and mu is None:
        raise UsageError("the printed ALMC form needs the posterior means μ_φ",
                         "pass mu= to almc_logits")
    with _fp32(d.device):
        d, logvar, means = d.float(), logvar.float(), prior_means.float()
        sq = ((d * d).sum(dim=1, keepdim=True) + (means * means).sum(dim=1)[None, :]
              - 2.0 * d @ means.t()).clamp_min(0.0)
        alpha = margins.float()[labels]
        if form == "component":
            d_m = (d - means[labels]).pow(2).sum(dim=1)
        elif form == "posterior_var":
            d_m = ((d - means[labels]).pow(2) * torch.exp(-logvar)).sum(dim=1)
        else:                                              # Eq. 8: σ⁻¹, centre μ_φ, − α_y
            d_m = ((d - mu.float()).pow(2) * torch.exp(-0.5 * logvar)).sum(dim=1)
        if per_dim:
            sq, d_m = sq / d.shape[1], d_m / d.shape[1]
        d_m = d_m - alpha if form == "printed" else d_m + alpha
        return (-sq).scatter(1, labels.view(-1, 1), -d_m.view(-1, 1))


def almc(d: torch.Tensor, logvar: torch.Tensor, labels: torch.Tensor,
         prior_means: torch.Tensor, margins: torch.Tensor, form: str = "component",
         mu: torch.Tensor | None = None, per_dim: bool = False
         ) -> tuple[torch.Tensor, torch.Tensor]:
    """(lmc, lmc_alpha_reg): the ALMC cross-entropy of :func:`almc_logits` (mean over the
    batch; Eq. 7) and the margin regulariser −mean_{y in the batch} α_y. L_lmc is
    lmc + λ_α · lmc_alpha_reg."""
    ce = F.cross_entropy(almc_logits(d, logvar, labels, prior_means, margins, form, mu,
                                     per_dim), labels)
    reg = -margins.float()[torch.unique(labels)].mean()
    return ce, reg


# --------------------------------------------------------------------------- triplets

@dataclasses.dataclass
class CrossModalityTriplets:
    """Row indices [T] of the anchors, their positives and negatives (same / other
    identity, always the other modality; DG-VAE paper §4.2)."""

    anchor: torch.Tensor
    positive: torch.Tensor
    negative: torch.Tensor

    def __len__(self) -> int:
        return len(self.anchor)


def cross_modality_masks(labels: torch.Tensor, infrared: torch.Tensor
                         ) -> tuple[torch.Tensor, torch.Tensor]:
    """(positive, negative) bool [B, B]: row i's valid cross-modality positives (same
    label, other modality) and negatives (other label, other modality)."""
    same = labels[:, None] == labels[None, :]
    cross = infrared[:, None] != infrared[None, :]
    return same & cross, ~same & cross


def batch_hard_indices(dist: torch.Tensor, positive: torch.Tensor, negative: torch.Tensor
                       ) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row of ``dist`` [B, B]: the farthest valid positive and the closest valid
    negative (indices [B]; meaningless where a row has none)."""
    far = torch.where(positive, dist, torch.full_like(dist, -1.0)).argmax(dim=1)
    near = torch.where(negative, dist, torch.full_like(dist, float("inf"))).argmin(dim=1)
    return far, near


def cross_modality_triplets(features: torch.Tensor, labels: torch.Tensor,
                            infrared: torch.Tensor, mining: str = "hard",
                            generator: torch.Generator | None = None
                            ) -> CrossModalityTriplets:
    """One triplet per anchor that has a cross-modality positive and negative.

    ``features`` [B, l] (μ_φ; L2-normalised here, gradient stopped). ``mining="hard"``:
    batch-hard on the Euclidean distance; ``"random"``: uniform among the valid ones
    (``generator`` drives it)."""
    labels = labels.to(features.device)
    infrared = infrared.to(device=features.device, dtype=torch.bool)
    positive, negative = cross_modality_masks(labels, infrared)
    valid = positive.any(dim=1) & negative.any(dim=1)
    if not bool(valid.any()):
        raise UsageError("the batch holds no cross-modality triplet",
                         "sample at least two identities with visible and infrared images "
                         f"each ({param('p')} ≥ 2)")
    if mining == "hard":
        with torch.no_grad(), _fp32(features.device):
            x = F.normalize(features.detach().float(), dim=1)
            dist = torch.cdist(x, x)
        pos, neg = batch_hard_indices(dist, positive, negative)
    elif mining == "random":
        shape = positive.shape
        if generator is None:
            scores = torch.rand(2, *shape, device=features.device)
        else:
            scores = torch.rand(2, *shape, generator=generator,
                                device=generator.device).to(features.device)
        pos = torch.where(positive, scores[0], torch.full_like(scores[0], -1.0)).argmax(dim=1)
        neg = torch.where(negative, scores[1], torch.full_like(scores[1], -1.0)).argmax(dim=1)
    else:
        raise ParameterError("DG-VAE", "triplet_mining", mining, "is unknown",
                             f"use one of {', '.join(TRIPLET_MINING)}")
    anchors = torch.nonzero(valid).flatten()
    return CrossModalityTriplets(anchor=anchors, positive=pos[anchors], negative=neg[anchors])


def triplet_terms(x: torch.Tensor, triplets: CrossModalityTriplets,
                  margin: float) -> torch.Tensor:
    """ℓ(a, p, n) = [‖ā − p̄‖ − ‖ā − n̄‖ + m]₊ per triplet [T], x̄ = x/‖x‖ (DG-VAE paper §3.4)."""
    with _fp32(x.device):
        x = F.normalize(x.float(), dim=1)
        a = x[triplets.anchor]

        def dist(other: torch.Tensor) -> torch.Tensor:
            return (a - other).pow(2).sum(dim=1).clamp_min(1e-12).sqrt()

        return F.relu(dist(x[triplets.positive]) - dist(x[triplets.negative]) + margin)


def _modality_means(values: torch.Tensor, infrared: torch.Tensor) -> torch.Tensor:
    """mean over the visible rows + mean over the infrared rows (an empty side adds 0)."""
    total = values.new_zeros(())
    for side in (~infrared, infrared):
        if bool(side.any()):
            total = total + values[side].mean()
    return total


def cmtl_loss(mu: torch.Tensor, d: torch.Tensor, triplets: CrossModalityTriplets,
              infrared: torch.Tensor, margin: float, aux: float) -> torch.Tensor:
    """L_cmtl (Eq. 17): (1/N^V) Σ_{visible anchors} [ℓ(μ) + λ_aux ℓ(d)] + the same over the
    infrared anchors; ``mu``, ``d`` [B, l]."""
    terms = triplet_terms(mu, triplets, margin)
    if aux > 0:
        terms = terms + aux * triplet_terms(d, triplets, margin)
    return _modality_means(terms, infrared.to(terms.device)[triplets.anchor])


def id_loss(classifier: torch.nn.Module, mu: torch.Tensor, d: torch.Tensor,
            labels: torch.Tensor, aux: float) -> torch.Tensor:
    """L_id (Eq. 16): mean CE(D^C(μ_φ), y) + λ_aux · mean CE(D^C(d), y)."""
    loss = F.cross_entropy(classifier(mu).float(), labels)
    if aux > 0:
        loss = loss + aux * F.cross_entropy(classifier(d).float(), labels)
    return loss


# --------------------------------------------------------------------------- TSR

@dataclasses.dataclass
class TSRPlan:
    """Which reconstructions a step builds (Eq. 12–14). Every reconstruction is
    G(d[idi] ⊕ a[iai]); ``pairs`` [U, 2] are the distinct (idi, iai) rows, decoded once.

    L_rec entries [R]: ``rec_pair`` (row of ``pairs``), ``rec_target`` (row whose trunk map
    is the L1 target), ``rec_swap`` (False: self reconstruction), ``rec_target_infrared``.
    L_cyc / L_idc entries [M] (9 ordered pairs per triplet, or 7 with ``swap_only``):
    ``cyc_pair``, ``cyc_idi``, ``cyc_iai`` (source rows) and ``idc_labels`` (the identity of
    the IDI source)."""

    pairs: torch.Tensor
    rec_pair: torch.Tensor
    rec_target: torch.Tensor
    rec_swap: torch.Tensor
    rec_target_infrared: torch.Tensor
    cyc_pair: torch.Tensor
    cyc_idi: torch.Tensor
    cyc_iai: torch.Tensor
    idc_labels: torch.Tensor

    def rec_sources(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(idi rows, iai rows) [R] of the L_rec reconstructions."""
        return self.pairs[self.rec_pair, 0], self.pairs[self.rec_pair, 1]


#: ordered (u, v) pairs of a triplet (0 = anchor, 1 = positive, 2 = negative): f̂_uv = G(d_v ⊕ a_u)
_ALL_PAIRS = tuple((u, v) for u in range(3) for v in range(3))
_SWAP_ONLY_PAIRS = ((0, 0), (1, 1), (2, 2), (0, 1), (1, 0), (0, 2), (2, 0))


def tsr_plan(triplets: CrossModalityTriplets, labels: torch.Tensor, infrared: torch.Tensor,
             cyc_pairs: str = "all") -> TSRPlan:
    """The reconstructions of one step (DG-VAE paper Eq. 12–14, Fig. 4).

    L_rec: every image from its own codes (B self terms) and, per triplet, the anchor from
    (d_p, a_a) with target f_a and the positive from (d_a, a_p) with target f_p (2T swap
    terms); negatives are never L1 targets. L_cyc / L_idc: for each triplet (a, p, n) and
    each ordered pair (u, v), f̂_uv = G(d_v ⊕ a_u), labelled with y_v."""
    if cyc_pairs not in CYC_PAIRS:
        raise ParameterError("DG-VAE", "cyc_pairs", cyc_pairs, "is unknown",
                             f"use one of {', '.join(CYC_PAIRS)}")
    device = triplets.anchor.device
    labels, infrared = labels.to(device), infrared.to(device=device, dtype=torch.bool)
    rows = torch.arange(len(labels), device=device)
    a, p = triplets.anchor, triplets.positive
    rec_idi = torch.cat([rows, p, a])
    rec_iai = torch.cat([rows, a, p])
    rec_target = torch.cat([rows, a, p])
    rec_swap = torch.cat([torch.zeros_like(rows, dtype=torch.bool),
                          torch.ones(2 * len(a), dtype=torch.bool, device=device)])
    members = torch.stack([triplets.anchor, triplets.positive, triplets.negative])   # [3, T]
    chosen = _ALL_PAIRS if cyc_pairs == "all" else _SWAP_ONLY_PAIRS
    cyc_iai = torch.cat([members[u] for u, _ in chosen])
    cyc_idi = torch.cat([members[v] for _, v in chosen])
    pairs, inverse = torch.unique(torch.stack([torch.cat([rec_idi, cyc_idi]),
                                               torch.cat([rec_iai, cyc_iai])], dim=1),
                                  dim=0, return_inverse=True)
    n_rec = len(rec_idi)
    return TSRPlan(pairs=pairs, rec_pair=inverse[:n_rec], rec_target=rec_target,
                   rec_swap=rec_swap, rec_target_infrared=infrared[rec_target],
                   cyc_pair=inverse[n_rec:], cyc_idi=cyc_idi, cyc_iai=cyc_iai,
                   idc_labels=labels[cyc_idi])


def l1_per_sample(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mean absolute error over all elements of each sample [N] (ℓ1 of Eq. 12–13, as a
    per-element mean: docs/methods/dgvae.md D8)."""
    return (x.float() - y.float()).abs().flatten(1).mean(dim=1)


def rec_loss(reconstructions: torch.Tensor, maps: torch.Tensor, plan: TSRPlan) -> torch.Tensor:
    """L_rec (Eq. 12) from the decoded ``reconstructions`` [U, C, h, w] (rows of
    ``plan.pairs``) and the trunk maps ``maps`` [B, C, h, w] (detached here,
    docs/methods/dgvae.md D9): mean self term over visible + over infrared images + mean swap
    term with a visible target + with an infrared target."""
    errors = l1_per_sample(reconstructions[plan.rec_pair], maps.detach()[plan.rec_target])
    total = errors.new_zeros(())
    for group in (~plan.rec_swap, plan.rec_swap):
        total = total + _modality_means(errors[group], plan.rec_target_infrared[group])
    return total


def cyc_loss(mu_d_hat: torch.Tensor, mu_a_hat: torch.Tensor, d: torch.Tensor,
             a: torch.Tensor, plan: TSRPlan) -> torch.Tensor:
    """L_cyc (Eq. 13; docs/methods/dgvae.md D10): mean over the plan's cyc entries of
    ℓ1(sg(a_u), μ_ψ(f̂_uv)) + ℓ1(sg(d_v), μ_φ(f̂_uv)); ``mu_*_hat`` are the re-encodings
    [U', ·] indexed by ``plan.cyc_pair``."""
    code_a = l1_per_sample(mu_a_hat[plan.cyc_pair], a.detach()[plan.cyc_iai])
    code_d = l1_per_sample(mu_d_hat[plan.cyc_pair], d.detach()[plan.cyc_idi])
    return (code_a + code_d).mean()


def idc_loss(classifier: torch.nn.Module, mu_d_hat: torch.Tensor, plan: TSRPlan) -> torch.Tensor:
    """L_idc (Eq. 14; all 9 pairs per triplet, docs/methods/dgvae.md D11): mean
    CE(D^C(μ_φ(f̂_uv)), y_v) over the plan's cyc entries."""
    return F.cross_entropy(classifier(mu_d_hat[plan.cyc_pair]).float(), plan.idc_labels)


# --------------------------------------------------------------------------- one step

@dataclasses.dataclass
class DGVAETerms:
    """Differentiable unweighted ``terms`` {name: scalar} and detached 0-d ``diagnostics``
    (mean α, mean σ of d and of a)."""

    terms: dict[str, torch.Tensor]
    diagnostics: dict[str, torch.Tensor]


def dgvae_terms(model: DGVAE, images: torch.Tensor, labels: torch.Tensor,
                infrared: torch.Tensor, variant: Variant, weights: DGVAEWeights,
                terms: Iterable[str], generator: torch.Generator | None = None) -> DGVAETerms:
    """Compute the requested unweighted ``terms`` (names of :data:`LOSS_TERMS`) on one batch
    (images [B, 3, H, W], labels [B], infrared bool [B]), drawing the codes once."""
    wanted = set(terms)
    unknown = sorted(wanted - set(LOSS_TERMS))
    if unknown:
        raise ParameterError("DG-VAE", "terms", unknown, "are unknown",
                             f"use names from {', '.join(LOSS_TERMS)}")
    labels = labels.to(device=images.device, dtype=torch.long)
    infrared = infrared.to(device=images.device, dtype=torch.bool)
    if len(labels) and (int(labels.min()) < 0 or int(labels.max()) >= model.num_classes):
        raise UsageError(f"training labels must lie in 0..{model.num_classes - 1}",
                         "relabel the training identities 0-based and build the model for "
                         "all of them")
    tsr_terms = wanted & {"rec", "cyc", "idc"}
    with_iai = bool(tsr_terms) or "ambi" in wanted
    out = model(images, infrared, with_iai=with_iai)
    mu_d, logvar_d = out.mu_d.float(), out.logvar_d.float()
    d = reparameterise(mu_d, logvar_d, generator) if variant.sample_idi else mu_d
    aux = weights.aux if variant.aux else 0.0
    fixed = weights.fixed_margin()
    margins = (model.margins() if fixed is None
               else torch.full((model.num_classes,), fixed, device=mu_d.device))
    values: dict[str, torch.Tensor] = {}
    triplets = None
    if wanted & {"cmtl", "rec", "cyc", "idc"}:
        triplets = cross_modality_triplets(mu_d, labels, infrared, weights.triplet_mining,
                                           generator)
    if "id" in wanted:
        values["id"] = id_loss(model.classifier, out.mu_d, d, labels, aux)
    if "cmtl" in wanted:
        values["cmtl"] = cmtl_loss(mu_d, d, triplets, infrared, weights.margin, aux)
    if "gmm" in wanted:
        values["gmm"] = gmm_loss(mu_d, logvar_d, d, labels, model.prior_means,
                                 weights.gmm_estimator, weights.disc_scale == "per_dim")
    if wanted & {"lmc", "lmc_alpha_reg"}:
        ce, reg = almc(d, logvar_d, labels, model.prior_means, margins, weights.lmc_form,
                       mu=mu_d, per_dim=weights.disc_scale == "per_dim")
        values.update({k: v for k, v in (("lmc", ce), ("lmc_alpha_reg", reg)) if k in wanted})
    if "ambi_d" in wanted:                                # Table 2 row 10: N(0, I) on d
        values["ambi_d"] = ambi_loss(mu_d, logvar_d)
    diagnostics = {"alpha_mean": margins.detach().float().mean(),
                   "sigma_d": torch.exp(0.5 * logvar_d.detach()).mean()}
    if with_iai:
        mu_a, logvar_a = out.mu_a.float(), out.logvar_a.float()
        a = reparameterise(mu_a, logvar_a, generator) if variant.sample_iai else mu_a
        diagnostics["sigma_a"] = torch.exp(0.5 * logvar_a.detach()).mean()
        if "ambi" in wanted:
            values["ambi"] = ambi_loss(mu_a, logvar_a)
        if tsr_terms:
            plan = tsr_plan(triplets, labels, infrared, weights.cyc_pairs)
            values.update(_tsr_values(model, out.f, d, a, plan, tsr_terms,
                                      weights.recon_bn_update))
    return DGVAETerms(terms={t: values[t] for t in LOSS_TERMS if t in values},
                      diagnostics=diagnostics)


def _tsr_values(model: DGVAE, f: torch.Tensor, d: torch.Tensor, a: torch.Tensor,
                plan: TSRPlan, wanted: set[str], recon_bn_update: bool = False
                ) -> dict[str, torch.Tensor]:
    """rec / cyc / idc of one step: decode the plan's distinct pairs once, re-encode with
    the posterior means the ones the cyc/idc entries use (leaving the encoders' BN running
    statistics alone unless ``recon_bn_update``, D29)."""
    values: dict[str, torch.Tensor] = {}
    pairs = plan.pairs
    if "rec" not in wanted:                                 # decode only the cyc/idc pairs
        used = torch.unique(plan.cyc_pair)
        remap = torch.full((len(pairs),), -1, dtype=torch.long, device=pairs.device)
        remap[used] = torch.arange(len(used), device=pairs.device)
        pairs = pairs[used]
        plan = dataclasses.replace(plan, pairs=pairs, cyc_pair=remap[plan.cyc_pair])
    recon = model.decode(d[pairs[:, 0]], a[pairs[:, 1]])
    if "rec" in wanted:
        values["rec"] = rec_loss(recon, f, plan)
    if wanted & {"cyc", "idc"}:
        used = torch.unique(plan.cyc_pair)
        slot = torch.full((len(pairs),), -1, dtype=torch.long, device=pairs.device)
        slot[used] = torch.arange(len(used), device=pairs.device)
        maps = recon[used]
        mu_d_hat = model.encode_idi(maps, update_bn=recon_bn_update)[0].float()
        local = dataclasses.replace(plan, cyc_pair=slot[plan.cyc_pair])
        if "cyc" in wanted:
            mu_a_hat = model.encode_iai(maps, update_bn=recon_bn_update)[0].float()
            values["cyc"] = cyc_loss(mu_d_hat, mu_a_hat, d, a, local)
        if "idc" in wanted:
            values["idc"] = idc_loss(model.classifier, mu_d_hat, local)
    return values


def weighted_total(terms: dict[str, torch.Tensor], stage: int,
                   weights: DGVAEWeights) -> torch.Tensor:
    """Σ_t w_t · term_t with the effective weights of :func:`term_weights`."""
    w = term_weights(stage, weights)
    total = None
    for name, value in terms.items():
        total = w[name] * value if total is None else total + w[name] * value
    if total is None:
        raise UsageError(f"DG-VAE stage {stage} has no loss term to optimise",
                         "choose a variant and stage with active terms")
    return total


def term_grad_norms(model: DGVAE, terms: dict[str, torch.Tensor], stage: int,
                    weights: DGVAEWeights) -> dict[str, torch.Tensor]:
    """{"gradnorm_<term>": ‖∂(w_t · term_t)/∂θ‖₂} [0-d] for every term, θ the parameters of
    E^D and E^A (:data:`GRAD_NORM_MODULES`) that require a gradient; 0 for a term that does
    not reach them. Each term takes one ``autograd.grad`` (the graph is kept for the step's
    backward); empty when grad mode is off or no encoder parameter trains."""
    params = [p for name in GRAD_NORM_MODULES for p in getattr(model, name).parameters()
              if p.requires_grad]
    if not params or not torch.is_grad_enabled():
        return {}
    w = term_weights(stage, weights)
    out = {}
    for name, value in terms.items():
        if not value.requires_grad:
            out[f"gradnorm_{name}"] = value.new_zeros((), dtype=torch.float32)
            continue
        grads = torch.autograd.grad(w[name] * value, params, retain_graph=True,
                                    allow_unused=True)
        squares = [g.detach().float().pow(2).sum() for g in grads if g is not None]
        out[f"gradnorm_{name}"] = (torch.stack(squares).sum().sqrt() if squares
                                   else value.new_zeros((), dtype=torch.float32))
    return out


def dgvae_step_loss(model: DGVAE, images: torch.Tensor, labels: torch.Tensor,
                    infrared: torch.Tensor, stage: int, variant: Variant,
                    weights: DGVAEWeights, generator: torch.Generator | None = None
                    ) -> tuple[torch.Tensor, dict[str, float]]:
    """One training step of ``stage``: (weighted total, a scalar to back-propagate;
    {unweighted active term: value, "alpha_mean", "sigma_d", "sigma_a" (when the IAI branch
    ran), "gradnorm_<term>" (with ``weights.grad_norms``, :func:`term_grad_norms`)}). Module
    modes and ``requires_grad`` are left to the caller."""
    result = dgvae_terms(model, images, labels, infrared, variant, weights,
                         active_terms(variant, stage, weights), generator)
    total = weighted_total(result.terms, stage, weights)
    logged = {**result.terms, **result.diagnostics}
    if weights.grad_norms:
        logged.update(term_grad_norms(model, result.terms, stage, weights))
    # one device→host copy for every logged value (a float() per term syncs once each)
    values = torch.stack([v.detach().float().reshape(()) for v in logged.values()]).tolist()
    return total, dict(zip(logged, values))


__all__ = ["LOSS_TERMS", "DIAGNOSTICS", "Variant", "VARIANTS", "get_variant", "DGVAEWeights",
           "active_terms", "term_weights", "reparameterise", "mog_kl", "mog_kl_mc", "gmm_loss",
           "standard_gaussian_kl", "ambi_loss", "almc_logits", "almc",
           "CrossModalityTriplets", "cross_modality_masks", "batch_hard_indices",
           "cross_modality_triplets", "triplet_terms", "cmtl_loss", "id_loss", "TSRPlan",
           "tsr_plan", "l1_per_sample", "rec_loss", "cyc_loss", "idc_loss", "DGVAETerms",
           "dgvae_terms", "weighted_total", "term_grad_norms", "dgvae_step_loss",
           "LMC_FORMS", "DISC_SCALES", "GRAD_NORM_MODULES"]
