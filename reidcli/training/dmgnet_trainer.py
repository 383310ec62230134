"""DMG-Net training recipe on the shared engine (docs/methods/dmgnet.md).

The model, the schedule and the optimiser are BoT's (DMG-Net paper §5: ResNet-50, last
stride 1, BNNeck, Adam 3.5e-4 with weight decay 5e-4, 10 warm-up epochs, ×0.1 at 40 and 70
of 120). What DMG-Net changes is the data and the step:

* the training rows come from several labelled **source** datasets
  (:func:`reidcli.training.sources.multi_source_records`: global labels, global cameras,
  domains; pseudo-cameras for sources without camera labels);
* each iteration draws a paired batch (:class:`reidcli.data.samplers.CameraSplitSampler`):
  the same P identities × K images from the epoch's **support** cameras and × K from its
  **query** cameras, the camera split (of all source cameras, ``meta_split="global"``, or of
  each domain's, ``"per-domain"``) being redrawn every epoch (Alg. 1);
* the step (:func:`reidcli.training.dmgnet_meta.dmg_step_loss`) is the dual meta-learning
  objective L_G(θ') + λ_MD L_MD(θ) with θ' = θ − α∇L_B(θ) (Eq. 1–7), second order by
  default; ``no_meta`` trains L_B on both sets (+ λ_MD L_MD), so ``no_meta`` with
  ``md_weight = 0`` is a paired-batch control (BoT's losses on camera-split paired batches,
  one BN forward per half) — not the paper's BoT baseline, which is ``reid train bot
  --sources …`` (:mod:`reidcli.training.bot_trainer`).
"""
from __future__ import annotations

import contextlib
import dataclasses

import pandas as pd
import torch

from reidcli.data.samplers import SPLITS, CameraSplitSampler
from reidcli.data.transforms import train_transform
from reidcli.errors import ParameterError
from reidcli.naming import param
from reidcli.params import Interval, Options
from reidcli.registry import Parameter, register_info
from reidcli.training.bot_trainer import DMGNET_TINY, SOURCE_PARAMETERS, BoTTrainer
from reidcli.training.sources import check_targets
from reidcli.training.config import (FLAG, NON_NEGATIVE, OWNER, POSITIVE, SWITCH, SameOr,
                                     TrainConfig, check_pk_triplet,
                                     defaults_only, pk_batch, shared)


def meta_config(cfg: TrainConfig):
    """The meta step's settings of ``cfg``."""
    from reidcli.training.dmgnet_meta import MetaConfig

    return MetaConfig(meta_order=int(cfg.meta_order), inner_opt=cfg.inner_opt,
                      inner_lr=cfg.inner_lr, md_weight=float(cfg.md_weight),
                      md_scale=float(cfg.md_scale), md_features=cfg.md_features,
                      outer_base_weight=float(cfg.outer_base_weight), no_meta=bool(cfg.no_meta),
                      label_smooth=float(cfg.label_smooth),
                      triplet_margin=float(cfg.triplet_margin))




class DMGNetTrainer(BoTTrainer):
    """DMG-Net (Bai et al., CVPR 2021): BoT model and schedule, dual meta-learning step."""

    name = "dmgnet"
    log_columns = ("loss_b", "loss_g", "loss_md")
    bar_terms = ("loss_b", "loss_g", "loss_md")

    def dataset_options(self, cfg: TrainConfig) -> dict:
        return dict(cfg.options)                # the sources' own: cfg.source_options

    def training_records(self, cfg: TrainConfig) -> pd.DataFrame:
        from reidcli.training.sources import source_training_records

        return source_training_records(cfg, owner="DMG-Net")

    def train_transform(self, cfg: TrainConfig):
        # BoT's transform; colour jitter on the Mixed benchmarks (DMG-Net paper §5)
        return train_transform("bot", cfg.input_size, erasing=cfg.random_erasing,
                               color_jitter=bool(cfg.color_jitter))

    def batch_sampler(self, cfg: TrainConfig, labels, world: int, rank: int, records=None):
        groups = records["cam_group"].to_numpy() if "cam_group" in records else None
        return CameraSplitSampler(labels, records["cam"].to_numpy(),
                                  domains=records["dom"].to_numpy(), p=cfg.p, k=cfg.k,
                                  seed=cfg.seed, iterations=cfg.iters_per_epoch,
                                  resplit=cfg.resplit, flat=True, num_replicas=world, rank=rank,
                                  split=cfg.meta_split, camera_groups=groups)

    def phases(self, cfg: TrainConfig):
        return [dataclasses.replace(phase, name="dmgnet") for phase in super().phases(cfg)]

    def train_module(self, model: torch.nn.Module, cfg: TrainConfig) -> torch.nn.Module:
        from reidcli.training.dmgnet_meta import DMGStepModule

        return DMGStepModule(model, meta_config(cfg))

    def train_step(self, net, images, labels, batch, phase, cfg: TrainConfig, *, lr: float,
                   amp=contextlib.nullcontext):
        """The meta step (inner update, outer losses) under ``amp()``."""
        with amp():
            return self.step_loss(net, images, labels, batch, phase, cfg, lr=lr)

    def step_loss(self, net, images, labels, batch, phase, cfg: TrainConfig,
                  lr: float | None = None):
        half = cfg.p * cfg.k                       # support rows first, then query rows
        loss, parts = net(images[:half], labels[:half], images[half:], labels[half:], lr)
        names = {"L_B": "loss_b", "L_G": "loss_g", "L_MD": "loss_md"}
        return loss, {names[k]: v for k, v in parts.items() if k in names}


def _validate(cfg: TrainConfig) -> None:
    """DMG-Net's checks between values (each value's own range — meta_order, md_weight, … —
    is its parameter's constraint, :data:`PARAMETERS`)."""
    check_pk_triplet(cfg)
    if cfg.eval_every is not None and not cfg.eval_dataset:
        raise ParameterError(OWNER, "eval_every", cfg.eval_every, "needs a dataset to "
                             "evaluate on (DMG-Net trains on several sources)",
                             f"name a target with {param('eval_dataset')}")
    if cfg.amp != "off" and cfg.meta_order == 2 and not cfg.no_meta:
        raise ParameterError(OWNER, "amp", cfg.amp,
                             "is not supported with the second-order meta-gradient",
                             f"use {param('amp', 'off')} or {param('meta_order', 1)}")
    if cfg.amp == "fp16" and not cfg.no_meta:
        # the inner gradient ∇L_B of Eq. 2 is taken inside the step, outside the engine's
        # GradScaler: in fp16 it would be unscaled and underflow (D30)
        raise ParameterError(OWNER, "amp", cfg.amp,
                             "is not supported with the meta step: its inner gradient "
                             "would be taken without loss scaling",
                             f"use {param('amp', 'bf16')} or {param('amp', 'off')} with "
                             f"{param('meta_order', 1)}")


#: ``reid train dmgnet``: its own parameters (docs/methods/dmgnet.md) and BoT's schedule
PARAMETERS = [
    *SOURCE_PARAMETERS[:2],
    # None: each composition source's own split (Mixed A all, Mixed B train), train for a
    # plain dataset
    shared("train_split", None, "train | all (every split of each source; default: train, a "
           "composition's own: Mixed A all, Mixed B train)."),
    *SOURCE_PARAMETERS[2:],
    shared("preset", help="tiny = toy trunk from scratch, 32x16, 4 epochs, P=4 x K=2, for "
           "CPU; explicit options win. Default: the paper's settings."),
    shared("init", help="imagenet | PATH | scratch."),
    shared("backbone"),
    shared("input_size", (256, 128), "HxW (256x128)."),
    shared("epochs", 120, "120 (steps/warm-up rescaled)."),
    shared("iters_per_epoch", help="Default ⌊N_images / (2·P·K)⌋."),
    shared("p", 16, "Identities per batch P (16), the same in the support and the query set."),
    shared("k", 4, "Images per identity and set K (4)."),
    shared("lr", 3.5e-4, "3.5e-4."),
    shared("lr_steps", [40, 70], "40,70."),
    shared("warmup_epochs", 10, "10."),
    shared("weight_decay", 5e-4, "5e-4."),
    Parameter("meta_order", 2, (Interval(int, 1, 2),), "2 (full meta-gradient, Eq. 4) | 1 "
              "(first order)."),
    Parameter("inner_opt", "sgd", (Options(("sgd", "adam1")),), "sgd (Eq. 2) | adam1 "
              "(normalised step g/(|g|+1e-8))."),
    Parameter("inner_lr", None, (SameOr(NON_NEGATIVE),), "same (the scheduled lr, Alg. 1) | a "
              "number."),
    Parameter("md_weight", 1.0, (NON_NEGATIVE,), "λ_MD (1; 0 = meta-generalisation only)."),
    Parameter("md_scale", 1.0, (POSITIVE,), "Scale s of Eq. 6 (1)."),
    Parameter("md_features", "theta", (Options(("theta", "adapted")),), "theta | adapted."),
    Parameter("outer_base_weight", 0.0, (NON_NEGATIVE,), "β: + β·L_B(θ) in the outer loss "
              "(0)."),
    Parameter("no_meta", False, (FLAG,), "No inner step: L_B on both sets + λ_MD L_MD (with "
              "--md-weight 0: a paired-batch control; the paper's BoT is reid train bot "
              "--sources)."),
    Parameter("color_jitter", False, (SWITCH,), "on | off (off; on for the Mixed benchmarks)."),
    Parameter("resplit", "epoch", (Options(("epoch", "iter")),), "epoch (Alg. 1) | iter."),
    Parameter("meta_split", "global", (Options(SPLITS),), "global (the paper: half of all "
              "source cameras to the support set) | per-domain (each domain's cameras halved). "
              "CUHK02 is split pair by pair in both."),
    shared("random_erasing", 0.5),
    shared("max_images"), shared("subsample_seed"),
    shared("seed", 0),
    *defaults_only(optimizer="adam", backbone_lr_mult=1.0, lr_gamma=0.1, warmup_factor=0.1,
                   label_smooth=0.1, triplet_margin=0.3),
]

register_info(
    "dmgnet", stage="train-net", paper="Bai et al., CVPR 2021 (Person30K, DMG-Net)",
    summary="DMG-Net: BoT trained on several source datasets with a meta-generalisation "
            "step across cameras and a prototype meta-discrimination loss.",
    parameters=PARAMETERS,
    extras={"trainer": DMGNetTrainer, "validate": _validate, "batch": pk_batch,
            "data_parameter": "sources", "data_example": ("market1501,dukemtmc", "mixed_b"),
            "presets": {
                # CPU scale (tests, the synthetic recipe): toy trunk at 32x16
                # (docs/methods/dmgnet.md)
                "tiny": DMGNET_TINY}})

__all__ = ["DMGNetTrainer", "PARAMETERS", "meta_config", "check_targets"]
