"""Image transforms for training and extraction (torchvision.transforms.v2).

Presets: ``pcb`` (pcb.md §2: resize 384×128, horizontal flip only), ``bot`` (dmgnet.md §4 / BoT:
resize 256×128, flip p 0.5, zero-pad round(10·H/256) px, random crop, random erasing p 0.5 with
area 0.02–0.4, aspect ≥ 0.3 and the ImageNet mean as fill), ``plain`` (resize only). All end
with ImageNet mean/std normalisation; test transforms resize and normalise.
"""
from __future__ import annotations

import torch
from torchvision.transforms import v2

from reidcli.errors import UsageError

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
PRESETS = ("pcb", "bot", "plain")
DEFAULT_SIZE = {"pcb": (384, 128), "bot": (256, 128), "plain": (256, 128)}


def parse_size(text: str | tuple[int, int]) -> tuple[int, int]:
    """``"384x128"`` → (384, 128) = (height, width); UsageError otherwise."""
    if isinstance(text, tuple):
        return int(text[0]), int(text[1])
    try:
        h, w = (int(v) for v in str(text).lower().split("x"))
    except ValueError:
        raise UsageError(f"size {text!r} is not HxW", "write e.g. 384x128") from None
    if h < 1 or w < 1:
        raise UsageError(f"size {text!r} must be positive", "write e.g. 384x128")
    return h, w


def _to_tensor() -> list:
    return [v2.ToImage(), v2.ToDtype(torch.float32, scale=True)]


def train_transform(preset: str = "bot", size: str | tuple[int, int] | None = None):
    """The training transform of a preset (PIL image → normalised float tensor [3, H, W])."""
    if preset not in PRESETS:
        raise UsageError(f"transform preset {preset!r} is unknown",
                         f"use one of {', '.join(PRESETS)}")
    h, w = parse_size(size or DEFAULT_SIZE[preset])
    steps = [v2.Resize((h, w), interpolation=v2.InterpolationMode.BILINEAR, antialias=True)]
    if preset in ("pcb", "bot"):
        steps.append(v2.RandomHorizontalFlip(0.5))
    if preset == "bot":
        pad = round(10 * h / 256)
        steps += [v2.Pad(pad, fill=0), v2.RandomCrop((h, w))]
    steps += _to_tensor() + [v2.Normalize(IMAGENET_MEAN, IMAGENET_STD)]
    if preset == "bot":
        # erase with the ImageNet mean, which is 0 after normalisation
        steps.append(v2.RandomErasing(p=0.5, scale=(0.02, 0.4), ratio=(0.3, 1 / 0.3), value=0))
    return v2.Compose(steps)


def eval_transform(size: str | tuple[int, int] = (256, 128)):
    """Test transform: resize (bilinear) and ImageNet normalisation."""
    h, w = parse_size(size)
    return v2.Compose([v2.Resize((h, w), interpolation=v2.InterpolationMode.BILINEAR,
                                 antialias=True), *_to_tensor(),
                       v2.Normalize(IMAGENET_MEAN, IMAGENET_STD)])
