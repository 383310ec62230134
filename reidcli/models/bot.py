"""BoT — the "bag of tricks" strong baseline with BNNeck (docs/methods/bot.md).

Trunk (last stride 1) → global average pooling → ``pool5`` f_t [N, C5] (triplet loss) →
BatchNorm1d with a frozen zero bias → ``bnneck`` f_i [N, C5] (softmax loss, test feature) →
``Linear(C5, K, bias=False)`` initialised N(0, 0.001²).
"""
from __future__ import annotations

import dataclasses

import torch
import torch.nn.functional as F
from torch import nn

from reidcli.models.backbones import ResNetTrunk
from reidcli.models.fixed_order import BatchNorm1d, Linear


@dataclasses.dataclass
class BoTOutput:
    """``pool5`` [N, C5], ``bnneck`` [N, C5], ``logits`` [N, K] (None without a classifier),
    ``taps`` {conv*_x: [N, C, h, w]}, ``t`` conv5_x."""

    pool5: torch.Tensor
    bnneck: torch.Tensor
    logits: torch.Tensor | None
    taps: dict[str, torch.Tensor]
    t: torch.Tensor


class BoT(nn.Module):
    """BoT model (BNNeck) over a :class:`ResNetTrunk`."""

    def __init__(self, backbone: ResNetTrunk, num_classes: int):
        super().__init__()
        self.backbone = backbone
        channels = backbone.out_channels
        self.bottleneck = BatchNorm1d(channels)     # thread-count independent (fixed_order.py)
        nn.init.ones_(self.bottleneck.weight)
        nn.init.zeros_(self.bottleneck.bias)
        self.bottleneck.bias.requires_grad_(False)                   # BNNeck: no shift
        self.classifier = Linear(channels, num_classes, bias=False) if num_classes > 0 \
            else None
        if self.classifier is not None:
            nn.init.normal_(self.classifier.weight, std=0.001)

    @property
    def num_classes(self) -> int:
        return self.classifier.out_features if self.classifier is not None else 0

    def forward(self, x: torch.Tensor, taps=()) -> BoTOutput:
        t, tapped = self.backbone(x, taps)
        pool5 = F.adaptive_avg_pool2d(t, 1).flatten(1)
        bnneck = self.bottleneck(pool5)
        logits = self.classifier(bnneck) if self.classifier is not None else None
        return BoTOutput(pool5=pool5, bnneck=bnneck, logits=logits, taps=tapped, t=t)

    def new_parameters(self) -> list[nn.Parameter]:
        mods = [self.bottleneck] + ([self.classifier] if self.classifier is not None else [])
        return [p for m in mods for p in m.parameters() if p.requires_grad]


def bot_features(out: BoTOutput) -> dict[str, torch.Tensor]:
    """Store features: ``bnneck`` (the test feature) and ``pool5`` [N, C5]."""
    return {"bnneck": out.bnneck, "pool5": out.pool5}


__all__ = ["BoT", "BoTOutput", "bot_features"]
