"""Image transforms for training and extraction (``torchvision.transforms.v2``).

Every transform takes a PIL RGB image (what :class:`~reidcli.data.image_dataset.
ImageRecordDataset` decodes) and returns a plain float32 tensor ``[3, H, W]`` normalised with
the ImageNet mean/std. Sizes are ``(height, width)``; resizing ignores the aspect ratio
(bilinear, as PCB's ``RectScale`` and BoT do).

Training presets (:func:`train_transform`):

``pcb``   (docs/methods/pcb.md, default 384×128) resize → horizontal flip p 0.5 → to float →
          normalise. No crop, no random erasing.
``bot``   (docs/methods/bot.md, BoT strong baseline, default 256×128) resize → horizontal flip p 0.5
          → zero-pad ``round(10·H/256)`` px (10 at 256×128) → random crop back to H×W →
          [colour jitter] → to float → normalise → random erasing p 0.5 (area 0.02–0.4,
          aspect 0.3–1/0.3, fill = the ImageNet mean, i.e. 0 after normalisation).
``plain`` (default 256×128) resize → to float → normalise: no augmentation at all (useful for
          debugging a training loop; identical to :func:`eval_transform`).

Keyword overrides cover the other recipes: DG-VAE (DG-VAE paper §4.2) is
``train_transform("pcb", erasing=0.5)`` (384×128, flip, normalise, erasing with mean fill);
DMG-Net's ``--color-jitter on`` / ``--random-erasing P`` are ``color_jitter=True`` /
``erasing=P`` on ``bot``.

Randomness comes from torch's global generator only, so ``torch.manual_seed(s)`` before a
call makes the output reproducible (in DataLoader workers torch seeds each worker from the
loader's generator).
"""
from __future__ import annotations

import re
from typing import Sequence

import torch
from torchvision.transforms import v2

from reidcli.errors import UsageError
from reidcli.naming import param

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
PRESETS = ("pcb", "bot", "plain")
#: default input size (H, W) of each preset
DEFAULT_SIZE = {"pcb": (384, 128), "bot": (256, 128), "plain": (256, 128)}
#: default random-erasing probability of each preset
DEFAULT_ERASING = {"pcb": 0.0, "bot": 0.5, "plain": 0.0}
#: colour jitter of DMG-Net paper §5 (fast-reid defaults): p, brightness, contrast, saturation, hue
COLOR_JITTER = (0.8, 0.15, 0.15, 0.1, 0.1)

_SIZE_RE = re.compile(r"^\s*(\d+)\s*[xX×]\s*(\d+)\s*$")


def parse_size(text: str | Sequence[int], parameter: str | None = None) -> tuple[int, int]:
    """``"384x128"`` → ``(384, 128)`` = (height, width).

    Also accepts a 2-sequence of ints. Raises :class:`UsageError` on anything else,
    including zero or negative sides.
    """
    if isinstance(text, (tuple, list)):
        if len(text) != 2:
            raise UsageError(f"size {text!r} is not HxW", "write e.g. 384x128")
        try:
            h, w = int(text[0]), int(text[1])
        except (TypeError, ValueError):
            raise UsageError(f"size {text!r} is not HxW", "write e.g. 384x128") from None
    else:
        match = _SIZE_RE.match(str(text))
        if not match:
            raise UsageError(f"size {text!r} is not HxW", "write e.g. 384x128 (height x width)")
        h, w = int(match.group(1)), int(match.group(2))
    if h < 1 or w < 1:
        named = f"{param(parameter)} {text!r}" if parameter else f"size {text!r}"
        raise UsageError(f"{named} must have positive height and width",
                         "write e.g. 384x128")
    return h, w


def _resize(size: tuple[int, int]) -> v2.Resize:
    return v2.Resize(size, interpolation=v2.InterpolationMode.BILINEAR, antialias=True)


def _to_normalised_tensor() -> list:
    return [v2.ToImage(), v2.ToDtype(torch.float32, scale=True),
            v2.Normalize(IMAGENET_MEAN, IMAGENET_STD)]


def train_transform(preset: str = "bot", size: str | Sequence[int] | None = None, *,
                    erasing: float | None = None, color_jitter: bool = False,
                    flip: float = 0.5) -> v2.Compose:
    """The training transform of ``preset`` (see the module docstring).

    ``size`` defaults to the preset's (:data:`DEFAULT_SIZE`); ``erasing`` overrides the
    random-erasing probability (:data:`DEFAULT_ERASING`); ``color_jitter`` adds DMG-Net's
    colour jitter after the crop (any preset); ``flip`` is the horizontal-flip probability
    of ``pcb``/``bot``.
    """
    if preset not in PRESETS:
        raise UsageError(f"transform preset {preset!r} is unknown",
                         f"use one of {', '.join(PRESETS)}")
    h, w = parse_size(size if size is not None else DEFAULT_SIZE[preset])
    p_erase = DEFAULT_ERASING[preset] if erasing is None else float(erasing)
    if not 0.0 <= p_erase <= 1.0:
        raise UsageError(f"random-erasing probability {erasing} is outside [0, 1]",
                         "give e.g. 0.5, or 0 to switch it off")
    steps: list = [_resize((h, w))]
    if preset in ("pcb", "bot") and flip > 0:
        steps.append(v2.RandomHorizontalFlip(flip))
    if preset == "bot":
        steps += [v2.Pad(round(10 * h / 256), fill=0), v2.RandomCrop((h, w))]
    if color_jitter:
        p, b, c, s, hue = COLOR_JITTER
        steps.append(v2.RandomApply([v2.ColorJitter(b, c, s, hue)], p=p))
    steps += _to_normalised_tensor()
    if p_erase > 0:
        # value 0 after normalisation = the ImageNet mean colour (BoT / Zhong et al.)
        steps.append(v2.RandomErasing(p=p_erase, scale=(0.02, 0.4), ratio=(0.3, 1 / 0.3),
                                      value=0))
    steps.append(v2.ToPureTensor())
    return v2.Compose(steps)


def eval_transform(size: str | Sequence[int] = (256, 128)) -> v2.Compose:
    """Test/extraction transform: resize to ``size`` (bilinear) and ImageNet-normalise
    (no flip, no crop). PCB extraction uses ``eval_transform("384x128")``."""
    return v2.Compose([_resize(parse_size(size)), *_to_normalised_tensor(), v2.ToPureTensor()])
