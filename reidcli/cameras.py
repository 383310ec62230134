"""Camera lists given by the user: one parser for every parameter that names cameras
(``train_cams``, ``query_cams``, a synthetic domain's ``ir_cameras``, ...)."""
from __future__ import annotations

from typing import Any

import numpy as np

from reidcli.errors import ParameterError


def parse_cameras(value: Any, parameter: str, *, owner: str = "camera selection",
                  first: int = 0, repeats: bool = True) -> list[int] | None:
    """Sorted camera numbers from ``"0,6,7"``, ``"0-4"``, a list, or one number; None for
    None or ``""`` (no selection).

    ``first`` is the lowest valid number: 0 for store ``camid`` values (file camera c1 → 0),
    1 for file camera numbers (then a ``c`` prefix is accepted: ``"c3,c6"``). A camera given
    twice counts once unless ``repeats=False`` makes that an error. A list must name at least
    one camera.

    :class:`~reidcli.errors.ParameterError` naming ``parameter`` (and ``owner``) otherwise.
    """
    kind = "0-based camera ids" if first == 0 else f"{first}-based camera numbers"

    def fail(requirement: str, todo: str | None = None) -> ParameterError:
        example = ",".join(str(first + c) for c in (0, 2, 3))
        return ParameterError(owner, parameter, value, requirement,
                              todo or f"give {kind} separated by commas, e.g. {example}")

    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, str):
        items: list[Any] = []
        for part in value.replace(" ", "").split(","):
            lo, sep, hi = part.partition("-")
            if sep and lo.isdigit() and hi.isdigit():
                items.extend(range(int(lo), int(hi) + 1))
            elif part:
                items.append(part)
    elif isinstance(value, (list, tuple, set, frozenset, range, np.ndarray)):
        items = list(value)
    else:
        items = [value]
    cams = [_camera_number(item, first) for item in items]
    if any(c is None for c in cams):
        bad = next(i for i, c in zip(items, cams) if c is None)
        raise fail(f"is not a list of camera ids ({bad!r} is not a whole number)")
    if not cams:
        raise fail("names no camera")
    if min(cams) < first:
        raise fail(f"holds camera {min(cams)}, but camera ids are {first}-based",
                   "use the store's camid values (file camera c1 → 0)" if first == 0 else None)
    if not repeats and len(set(cams)) != len(cams):
        raise fail("names a camera twice", "list each camera once")
    return sorted(set(cams))


def _camera_number(item: Any, first: int) -> int | None:
    """``item`` as a whole number (``"c3"`` → 3 when numbering starts at 1); None if not one."""
    if isinstance(item, (bool, np.bool_)):
        return None
    if isinstance(item, (int, np.integer)):
        return int(item)
    if isinstance(item, (float, np.floating)):
        return int(item) if float(item).is_integer() else None
    text = str(item).strip().lower()
    if first > 0:
        text = text.removeprefix("c")
    try:
        return int(text)
    except ValueError:
        return None


__all__ = ["parse_cameras"]
