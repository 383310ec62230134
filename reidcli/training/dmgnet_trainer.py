"""DMG-Net training recipe on the shared engine (docs/methods/dmgnet.md).

The model, the schedule and the optimiser are BoT's (DMG-Net paper §5: ResNet-50, last
stride 1, BNNeck, Adam 3.5e-4 with weight decay 5e-4, 10 warm-up epochs, ×0.1 at 40 and 70
of 120). What DMG-Net changes is the data and the step:

* the training rows come from several labelled **source** datasets
  (:func:`reidcli.training.sources.multi_source_records`: global labels, global cameras,
  domains; pseudo-cameras for sources without camera labels);
* each iteration draws a paired batch (:class:`reidcli.data.samplers.CameraSplitSampler`):
  the same P identities × K images from the epoch's **support** cameras and × K from its
  **query** cameras, the camera split being redrawn every epoch per domain (Alg. 1);
* the step (:func:`reidcli.training.dmgnet_meta.dmg_step_loss`) is the dual meta-learning
  objective L_G(θ') + λ_MD L_MD(θ) with θ' = θ − α∇L_B(θ) (Eq. 1–7), second order by
  default; ``no_meta`` trains L_B on both sets (+ λ_MD L_MD), so ``no_meta`` with
  ``md_weight = 0`` is BoT on the same paired batches and budget.
"""
from __future__ import annotations

import contextlib
import dataclasses

import pandas as pd
import torch

from reidcli.data.samplers import CameraSplitSampler
from reidcli.data.transforms import train_transform
from reidcli.errors import ParameterError, ReidError, UsageError
from reidcli.naming import param
from reidcli.registry import register_info
from reidcli.training.bot_trainer import BoTTrainer
from reidcli.training.config import TrainConfig


def meta_config(cfg: TrainConfig):
    """The meta step's settings of ``cfg``."""
    from reidcli.training.dmgnet_meta import MetaConfig

    return MetaConfig(meta_order=int(cfg.meta_order), inner_opt=cfg.inner_opt,
                      inner_lr=cfg.inner_lr, md_weight=float(cfg.md_weight),
                      md_scale=float(cfg.md_scale), md_features=cfg.md_features,
                      outer_base_weight=float(cfg.outer_base_weight), no_meta=bool(cfg.no_meta),
                      label_smooth=float(cfg.label_smooth),
                      triplet_margin=float(cfg.triplet_margin))




def check_targets(records: pd.DataFrame, targets) -> None:
    """Refuse a target (``dataset`` or ``dataset/domain``) that is also a training source:
    domain generalisation never sees its target (DMG-Net paper §5)."""
    from reidcli.data.registry import canonical_name

    domains = set(records["domain"].astype(str))
    datasets = set(records["dataset"].astype(str))
    for target in targets or ():
        text = str(target)
        dataset, _, domain = text.partition("/")
        try:
            dataset = canonical_name(dataset)
        except ReidError:                              # an unknown dataset name
            raise ParameterError("training", "targets", text, "is not a dataset",
                                 "name datasets (reid data list), e.g. viper or "
                                 "synthetic/d3") from None
        if dataset not in datasets:
            continue
        if not domain or f"{dataset}/{domain}" in domains or domain in domains:
            raise UsageError(f"target {text} is also a training source (sources cover "
                             f"{', '.join(sorted(domains))})",
                             f"drop it from {param('sources')} or keep other domains with "
                             f"{param('domains')}")


class DMGNetTrainer(BoTTrainer):
    """DMG-Net (Bai et al., CVPR 2021): BoT model and schedule, dual meta-learning step."""

    name = "dmgnet"
    log_columns = ("loss_b", "loss_g", "loss_md")
    bar_terms = ("loss_b", "loss_g", "loss_md")

    def dataset_options(self, cfg: TrainConfig) -> dict:
        return dict(cfg.options)                # the sources' own: cfg.source_options

    def training_records(self, cfg: TrainConfig) -> pd.DataFrame:
        from reidcli.training.sources import check_target_domains, multi_source_records

        if not cfg.sources:
            raise UsageError("DMG-Net needs source datasets",
                             f"name them with {param('sources')}, e.g. "
                             f"{param('sources', 'market1501,dukemtmc')} or mixed_a")
        loaded = multi_source_records(
            cfg.sources, cfg.root, source_options=cfg.source_options,
            source_split=cfg.train_split, domains=cfg.domains, seed=cfg.seed,
            max_images=cfg.max_images, subsample_seed=cfg.subsample_seed)
        check_target_domains(cfg.targets, loaded.source_domains)
        check_targets(loaded.records, cfg.targets)
        return loaded.records.sort_values("path", kind="stable").reset_index(drop=True)

    def train_transform(self, cfg: TrainConfig):
        # BoT's transform; colour jitter on the Mixed benchmarks (DMG-Net paper §5)
        return train_transform("bot", cfg.input_size, erasing=cfg.random_erasing,
                               color_jitter=bool(cfg.color_jitter))

    def batch_sampler(self, cfg: TrainConfig, labels, world: int, rank: int, records=None):
        return CameraSplitSampler(labels, records["cam"].to_numpy(),
                                  domains=records["dom"].to_numpy(), p=cfg.p, k=cfg.k,
                                  seed=cfg.seed, iterations=cfg.iters_per_epoch,
                                  resplit=cfg.resplit, flat=True, num_replicas=world, rank=rank)

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
    """DMG-Net's cross-option check; every option's own range (meta_order, md_weight, …) is
    checked with the others' in :func:`reidcli.training.config.validate_config`."""
    if cfg.amp != "off" and cfg.meta_order == 2 and not cfg.no_meta:
        raise ParameterError("training", "amp", cfg.amp,
                             "is not supported with the second-order meta-gradient",
                             f"use {param('amp', 'off')} or {param('meta_order', 1)}")
    if cfg.amp == "fp16" and not cfg.no_meta:
        # the inner gradient ∇L_B of Eq. 2 is taken inside the step, outside the engine's
        # GradScaler: in fp16 it would be unscaled and underflow (D30)
        raise ParameterError("training", "amp", cfg.amp,
                             "is not supported with the meta step: its inner gradient "
                             "would be taken without loss scaling",
                             f"use {param('amp', 'bf16')} or {param('amp', 'off')} with "
                             f"{param('meta_order', 1)}")


register_info(
    "dmgnet", stage="train-net", paper="Bai et al., CVPR 2021 (Person30K, DMG-Net)",
    summary="DMG-Net: BoT trained on several source datasets with a meta-generalisation "
            "step across cameras and a prototype meta-discrimination loss.",
    # BoT's schedule and the paper's DMG-Net settings (docs/methods/dmgnet.md)
    defaults=dict(epochs=120, p=16, k=4, optimizer="adam", lr=3.5e-4, backbone_lr_mult=1.0,
                  weight_decay=5e-4, lr_steps=[40, 70], lr_gamma=0.1, warmup_epochs=10,
                  warmup_factor=0.1, label_smooth=0.1, triplet_margin=0.3,
                  input_size=(256, 128), random_erasing=0.5, seed=0, meta_order=2,
                  inner_opt="sgd", md_weight=1.0, md_scale=1.0, md_features="theta",
                  outer_base_weight=0.0, no_meta=False, color_jitter=False, resplit="epoch",
                  # None: each composition source's own split (Mixed A all, Mixed B train),
                  # train for a plain dataset
                  train_split=None),
    extras={"trainer": DMGNetTrainer, "validate": _validate, "presets": {
        # CPU scale (tests, the synthetic recipe): toy trunk at 32x16 (docs/methods/dmgnet.md)
        "tiny": dict(backbone="tiny", input_size=(32, 16), epochs=4, p=4, k=2, lr=3e-3,
                     lr_steps=[3], warmup_epochs=1, init="scratch", workers=0,
                     log_every=5)}})

__all__ = ["DMGNetTrainer", "meta_config", "check_targets"]
