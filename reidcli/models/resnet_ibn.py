"""ResNet-50-IBN-a: ResNet-50 with Instance-Batch Normalization in conv2_x … conv4_x.

IBN-Net paper (Pan et al., "Two at Once: Enhancing Learning and Generalization Capacities via
IBN-Net", ECCV 2018), IBN-a: in every bottleneck of conv2_x, conv3_x and conv4_x the
normalisation after the first 1×1 convolution normalises half of the channels with
InstanceNorm (affine) and the other half with BatchNorm; conv5_x and the stem stay BatchNorm
(IN removes appearance/style variation in shallow layers; deep layers keep BN so the
features stay discriminative).

Module names are the IBN-Net / fast-reid ones (``layer1.0.bn1.IN.weight``,
``layer1.0.bn1.BN.running_mean``, ``layer4.0.downsample.0.weight`` …), so a fast-reid
``backbone.*`` or IBN-Net state dict loads key for key once its prefix is stripped
(:func:`reidcli.models.weights.load_trunk_state`). The parameter count equals ResNet-50's
trunk (23,508,032): the affine IN of C/2 channels has as many parameters as the BN it
replaces; only the running-statistics buffers of those C/2 channels disappear.

Shapes at input [N, 3, 256, 128], last stride 1::

    conv2_x = layer1 [N, 256, 64, 32]    conv4_x = layer3 [N, 1024, 16, 8]
    conv3_x = layer2 [N, 512, 32, 16]    conv5_x = layer4 [N, 2048, 16, 8]
"""
from __future__ import annotations

import math

import torch
from torch import nn

#: bottlenecks per stage of ResNet-50 (conv2_x … conv5_x)
RESNET50_BLOCKS = (3, 4, 6, 3)
#: stages whose bottlenecks use IBN (IBN-a: conv2_x, conv3_x, conv4_x; not conv5_x)
IBN_A_STAGES = (True, True, True, False)


class IBN(nn.Module):
    """Instance-Batch Normalization of a [N, C, H, W] map (IBN-Net paper, IBN-a).

    The first ``half = int(C · ratio)`` channels go through ``IN`` (InstanceNorm2d, affine),
    the remaining ``C − half`` through ``BN`` (BatchNorm2d); the halves are concatenated
    back in order: [N, C, H, W] → [N, C, H, W].
    """

    def __init__(self, planes: int, ratio: float = 0.5):
        super().__init__()
        self.half = int(planes * ratio)
        self.IN = nn.InstanceNorm2d(self.half, affine=True)
        self.BN = nn.BatchNorm2d(planes - self.half)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        first, second = torch.split(x, [self.half, x.shape[1] - self.half], dim=1)
        return torch.cat((self.IN(first.contiguous()), self.BN(second.contiguous())), dim=1)


class IBNBottleneck(nn.Module):
    """ResNet bottleneck 1×1 → 3×3 (stride here) → 1×1 ×4 with an optional IBN after the
    first 1×1 convolution: [N, C_in, H, W] → [N, 4·planes, H/stride, W/stride]."""

    expansion = 4

    def __init__(self, inplanes: int, planes: int, stride: int = 1, ibn: bool = False,
                 downsample: nn.Module | None = None):
        super().__init__()
        width = planes * self.expansion
        self.conv1 = nn.Conv2d(inplanes, planes, 1, bias=False)
        self.bn1 = IBN(planes) if ibn else nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, width, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shortcut = x if self.downsample is None else self.downsample(x)
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        return self.relu(y + shortcut)


def _stage(inplanes: int, planes: int, blocks: int, stride: int, ibn: bool) -> nn.Sequential:
    """``blocks`` bottlenecks; the first changes the width / stride and carries the 1×1
    projection shortcut ``downsample`` = (conv, BN)."""
    width = planes * IBNBottleneck.expansion
    downsample = None
    if stride != 1 or inplanes != width:
        downsample = nn.Sequential(nn.Conv2d(inplanes, width, 1, stride=stride, bias=False),
                                   nn.BatchNorm2d(width))
    layers = [IBNBottleneck(inplanes, planes, stride, ibn, downsample)]
    layers += [IBNBottleneck(width, planes, 1, ibn) for _ in range(1, blocks)]
    return nn.Sequential(*layers)


def _init_like_reference(module: nn.Module) -> None:
    """IBN-Net's / fast-reid's random init: conv weights N(0, 2 / (k·k·C_out)) (He et al.,
    fan-out), every BN and affine IN weight 1 and bias 0."""
    for m in module.modules():
        if isinstance(m, nn.Conv2d):
            fan_out = m.kernel_size[0] * m.kernel_size[1] * m.out_channels
            nn.init.normal_(m.weight, 0.0, math.sqrt(2.0 / fan_out))
        elif isinstance(m, (nn.BatchNorm2d, nn.InstanceNorm2d)) and m.weight is not None:
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)


def resnet50_ibn_a_parts(last_stride: int = 1) -> tuple[dict[str, nn.Module], list[nn.Module]]:
    """Randomly initialised stem {conv1, bn1, relu, maxpool} and stages [layer1 … layer4] of
    ResNet-50-IBN-a; ``last_stride`` is the stride of ``layer4`` (1: the re-id papers', 2:
    ImageNet's). :func:`reidcli.models.backbones.build_backbone` wraps them in a trunk."""
    stem = {"conv1": nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False),
            "bn1": nn.BatchNorm2d(64), "relu": nn.ReLU(inplace=True),
            "maxpool": nn.MaxPool2d(3, stride=2, padding=1)}
    layers, inplanes = [], 64
    for i, (blocks, ibn) in enumerate(zip(RESNET50_BLOCKS, IBN_A_STAGES)):
        planes = 64 * 2 ** i
        stride = 1 if i == 0 else (last_stride if i == 3 else 2)
        layers.append(_stage(inplanes, planes, blocks, stride, ibn))
        inplanes = planes * IBNBottleneck.expansion
    for part in (*stem.values(), *layers):
        _init_like_reference(part)
    return stem, layers


def fastreid_maxpool() -> nn.MaxPool2d:
    """fast-reid's stem pooling (3×3, stride 2, no padding, ceil mode). It has no
    parameters and gives the same output size as the IBN-Net / torchvision pooling (3×3,
    stride 2, padding 1) on even sizes, but its windows start one pixel later; assign it to
    a trunk's ``maxpool`` to reproduce features of a model trained in fast-reid."""
    return nn.MaxPool2d(3, stride=2, ceil_mode=True)


__all__ = ["IBN", "IBNBottleneck", "resnet50_ibn_a_parts", "fastreid_maxpool",
           "RESNET50_BLOCKS", "IBN_A_STAGES"]
