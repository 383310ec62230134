"""Warnings on the terminal as ONE line each: ``warning: <what> — <what to do>`` on stderr.

:func:`print_warning` writes the line — through the live progress display's console while a
rich progress bar is drawn (rich prints it above the bars, which stay intact), else straight to
stderr. :func:`one_line_warnings` routes Python's :mod:`warnings` from library code through it
for the duration of a ``reid`` invocation: no source path, no line of code.
"""
from __future__ import annotations

import sys
import warnings
from contextlib import contextmanager
from typing import Iterator

PREFIX = "warning: "


def print_warning(message: str) -> None:
    """``warning: <message>`` as one line on stderr (newlines in ``message`` become spaces)."""
    text = PREFIX + " ".join(str(message).split())
    progress = sys.modules.get("reidcli.progress")
    live = getattr(progress, "_live", None) if progress is not None else None
    if live is not None:                    # a progress display is up: print above it
        live.console.print(text, markup=False, highlight=False, soft_wrap=True)
        return
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def _show(message, category, filename, lineno, file=None, line=None) -> None:
    print_warning(str(message))


@contextmanager
def one_line_warnings() -> Iterator[None]:
    """Within the block, every shown Python warning prints as one ``warning:`` line."""
    previous = warnings.showwarning
    warnings.showwarning = _show
    try:
        yield
    finally:
        warnings.showwarning = previous


__all__ = ["PREFIX", "one_line_warnings", "print_warning"]
