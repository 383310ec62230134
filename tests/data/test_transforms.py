"""Training/eval transforms (reidcli.data.transforms)."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from reidcli.data.transforms import (IMAGENET_MEAN, IMAGENET_STD, eval_transform, parse_size,
                                     train_transform)
from reidcli.errors import UsageError

MEAN = torch.tensor(IMAGENET_MEAN).view(3, 1, 1)
STD = torch.tensor(IMAGENET_STD).view(3, 1, 1)


def _gradient_image(w: int = 64, h: int = 128) -> Image.Image:
    """Left-right and top-bottom asymmetric RGB image."""
    x = np.linspace(0, 255, w, dtype=np.float32)[None, :, None]
    y = np.linspace(0, 255, h, dtype=np.float32)[:, None, None]
    arr = np.concatenate([np.broadcast_to(x, (h, w, 1)), np.broadcast_to(y, (h, w, 1)),
                          np.full((h, w, 1), 40, np.float32)], axis=2)
    return Image.fromarray(arr.astype(np.uint8), "RGB")


def _near(out: torch.Tensor, colour: torch.Tensor) -> torch.Tensor:
    """[H, W] mask of the pixels of ``out`` equal to ``colour`` (3×1×1) within 1e-4."""
    return (out - colour).abs().amax(0) < 1e-4


def _run(transform, image, seed):
    torch.manual_seed(seed)
    return transform(image)


@pytest.mark.parametrize("preset,size", [("pcb", (384, 128)), ("bot", (256, 128)),
                                         ("plain", (256, 128))])
def test_train_presets_shape_dtype_and_determinism(preset, size):
    image = _gradient_image()
    transform = train_transform(preset)
    out = _run(transform, image, 0)
    assert type(out) is torch.Tensor and out.dtype == torch.float32 and out.shape == (3, *size)
    assert torch.equal(out, _run(transform, image, 0))
    assert torch.equal(out, _run(train_transform(preset), image, 0))   # fresh object too
    other = train_transform(preset, "64x32")
    assert _run(other, image, 0).shape == (3, 64, 32)
    if preset == "bot":   # crop offset / erasing / flip: some seed must change the output
        assert any(not torch.equal(out, _run(transform, image, s)) for s in range(1, 6))


def test_eval_transform_normalises_with_imagenet_stats():
    colour = (200, 30, 120)
    image = Image.new("RGB", (50, 100), colour)
    out = eval_transform("128x64")(image)
    expected = (torch.tensor(colour, dtype=torch.float32).view(3, 1, 1) / 255 - MEAN) / STD
    assert out.shape == (3, 128, 64)
    assert torch.allclose(out, expected.expand(3, 128, 64), atol=1e-5)
    # no randomness at test time
    image = _gradient_image()
    assert torch.equal(_run(eval_transform(), image, 0), _run(eval_transform(), image, 1))


def test_pcb_is_resize_plus_flip_only():
    image = _gradient_image()
    reference = eval_transform((384, 128))(image)
    flipped = reference.flip(-1)
    seen = set()
    for seed in range(12):
        out = _run(train_transform("pcb"), image, seed)
        if torch.equal(out, reference):
            seen.add("same")
        elif torch.equal(out, flipped):
            seen.add("flipped")
        else:
            pytest.fail("pcb training transform does more than resize + flip")
    assert seen == {"same", "flipped"}
    assert torch.equal(_run(train_transform("plain", (384, 128)), image, 3), reference)


def test_bot_padding_crop_and_erasing_with_mean_fill():
    white = Image.new("RGB", (64, 128), (255, 255, 255))
    white_norm = (1 - MEAN) / STD
    black_norm = (0 - MEAN) / STD
    shifted = 0
    for seed in range(8):
        out = _run(train_transform("bot", erasing=0.0), white, seed)
        black = _near(out, black_norm)                                  # zero padding
        assert _near(out, white_norm).logical_or(black).all()
        black_rows = int(black.all(1).sum())
        black_cols = int(black.all(0).sum())
        assert black_rows <= 10 and black_cols <= 10                   # pad 10 at 256x128
        shifted += bool(black.any())
    assert shifted >= 4
    for seed in range(5):
        out = _run(train_transform("bot", erasing=1.0, flip=0.0), white, seed)
        erased = (out == 0).all(0)                                      # ImageNet mean fill
        frac = erased.float().mean().item()
        assert 0.015 <= frac <= 0.41


def test_options_and_errors():
    names = lambda t: [type(s).__name__ for s in t.transforms]          # noqa: E731
    assert "ColorJitter" not in str(names(train_transform("bot")))
    jitter = train_transform("bot", color_jitter=True)
    assert "RandomApply" in names(jitter)
    assert "RandomErasing" in names(train_transform("pcb", erasing=0.5))  # DG-VAE recipe
    assert "RandomErasing" not in names(train_transform("pcb"))
    assert "RandomErasing" not in names(train_transform("bot", erasing=0))
    with pytest.raises(UsageError, match="preset 'fancy'"):
        train_transform("fancy")
    with pytest.raises(UsageError, match="outside"):
        train_transform("bot", erasing=1.5)


def test_parse_size():
    assert parse_size("384x128") == (384, 128)
    assert parse_size(" 256X128 ") == (256, 128)
    assert parse_size((64, 32)) == (64, 32) and parse_size([64, 32]) == (64, 32)
    for bad in ("384by128", "384x", "x128", "0x128", "12.5x4", (1, 2, 3), "-3x4"):
        with pytest.raises(UsageError, match="384x128"):
            parse_size(bad)
