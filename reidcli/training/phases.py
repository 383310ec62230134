"""A training phase: a run of epochs with its own trainable set, parameter groups and LR
factor (PCB's RPP induced training, DG-VAE's three stages; docs/training.md)."""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Callable

import torch

if TYPE_CHECKING:
    from reidcli.training.config import TrainConfig


@dataclasses.dataclass
class Phase:
    """A run of epochs with its own trainable set and optimiser (RPP's induced training)."""

    name: str
    epochs: int
    prepare: Callable[[torch.nn.Module], None]
    groups: Callable[[torch.nn.Module, "TrainConfig"], list[dict[str, Any]]]
    lr_factor: Callable[[int, "TrainConfig"], float]
    #: called after ``model.train()`` each epoch (e.g. frozen modules' BN back to eval mode)
    train_modes: Callable[[torch.nn.Module], None] | None = None


__all__ = ["Phase"]
