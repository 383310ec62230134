"""DG-VAE training recipe on the shared engine (docs/methods/dgvae.md).

Three stages, each a :class:`~reidcli.training.phases.Phase` with its own trainable set
and freshly created optimisers (DG-VAE paper §4.2, following FD-GAN's scheme):

=====  ===============================================  ============================  =========
stage  loss                                             trains                        Adam lr
=====  ===============================================  ============================  =========
1      L_task + λ_disc L_disc                           E^V, E^I, E^D, μ_y, ρ, D^C    2e-4
2      λ_tsr L_tsr + λ_ambi L_ambi (λ_ambi = 0.001)     E^A, G, D^C                   2e-4
3      L_all (Eq. 19, λ_ambi = 0.01)                    everything                    2e-5
=====  ===============================================  ============================  =========

Frozen modules get ``requires_grad=False`` and their BatchNorm / dropout run in eval mode;
gradients still flow *through* a frozen E^D into G. Adam (β 0.9, 0.999) drives the networks,
μ_y and ρ; SGD with momentum 0.9 drives the latent-code classifier D^C (0.01, 0.01, 0.001);
weight decay 5e-4 on everything but μ_y and ρ; the lr is constant within a stage unless
``lr_decay="linear"``. Batches hold P identities × (K visible + K infrared) images
(:class:`~reidcli.data.samplers.CrossModalitySampler`, P = 4, K = 4); an epoch is
⌈max(N_visible, N_infrared) / (P·K)⌉ iterations unless ``iters_per_epoch`` is given. Variants
without a decoder (Table 2 rows 1–3) run stages 1 and 3 only.
"""
from __future__ import annotations

import contextlib
import dataclasses
from typing import Any

import torch
from torch import nn

from reidcli.data.samplers import CrossModalitySampler
from reidcli.data.transforms import train_transform
from reidcli.errors import InputFileError, ParameterError, UsageError
from reidcli.models.checkpoint import Architecture, ModelSpec, register_architecture
from reidcli.naming import param
from reidcli.params import NONE, Interval, Options
from reidcli.registry import Parameter, register_info
from reidcli.training.config import (EPOCHS, KEY_VALUES, NON_NEGATIVE, Each, TrainConfig,
                                     defaults_only, shared)
from reidcli.training.optim import OptimizerGroup
from reidcli.training.phases import Phase
from reidcli.training.trainer_base import TrainerBase

#: modules trained in each stage (DG-VAE paper §4.2); the rest are frozen
STAGE_MODULES = {
    1: ("trunk_visible", "trunk_infrared", "idi_encoder", "classifier", "prior_means",
        "margin_rho"),
    2: ("iai_encoder", "decoder", "classifier"),
    3: ("trunk_visible", "trunk_infrared", "idi_encoder", "iai_encoder", "decoder",
        "classifier", "prior_means", "margin_rho"),
}
#: parameters without weight decay (the prior's means μ_y and margins ρ)
NO_DECAY = ("prior_means", "margin_rho")
#: loss terms shown on the progress bar
BAR_TERMS = ("loss_id", "loss_cmtl", "loss_gmm", "loss_rec", "loss_idc")


def _variant(name: str):
    from reidcli.training.dgvae_losses import get_variant

    return get_variant(name)


def split_settings(settings: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``--set key=value`` → (architecture overrides, loss-weight overrides); an unknown key
    is a :class:`ParameterError` listing the known ones."""
    from reidcli.models.dgvae import DGVAEArch
    from reidcli.training.dgvae_losses import DGVAEWeights

    arch_keys = {f.name for f in dataclasses.fields(DGVAEArch)} - {
        "config", "num_classes", "map_size"}
    weight_keys = {f.name for f in dataclasses.fields(DGVAEWeights)}
    arch, weights = {}, {}
    for key, value in (settings or {}).items():
        if key in arch_keys:
            arch[key] = value
        elif key in weight_keys:
            weights[key] = value
        else:
            raise ParameterError("training", "set", key, "is not a DG-VAE setting",
                                 f"use one of {', '.join(sorted(arch_keys | weight_keys))}")
    return arch, weights


def dgvae_weights(cfg: TrainConfig):
    """The loss weights of ``cfg`` (DG-VAE paper §4.2 defaults + ``--set`` overrides)."""
    from reidcli.training.dgvae_losses import DGVAEWeights

    return DGVAEWeights(**split_settings(cfg.settings)[1])


def run_stages(cfg: TrainConfig) -> list[int]:
    """The stages this run trains: ``cfg.stages`` (checked against the variant) or all of the
    variant's (1, 2, 3; 1, 3 without a decoder)."""
    own = tuple(_variant(cfg.variant).stages())
    if cfg.stages is None:
        return list(own)
    stages = sorted({int(s) for s in cfg.stages})
    bad = [s for s in stages if s not in own]
    if bad or not stages:
        raise ParameterError("training", "stages", ",".join(map(str, cfg.stages)),
                             f"is not a subset of the stages of variant {cfg.variant} "
                             f"({','.join(map(str, own))})",
                             f"use e.g. {param('stages', ','.join(map(str, own)))}")
    return stages


def _trainable(stage: int, variant) -> set[str]:
    names = set(STAGE_MODULES[stage])
    if not variant.decoder:                      # E^A and G are never used
        names -= {"iai_encoder", "decoder"}
    return names


def _freeze_for(stage: int, variant):
    def prepare(model: nn.Module) -> None:
        trainable = _trainable(stage, variant)
        for name, p in model.named_parameters():
            p.requires_grad_(name.split(".")[0] in trainable)
    return prepare


def _eval_frozen(stage: int, variant):
    def train_modes(model: nn.Module) -> None:
        trainable = _trainable(stage, variant)
        for name, child in model.named_children():
            if name not in trainable:
                child.eval()                     # BN statistics and dropout of frozen parts
    return train_modes


def _groups_for(stage: int):
    def groups(model: nn.Module, cfg: TrainConfig) -> list[dict[str, Any]]:
        adam_decay, adam_plain, classifier = [], [], []
        for name, p in model.named_parameters():
            if not p.requires_grad:
                continue
            top = name.split(".")[0]
            if top == "classifier":
                classifier.append(p)
            elif top in NO_DECAY:
                adam_plain.append(p)
            else:
                adam_decay.append(p)
        lr = float(cfg.stage_lrs[stage - 1])
        out = [{"name": "classifier", "algo": "sgd", "params": classifier,
                "lr": float(cfg.classifier_lrs[stage - 1]), "weight_decay": cfg.weight_decay},
               {"name": "prior", "algo": "adam", "params": adam_plain, "lr": lr,
                "weight_decay": 0.0},
               {"name": "networks", "algo": "adam", "params": adam_decay, "lr": lr,
                "weight_decay": cfg.weight_decay}]
        return [g for g in out if g["params"]]
    return groups


def _lr_factor(stage: int):
    def factor(epoch_in_stage: int, cfg: TrainConfig) -> float:
        if cfg.lr_decay == "linear":             # FD-GAN: linearly to 0 within the stage
            total = max(1, int(cfg.stage_epochs[stage - 1]))
            return 1.0 - epoch_in_stage / total
        return 1.0
    return factor


class DGVAEStepModule(nn.Module):
    """The model plus its loss as one module, so DDP sees the whole step in ``forward``.

    ``forward(images [B, 3, H, W], labels [B], infrared [B] bool, stage)`` → (weighted total,
    {term: unweighted value})."""

    def __init__(self, model: nn.Module, variant, weights):
        super().__init__()
        self.model, self.variant, self.weights = model, variant, weights

    def forward(self, images, labels, infrared, stage: int):
        from reidcli.training.dgvae_losses import dgvae_step_loss

        return dgvae_step_loss(self.model, images, labels, infrared, stage, self.variant,
                               self.weights)


class DGVAETrainer(TrainerBase):
    """DG-VAE (Pu et al., ACM MM 2020) on the shared training engine."""

    name = "dgvae"
    bar_terms = BAR_TERMS
    #: whether metrics.csv gets the gradnorm_<term> columns (set from the run's settings
    #: by :meth:`phases`, which the engine calls before it opens the log)
    grad_norm_columns = False

    @property
    def log_columns(self) -> list[str]:
        from reidcli.training.dgvae_losses import LOSS_TERMS

        columns = [f"loss_{t}" for t in LOSS_TERMS] + ["alpha_mean", "sigma_d", "sigma_a"]
        if self.grad_norm_columns:                 # --set grad_norms=true (see phases)
            columns += [f"gradnorm_{t}" for t in LOSS_TERMS]
        return columns

    def model_spec(self, cfg: TrainConfig, num_classes: int) -> ModelSpec:
        from reidcli.models.dgvae import dgvae_arch

        config = "tiny" if cfg.backbone == "tiny" else "full"
        if config == "full" and cfg.backbone != "resnet50":
            raise ParameterError("training", "backbone", cfg.backbone, "is not a DG-VAE trunk",
                                 f"use {param('backbone', 'resnet50')} (the paper's) or "
                                 f"{param('backbone', 'tiny')}")
        arch = dgvae_arch(config, num_classes, tuple(cfg.input_size),
                          **split_settings(cfg.settings)[0])
        return ModelSpec(kind="dgvae", backbone=cfg.backbone, last_stride=2,
                         num_classes=num_classes, input_size=tuple(cfg.input_size),
                         dropout=float(arch.dropout), dgvae=arch.as_dict())

    def create_model(self, spec: ModelSpec, cfg: TrainConfig):
        """The DG-VAE of ``spec`` with ``cfg.init`` applied: the ImageNet (or local) ResNet-50
        is loaded once and copied into E^V, E^I, E^D and E^A (DG-VAE paper §4.2)."""
        from reidcli.models.backbones import build_backbone
        from reidcli.models.dgvae import DGVAE, DGVAEArch
        from reidcli.models.weights import InitReport, initialize_trunk

        arch = DGVAEArch.from_dict(spec.dgvae)
        if arch.config == "tiny":
            if cfg.init != "scratch":
                raise UsageError(f"{param('init', cfg.init)}: the tiny DG-VAE has no "
                                 "pretrained weights", f"use {param('init', 'scratch')}")
            return DGVAE(arch), InitReport(source="scratch")
        resnet = build_backbone("resnet50", last_stride=2)
        report = initialize_trunk(resnet, cfg.init)
        return DGVAE(arch, resnet=resnet), report

    def train_transform(self, cfg: TrainConfig):
        # resize, flip 0.5, ImageNet normalisation, random erasing 0.5; no pad-and-crop
        # (DG-VAE paper §4.2: the same pipeline for both modalities)
        return train_transform("pcb", cfg.input_size, erasing=cfg.random_erasing)

    def batch_sampler(self, cfg: TrainConfig, labels, world: int, rank: int, records=None):
        if records is None or "modality" not in records:
            raise UsageError(f"dataset {cfg.dataset} has no modality column",
                             "DG-VAE trains on visible and infrared images (sysu_mm01, regdb, "
                             "or synthetic with infrared cameras, e.g. the vi preset)")
        modality = records["modality"].astype(str).to_numpy()
        if not (modality == "infrared").any() or (modality == "infrared").all():
            raise UsageError(f"dataset {cfg.dataset}: the training images are all of one "
                             "modality", "DG-VAE needs visible and infrared training images "
                             "(synthetic: the vi preset)")
        return CrossModalitySampler(labels, modality, p=cfg.p, k=cfg.k, seed=cfg.seed,
                                    iterations=cfg.iters_per_epoch, num_replicas=world,
                                    rank=rank)

    def phases(self, cfg: TrainConfig) -> list[Phase]:
        variant = _variant(cfg.variant)
        self.grad_norm_columns = bool(dgvae_weights(cfg).grad_norms)
        return [Phase(f"stage{s}", int(cfg.stage_epochs[s - 1]), _freeze_for(s, variant),
                      _groups_for(s), _lr_factor(s), _eval_frozen(s, variant))
                for s in run_stages(cfg)]

    def optimizer(self, groups, cfg: TrainConfig) -> OptimizerGroup:
        sgd = [g for g in groups if g["algo"] == "sgd"]
        adam = [g for g in groups if g["algo"] == "adam"]
        return OptimizerGroup(
            torch.optim.SGD(sgd, lr=sgd[0]["lr"], momentum=0.9) if sgd else None,
            torch.optim.Adam(adam, lr=adam[0]["lr"], betas=(0.9, 0.999)) if adam else None)

    def train_module(self, model: nn.Module, cfg: TrainConfig) -> nn.Module:
        return DGVAEStepModule(model, _variant(cfg.variant), dgvae_weights(cfg))

    def train_step(self, net, images, labels, batch, phase: Phase, cfg: TrainConfig, *,
                   lr: float, amp=contextlib.nullcontext):
        """The whole step (encoders, decoders, losses) under ``amp()``."""
        with amp():
            return self.step_loss(net, images, labels, batch, phase, cfg, lr=lr)

    def step_loss(self, net, images, labels, batch, phase: Phase, cfg: TrainConfig,
                  lr: float | None = None):
        from reidcli.training.dgvae_losses import LOSS_TERMS

        infrared = batch["modality"].to(images.device, non_blocking=True).bool()
        loss, parts = net(images, labels, infrared, int(phase.name.removeprefix("stage")))
        return loss, {(f"loss_{k}" if k in LOSS_TERMS else k): v for k, v in parts.items()}


def _validate(cfg: TrainConfig) -> None:
    # each value's range and finiteness: reidcli.training.config.validate_config
    for name, values in (("stage_epochs", cfg.stage_epochs), ("stage_lrs", cfg.stage_lrs),
                         ("classifier_lrs", cfg.classifier_lrs)):
        if len(values) != 3 or any(v < 0 for v in values):
            raise ParameterError("training", name, ",".join(map(str, values)),
                                 "needs three non-negative values, one per stage",
                                 f"e.g. {param(name, '100,50,100')}" if name == "stage_epochs"
                                 else "e.g. 2e-4,2e-4,2e-5")
    stages = run_stages(cfg)
    empty = [s for s in stages if int(cfg.stage_epochs[s - 1]) < 1]
    if empty:
        raise ParameterError("training", "stage_epochs", ",".join(map(str, cfg.stage_epochs)),
                             f"gives stage {empty[0]} no epoch",
                             f"leave it out with {param('stages')}, or give it ≥ 1 epoch")
    split_settings(cfg.settings)


# -- the DG-VAE architecture (docs/methods/dgvae.md): kind "dgvae", features dgvae_idi (test)
# and dgvae_iai, compared by Euclidean distance between L2-normalised μ_φ, i.e. cosine
def build_dgvae(spec: ModelSpec):
    """A randomly initialised DG-VAE of ``spec`` (its recorded DGVAEArch)."""
    from reidcli.models.dgvae import DGVAE, DGVAEArch

    if not spec.dgvae:
        raise InputFileError("the model file has no DG-VAE architecture record",
                             "re-train it with reid train dgvae")
    return DGVAE(DGVAEArch.from_dict(spec.dgvae))


def _dgvae_dims(spec: ModelSpec) -> dict[str, tuple[int, int]]:
    arch = spec.dgvae or {}
    return {"dgvae_idi": (int(arch["idi_dim"]), 1), "dgvae_iai": (int(arch["iai_dim"]), 1)}


def _dgvae_features(output) -> dict:
    """Posterior means μ_φ (IDI) and μ_ψ (IAI), DG-VAE paper §3.4."""
    return {"dgvae_idi": output.mu_d,
            **({"dgvae_iai": output.mu_a} if output.mu_a is not None else {})}


def _dgvae_logits(output):
    raise InputFileError("a DG-VAE model has no re-id classifier over test identities",
                         "use a BoT or PCB model here")


def _dgvae_forward(loaded, images, taps, modality, features):
    """Each row through its visible or infrared trunk by ``modality`` [B] (0 visible,
    1 infrared; required); no conv taps; the IAI encoder only when ``features`` (default:
    all) asks for ``dgvae_iai``."""
    if modality is None:
        raise InputFileError(f"{param('model')} {loaded.path} is a DG-VAE model: every "
                             "image needs its modality (visible or infrared)",
                             "extract from a dataset whose records carry a modality "
                             "column")
    if taps:
        raise InputFileError(f"{param('model')} {loaded.path} is a DG-VAE model and has "
                             "no conv-map taps", f"drop {param('maps')}")
    return loaded.module(images.to(loaded.device), modality.to(loaded.device).bool(),
                         with_iai=features is None or "dgvae_iai" in features)


register_architecture(Architecture(
    "dgvae", build_dgvae, _dgvae_dims, _dgvae_features,
    {"dgvae": (("dgvae_idi", "dgvae_iai"), ("dgvae_idi",))},
    logits=_dgvae_logits, forward=_dgvae_forward,
    metrics={"dgvae_idi": "cosine", "dgvae_iai": "cosine"}, module=__name__))


def _batch(values: dict[str, Any], given: dict[str, Any]) -> None:
    """P identities × (K visible + K infrared) images."""
    values["batch_size"] = 2 * values["p"] * values["k"]


#: ``reid train dgvae``: DG-VAE's own parameters and its defaults of the shared settings
#: (the paper's, docs/methods/dgvae.md), with the help of each option
PARAMETERS = [
    shared("preset", help="tiny = the 60/60/60-iteration CPU configuration (toy trunk from "
           "scratch, 32x16 input, P=4 x K=2); explicit options win. Default: the paper's "
           "settings."),
    Parameter("variant", "dgvae", (), "Table 2 row: baseline | mog | mog_lmc | ae_tsr | "
              "ae_tsr_idc | ae_tsr_idc_cyc | vae1_tsr | vae1_tsr_idc | vae1_tsr_idc_cyc | "
              "vae2_tsr | dgvae_nolmc | dgvae (default)."),
    Parameter("stages", None, (NONE, Each(Interval(int, 1, 3), "numbers", "1,2,3")),
              "Stages to run, e.g. 1 or 1,2,3 (default: all of the variant's)."),
    Parameter("stage_epochs", [100, 50, 100], (Each(EPOCHS, "numbers", "100,50,100"),),
              "Epochs of stages 1,2,3 (100,50,100)."),
    shared("iters_per_epoch", help="Iterations per epoch (default ⌈max(N_vis, N_ir) / "
           "(P·K)⌉)."),
    shared("init", "imagenet", "imagenet | PATH (local ResNet-50 state dict) | scratch."),
    shared("backbone", "resnet50", "resnet50 (the paper's MGN split) | tiny."),
    shared("input_size", (384, 128), "HxW (384x128)."),
    shared("p", 4, "Identities per batch P (4)."),
    shared("k", 4, "Visible and infrared images per identity K (4 + 4)."),
    Parameter("stage_lrs", [2e-4, 2e-4, 2e-5],
              (Each(NON_NEGATIVE, "numbers", "2e-4,2e-4,2e-5"),),
              "Adam lr of stages 1,2,3 (2e-4,2e-4,2e-5)."),
    Parameter("classifier_lrs", [0.01, 0.01, 0.001],
              (Each(NON_NEGATIVE, "numbers", "0.01,0.01,0.001"),),
              "SGD lr of the code classifier D^C per stage (0.01,0.01,0.001)."),
    Parameter("lr_decay", "constant", (Options(("constant", "linear")),),
              "constant (default) | linear (to 0 within each stage, FD-GAN)."),
    shared("weight_decay", 5e-4, "5e-4 (none on μ_y, ρ)."),
    shared("random_erasing", 0.5),
    Parameter("settings", {}, (KEY_VALUES,), "Loss weight or model setting key=value "
              "(repeatable), e.g. tsr=1.0, gmm_estimator=mc, shared_trunk=true, "
              "lmc_form=component|posterior_var|printed, disc_scale=per_dim|sum, "
              "grad_norms=true (docs/methods/dgvae.md)."),
    shared("max_images"), shared("subsample_seed"),
    shared("seed", 0),
    *defaults_only(lr=2e-4),
]

register_info(
    "dgvae", stage="train-net", paper="Pu et al., ACM MM 2020 (DG-VAE)",
    summary="DG-VAE: visible-infrared re-id, MoG-prior IDI code, N(0,I) IAI code, triplet "
            "swap reconstruction; three stages.",
    parameters=PARAMETERS,
    extras={"trainer": DGVAETrainer, "validate": _validate, "batch": _batch, "presets": {
        # DG-VAE paper's CPU sanity scale (docs/methods/dgvae.md "tiny"): 60/60/60 iterations
        "tiny": dict(backbone="tiny", init="scratch", input_size=(32, 16), p=4, k=2,
                     stage_epochs=[3, 3, 3], iters_per_epoch=20, stage_lrs=[3e-3, 3e-3, 3e-4],
                     classifier_lrs=[0.05, 0.05, 0.005], weight_decay=0.0, random_erasing=0.0,
                     workers=0, log_every=5)}})

__all__ = ["DGVAETrainer", "PARAMETERS", "DGVAEStepModule", "STAGE_MODULES", "run_stages",
           "split_settings", "dgvae_weights", "build_dgvae"]
