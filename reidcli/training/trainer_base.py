"""The base class of the network trainers: what the engine (:mod:`reidcli.training.engine`)
asks of a method, with the defaults most methods keep (one dataset, one trunk initialised by
``--init``, forward + loss per step)."""
from __future__ import annotations

import contextlib
from typing import Callable, ContextManager

import torch

from reidcli.training.config import TrainConfig
from reidcli.training.phases import Phase


class TrainerBase:
    """Defaults of a trainer; a method overrides what its paper does differently.

    A subclass must give :meth:`model_spec`, :meth:`train_transform`, :meth:`batch_sampler`,
    :meth:`phases`, :meth:`optimizer` and either :meth:`loss` or :meth:`train_step`."""

    name = ""
    #: metrics.csv columns after the base ones (the method's loss terms, accuracy)
    log_columns: tuple[str, ...] | list[str] = ("acc",)
    #: loss terms shown on the progress bar
    bar_terms: tuple[str, ...] = ()

    # -- data -------------------------------------------------------------------------------
    def dataset_options(self, cfg: TrainConfig) -> dict:
        """The loader options recorded in config.json (checked against the dataset's)."""
        from reidcli.training.data import training_options

        return training_options(cfg.dataset, cfg.options)

    def training_records(self, cfg: TrainConfig):
        """The training rows (DataFrame: path, pid, camid, domain, …) of ``cfg.dataset``."""
        from reidcli.training.data import training_records

        return training_records(cfg.dataset, cfg.root, cfg.options, train_cams=cfg.train_cams,
                                max_images=cfg.max_images, subsample_seed=cfg.subsample_seed,
                                split=cfg.train_split)

    # -- model ------------------------------------------------------------------------------
    def model_spec(self, cfg: TrainConfig, num_classes: int):
        raise NotImplementedError

    def create_model(self, spec, cfg: TrainConfig):
        """(model, InitReport): the model of ``spec``, its trunk initialised by ``cfg.init``."""
        from reidcli.models.checkpoint import build_model
        from reidcli.models.weights import initialize_trunk

        model = build_model(spec)
        return model, initialize_trunk(model.backbone, cfg.init)

    def train_module(self, model: torch.nn.Module, cfg: TrainConfig) -> torch.nn.Module:
        """The module one training step runs (and DDP wraps): the model itself by default."""
        return model

    # -- schedule ---------------------------------------------------------------------------
    def phases(self, cfg: TrainConfig) -> list[Phase]:
        raise NotImplementedError

    def optimizer(self, groups: list[dict], cfg: TrainConfig):
        raise NotImplementedError

    # -- one step ---------------------------------------------------------------------------
    def train_step(self, net: torch.nn.Module, images: torch.Tensor, labels: torch.Tensor,
                   batch: dict, phase: Phase, cfg: TrainConfig, *, lr: float,
                   amp: Callable[[], ContextManager] = contextlib.nullcontext
                   ) -> tuple[torch.Tensor, dict[str, float]]:
        """(loss, logged terms) of one batch: images [B, 3, H, W], labels [B]. By default the
        forward runs under ``amp()`` and :meth:`loss` outside it."""
        with amp():
            output = net(images)
        return self.loss(output, labels, cfg)

    def loss(self, output, labels: torch.Tensor, cfg: TrainConfig
             ) -> tuple[torch.Tensor, dict[str, float]]:
        raise NotImplementedError


__all__ = ["TrainerBase"]
