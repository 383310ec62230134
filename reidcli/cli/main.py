"""Entry point of the ``reid`` command.

Stages are typer sub-apps or commands registered below. User errors (:class:`ReidError`)
print ``error: <what> — <what to do>`` on one line and exit 2; ``--debug`` anywhere on the
command line shows the traceback instead.

SIGINT (Ctrl-C) and SIGTERM — also during start-up, while the modules load — remove the
temporary files of outputs in progress (:func:`reidcli.io.cleanup_temp_files`), stop child
processes (they are terminated by the code that started them when the interrupt unwinds it),
print ``error: interrupted — …`` and exit 130 (SIGINT) or 143 (SIGTERM).
"""
from __future__ import annotations

import os
import signal
import sys


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised like Ctrl-C so that every ``finally``/``except BaseException`` cleans
    up; exits 143 instead of 130."""

    signum = signal.SIGTERM


#: signals received (an exception raised in a C callback may be swallowed; this is not)
RECEIVED: list[int] = []

#: main() calls in progress (``reid demo`` runs each stage through a nested main()) and whether
#: a nested one already printed the interrupt line, so that it prints once
_DEPTH: list[int] = [0]
_INTERRUPT_REPORTED: list[bool] = [False]


def _note(signum: int) -> None:
    RECEIVED.append(int(signum))
    io = sys.modules.get("reidcli.io")
    if io is not None:
        io.note_signal(signum)


def _raise_terminated(signum, frame) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)      # one clean-up, not a second interrupt
    _note(signum)
    raise Terminated()


def _raise_interrupt(signum, frame) -> None:
    _note(signum)
    raise KeyboardInterrupt()


def _quiet_lost_interrupt(unraisable) -> None:
    """An interrupt raised inside a destructor or weakref callback cannot propagate and
    Python prints it as "Exception ignored …"; the signal is in :data:`RECEIVED`, so the
    command still stops with its one-line error — print nothing for it here."""
    if isinstance(getattr(unraisable, "exc_value", None), KeyboardInterrupt) and RECEIVED:
        return
    _PREVIOUS_UNRAISABLE_HOOK[0](unraisable)


_PREVIOUS_UNRAISABLE_HOOK = [sys.unraisablehook]


def install_signal_handlers() -> None:
    """SIGTERM → :class:`Terminated`; SIGINT → KeyboardInterrupt (Python's default handler,
    re-installed in case the parent process ignored it). Main thread only."""
    if sys.unraisablehook is not _quiet_lost_interrupt:
        _PREVIOUS_UNRAISABLE_HOOK[0] = sys.unraisablehook
        sys.unraisablehook = _quiet_lost_interrupt
    try:
        signal.signal(signal.SIGTERM, _raise_terminated)
        if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
            signal.signal(signal.SIGINT, _raise_interrupt)
    except ValueError:                                  # not the main thread
        pass


def interrupted(exc: BaseException, debug: bool = False) -> SystemExit:
    """Clean up after SIGINT/SIGTERM and return the SystemExit (130 or 143) to raise."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)        # a second Ctrl-C must not cut cleanup
    term = isinstance(exc, Terminated) or bool(RECEIVED and RECEIVED[-1] == signal.SIGTERM)
    try:
        if "reidcli.io" in sys.modules:
            sys.modules["reidcli.io"].cleanup_temp_files()
        if debug:
            import traceback
            traceback.print_exception(exc)
        if not _INTERRUPT_REPORTED[0]:
            sys.stderr.write(f"error: interrupted ({'SIGTERM' if term else 'SIGINT'}) — outputs "
                             "in progress were removed; run the command again\n")
            sys.stderr.flush()
        _INTERRUPT_REPORTED[0] = _DEPTH[0] > 1          # a nested main's caller stays quiet
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    return SystemExit(143 if term else 130)


# as the ``reid`` command (not when imported by other Python code), handle SIGTERM from the
# first line on, before the slow imports below
if __name__ == "__main__" or sys.argv[0].rsplit("/", 1)[-1] in ("reid", "reid.exe"):
    install_signal_handlers()

try:                                   # Ctrl-C while the (slow) modules load: one line too
    import traceback
    from typing import Optional, Sequence

    import typer

    from reidcli import __version__
    from reidcli.cli.context import flag_for, reset_flag_names, set_invocation
    from reidcli.cli.warning_lines import one_line_warnings
    from reidcli.errors import ParameterError, ReidError
    from reidcli.naming import set_flag_namer
except KeyboardInterrupt as _exc:
    raise interrupted(_exc, "--debug" in sys.argv) from None

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


#: stages whose subcommands are generated from the method registry, built only when run
GENERATED_STAGES = ("train", "fit-pooling", "adapt")

#: every stage: its module under :mod:`reidcli.cli`, the module's typer sub-app (``app``) or
#: command function, and its help line, in the order they are registered; `reid --help` lists
#: the commands, then the sub-apps, each in this order. The help lines of stages whose module
#: has a ``HELP`` are that text (tests/cli/test_lazy_imports.py keeps them equal): they are here
#: so that `reid --help` lists every stage without importing its module (:func:`_add_listing`)
STAGES: dict[str, tuple[str, str, str]] = {
    "data": ("data", "app", "List, describe, check and synthesise datasets."),
    "store": ("store", "app", "Inspect, import and merge feature stores."),
    "extract": ("extract", "extract",
                "Extract embeddings and conv maps from images into a feature store."),
    "train": ("train", "app", "Train a network or fit a metric on a store."),
    "fit-pooling": ("fit_pooling", "app",
                    "Fit C-DPCF / DPCF / average-pooling baselines on stored conv maps."),
    "adapt": ("adapt", "app", "Test-time adaptation of a store's features."),
    "eval": ("eval", "evaluate",
             "Evaluate a feature store (optionally through a fitted model): CMC, mAP, mINP, "
             "per protocol E1–E5 / camera-split, with optional k-reciprocal re-ranking."),
    "plot": ("plot", "app", "Figures: CMC, t-SNE, weight maps, rank lists, training curves, "
                            "distance histograms."),
    "export": ("export", "app",
               "Export a trained model to ONNX or TorchScript (with a parity check)."),
    "demo": ("demo", "demo",
             "Run the pipeline end to end on synthetic datasets and print a results table."),
    "methods": ("methods", "methods",
                "List every registered method: stage, paper and default parameters."),
    "paper": ("paper", "app", "Compare results with the papers' tables (docs/papers.md)."),
}

#: stages already added to :data:`app`
_REGISTERED: set[str] = set()
#: stages listed in :data:`app` by name and help line only (:func:`_add_listing`)
_LISTED: set[str] = set()


def _stage_module(stage: str):
    """The module of ``stage`` under :mod:`reidcli.cli`, imported on first use."""
    import importlib

    return importlib.import_module(f"reidcli.cli.{STAGES[stage][0]}")


def _add_stage(stage: str) -> None:
    """Add one stage to :data:`app` (importing its module only now, and replacing its
    listing), in :data:`STAGES` order whatever order the stages are added in."""
    module = _stage_module(stage)
    _, attribute, help_line = STAGES[stage]
    target = getattr(module, attribute)
    _drop_listing(stage)
    if attribute == "app":
        app.add_typer(target, name=stage, help=help_line)
    else:
        app.command(stage, help=help_line,
                    context_settings=getattr(module, "CONTEXT", None))(target)
    _REGISTERED.add(stage)
    _sort_stages()


def _sort_stages() -> None:
    order = list(STAGES)
    app.registered_commands.sort(key=lambda info: order.index(info.name))
    app.registered_groups.sort(key=lambda info: order.index(info.name))


def _listed_command() -> None:
    """Stands for a stage that was only listed (never run: running a stage adds it first)."""
    raise RuntimeError("a listed stage ran before it was added")


def _add_listing(stage: str) -> None:
    """List ``stage`` in :data:`app` by its name and help line only — a command, or an empty
    sub-app, as the stage is — without importing its module: what `reid --help` (and a bare
    `reid`, or an unknown command's suggestion) shows. :func:`_add_stage` replaces it."""
    _, attribute, help_line = STAGES[stage]
    if attribute == "app":
        app.add_typer(typer.Typer(pretty_exceptions_enable=False), name=stage, help=help_line)
    else:
        app.command(stage, help=help_line)(_listed_command)
    _LISTED.add(stage)


def _drop_listing(stage: str) -> None:
    if stage in _LISTED:
        app.registered_commands[:] = [i for i in app.registered_commands if i.name != stage]
        app.registered_groups[:] = [i for i in app.registered_groups if i.name != stage]
        _LISTED.discard(stage)


def _register(args: Sequence[str] = (), every_stage: bool = True) -> None:
    """Add the stage commands and generate the method commands of the stage being run
    (``args``' first word). Done inside :func:`main`, so a method module that fails to import
    is reported as a one-line error; `reid --help` imports no method module.

    With ``every_stage=False`` (what :func:`main` does) only the stage being run is added, so
    that e.g. `reid eval` imports no other stage's module; when ``args`` name no stage
    (`reid --help`, `reid`) or an unknown one (its error suggests a stage) the stages not
    added yet are listed by name and help line (:func:`_add_listing`), importing no stage
    module. With ``every_stage=True`` every stage is added."""
    stage = next((a for a in args if not a.startswith("-")), None)
    if stage in STAGES or every_stage:
        for name in [stage] if stage in STAGES and not every_stage else list(STAGES):
            if name not in _REGISTERED:
                _add_stage(name)
    else:
        for name in STAGES:
            if name not in _REGISTERED and name not in _LISTED:
                _add_listing(name)
        _sort_stages()
    if stage in GENERATED_STAGES:
        _stage_module(stage).build_commands()


def print_error(exc: ReidError) -> None:
    """One line on stderr: ``error: <what> — <what to do>``."""
    sys.stderr.write(f"error: {exc.message}\n")
    sys.stderr.flush()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns/exit code 0 on success, 2 on a user error."""
    args = list(sys.argv[1:] if argv is None else argv)
    # Idle OpenMP workers of torch spin at the end of every parallel region; on shared or
    # oversubscribed cores that spinning steals the working thread's core (a 1024 × 2048 GEMM:
    # 16 ms instead of 0.3 ms). Sleeping workers cost microseconds per region. libgomp reads
    # this once, when torch loads (after this line: commands import torch lazily); a value
    # the user set is kept.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    # NumPy's OpenBLAS does the same after every GEMM for 2^28 cycles (about 0.1 s): on 2
    # cores its spinning thread halves the cores left to the ranking that follows each
    # distance block of `reid eval` (docs/performance.md). 2^4 cycles: it sleeps at once.
    # OpenBLAS reads this when NumPy first loads, after this line.
    os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")
    debug = "--debug" in args
    args = [a for a in args if a != "--debug"]
    if _DEPTH[0] == 0:
        _INTERRUPT_REPORTED[0] = False
    _DEPTH[0] += 1
    set_invocation(args)
    reset_flag_names()
    set_flag_namer(flag_for)             # library messages name parameters by their flags
    install_signal_handlers()
    RECEIVED.clear()
    warnings_shown = one_line_warnings()          # library warnings: one line, no source path
    warnings_shown.__enter__()
    try:
        try:
            import reidcli.io as io
            io.clear_signals()
            _register(args, every_stage=False)
            try:
                _run_app(args)
            except SystemExit as done:
                # typer turns KeyboardInterrupt into a silent exit 130; an interrupt that h5py
                # swallowed lets the command finish (exit 0): both are interrupts
                if RECEIVED or done.code == 130:
                    raise (Terminated() if RECEIVED and RECEIVED[-1] == signal.SIGTERM
                           else KeyboardInterrupt()) from None
                raise
            if RECEIVED:
                raise KeyboardInterrupt()
        except ReidError as exc:
            if debug:
                traceback.print_exc()
            if isinstance(exc, ParameterError):          # library terms → the flag typed
                exc = exc.for_flag(flag_for(exc.parameter))
            print_error(exc)
            _leave_if_hdf5_broken(exc.exit_code, argv)
            raise SystemExit(exc.exit_code) from None
    except KeyboardInterrupt as exc:                     # also SIGTERM (Terminated)
        raise interrupted(exc, debug) from None
    finally:
        _DEPTH[0] -= 1
        warnings_shown.__exit__(None, None, None)
        set_flag_namer(None)
        RECEIVED.clear()                 # handled: a caller in this process starts afresh
        io_module = sys.modules.get("reidcli.io")
        if io_module is not None:
            io_module.clear_signals()
    return 0


def _run_app(args: list[str]) -> None:
    """Run the typer app; its own usage errors (an unknown option, a value that does not parse)
    print one line like every other error, except a bare group, which prints its help."""
    from typer.main import get_command
    from reidcli.cli.click_compat import (ClickException, NoArgsIsHelpError,
                                          install_fast_coercion)

    from reidcli.cli import help_format

    help_format.install()
    install_fast_coercion()
    command = get_command(app)
    try:
        code = command.main(args=args, prog_name="reid", standalone_mode=False)
    except NoArgsIsHelpError as exc:
        exc.show()
        raise SystemExit(exc.exit_code) from None
    except ClickException as exc:
        ctx = getattr(exc, "ctx", None)
        command = ctx.command_path if ctx is not None else "reid"
        sys.stderr.write(f"error: {exc.format_message()} — see `{command} --help`\n")
        raise SystemExit(exc.exit_code) from None
    if isinstance(code, int) and code:
        raise SystemExit(code)


def _leave_if_hdf5_broken(code: int, argv: Sequence[str] | None) -> None:
    """After a full disk, HDF5 may hold a file it could not close; its own exit handler then
    crashes (SIGSEGV) instead of exiting with ``code``. As a command (not called from Python
    with ``argv``), exit at once after removing the temporary files."""
    io = sys.modules.get("reidcli.io")
    if argv is None and io is not None and getattr(io, "hdf5_close_failed", lambda: False)():
        io.cleanup_temp_files()
        sys.stdout.flush()
        sys.stderr.flush()
        import os
        os._exit(code)


if __name__ == "__main__":  # pragma: no cover
    main()
