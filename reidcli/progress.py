"""Progress reporting: a rich progress bar on a TTY, plain log lines otherwise."""
from __future__ import annotations

import sys
import time
from typing import Iterable, Iterator, TypeVar

T = TypeVar("T")

#: set to False (e.g. by tests or ``--quiet``) to silence progress output entirely
ENABLED = True


def track(iterable: Iterable[T], total: int | None = None, description: str = "working",
          enabled: bool | None = None, unit: str = "it") -> Iterator[T]:
    """Iterate with progress: rich bar on a TTY, a log line every ~10 % on a pipe.

    Output goes to stderr so stdout stays clean for tables and JSON.
    """
    on = ENABLED if enabled is None else enabled
    if total is None:
        try:
            total = len(iterable)  # type: ignore[arg-type]
        except TypeError:
            total = None
    if not on:
        yield from iterable
        return
    if sys.stderr.isatty():
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                                   TimeElapsedColumn, TimeRemainingColumn)
        from rich.console import Console

        with Progress(TextColumn("[bold]{task.description}"), BarColumn(),
                      MofNCompleteColumn(), TimeElapsedColumn(), TimeRemainingColumn(),
                      console=Console(stderr=True), transient=True) as prog:
            task = prog.add_task(description, total=total)
            for item in iterable:
                yield item
                prog.advance(task)
        return
    start = time.perf_counter()
    step = max(1, (total or 10) // 10)
    done = 0
    for item in iterable:
        yield item
        done += 1
        if done % step == 0 or (total is not None and done == total):
            tot = f"/{total}" if total else ""
            print(f"{description}: {done}{tot} {unit} ({time.perf_counter() - start:.1f} s)",
                  file=sys.stderr, flush=True)
