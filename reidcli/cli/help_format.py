"""How ``--help`` renders options: no type column for a flag (``--force``, ``--rpp/--no-rpp``
take no value, so typer's ``<bool>`` says nothing), and no usage word for a hidden argument
(a deprecated positional, docs/cli.md); installed once by :func:`reidcli.cli.main.main`."""
from __future__ import annotations

_INSTALLED: list[bool] = []


def install() -> None:
    """Patch typer's help rendering as the module says (idempotent)."""
    if _INSTALLED:
        return
    _INSTALLED.append(True)
    from typer.core import TyperArgument, TyperOption

    shown = getattr(TyperOption, "display_type_rich", None)      # typer < 0.26: no such column

    def display_type_rich(self, ctx):
        if self.is_flag and not self.count:
            return None
        return shown(self, ctx)

    if shown is not None:
        TyperOption.display_type_rich = display_type_rich

    pieces = TyperArgument.get_usage_pieces

    def get_usage_pieces(self, ctx):
        return [] if self.hidden else pieces(self, ctx)

    TyperArgument.get_usage_pieces = get_usage_pieces


__all__ = ["install"]
