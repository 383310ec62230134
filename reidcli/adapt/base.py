"""The interface every optimising adaptation method implements, and the backbone runner
shared by the model-based ones (full DART3, TENT, TEMP).

An :class:`Adapter` owns the learnable state of one method. The loop of
:mod:`reidcli.adapt.loop` calls, per batch and step, ``loss_and_embeddings(batch)`` →
backward → optimiser step → ``after_step()``, and ``reset()`` for episodic runs and new
per-camera streams.
"""
from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import torch

from reidcli.device import use_channels_last
from reidcli.errors import UsageError
from reidcli.naming import param


@dataclasses.dataclass
class Batch:
    """One batch: ``query_pos`` [nq] positions into the trial's queries, ``ground_pos`` [ng]
    positions into the grounding pool, ``codes`` [nq+ng] camera codes (device), ``images``
    [nq+ng, 3, H, W] for model-based methods (queries first)."""

    query_pos: np.ndarray
    ground_pos: np.ndarray
    codes: torch.Tensor
    images: torch.Tensor | None = None

    @property
    def num_queries(self) -> int:
        return len(self.query_pos)


class Adapter:
    """Learnable state and per-batch objective of one adaptation method."""

    def parameters(self) -> list[torch.Tensor]:
        raise NotImplementedError

    def loss_and_embeddings(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        """(scalar loss over all rows of the batch, emitted query embeddings [nq, d])."""
        raise NotImplementedError

    def embeddings(self, batch: Batch) -> torch.Tensor:
        """Query embeddings [nq, d] with the current parameters (``--emit post``)."""
        with torch.no_grad():
            return self.loss_and_embeddings(batch)[1]

    def after_step(self) -> None:
        """Projection after each optimiser step (e.g. keep scales positive)."""

    def reset(self) -> None:
        """Restore the initial state (episodic batches, a new per-camera stream)."""

    def arrays(self) -> dict[str, np.ndarray]:
        """The state written under ``/adapt/<method>/`` (name → array)."""
        return {}


def make_optimizer(params: list[torch.Tensor], name: str, lr: float) -> torch.optim.Optimizer:
    """docs/methods/dart3.md: Adam (β 0.9/0.999, eps 1e-8, no weight decay) or SGD (momentum 0.9)."""
    if not params:
        raise UsageError("the adaptation has no learnable parameter",
                         f"check {param('mode')} / {param('external', False)}")
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=0.9, nesterov=False)
    return torch.optim.Adam(params, lr=lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)


class BackboneRunner:
    """A trained PCB/BoT re-run on query images with BN adaptation (docs/methods/dart3.md).

    ``forward(images)`` → (store feature [B, d], classifier logits list). When the store's
    features were extracted with ``--flip`` the mirrored image's features are averaged in
    too, so emitted embeddings stay comparable with the stored gallery.
    """

    def __init__(self, loaded, feature: str, bn_mode: str, flip: bool = False):
        from reidcli.adapt.bn import BatchNormAdaptation

        if feature not in loaded.feature_names:
            raise UsageError(f"store feature {feature!r} is not an output of the {loaded.kind} "
                             f"model {loaded.path} ({', '.join(loaded.feature_names)})",
                             f"pass {param('feature')} with one of the model's features, or "
                             "the model that extracted the store")
        self.loaded, self.feature, self.flip = loaded, feature, bool(flip)
        self.bn = BatchNormAdaptation(loaded.module, bn_mode)
        self.channels_last = use_channels_last("auto", loaded.device)
        if self.channels_last:
            loaded.module.to(memory_format=torch.channels_last)

    def forward(self, images: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        from reidcli.models.checkpoint import model_features, model_logits
        from reidcli.models.fixed_order import fixed_order_convolutions

        x = images.to(self.loaded.device, non_blocking=True)
        if self.channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        # torch's native convolutions on the CPU: oneDNN's results change with the thread count
        with fixed_order_convolutions(self.loaded.device):
            out = self.loaded.module(x)
            flipped = self.loaded.module(torch.flip(x, dims=[3])) if self.flip else None
        feats = model_features(self.loaded.kind, out)[self.feature].float()
        logits = model_logits(self.loaded.kind, out)
        if flipped is not None:
            feats = (feats + model_features(self.loaded.kind, flipped)[self.feature].float()) / 2
        return feats, logits

    def check_dim(self, dim: int) -> None:
        probe = torch.zeros(2, 3, *self.loaded.input_size, device=self.loaded.device)
        with torch.no_grad():
            got = self.forward(probe)[0].shape[1]
        self.bn.reset()
        if got != dim:
            raise UsageError(f"model {self.loaded.path} gives {got}-dimensional "
                             f"{self.feature!r} features, the store's have {dim}",
                             "pass the model that extracted the store")

    def arrays(self) -> dict[str, Any]:
        return {f"bn/{k}": v for k, v in self.bn.arrays().items()}


__all__ = ["Adapter", "Batch", "BackboneRunner", "make_optimizer"]
