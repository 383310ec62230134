"""Placeholders for stages that later releases fill in: a clear error, exit 2."""
from __future__ import annotations

import typer

from reidcli.errors import NotImplementedYetError

PASS_THROUGH = {"allow_extra_args": True, "ignore_unknown_options": True}


def not_yet(stage: str) -> None:
    raise NotImplementedYetError(f"`reid {stage}` is not implemented yet in this release",
                                 "see CHANGELOG.md for the stages available now")


def stub_group(stage: str, methods: tuple[str, ...]) -> typer.Typer:
    """A typer group whose METHOD argument is accepted and answered with a clear error."""
    app = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False)

    @app.command("run", hidden=True)
    def _hidden() -> None:  # pragma: no cover - keeps typer in group mode
        not_yet(stage)

    for method in methods:
        def _make(m: str):
            def _cmd(ctx: typer.Context) -> None:
                not_yet(f"{stage} {m}")
            _cmd.__doc__ = f"{m} (not implemented yet)"
            return _cmd
        app.command(method, context_settings=PASS_THROUGH)(_make(method))
    return app
