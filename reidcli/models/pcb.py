"""PCB — Part-based Convolutional Baseline, with optional RPP (docs/methods/pcb.md).

Input [N, 3, 384, 128] → conv5_x T [N, 2048, 24, 8] (last stride 1) → 6 horizontal stripes
averaged → g [N, 6, 2048] → dropout (training) → one shared 1×1 conv 2048→256 (no bias) +
BN + ReLU → h [N, 6, 256] → six separate classifiers 256→K.

With RPP the hard stripes are replaced by a part classifier over every column vector f of T:
g_i = (p / S) · Σ_f P(P_i | f) · f  (docs/methods/pcb.md; S = H·W positions, the author code's scaling).
"""
from __future__ import annotations

import dataclasses

import torch
import torch.nn.functional as F
from torch import nn

from reidcli.models.backbones import ResNetTrunk
from reidcli.models.fixed_order import Linear


@dataclasses.dataclass
class PCBOutput:
    """``g`` [N, p, C5] (before dropout), ``h`` [N, p, r], ``logits`` p × [N, K] (empty when
    the model has no classifiers), ``taps`` {conv*_x: [N, C, h, w]}, ``t`` conv5_x;
    ``refined``: g comes from RPP's soft pooling (features ``rpp_g``/``rpp_h``)."""

    g: torch.Tensor
    h: torch.Tensor
    logits: list[torch.Tensor]
    taps: dict[str, torch.Tensor]
    t: torch.Tensor
    refined: bool = False


class RefinedPartPooling(nn.Module):
    """RPP part classifier: linear C5 → p with softmax over parts, per column vector."""

    def __init__(self, channels: int, parts: int = 6):
        super().__init__()
        self.parts = parts
        self.classifier = nn.Conv2d(channels, parts, 1, bias=True)   # W ∈ R^{p×C}, per position
        nn.init.normal_(self.classifier.weight, std=0.001)
        nn.init.zeros_(self.classifier.bias)

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        """``t`` [N, C, H, W] → g [N, p, C]: g_i = (p/S) Σ_f P(P_i|f) f (docs/methods/pcb.md)."""
        prob = torch.softmax(self.classifier(t), dim=1)              # [N, p, H, W]
        s = t.shape[2] * t.shape[3]
        return torch.einsum("nphw,nchw->npc", prob, t) * (self.parts / s)


class PCB(nn.Module):
    """PCB model over a :class:`ResNetTrunk` (docs/methods/pcb.md).

    ``num_classes`` 0 builds no classifiers (extraction of a model trained elsewhere).
    """

    def __init__(self, backbone: ResNetTrunk, num_classes: int, parts: int = 6,
                 reduced_dim: int = 256, dropout: float = 0.5, rpp: bool = False):
        super().__init__()
        self.backbone = backbone
        self.parts, self.reduced_dim = int(parts), int(reduced_dim)
        channels = backbone.out_channels
        self.dropout = nn.Dropout(p=dropout)
        # one 1×1 reduction shared by the p parts (docs/methods/pcb.md)
        self.local_conv = nn.Conv2d(channels, reduced_dim, 1, bias=False)
        self.local_bn = nn.BatchNorm2d(reduced_dim)
        self.classifiers = nn.ModuleList(Linear(reduced_dim, num_classes)   # fixed_order.py
                                         for _ in range(parts if num_classes > 0 else 0))
        self.rpp = RefinedPartPooling(channels, parts) if rpp else None
        nn.init.kaiming_normal_(self.local_conv.weight, mode="fan_out")
        nn.init.ones_(self.local_bn.weight)
        nn.init.zeros_(self.local_bn.bias)
        for fc in self.classifiers:
            nn.init.normal_(fc.weight, std=0.001)
            nn.init.zeros_(fc.bias)

    @property
    def num_classes(self) -> int:
        return self.classifiers[0].out_features if len(self.classifiers) else 0

    def enable_rpp(self) -> None:
        """Add the RPP part classifier (induced training step 2, docs/methods/pcb.md)."""
        if self.rpp is None:
            ref = next(self.parameters())
            self.rpp = RefinedPartPooling(self.backbone.out_channels, self.parts).to(ref.device)

    def pool_parts(self, t: torch.Tensor) -> torch.Tensor:
        """conv5_x [N, C, H, W] → g [N, p, C]: stripe means (or RPP's soft pooling)."""
        if self.rpp is not None:
            return self.rpp(t)
        # stripe i covers rows i·H/p … (i+1)·H/p − 1; = avg_pool2d(T, (H/p, W)) when divisible
        return F.adaptive_avg_pool2d(t, (self.parts, 1)).squeeze(-1).transpose(1, 2)

    def forward(self, x: torch.Tensor, taps=()) -> PCBOutput:
        t, tapped = self.backbone(x, taps)
        g = self.pool_parts(t)                                        # [N, p, C]
        z = self.dropout(g).transpose(1, 2).unsqueeze(-1)             # [N, C, p, 1]
        h = F.relu(self.local_bn(self.local_conv(z)))                 # [N, r, p, 1]
        h = h.squeeze(-1).transpose(1, 2)                             # [N, p, r]
        logits = [fc(h[:, i]) for i, fc in enumerate(self.classifiers)]
        return PCBOutput(g=g, h=h, logits=logits, taps=tapped, t=t,
                         refined=self.rpp is not None)

    def new_parameters(self) -> list[nn.Parameter]:
        """Parameters trained at the full rate (1×1 conv, its BN, classifiers, RPP)."""
        mods = [self.local_conv, self.local_bn, self.classifiers] + \
            ([self.rpp] if self.rpp is not None else [])
        return [p for m in mods for p in m.parameters()]


def pcb_features(out: PCBOutput) -> dict[str, torch.Tensor]:
    """Store features (docs/methods/pcb.md), raw and part-major: ``pcb_g`` [N, p·C5], ``pcb_h``
    [N, p·r] — named ``rpp_g``/``rpp_h`` when the parts are RPP-refined (docs/methods/pcb.md)."""
    prefix = "rpp" if out.refined else "pcb"
    return {f"{prefix}_g": out.g.flatten(1), f"{prefix}_h": out.h.flatten(1)}


__all__ = ["PCB", "PCBOutput", "RefinedPartPooling", "pcb_features"]
