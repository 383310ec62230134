"""How a message names a parameter: in library terms, or as the flag the user typed.

Library code never spells a command-line flag. A message that points at a parameter other
than the one a :class:`~reidcli.errors.ParameterError` is about (``… is not a multiple of
k=4``, ``… allow overwriting (force)``) writes it with :func:`param`, which gives the
parameter's own name (``k=4``, ``force``) — unless the ``reid`` command line installed its
flag namer for the running invocation (:func:`set_flag_namer`, done by
:func:`reidcli.cli.main.main`), then the flag that sets it (``--K 4``, ``--force``).
"""
from __future__ import annotations

from typing import Any, Callable

_UNSET = object()
#: parameter → flag of the running ``reid`` invocation; None outside the command line
_FLAG_NAMER: Callable[[str], str] | None = None


def set_flag_namer(namer: Callable[[str], str] | None) -> None:
    """Install (or with None remove) the command line's parameter → flag function."""
    global _FLAG_NAMER
    _FLAG_NAMER = namer


def param(name: str, value: Any = _UNSET) -> str:
    """``name`` / ``name=value`` in library terms; ``--flag`` / ``--flag value`` under the CLI.

    ``value`` is inserted with ``str`` (pass ``repr(x)`` for quotes). A boolean value is the
    bare flag on the command line (``param("force", True)`` → ``--force``; the CLI registers
    the flag that sets the value, e.g. ``external`` → ``--no-external`` for
    ``param("external", False)``), and a key of a ``--option key=value`` flag keeps its ``=``
    (``--option test_ids=5``).
    """
    if _FLAG_NAMER is None:
        return name if value is _UNSET else f"{name}={value}"
    flag = _FLAG_NAMER(name)
    if value is _UNSET or isinstance(value, bool):
        return flag
    return f"{flag}={value}" if " " in flag else f"{flag} {value}"   # --option key=value


__all__ = ["param", "set_flag_namer"]
