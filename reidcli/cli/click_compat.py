"""The click that typer runs on, whichever typer is installed: typer ≥ 0.26 vendors it as
``typer._click`` (and needs no ``click`` package); older typer depends on ``click`` itself.
Every ``reid`` module takes click names from here (docs/cli.md "Supported systems")."""
from __future__ import annotations

try:                                        # typer ≥ 0.26: its own copy of click
    from typer._click import exceptions
    from typer._click.globals import get_current_context
except ImportError:                         # older typer: the click package it depends on
    from click import exceptions
    from click.globals import get_current_context

ClickException = exceptions.ClickException


class _NeverRaised(Exception):
    """Stands for an exception this click version does not have."""


#: click ≥ 8.2 raises it for a bare group (its message is the help); older click prints the
#: help itself and exits 0
NoArgsIsHelpError = getattr(exceptions, "NoArgsIsHelpError", _NeverRaised)

__all__ = ["ClickException", "NoArgsIsHelpError", "get_current_context"]
