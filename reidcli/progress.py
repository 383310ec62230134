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


class StepBar:
    """A progress bar with live fields (e.g. loss, lr, images/s) for training loops.

    On a TTY: a rich bar on stderr; otherwise silent (the caller logs lines itself).
    Use as a context manager; ``update(n, loss=…, lr=…)`` advances and refreshes the fields.
    """

    def __init__(self, total: int | None, description: str = "training",
                 enabled: bool | None = None):
        self.total, self.description = total, description
        self.on = (ENABLED if enabled is None else enabled) and sys.stderr.isatty()
        self._prog = None
        self._task = None

    def __enter__(self) -> "StepBar":
        if self.on:
            from rich.console import Console
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                                       TimeElapsedColumn, TimeRemainingColumn)

            self._prog = Progress(TextColumn("[bold]{task.description}"), BarColumn(),
                                  MofNCompleteColumn(), TimeElapsedColumn(),
                                  TimeRemainingColumn(), TextColumn("{task.fields[info]}"),
                                  console=Console(stderr=True), transient=True)
            self._prog.__enter__()
            self._task = self._prog.add_task(self.description, total=self.total, info="")
        return self

    def update(self, advance: int = 1, description: str | None = None, **fields: float) -> None:
        if self._prog is None:
            return
        info = "  ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}"
                         for k, v in fields.items())
        kwargs = {"description": description} if description else {}
        self._prog.update(self._task, advance=advance, info=info, **kwargs)

    def __exit__(self, *exc) -> None:
        if self._prog is not None:
            self._prog.__exit__(*exc)
