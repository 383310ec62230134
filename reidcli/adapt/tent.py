"""TENT — entropy minimisation of the BN affine parameters (Wang et al.; DART3 paper Eq. 7).

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
from reidcli.naming import param
from reidcli.params import Options
from reidcli.registry import Parameter, register_info


class TentAdapter(Adapter):
    """TENT on a :class:`BackboneRunner` (``logits``: ``classifier`` | ``features``)."""

    def __init__(self, runner: BackboneRunner, logits: str = "classifier"):
        if logits == "classifier" and runner.loaded.module.num_classes == 0:
            raise UsageError(f"model {runner.loaded.path} has no identity classifier for TENT",
                             f"use {param('tent_logits', 'features')} (softmax over the "
                             "embedding)")
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


def build(cfg, inputs, stats, runner, gallery_normalized, device):
    """(adapter, scoring gallery) of ``reid adapt tent``: the stored gallery as it is."""
    return TentAdapter(runner, cfg.tent_logits), inputs.gallery.copy()


register_info("tent", stage="adapt", paper="Wang et al., ICLR 2021",
              summary="TENT: entropy of the identity classifier, BN γ/β (needs --model).",
              parameters=(Parameter("tent_logits", "classifier",
                                    (Options(("classifier", "features")),),
                                    "classifier | features."),),
              defaults=dict(batch_size=64, lr=3.5e-4, bn_mode="batch"),
              extras={"build": build, "needs_model": True, "label": "TENT"})

__all__ = ["TentAdapter"]
