"""The names of the trunks :func:`reidcli.models.backbones.build_backbone` builds, without
importing torch (option validation and ``--help`` read them)."""
from __future__ import annotations

#: ResNets built by torchvision (their ImageNet weights come from its weights API)
TORCHVISION_BACKBONES = ("resnet50", "resnet18")
#: OSNet variants (no last stride: conv5_x is at 1/16 of the input)
OSNET_BACKBONES = ("osnet_x1_0", "osnet_x0_25", "osnet_ibn_x1_0")
#: every trunk, in the order ``--help`` lists them
BACKBONES = ("resnet50", "resnet18", "tiny", "resnet50_ibn_a", *OSNET_BACKBONES)

#: paper name of each tap → torchvision module of the trunk (docs/methods/pcb.md)
TAP_MODULES = {"conv2_x": "layer1", "conv3_x": "layer2", "conv4_x": "layer3",
               "conv5_x": "layer4"}
TAPS = tuple(TAP_MODULES)

__all__ = ["BACKBONES", "TORCHVISION_BACKBONES", "OSNET_BACKBONES", "TAP_MODULES", "TAPS"]
