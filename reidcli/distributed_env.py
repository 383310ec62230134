"""The ``torchrun`` launch environment and the rendezvous of its ranks (docs/formats.md,
"Distributed extraction").

``torchrun`` tells every process ``WORLD_SIZE`` (the number of ranks), ``RANK`` (this one,
``0 … WORLD_SIZE-1``), ``LOCAL_RANK`` (its index on its machine: the GPU it uses) and
``MASTER_ADDR``/``MASTER_PORT`` (where rank 0 meets the others). A process started by hand
with some of them set is checked here before it waits for anyone: each error names the
variable at fault.

The rendezvous (:func:`join_process_group`) says at once on stderr that it waits, and gives up
after ``REIDCLI_DIST_JOIN_TIMEOUT`` seconds (default :data:`DEFAULT_JOIN_TIMEOUT_S`) with one
error line instead of torch's C++ log and stack.
"""
from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import math
import os
import re
import sys
import tempfile
import threading
from typing import Callable, Iterator, Mapping

from reidcli.errors import OutputError, UsageError

#: environment variable: seconds a rank waits for the others to join (the rendezvous)
JOIN_TIMEOUT_ENV = "REIDCLI_DIST_JOIN_TIMEOUT"
#: the rendezvous's default bound: long enough for every rank to start and load torch
DEFAULT_JOIN_TIMEOUT_S = 300.0
#: the longest timeout accepted (a year; torch's timedelta arithmetic overflows far above)
MAX_TIMEOUT_S = 365 * 86400.0

_TODO = "launch with torchrun, which sets WORLD_SIZE, RANK, LOCAL_RANK, MASTER_ADDR and " \
        "MASTER_PORT (or unset WORLD_SIZE to run in one process)"


@dataclasses.dataclass(frozen=True)
class Launch:
    """Where this process sits in a launch: ``rank`` of ``world_size`` processes,
    ``local_rank`` on its machine, and the rendezvous address ``master_addr:master_port``."""

    rank: int
    world_size: int
    local_rank: int
    master_addr: str | None = None
    master_port: int | None = None

    @property
    def endpoint(self) -> str:
        """``MASTER_ADDR:MASTER_PORT`` (IPv6 addresses in brackets)."""
        host = self.master_addr or ""
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"
        return f"{host}:{self.master_port}"


def _integer(env: Mapping[str, str], name: str, default: int | None) -> int | None:
    """``env[name]`` as an integer; ``default`` when unset or empty."""
    raw = env.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        return int(raw.strip())
    except ValueError:
        raise UsageError(f"{name}={raw!r} is not an integer", _TODO) from None


def read_launch(environ: Mapping[str, str] | None = None) -> Launch | None:
    """The launch read from the environment; None when ``WORLD_SIZE`` is unset, empty or 1
    (a plain, single-process run). ``LOCAL_RANK`` defaults to ``RANK``.

    Checked: every variable an integer; ``WORLD_SIZE ≥ 1``; ``0 ≤ RANK < WORLD_SIZE``;
    ``0 ≤ LOCAL_RANK < WORLD_SIZE`` (and ``< LOCAL_WORLD_SIZE`` when that is set); with
    ``WORLD_SIZE > 1``, ``MASTER_ADDR`` set and ``MASTER_PORT`` in ``1 … 65535``. Raises
    :class:`~reidcli.errors.UsageError` naming the variable at fault."""
    env = os.environ if environ is None else environ
    world = _integer(env, "WORLD_SIZE", None)
    if world is None:
        return None
    if world < 1:
        raise UsageError(f"WORLD_SIZE={world} must be ≥ 1 (the number of ranks)", _TODO)
    rank = _integer(env, "RANK", 0)
    if not 0 <= rank < world:
        raise UsageError(f"RANK={rank} is outside 0…{world - 1} (WORLD_SIZE={world})", _TODO)
    if world == 1:
        return None
    local_rank = _integer(env, "LOCAL_RANK", rank)
    if local_rank < 0:
        raise UsageError(f"LOCAL_RANK={local_rank} must be ≥ 0 (this rank's index on its "
                         "machine)", _TODO)
    local_world = _integer(env, "LOCAL_WORLD_SIZE", None)
    if local_world is not None and not 1 <= local_world <= world:
        raise UsageError(f"LOCAL_WORLD_SIZE={local_world} is outside 1…{world} "
                         f"(WORLD_SIZE={world})", _TODO)
    bound, of = (local_world, "LOCAL_WORLD_SIZE") if local_world is not None else \
        (world, "WORLD_SIZE")
    if local_rank >= bound:
        raise UsageError(f"LOCAL_RANK={local_rank} is outside 0…{bound - 1} ({of}={bound})",
                         _TODO)
    addr = env.get("MASTER_ADDR") or ""              # kept as given: torchrun's agent store
    if not addr.strip():                              # is recognised by this exact string
        raise UsageError(f"MASTER_ADDR is not set: the {world} ranks have nowhere to meet",
                         "set MASTER_ADDR to rank 0's host and MASTER_PORT to a free port, "
                         "or launch with torchrun")
    port = _integer(env, "MASTER_PORT", None)
    if port is None:
        raise UsageError(f"MASTER_PORT is not set: the {world} ranks have nowhere to meet",
                         "set MASTER_PORT to a free port on rank 0's host, or launch with "
                         "torchrun")
    if not 1 <= port <= 65535:
        raise UsageError(f"MASTER_PORT={port} is outside 1…65535", _TODO)
    return Launch(rank=rank, world_size=world, local_rank=local_rank, master_addr=addr,
                  master_port=port)


def join_timeout(environ: Mapping[str, str] | None = None) -> float:
    """Seconds the rendezvous waits: ``REIDCLI_DIST_JOIN_TIMEOUT`` (a number > 0), else
    :data:`DEFAULT_JOIN_TIMEOUT_S`."""
    env = os.environ if environ is None else environ
    raw = (env.get(JOIN_TIMEOUT_ENV) or "").strip()
    if not raw:
        return DEFAULT_JOIN_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not 0 < value <= MAX_TIMEOUT_S:                  # NaN and inf included
        raise UsageError(f"{JOIN_TIMEOUT_ENV}={raw!r} is not a number of seconds in "
                         f"(0, {MAX_TIMEOUT_S:g}]",
                         f"e.g. {JOIN_TIMEOUT_ENV}={int(DEFAULT_JOIN_TIMEOUT_S)}, or unset it")
    return value


def announce_on_stderr(line: str) -> None:
    """Print one line on stderr at once."""
    print(line, file=sys.stderr, flush=True)


@contextlib.contextmanager
def native_stderr_held() -> Iterator[list[str]]:
    """Hold what is written to file descriptor 2 (torch's C++ log lines and stacks) while the
    block runs: replayed after a success, dropped after an exception — whose one-line error
    says what failed. The yielded list receives the held text after a failure (for
    ``--debug``)."""
    held: list[str] = []
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):   # no file descriptor 2: nothing to hold
        yield held
        return
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        failed = True
        try:
            yield held
            failed = False
        finally:
            with contextlib.suppress(Exception):
                sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            text = tmp.read()
            if failed:
                held.append(text.decode("utf-8", "replace"))
            elif text:
                os.write(2, text)


def torch_error_line(exc: BaseException) -> str:
    """The first line of a torch/c10d error, without the C++ source location
    (``[/path/file.cc:129] ``) gloo puts in front; a long line cut after its first sentence."""
    first = (str(exc).strip().splitlines() or [""])[0]
    first = re.sub(r"^\[[^\]]*\.(?:cc|cpp|h|hpp):\d+\]\s*", "", first)
    if len(first) > 160:                              # torch's advice after the first sentence
        first = first.split(". ")[0]
    return f"{exc.__class__.__name__}: {first}" if first else exc.__class__.__name__


def _rendezvous(url: str, launch: Launch, timeout: _dt.timedelta):
    """The rendezvous's store (rank 0 hosts it and waits for every rank to connect). It waits
    in a helper thread so that this one still handles Ctrl-C and SIGTERM at once; the thread
    is a daemon and ends with the process."""
    import torch.distributed as dist

    outcome: dict[str, object] = {}

    def meet() -> None:
        try:
            outcome["store"] = next(dist.rendezvous(url, rank=launch.rank,
                                                    world_size=launch.world_size,
                                                    timeout=timeout))[0]
        except BaseException as exc:                   # noqa: BLE001 - raised below
            outcome["error"] = exc

    helper = threading.Thread(target=meet, name="reidcli-rendezvous", daemon=True)
    helper.start()
    while helper.is_alive():
        helper.join(0.2)
    if "error" in outcome:
        raise outcome["error"]                         # type: ignore[misc]
    return outcome["store"]


def join_process_group(backend: str, launch: Launch, *, timeout_s: float | None = None,
                       join_timeout_s: float | None = None,
                       announce: Callable[[str], None] | None = announce_on_stderr) -> bool:
    """Join the launch's ``torch.distributed`` process group (once); True when this call
    created it.

    First the rendezvous at ``MASTER_ADDR:MASTER_PORT`` (rank 0 hosts it, or torchrun's agent),
    announced on stderr and bounded by ``join_timeout_s`` (default :func:`join_timeout`;
    never more than ``timeout_s``); then the group, whose collectives wait ``timeout_s``
    (default torch's). A failure raises :class:`~reidcli.errors.OutputError` in one line."""
    import torch.distributed as dist

    if dist.is_initialized():
        return False
    join_s = join_timeout() if join_timeout_s is None else float(join_timeout_s)
    if not 0 < join_s <= MAX_TIMEOUT_S:                 # NaN and inf included
        raise UsageError(f"join_timeout={join_s!r} must be a number of seconds in "
                         f"(0, {MAX_TIMEOUT_S:g}]", f"e.g. {int(DEFAULT_JOIN_TIMEOUT_S)}")
    if timeout_s is not None:
        join_s = min(join_s, float(timeout_s))
    others = launch.world_size - 1
    if announce is not None:
        announce(f"rank {launch.rank}: waiting for {others} other rank{'s' * (others != 1)} at "
                 f"{launch.endpoint} (giving up after {join_s:g} s; {JOIN_TIMEOUT_ENV})")
    join_td = _dt.timedelta(seconds=join_s)
    # env:// when the launch is this process's environment: torch then recognises torchrun's
    # agent store by the very strings torchrun exported (a tcp:// URL lower-cases the host)
    from_environ = os.environ.get("MASTER_ADDR") == launch.master_addr and \
        (os.environ.get("MASTER_PORT") or "").strip() == str(launch.master_port)
    url = "env://" if from_environ else f"tcp://{launch.endpoint}"
    held: list[str] = []
    try:
        with native_stderr_held() as held:
            store = _rendezvous(url, launch, join_td)
            store.set_timeout(join_td)                 # the group's own handshake
            kwargs = {} if timeout_s is None else {"timeout": _dt.timedelta(seconds=timeout_s)}
            dist.init_process_group(backend, store=dist.PrefixStore("default_pg", store),
                                    rank=launch.rank, world_size=launch.world_size, **kwargs)
            if timeout_s is not None:
                store.set_timeout(_dt.timedelta(seconds=timeout_s))
        return True
    except (RuntimeError, ValueError, OSError) as exc:   # c10d's DistError is a RuntimeError
        error = exc
    timed_out = "timed out" in str(error).lower() or "timeout" in str(error).lower()
    what = (f"rank {launch.rank} gave up after {join_s:g} s waiting for {others} other "
            f"rank{'s' * (others != 1)} at {launch.endpoint}" if timed_out else
            f"rank {launch.rank} could not join the {launch.world_size} ranks at "
            f"{launch.endpoint}")
    failure = OutputError(f"{what} ({torch_error_line(error)}); nothing was written",
                          "start every rank (torchrun does), check MASTER_ADDR/MASTER_PORT, "
                          f"or give them longer with {JOIN_TIMEOUT_ENV}=SECONDS")
    if held and held[0].strip():
        failure.add_note(held[0])
    raise failure from error


__all__ = ["DEFAULT_JOIN_TIMEOUT_S", "JOIN_TIMEOUT_ENV", "Launch", "announce_on_stderr",
           "join_process_group", "join_timeout", "native_stderr_held", "read_launch",
           "torch_error_line"]
