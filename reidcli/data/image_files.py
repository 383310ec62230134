"""Decoding one dataset image, with a one-line error naming a missing, empty or damaged file
(no torch import, so ``reid data check --open-images`` stays light)."""
from __future__ import annotations

import os

from PIL import Image

from reidcli.errors import DatasetError


class ImageReadError(DatasetError):
    """An image of a record table is missing or cannot be decoded.

    Also constructible as ``ImageReadError(message=text)``: that is how torch re-raises a
    worker's exception in the main process (with the worker traceback as text); the original
    one-line message is recovered from it, so a failing DataLoader worker still gives the
    user one clear line naming the file.
    """

    def __init__(self, what: str | None = None, todo: str | None = None, *,
                 message: str | None = None):
        if message is not None and what is None:
            what, todo = _original_message(message), None
        super().__init__(what or "an image cannot be read", todo)


def _original_message(text: str) -> str:
    marker = f"{ImageReadError.__name__}: "
    for line in reversed(text.strip().splitlines()):
        if marker in line:
            return line.split(marker, 1)[1].strip()
    return text.strip().splitlines()[-1] if text.strip() else text


def load_rgb(path: str | os.PathLike) -> Image.Image:
    """Decode one image as RGB (fully loaded, file closed); :class:`ImageReadError` naming
    the file when it is missing, empty (0 bytes) or not a readable image."""
    try:
        with Image.open(path) as img:
            return img.convert("RGB")
    except FileNotFoundError:
        raise ImageReadError(f"image {path} does not exist",
                             "restore it, or check the whole copy with "
                             "`reid data check --open-images`") from None
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as exc:
        # UnidentifiedImageError and truncated files are OSErrors; some broken files raise
        # SyntaxError/ValueError inside the PIL plugins
        try:
            empty = os.path.getsize(path) == 0
        except OSError:
            empty = False
        what = "is empty (0 bytes)" if empty else \
            f"cannot be decoded ({exc.__class__.__name__}: {exc})"
        raise ImageReadError(f"image {path} {what}",
                             "replace it from the dataset release (`reid data check "
                             "--open-images` decodes every image of a trial)") from None


__all__ = ["ImageReadError", "load_rgb"]
