"""Progress reporting on stderr: one live rich display on a TTY, sparse log lines on a pipe.

Every loop that can run for more than a couple of seconds reports through :func:`task` (a
handle advanced by hand), :func:`track` (an iterable) or :class:`StepBar` (a training loop
with live fields); :func:`activity` covers work of unknown length (elapsed time only).

Progress nests. The calls share one stack per process: a call made while another is running
(the iterations of one trial inside the loop over trials) becomes its inner level —

* on a TTY it adds a row to the same rich ``Progress`` (rich allows a single live display at
  a time), removed when the inner loop ends; each row has done/total, elapsed time and ETA;
* on a pipe it writes lines prefixed with the outer levels (``train warca 2/10 › warca
  iterations: 500/5000 it, 12 s elapsed, ETA 1:48``), at most one per ~10 % of the total
  and one per ~10 s, whichever is rarer (:data:`LOG_FRACTION`, :data:`LOG_INTERVAL_S`), and
  a closing line for an outermost loop or one that ran longer than the interval.

``enabled=None`` follows the enclosing level (so ``--quiet``, passed to the outermost call as
``enabled=False``, silences everything inside); a library loop passes ``inner=True`` and
stays silent outside any level. ``ENABLED = False`` silences all. stdout stays clean.
"""
from __future__ import annotations

import math
import sys
import time
from contextlib import contextmanager
from typing import Any, Iterable, Iterator, TextIO, TypeVar

T = TypeVar("T")

#: set to False (e.g. by tests or ``--quiet``) to silence progress output entirely
ENABLED = True
#: on a pipe, a progress line needs this share of the total done since the previous line …
LOG_FRACTION = 0.1
#: … and this many seconds passed since it (whichever is rarer wins)
LOG_INTERVAL_S = 10.0

#: monotonic clock in seconds (tests substitute a fake one)
_clock = time.monotonic
#: the console progress draws on (None: a stderr console made on first use)
_console = None
#: the shared rich Progress while any TTY level is open (reidcli.cli.warning_lines prints
#: warnings through its console, above the bars)
_live = None
#: open levels, outermost first
_stack: list["Task"] = []


def set_console(console) -> None:
    """Draw on ``console`` (a ``rich.console.Console``; None: stderr) — for tests and embedding.

    A terminal console gets the live display, any other one the log lines (on its file).
    """
    global _console
    _console = console


def _terminal() -> bool:
    return _console.is_terminal if _console is not None else sys.stderr.isatty()


def _stream() -> TextIO:
    return _console.file if _console is not None else sys.stderr


def _shared_progress():
    """The process's one rich Progress, started on first use."""
    global _live
    if _live is None:
        from rich.console import Console
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                                   TimeElapsedColumn, TimeRemainingColumn)

        _live = Progress(TextColumn("[bold]{task.description}"), BarColumn(),
                         MofNCompleteColumn(), TimeElapsedColumn(), TimeRemainingColumn(),
                         TextColumn("{task.fields[info]}"),
                         console=_console if _console is not None else Console(stderr=True),
                         transient=True)
        _live.start()
    return _live


def _release_progress() -> None:
    global _live
    if _live is not None and not any(t._row is not None for t in _stack):
        _live.stop()
        _live = None


def duration(seconds: float) -> str:
    """``42 s``, ``3:05`` or ``1:02:03`` for a number of seconds."""
    if not math.isfinite(seconds):
        return "?"
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes, sec = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{sec:02d}" if hours else f"{minutes}:{sec:02d}"


class Task:
    """One level of progress: ``advance(n, **fields)`` after each unit of work.

    Made by :func:`task`; ``done`` counts the units so far, ``on`` says whether it reports.
    ``fields`` (loss, lr, …) show on the TTY row only.
    """

    def __init__(self, description: str, total: int | None, unit: str, on: bool,
                 lines: bool):
        self.description, self.total, self.unit, self.on = description, total, unit, on
        self.done = 0
        self._lines = on and lines
        self._row = None
        self._started = self._last_t = _clock()
        self._last_done = 0
        self._step = max(1, math.ceil(total * LOG_FRACTION)) if total else 1

    # -- rendering -----------------------------------------------------------------------
    def _open(self) -> None:
        if self.on and _terminal():
            self._row = _shared_progress().add_task(self.description, total=self.total,
                                                    info="")
            self._lines = False

    def _close(self) -> None:
        if self._row is not None:
            _live.remove_task(self._row)
            self._row = None
            return
        if self._lines and self.done != self._last_done:
            now = _clock()
            if self is _stack[0] or now - self._started >= LOG_INTERVAL_S:
                self._line(now, final=True)

    def _line(self, now: float, final: bool = False) -> None:
        elapsed = now - self._started
        count = f"{self.done}/{self.total}" if self.total else f"{self.done}"
        text = f"{count} {self.unit}, {duration(elapsed)} elapsed" if self.unit \
            else f"{duration(elapsed)} elapsed"
        if self.total and not final and self.done:
            text += f", ETA {duration(elapsed / self.done * (self.total - self.done))}"
        outer = [t for t in _stack[:_stack.index(self)] if t._lines] if self in _stack else []
        prefix = "".join(f"{t.description} {t.done + 1}" + (f"/{t.total}" if t.total else "")
                         + " › " for t in outer)
        print(f"{prefix}{self.description}: {text}", file=_stream(), flush=True)
        self._last_t, self._last_done = now, self.done

    # -- the caller's side ---------------------------------------------------------------
    def advance(self, n: int = 1, description: str | None = None, **fields: Any) -> None:
        """Count ``n`` more units done; ``description`` / ``fields`` refresh the TTY row."""
        self.done += n
        if self._row is not None:
            info = "  ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}"
                             for k, v in fields.items())
            extra = {"description": description} if description else {}
            _live.update(self._row, advance=n, info=info, **extra)
        elif self._lines and self.done - self._last_done >= self._step:
            now = _clock()
            if now - self._last_t >= LOG_INTERVAL_S and self.done != self.total:
                self._line(now)


def _resolve(enabled: bool | None, inner: bool) -> bool:
    if not ENABLED:
        return False
    if enabled is not None:
        return bool(enabled)
    return _stack[-1].on if _stack else not inner


@contextmanager
def task(description: str, total: int | None = None, unit: str = "it",
         enabled: bool | None = None, lines: bool = True, inner: bool = False
         ) -> Iterator[Task]:
    """A progress level (``with task("warca iterations", total=n) as t: … t.advance()``).

    ``enabled=None`` follows the enclosing level; at the outermost level it reports unless
    ``inner`` (a library loop reports only inside a level a command opened: ``reid train``'s
    trials, not a bare ``WARCA().fit()``). :data:`ENABLED` = False silences every level;
    ``lines=False`` draws the TTY row only (the caller logs its own lines on a pipe).
    """
    level = Task(description, total, unit, _resolve(enabled, inner), lines)
    level._open()
    _stack.append(level)
    try:
        yield level
    except BaseException:
        level._lines = False                       # an error ends the loop: no closing line
        raise
    finally:
        try:
            level._close()
        finally:
            if level in _stack:
                _stack.remove(level)
            _release_progress()


def track(iterable: Iterable[T], total: int | None = None, description: str = "working",
          enabled: bool | None = None, unit: str = "it", inner: bool = False) -> Iterator[T]:
    """Iterate with progress (see :func:`task`; ``total`` defaults to ``len(iterable)``)."""
    if total is None:
        try:
            total = len(iterable)  # type: ignore[arg-type]
        except TypeError:
            total = None
    with task(description, total, unit, enabled, inner=inner) as level:
        if not level.on:
            yield from iterable
            return
        for item in iterable:
            yield item
            level.advance()


@contextmanager
def activity(description: str, enabled: bool | None = None, inner: bool = False
             ) -> Iterator[Task]:
    """Work of unknown length (e.g. a library call): an elapsed-time row on a TTY, a closing
    line with the elapsed time on a pipe (outermost, or longer than :data:`LOG_INTERVAL_S`)."""
    with task(description, None, "", enabled, inner=inner) as level:
        yield level
        level.done = max(level.done, 1)


class StepBar:
    """A progress row with live fields (e.g. loss, lr, images/s) for training loops.

    On a TTY: a row of the shared display; otherwise silent (the caller logs lines itself).
    Use as a context manager; ``update(n, loss=…, lr=…)`` advances and refreshes the fields.
    """

    def __init__(self, total: int | None, description: str = "training",
                 enabled: bool | None = None):
        self.total, self.description, self.enabled = total, description, enabled
        self._cm = None
        self._task: Task | None = None

    @property
    def on(self) -> bool:
        return self._task is not None and self._task._row is not None

    def __enter__(self) -> "StepBar":
        self._cm = task(self.description, self.total, enabled=self.enabled, lines=False)
        self._task = self._cm.__enter__()
        return self

    def update(self, advance: int = 1, description: str | None = None, **fields: float) -> None:
        if self._task is not None:
            self._task.advance(advance, description, **fields)

    def __exit__(self, *exc) -> None:
        if self._cm is not None:
            self._cm.__exit__(*exc)
            self._cm = self._task = None


__all__ = ["ENABLED", "LOG_FRACTION", "LOG_INTERVAL_S", "StepBar", "Task", "activity",
           "duration", "set_console", "task", "track"]
