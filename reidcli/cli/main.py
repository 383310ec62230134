"""Entry point of the ``reid`` command.

Stages are typer sub-apps or commands registered below. User errors (:class:`ReidError`)
print ``error: <what> — <what to do>`` on one line and exit 2; ``--debug`` anywhere on the
command line shows the traceback instead.
"""
from __future__ import annotations

import sys
import traceback
from typing import Optional, Sequence

import typer

from reidcli import __version__
from reidcli.cli.context import flag_for, reset_flag_names, set_invocation
from reidcli.errors import ParameterError, ReidError
from reidcli.naming import set_flag_namer

app = typer.Typer(
    name="reid",
    help="Person re-identification toolkit: datasets → feature stores → fit/adapt → eval → plot.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"reidcli {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Optional[bool] = typer.Option(None, "--version", callback=_version_callback,
                                           is_eager=True, help="Print the version and exit."),
    debug: bool = typer.Option(False, "--debug",
                               help="Show tracebacks for errors (may appear anywhere)."),
) -> None:
    """reidcli — run published re-ID methods from the shell."""


_REGISTERED: list[bool] = []


def _register() -> None:
    """Add the stage commands (once). Done inside :func:`main`, so a method module that fails
    to import while the commands are generated is reported as a one-line error."""
    if _REGISTERED:
        return
    _REGISTERED.append(True)
    from reidcli.cli import (adapt, data, demo, eval as eval_cli, extract, fit_pooling,
                             methods, plot, store, train)

    app.add_typer(data.app, name="data", help="List, describe, check and synthesise datasets.")
    app.add_typer(store.app, name="store", help="Inspect, import and merge feature stores.")
    app.command("extract", help=extract.HELP, context_settings=extract.CONTEXT)(extract.extract)
    app.add_typer(train.app, name="train", help="Train a network or fit a metric on a store.")
    app.add_typer(fit_pooling.app, name="fit-pooling",
                  help="Fit C-DPCF / DPCF / average-pooling baselines on stored conv maps.")
    app.add_typer(adapt.app, name="adapt", help="Test-time adaptation of a store's features.")
    app.command("eval", help=eval_cli.HELP, context_settings=eval_cli.CONTEXT)(eval_cli.evaluate)
    app.add_typer(plot.app, name="plot", help="Figures: CMC, t-SNE, weight maps, rank lists.")
    app.command("demo", help=demo.HELP)(demo.demo)
    app.command("methods", help=methods.HELP)(methods.methods)


def print_error(exc: ReidError) -> None:
    """One line on stderr: ``error: <what> — <what to do>``."""
    sys.stderr.write(f"error: {exc.message}\n")
    sys.stderr.flush()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns/exit code 0 on success, 2 on a user error."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    args = [a for a in args if a != "--debug"]
    set_invocation(args)
    reset_flag_names()
    set_flag_namer(flag_for)             # library messages name parameters by their flags
    try:
        _register()
        app(args=args, prog_name="reid", standalone_mode=True)
    except ReidError as exc:
        if debug:
            traceback.print_exc()
        if isinstance(exc, ParameterError):          # library terms → the flag typed
            exc = exc.for_flag(flag_for(exc.parameter))
        print_error(exc)
        raise SystemExit(exc.exit_code) from None
    except KeyboardInterrupt:
        if debug:
            traceback.print_exc()
        sys.stderr.write("error: interrupted — outputs in progress were removed\n")
        raise SystemExit(130) from None
    finally:
        set_flag_namer(None)
    return 0


if __name__ == "__main__":  # pragma: no cover
    main()
