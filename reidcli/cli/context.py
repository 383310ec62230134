"""What the running ``reid`` invocation was called with (for provenance records)."""
from __future__ import annotations

import sys

_ARGV: list[str] | None = None


def set_invocation(argv: list[str]) -> None:
    global _ARGV
    _ARGV = list(argv)


def invoked_command() -> list[str]:
    """``["reid", *args]`` of the current invocation (``sys.argv`` outside :func:`main`)."""
    args = _ARGV if _ARGV is not None else sys.argv[1:]
    return ["reid", *args]
