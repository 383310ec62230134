"""TENT — entropy minimisation of the BN affine parameters (Wang et al.; dart3.md §4.3).

The "classification" distribution of a retrieval model is the softmax of the source
identity classifier (the mean of the per-head entropies over PCB's 6 part classifiers);
``logits="features"`` takes the softmax over the embedding's components instead. Only BN
γ/β adapt (batch statistics by default); each batch's embeddings are emitted from the
forward pass before its update and scored against the stored source-model gallery.
"""
from __future__ import annotations

import numpy as np
import torch

from reidcli.adapt.base import Adapter, BackboneRunner, Batch
from reidcli.adapt.losses import softmax_entropy, tent_loss
from reidcli.errors import UsageError


class TentAdapter(Adapter):
    """TENT on a :class:`BackboneRunner` (``logits``: ``classifier`` | ``features``)."""

    def __init__(self, runner: BackboneRunner, logits: str = "classifier"):
        if logits == "classifier" and runner.loaded.module.num_classes == 0:
            raise UsageError(f"model {runner.loaded.path} has no identity classifier for TENT",
                             "use --tent-logits features (softmax over the embedding)")
        self.runner, self.logits = runner, logits

    def parameters(self) -> list[torch.Tensor]:
        return self.runner.bn.params

    def loss_and_embeddings(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        feats, logits = self.runner.forward(batch.images)
        loss = tent_loss(logits) if self.logits == "classifier" else softmax_entropy(feats)
        return loss, feats[:batch.num_queries].detach()

    def reset(self) -> None:
        self.runner.bn.reset()

    def arrays(self) -> dict[str, np.ndarray]:
        return self.runner.arrays()


__all__ = ["TentAdapter"]
