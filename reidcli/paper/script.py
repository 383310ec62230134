"""What the ``reid paper`` commands share: reading ``LABEL=result.json``
arguments and reporting an error as one line with exit code 2."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Callable, Iterable, Sequence

from reidcli.errors import InputFileError, ParameterError, ReidError, UsageError


def labelled_results(items: Iterable[str], example: str) -> list[tuple[str, Path]]:
    """``["DMG-Net=a.json", ...]`` → ``[("DMG-Net", Path("a.json")), ...]``."""
    pairs = []
    for item in items:
        if "=" not in item:
            raise UsageError(f"result {item!r} is not LABEL=path.json", f"write e.g. {example}")
        label, path = item.split("=", 1)
        pairs.append((label, Path(path)))
    return pairs


def report_error(exc: ReidError) -> int:
    """Print ``error: …`` (a parameter named as this script's ``--flag``); return 2."""
    from rich.console import Console

    if isinstance(exc, ParameterError):           # library terms → this script's flag
        exc = exc.for_flag("--" + exc.parameter.replace("_", "-"))
    Console(stderr=True).print(f"error: {exc.message}", markup=False)
    return 2


def ablation_runs(paths: Sequence[str]) -> list[str]:
    """``paths`` with each output folder of ``reid paper ablation`` (one holding
    ``ablation.json``) replaced by its run directories, row by row, seed by seed."""
    runs: list[str] = []
    for path in paths:
        index = Path(path) / "ablation.json"
        if not index.is_file():
            runs.append(path)
            continue
        try:
            rows = json.loads(index.read_text())["rows"]
            runs.extend(str(run) for row in rows for run in row["runs"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise InputFileError(f"cannot read {index} ({exc.__class__.__name__})",
                                 "rerun reid paper ablation into that folder") from None
    return runs


def budget_main(prog: str, description: str, method: str,
                budget_lines: Callable[[Sequence[str]], list[str]],
                argv: list[str] | None = None, notes: Sequence[str] = ()) -> int:
    """``PROG RUN_DIR...``: print ``budget_lines(runs)`` then ``notes``."""
    import argparse

    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("runs", nargs="+",
                        help=f"run directories of reid train {method}, or the output folder of "
                             f"reid paper ablation {method} (its runs, in row order)")
    args = parser.parse_args(argv)
    try:
        for line in budget_lines(ablation_runs(args.runs)):
            print(line)
    except ReidError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 2
    for note in notes:
        print(note)
    return 0


__all__ = ["labelled_results", "report_error", "ablation_runs", "budget_main"]
