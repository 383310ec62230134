"""TEMP — test-time similarity modification (Adachi et al., Eq 8–9; docs/methods/dart3.md).

The entropy of the softmax over each query's k largest cosine similarities to the gallery
(a seeded subset of at most ``gallery_sample`` stored rows), plus
``reg``·Σ‖θ_BN − θ_BN,0‖², minimised over the BN γ/β (running statistics by default, as the
official code keeps the network in eval mode).
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from reidcli.adapt.base import Adapter, BackboneRunner, Batch
from reidcli.adapt.losses import temp_loss
from reidcli.adapt.config import MAX_FLOAT, count
from reidcli.params import Interval
from reidcli.registry import Parameter, register_info


class TempAdapter(Adapter):
    """TEMP on a :class:`BackboneRunner` against the stored gallery [Ng, d]."""

    def __init__(self, runner: BackboneRunner, gallery: np.ndarray, *, k: int = 50,
                 gallery_sample: int = 30000, reg: float = 1e-4, seed: int = 0):
        device = runner.loaded.device
        rows = np.arange(len(gallery))
        if len(rows) > gallery_sample:                  # drawn once per run (official config)
            rows = np.sort(np.random.default_rng([int(seed), 19]).choice(
                len(rows), size=gallery_sample, replace=False))
        self.gallery_rows = rows
        g = torch.as_tensor(gallery[rows], dtype=torch.float32, device=device)
        self.gallery_unit = F.normalize(g, dim=1)
        self.runner, self.k, self.reg = runner, int(k), float(reg)

    def parameters(self) -> list[torch.Tensor]:
        return self.runner.bn.params

    def loss_and_embeddings(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        feats, _ = self.runner.forward(batch.images)
        loss = temp_loss(feats, self.gallery_unit, self.k)
        if self.reg > 0:
            loss = loss + self.reg * self.runner.bn.drift_penalty()
        return loss, feats[:batch.num_queries].detach()

    def reset(self) -> None:
        self.runner.bn.reset()

    def arrays(self) -> dict[str, np.ndarray]:
        return {**self.runner.arrays(), "temp_gallery_rows": self.gallery_rows}


def build(cfg, inputs, stats, runner, gallery_normalized, device):
    """(adapter, scoring gallery) of ``reid adapt temp``: the stored gallery as it is."""
    return (TempAdapter(runner, inputs.gallery, k=cfg.temp_k,
                        gallery_sample=cfg.temp_gallery_sample, reg=cfg.temp_reg,
                        seed=cfg.seed), inputs.gallery.copy())


register_info("temp", stage="adapt", paper="Adachi et al. (TEMP)",
              summary="TEMP: entropy of the top-k cosine similarities to the gallery, BN γ/β "
                      "(needs --model).",
              parameters=(
                  Parameter("temp_k", 50, (count(1),), "Top-k similarities."),
                  Parameter("temp_gallery_sample", 30000, (count(1),),
                            "Gallery rows in the loss."),
                  Parameter("temp_reg", 1e-4, (Interval(float, 0.0, MAX_FLOAT),),
                            "Anti-forgetting λ.")),
              defaults=dict(batch_size=16, lr=3.5e-4, bn_mode="running"),
              extras={"build": build, "needs_model": True, "label": "TEMP"})

__all__ = ["TempAdapter"]
