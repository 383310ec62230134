"""ResNet trunks with taps on conv2_x … conv5_x and a last-stride option (docs/methods/pcb.md).

A :class:`ResNetTrunk` keeps torchvision's module names (``conv1, bn1, relu, maxpool,
layer1 … layer4``), so a torchvision or torchreid state dict loads into it key for key; the
global pooling and ``fc`` are dropped. ``last_stride=1`` sets the stride of every
convolution of ``layer4[0]`` to 1 (docs/methods/pcb.md, docs/methods/bot.md), so conv5_x keeps the spatial
size of conv4_x.

Shapes at input [N, 3, 384, 128] (ResNet-50, last stride 1)::

    conv2_x = layer1  [N,  256, 96, 32]     conv4_x = layer3  [N, 1024, 24, 8]
    conv3_x = layer2  [N,  512, 48, 16]     conv5_x = layer4  [N, 2048, 24, 8]

``tiny`` is a four-stage toy trunk with the same names, strides and taps (16/32/64/128
channels) for tests and CPU demos; ``resnet18`` is torchvision's BasicBlock ResNet.

``resnet50_ibn_a`` (IBN-Net paper, Pan et al., ECCV 2018; :mod:`reidcli.models.resnet_ibn`)
is a :class:`ResNetTrunk` with fast-reid's / IBN-Net's module names. ``osnet_x1_0``,
``osnet_x0_25`` and ``osnet_ibn_x1_0`` (OSNet paper, Zhou et al., ICCV 2019) are
:class:`reidcli.models.osnet.OSNetTrunk` s with torchreid's module names and the same
interface (``name``, ``tap_channels``, ``tap_modules``, ``out_channels``, ``forward``);
OSNet has no last stride (its conv5_x is at 1/16 already), so ``last_stride=2`` is refused.
"""
from __future__ import annotations

from typing import Iterable

import torch
from torch import nn

from reidcli.errors import ParameterError
from reidcli.models.backbone_names import (BACKBONES, OSNET_BACKBONES, TAP_MODULES, TAPS,
                                           TORCHVISION_BACKBONES)

#: channels of conv2_x … conv5_x per backbone
TAP_CHANNELS = {"resnet50": (256, 512, 1024, 2048), "resnet18": (64, 128, 256, 512),
                "tiny": (16, 32, 64, 128), "resnet50_ibn_a": (256, 512, 1024, 2048),
                "osnet_x1_0": (256, 384, 512, 512), "osnet_x0_25": (64, 96, 128, 128),
                "osnet_ibn_x1_0": (256, 384, 512, 512)}


def _conv_bn_relu(cin: int, cout: int, stride: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout),
                         nn.ReLU(inplace=True))


class ResNetTrunk(nn.Module):
    """Stem + layer1..layer4 of a ResNet; :meth:`forward` returns conv5_x and the taps."""

    def __init__(self, name: str, stem: dict[str, nn.Module], layers: list[nn.Module]):
        super().__init__()
        self.name = name
        self.conv1, self.bn1 = stem["conv1"], stem["bn1"]
        self.relu, self.maxpool = stem["relu"], stem["maxpool"]
        self.layer1, self.layer2, self.layer3, self.layer4 = layers
        self.tap_channels = dict(zip(TAPS, TAP_CHANNELS[name]))
        self.tap_modules = dict(TAP_MODULES)
        self.out_channels = TAP_CHANNELS[name][-1]

    def forward(self, x: torch.Tensor, taps: Iterable[str] = ()
                ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """``x`` [N, 3, H, W] → (conv5_x [N, C5, H/16, W/16] at last stride 1,
        {tap: [N, C, h, w]} for the requested ``taps``)."""
        wanted = set(taps)
        out: dict[str, torch.Tensor] = {}
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        for tap in TAPS:
            x = getattr(self, TAP_MODULES[tap])(x)
            if tap in wanted:
                out[tap] = x
        return x, out


def _set_last_stride(layer4: nn.Module, stride: int) -> None:
    """Stride of every convolution of the first block of ``layer4`` (docs/methods/pcb.md)."""
    first = layer4[0]
    for module in first.modules():
        if isinstance(module, nn.Conv2d) and module.stride != (1, 1):
            module.stride = (stride, stride)


def build_backbone(name: str = "resnet50", last_stride: int = 1) -> nn.Module:
    """A randomly initialised trunk (each reference implementation's own init: torchvision's
    for the ResNets, IBN-Net's for resnet50_ibn_a, torchreid's for OSNet)."""
    if name not in BACKBONES:
        raise ParameterError("model", "backbone", name, "is unknown",
                             f"use one of {', '.join(BACKBONES)}")
    if last_stride not in (1, 2):
        raise ParameterError("model", "last_stride", last_stride, "must be 1 or 2",
                             "use 1 (the papers') or 2 (torchvision's)")
    if name in OSNET_BACKBONES:
        if last_stride != 1:
            raise ParameterError("model", "last_stride", last_stride,
                                 f"has no meaning for {name} (OSNet's conv4/conv5 have no "
                                 "stride; its conv5_x is at 1/16 of the input already)",
                                 "use 1")
        from reidcli.models.osnet import OSNetTrunk

        return OSNetTrunk(name)
    if name == "resnet50_ibn_a":
        from reidcli.models.resnet_ibn import resnet50_ibn_a_parts

        stem, layers = resnet50_ibn_a_parts(last_stride)
        return ResNetTrunk(name, stem, layers)
    if name == "tiny":
        c2, c3, c4, c5 = TAP_CHANNELS["tiny"]
        stem = {"conv1": nn.Conv2d(3, 8, 3, 2, 1, bias=False), "bn1": nn.BatchNorm2d(8),
                "relu": nn.ReLU(inplace=True), "maxpool": nn.MaxPool2d(3, 2, 1)}
        layers = [nn.Sequential(_conv_bn_relu(8, c2, 1)), nn.Sequential(_conv_bn_relu(c2, c3, 2)),
                  nn.Sequential(_conv_bn_relu(c3, c4, 2)),
                  nn.Sequential(_conv_bn_relu(c4, c5, last_stride))]
        return ResNetTrunk(name, stem, layers)
    import torchvision

    net = getattr(torchvision.models, name)(weights=None)
    if last_stride != 2:
        _set_last_stride(net.layer4, last_stride)
    stem = {"conv1": net.conv1, "bn1": net.bn1, "relu": net.relu, "maxpool": net.maxpool}
    return ResNetTrunk(name, stem, [net.layer1, net.layer2, net.layer3, net.layer4])


__all__ = ["ResNetTrunk", "build_backbone", "BACKBONES", "TAPS", "TAP_MODULES", "TAP_CHANNELS",
           "TORCHVISION_BACKBONES", "OSNET_BACKBONES"]
