"""OSNet — the Omni-Scale Network (Zhou et al., "Omni-Scale Feature Learning for Person
Re-Identification", ICCV 2019), as a trunk with taps, plus its 512-d ``fc`` head.

Layout (OSNet paper, Table 1), at input [N, 3, 256, 128], width ×1.0 (×0.25: channels
16/64/96/128 instead of 64/256/384/512)::

    conv1   7×7/2 conv + BN + ReLU, 3×3/2 max pool           [N,  64, 64, 32]
    conv2   2 OS blocks                         → conv2_x   [N, 256, 64, 32]
            transition: 1×1 conv + BN + ReLU, 2×2/2 avg pool [N, 256, 32, 16]
    conv3   2 OS blocks                         → conv3_x   [N, 384, 32, 16]
            transition                                       [N, 384, 16,  8]
    conv4   2 OS blocks                         → conv4_x   [N, 512, 16,  8]
    conv5   1×1 conv + BN + ReLU                → conv5_x   [N, 512, 16,  8]
    (head)  global average pool, fc 512 + BN + ReLU          [N, 512]

conv4 and conv5 keep 1/16 of the input size: OSNet has no stride in its last stages, so
its conv5_x is what a ResNet gives with last stride 1 (``last_stride=2`` is refused by
:func:`reidcli.models.backbones.build_backbone`). The taps conv2_x / conv3_x are the
outputs of the stages' last OS block (Table 1's rows), before the transition.

Module names are torchreid's (``conv1.conv.weight``, ``conv2.0.conv2b.1.conv1.weight``,
``conv2.0.gate.fc1.bias``, ``conv2.2.0.conv.weight`` for the transition,
``conv5.bn.running_var``; the head's ``fc.0.weight``, ``fc.1.running_mean``), so a
torchreid OSNet state dict loads key for key: everything but ``fc.*`` and ``classifier.*``
into :class:`OSNetTrunk`, ``fc.*`` into :class:`OSNetHead`.

``osnet_ibn_x1_0`` adds instance normalisation as torchreid does (after the IBN-Net paper,
Pan et al., ECCV 2018): the stem's norm is an affine InstanceNorm, and every OS block of
conv2 ends with an affine InstanceNorm of its output (``conv2.0.IN.weight``) before the ReLU.
"""
from __future__ import annotations

from typing import Iterable

import torch
import torch.nn.functional as F
from torch import nn

from reidcli.errors import ParameterError
from reidcli.models.backbone_names import TAPS
from reidcli.models.fixed_order import BatchNorm1d, Linear

#: channels of conv1, conv2, conv3, conv4 (= conv5) per variant (OSNet paper, Table 1; the
#: ×0.25 variant scales every width by 1/4)
OSNET_CHANNELS = {"osnet_x1_0": (64, 256, 384, 512), "osnet_x0_25": (16, 64, 96, 128),
                  "osnet_ibn_x1_0": (64, 256, 384, 512)}
#: variants with instance normalisation in the stem and conv2
OSNET_IBN = frozenset({"osnet_ibn_x1_0"})
#: OS blocks per stage conv2, conv3, conv4 (Table 1)
OSNET_BLOCKS = (2, 2, 2)
#: module whose output each tap is (names inside :class:`OSNetTrunk`)
OSNET_TAP_MODULES = {"conv2_x": "conv2.1", "conv3_x": "conv3.1", "conv4_x": "conv4",
                     "conv5_x": "conv5"}


class ConvBNReLU(nn.Module):
    """``conv`` (no bias) → ``bn`` (BatchNorm2d, or affine InstanceNorm2d) → ReLU:
    [N, C_in, H, W] → [N, C_out, H/stride, W/stride]."""

    def __init__(self, cin: int, cout: int, kernel: int = 1, stride: int = 1,
                 padding: int = 0, instance_norm: bool = False):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, kernel, stride=stride, padding=padding, bias=False)
        self.bn = nn.InstanceNorm2d(cout, affine=True) if instance_norm else nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(self.bn(self.conv(x)))


class ConvBN(nn.Module):
    """1×1 ``conv`` (no bias) → ``bn``, no activation: [N, C_in, H, W] → [N, C_out, H, W]."""

    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 1, bias=False)
        self.bn = nn.BatchNorm2d(cout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(self.conv(x))


class LiteConv3x3(nn.Module):
    """The OSNet paper's Lite 3×3: pointwise ``conv1`` 1×1 → depthwise ``conv2`` 3×3 →
    ``bn`` → ReLU; [N, C_in, H, W] → [N, C_out, H, W]."""

    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 1, bias=False)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, groups=cout, bias=False)
        self.bn = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(self.bn(self.conv2(self.conv1(x))))


class AggregationGate(nn.Module):
    """Unified aggregation gate G (OSNet paper Eq. 3): channel weights σ(fc2(ReLU(fc1(GAP(x)))))
    with a C/16 hidden layer, returned multiplied into x: [N, C, H, W] → [N, C, H, W].
    One gate (shared parameters) serves all streams of a block."""

    def __init__(self, channels: int, reduction: int = 16):
        super().__init__()
        hidden = channels // reduction
        self.fc1 = nn.Conv2d(channels, hidden, 1, bias=True)
        self.fc2 = nn.Conv2d(hidden, channels, 1, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        g = F.adaptive_avg_pool2d(x, 1)
        return x * torch.sigmoid(self.fc2(F.relu(self.fc1(g))))


class OSBlock(nn.Module):
    """Omni-scale residual block (OSNet paper Eq. 1–3): y = ReLU(x' + conv3(Σ_t G(x^t) ⊙ x^t)),
    x^t = t stacked Lite 3×3 on conv1(x) (t = 1…4, receptive fields 3, 5, 7, 9), x' = x or
    its 1×1 projection ``downsample`` when the width changes. ``instance_norm`` adds the
    affine InstanceNorm ``IN`` before the final ReLU (osnet_ibn).
    [N, C_in, H, W] → [N, C_out, H, W]; inner width C_out / 4."""

    def __init__(self, cin: int, cout: int, instance_norm: bool = False, reduction: int = 4):
        super().__init__()
        mid = cout // reduction
        self.conv1 = ConvBNReLU(cin, mid)
        self.conv2a = LiteConv3x3(mid, mid)
        self.conv2b = nn.Sequential(*(LiteConv3x3(mid, mid) for _ in range(2)))
        self.conv2c = nn.Sequential(*(LiteConv3x3(mid, mid) for _ in range(3)))
        self.conv2d = nn.Sequential(*(LiteConv3x3(mid, mid) for _ in range(4)))
        self.gate = AggregationGate(mid)
        self.conv3 = ConvBN(mid, cout)
        self.downsample = ConvBN(cin, cout) if cin != cout else None
        self.IN = nn.InstanceNorm2d(cout, affine=True) if instance_norm else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x1 = self.conv1(x)
        fused = sum(self.gate(stream(x1))
                    for stream in (self.conv2a, self.conv2b, self.conv2c, self.conv2d))
        y = self.conv3(fused) + (x if self.downsample is None else self.downsample(x))
        if self.IN is not None:
            y = self.IN(y)
        return F.relu(y)


def _stage(cin: int, cout: int, blocks: int, transition: bool,
           instance_norm: bool = False) -> nn.Sequential:
    """``blocks`` OS blocks, then (``transition``) 1×1 conv + BN + ReLU and 2×2/2 average
    pooling (Table 1's transition layer): [N, C_in, H, W] → [N, C_out, H/2 or H, …]."""
    layers: list[nn.Module] = [OSBlock(cin if i == 0 else cout, cout, instance_norm)
                               for i in range(blocks)]
    if transition:
        layers.append(nn.Sequential(ConvBNReLU(cout, cout), nn.AvgPool2d(2, stride=2)))
    return nn.Sequential(*layers)


def _init_like_reference(module: nn.Module) -> None:
    """torchreid's OSNet init: conv weights He-normal (fan-out, ReLU gain), conv and
    linear biases 0, BN weights 1 and biases 0, linear weights N(0, 0.01²); the affine
    InstanceNorms keep torch's 1 / 0."""
    for m in module.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, (nn.BatchNorm2d, nn.BatchNorm1d)):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, 0.0, 0.01)
            if m.bias is not None:
                nn.init.zeros_(m.bias)


class OSNetTrunk(nn.Module):
    """The convolutional part of OSNet (``conv1`` … ``conv5``); same interface as
    :class:`reidcli.models.backbones.ResNetTrunk`: ``name``, ``tap_channels``,
    ``tap_modules``, ``out_channels`` and :meth:`forward`."""

    def __init__(self, name: str = "osnet_x1_0"):
        super().__init__()
        if name not in OSNET_CHANNELS:
            raise ParameterError("model", "backbone", name, "is not an OSNet variant",
                                 f"use one of {', '.join(OSNET_CHANNELS)}")
        c1, c2, c3, c4 = OSNET_CHANNELS[name]
        inorm = name in OSNET_IBN
        self.name = name
        self.conv1 = ConvBNReLU(3, c1, 7, stride=2, padding=3, instance_norm=inorm)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        self.conv2 = _stage(c1, c2, OSNET_BLOCKS[0], transition=True, instance_norm=inorm)
        self.conv3 = _stage(c2, c3, OSNET_BLOCKS[1], transition=True)
        self.conv4 = _stage(c3, c4, OSNET_BLOCKS[2], transition=False)
        self.conv5 = ConvBNReLU(c4, c4)
        self.tap_channels = dict(zip(TAPS, (c2, c3, c4, c4)))
        self.tap_modules = dict(OSNET_TAP_MODULES)
        self.out_channels = c4
        _init_like_reference(self)

    def forward(self, x: torch.Tensor, taps: Iterable[str] = ()
                ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """``x`` [N, 3, H, W] → (conv5_x [N, C5, H/16, W/16], {tap: map} for the requested
        ``taps``: conv2_x [N, C2, H/4, W/4], conv3_x [N, C3, H/8, W/8], conv4_x and
        conv5_x [N, C5, H/16, W/16])."""
        wanted = set(taps)
        out: dict[str, torch.Tensor] = {}
        x = self.maxpool(self.conv1(x))
        for tap, stage in (("conv2_x", self.conv2), ("conv3_x", self.conv3)):
            *blocks, transition = stage
            for block in blocks:
                x = block(x)
            if tap in wanted:
                out[tap] = x
            x = transition(x)
        x = self.conv4(x)
        if "conv4_x" in wanted:
            out["conv4_x"] = x
        x = self.conv5(x)
        if "conv5_x" in wanted:
            out["conv5_x"] = x
        return x, out


class OSNetHead(nn.Module):
    """torchreid's OSNet test feature: global average pooling of conv5_x, then ``fc`` =
    Linear(C5, 512) + BatchNorm1d + ReLU (torch's modules, state dict unchanged, computed in a
    thread-count independent order: :mod:`reidcli.models.fixed_order`); [N, C5, h, w] →
    [N, 512]."""

    def __init__(self, in_channels: int = 512, feature_dim: int = 512):
        super().__init__()
        self.fc = nn.Sequential(Linear(in_channels, feature_dim), BatchNorm1d(feature_dim),
                                nn.ReLU(inplace=True))
        self.feature_dim = feature_dim
        _init_like_reference(self)

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        return self.fc(F.adaptive_avg_pool2d(t, 1).flatten(1))


__all__ = ["OSNetTrunk", "OSNetHead", "OSBlock", "LiteConv3x3", "AggregationGate",
           "ConvBNReLU", "ConvBN", "OSNET_CHANNELS", "OSNET_IBN", "OSNET_BLOCKS",
           "OSNET_TAP_MODULES"]
