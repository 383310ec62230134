"""Extraction on several processes or machines under ``torchrun`` (docs/formats.md, "Distributed
extraction").

``torchrun --nnodes N --nproc_per_node M reid extract --model …`` starts ``N·M`` copies of the
command; torchrun tells each its ``RANK``, ``WORLD_SIZE`` and ``LOCAL_RANK`` (and
``MASTER_ADDR``/``MASTER_PORT`` for the rendezvous). Here every rank

1. joins a ``torch.distributed`` process group (``nccl`` when it extracts on a GPU, bound to
   ``cuda:<LOCAL_RANK>``; ``gloo`` on CPU) with a timeout on every collective; the rendezvous
   is announced on stderr and bounded by ``REIDCLI_DIST_JOIN_TIMEOUT`` (default 300 s,
   :mod:`reidcli.distributed_env`);
2. writes shard ``RANK/WORLD_SIZE`` of the rows (the contiguous row range of
   :func:`reidcli.store.writer.shard_rows`) to :func:`shard_path` next to the output;
3. reports success or its error to every rank (one ``all_gather_object``, which is also the
   barrier).

Only when every rank succeeded does rank 0 join the shards into the output with
:func:`reidcli.store.merge.merge_shards` (written atomically like every store), check the joined
store, and then delete the shards; the other ranks return without waiting for the merge. With
``merge=False`` the shards stay for ``reid store merge``. When any rank failed, every rank
raises and no merged store is written; the shards of the ranks that succeeded are kept.
"""
from __future__ import annotations

import dataclasses
import os
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from reidcli.distributed_env import (MAX_TIMEOUT_S, Launch, join_process_group,
                                     native_stderr_held, read_launch, torch_error_line)
from reidcli.errors import OutputError, UsageError
from reidcli.naming import param

if TYPE_CHECKING:  # pragma: no cover
    from reidcli.features.layout import StoreLayout

#: seconds a collective (the rendezvous, the status exchange) waits for the slowest rank
DEFAULT_TIMEOUT_S = 1800.0


@dataclasses.dataclass(frozen=True)
class DistributedEnv(Launch):
    """Where this process sits in a ``torchrun`` launch: ``rank`` of ``world_size`` processes,
    ``local_rank`` on its machine (the GPU index it uses), the rendezvous address
    (:class:`reidcli.distributed_env.Launch`)."""

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> "DistributedEnv | None":
        """The launch read from ``WORLD_SIZE``, ``RANK``, ``LOCAL_RANK``, ``MASTER_ADDR`` and
        ``MASTER_PORT`` (:func:`reidcli.distributed_env.read_launch`: each checked, an error
        names the variable at fault); None when ``WORLD_SIZE`` is unset or 1 (a plain,
        single-process run)."""
        launch = read_launch(environ)
        return None if launch is None else cls(**dataclasses.asdict(launch))

    @property
    def shard(self) -> tuple[int, int]:
        """``(RANK, WORLD_SIZE)``: the shard this rank extracts."""
        return self.rank, self.world_size


def shard_path(out: str | os.PathLike, shard: tuple[int, int]) -> Path:
    """Where shard ``i`` of ``n`` of the output ``out`` is written: ``m.h5`` →
    ``m.shard-<i>-of-<n>.h5`` in the same folder."""
    out = Path(out)
    i, n = shard
    return out.with_name(f"{out.stem}.shard-{i}-of-{n}{out.suffix or '.h5'}")


def check_requested_shard(env: DistributedEnv, shard: tuple[int, int] | None) -> None:
    """A shard asked for explicitly must be the one the launch gives this rank."""
    if shard is not None and tuple(shard) != env.shard:
        raise UsageError(f"{param('shard', f'{shard[0]}/{shard[1]}')} disagrees with the "
                         f"torchrun launch (RANK={env.rank}, WORLD_SIZE={env.world_size})",
                         f"drop {param('shard')}: under torchrun each rank takes shard "
                         "RANK/WORLD_SIZE")


def rank_device(device: str, env: DistributedEnv) -> str:
    """The device this rank extracts on: ``auto``/``cuda`` → ``cuda:<LOCAL_RANK>`` when torch
    sees a GPU (:func:`reidcli.device.device_name`); a GPU index this machine lacks (more
    ranks per machine than GPUs) is refused naming ``LOCAL_RANK``."""
    from reidcli.device import device_name

    name = device_name(device, env.local_rank, owner="distributed extraction")
    if name.startswith("cuda:"):
        import torch

        count = torch.cuda.device_count()
        if int(name.split(":", 1)[1]) >= count:
            raise UsageError(f"this rank would extract on {name} (LOCAL_RANK={env.local_rank}) "
                             f"but torch sees {count} GPU{'s' * (count != 1)} on this machine",
                             f"start at most {count} rank{'s' * (count != 1)} per machine "
                             f"(torchrun --nproc_per_node {max(count, 1)}), or extract on "
                             f"{param('device', 'cpu')}")
    return name


@dataclasses.dataclass
class RankReport:
    """What one rank tells the others after extracting its shard (``error`` None = success)."""

    rank: int
    local_rank: int
    host: str
    device: str
    path: str
    rows: int | None = None
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class DistributedResult:
    """What :func:`run_sharded` did on this rank.

    ``path``: the merged store (rank 0 after a merge) or this rank's shard; ``merged``: whether
    this rank wrote the merged store; ``shard_paths``: the shards of all ranks (deleted after a
    merge); ``reports``: every rank's :class:`RankReport`, in rank order."""

    path: Path
    merged: bool
    shard_paths: list[Path]
    reports: list[RankReport]
    env: DistributedEnv
    backend: str


#: ``extract_shard(path, shard, device, provenance)`` writes shard ``(i, n)`` to ``path`` on
#: ``device``, adding ``provenance`` to the store's provenance, and returns the path written
ShardExtractor = Callable[[Path, tuple[int, int], str, Mapping[str, Any]], Path]


def _init_group(backend: str, device: str, env: DistributedEnv, timeout_s: float,
                join_timeout_s: float | None = None) -> bool:
    """Join the launch's process group (once; :func:`reidcli.distributed_env.join_process_group`:
    announced on stderr, the rendezvous bounded by ``join_timeout_s`` and ``timeout_s``);
    True when this call created it."""
    import torch
    import torch.distributed as dist

    if dist.is_initialized():
        return False
    if backend == "nccl":
        # NCCL binds a rank to the current device: select it before creating the group
        torch.cuda.set_device(torch.device(device))
    return join_process_group(backend, env, timeout_s=timeout_s, join_timeout_s=join_timeout_s)


def _exchange(report: RankReport, env: DistributedEnv, timeout_s: float) -> list[RankReport]:
    """Every rank's report (an ``all_gather_object``, which is also the barrier)."""
    import torch.distributed as dist

    gathered: list[Any] = [None] * env.world_size
    try:
        with native_stderr_held():                   # torch's C++ log of a failed collective
            dist.all_gather_object(gathered, report.as_dict())
    except (RuntimeError, ValueError) as exc:        # a rank died or stayed past the timeout
        closed = "closed" in str(exc).lower() or "reset by peer" in str(exc).lower()
        what = (f"rank {env.rank}: another rank stopped or gave up waiting" if closed else
                f"rank {env.rank}: not every rank reported within {timeout_s:g} s")
        raise OutputError(f"{what} ({torch_error_line(exc)}); no merged store was written",
                          f"see the failing rank's error; raise {param('timeout')} if a "
                          "rank is only slower") from None
    return [RankReport(**g) for g in gathered]


def _settle(report: RankReport, error: BaseException | None, env: DistributedEnv,
            timeout_s: float, phase: str) -> list[RankReport]:
    """Exchange the reports of a phase; raise this rank's own error, else an error naming the
    ranks that failed; return the reports when every rank succeeded."""
    try:
        reports = _exchange(report, env, timeout_s)
    except OutputError:
        if error is not None:                          # this rank's own error tells more
            raise error from None
        raise
    if error is not None:
        raise error
    if any(r.error is not None for r in reports):
        raise _failure(reports, env, phase)
    return reports


def _failure(reports: Sequence[RankReport], env: DistributedEnv, phase: str) -> OutputError:
    """The error of a rank whose partners failed: which ranks, the first one's message."""
    failed = [r for r in reports if r.error is not None]
    first = failed[0]
    what = (f"rank{'s' if len(failed) > 1 else ''} {', '.join(str(r.rank) for r in failed)} "
            f"of {env.world_size} failed (rank {first.rank}: {first.error})")
    if phase == "checks":
        return OutputError(f"{what}; no rank extracted anything", "fix the cause and run again")
    kept = [r.path for r in reports if r.error is None]
    return OutputError(
        f"{what}; no merged store was written"
        + (f"; the shards of the other ranks are kept ({', '.join(kept)})" if kept else ""),
        f"fix the cause and run again, or extract the missing shard alone "
        f"({param('shard', f'{first.rank}/{env.world_size}')}) into "
        f"{reports[first.rank].path} and join the shards with reid store merge")


def run_sharded(out: str | os.PathLike, extract_shard: ShardExtractor, *,
                env: DistributedEnv, device: str = "auto", merge: bool = True,
                force: bool = False, timeout: float = DEFAULT_TIMEOUT_S,
                requested_shard: tuple[int, int] | None = None,
                backend: str | None = None, command: list[str] | None = None,
                progress: bool | None = None,
                join_timeout: float | None = None) -> DistributedResult:
    """Extract this rank's shard with ``extract_shard`` and, on rank 0, join all shards.

    ``device``: ``auto`` | ``cpu`` | ``cuda`` (→ ``cuda:<LOCAL_RANK>``); ``backend`` defaults
    to ``nccl`` on CUDA, else ``gloo``. ``timeout`` (seconds) bounds every collective — the
    wait of a finished rank for the slowest one included; the rendezvous waits at most
    ``join_timeout`` (default ``REIDCLI_DIST_JOIN_TIMEOUT`` or 300 s) and never longer than
    ``timeout``. ``requested_shard`` (an explicit
    ``i/n``) must equal ``(RANK, WORLD_SIZE)``. Raises on every rank when any rank failed;
    the merged store is then not written. Errors before the group exists (a malformed
    ``timeout`` or ``device``) are raised at once.
    """
    import torch.distributed as dist

    if not 0 < timeout <= MAX_TIMEOUT_S:               # NaN and inf included
        raise UsageError(f"{param('timeout', timeout)} must be a number of seconds in "
                         f"(0, {MAX_TIMEOUT_S:g}]",
                         f"e.g. {param('timeout', int(DEFAULT_TIMEOUT_S))}")
    dev = rank_device(device, env)
    backend = backend or ("nccl" if dev.startswith("cuda") else "gloo")
    created = _init_group(backend, dev, env, float(timeout), join_timeout)
    try:
        paths = [shard_path(out, (r, env.world_size)) for r in range(env.world_size)]
        mine = paths[env.rank]
        report = RankReport(rank=env.rank, local_rank=env.local_rank, host=socket.gethostname(),
                            device=dev, path=str(mine))
        # phase 1, before any work: the arguments and outputs of every rank
        error: BaseException | None = None
        try:
            from reidcli.io import check_output

            check_requested_shard(env, requested_shard)
            check_output(mine, force)
            if merge and env.rank == 0:
                check_output(out, force)
        except Exception as exc:
            error = exc
            report.error = str(exc) or exc.__class__.__name__
        _settle(report, error, env, float(timeout), "checks")
        # phase 2: the shards
        try:
            provenance = {"distributed": {"rank": env.rank, "world_size": env.world_size,
                                          "local_rank": env.local_rank, "host": report.host,
                                          "device": dev, "backend": backend}}
            written = Path(extract_shard(mine, env.shard, dev, provenance))
            report.rows = _count_rows(written)
        except Exception as exc:                       # reported to every rank, then raised
            error = exc
            report.error = str(exc) or exc.__class__.__name__
        reports = _settle(report, error, env, float(timeout), "shards")
        result = DistributedResult(path=mine, merged=False, shard_paths=paths, reports=reports,
                                   env=env, backend=backend)
        if merge and env.rank == 0:
            result.path = merge_rank_shards(out, paths, reports, env=env, backend=backend,
                                            force=force, command=command, progress=progress)
            result.merged = True
        return result
    finally:
        if created and dist.is_initialized():
            dist.destroy_process_group()


def _count_rows(path: Path) -> int:
    from reidcli.store.reader import open_store

    with open_store(path) as st:
        return int(st.num_rows)


def merge_rank_shards(out: str | os.PathLike, paths: Sequence[Path],
                      reports: Sequence[RankReport], *, env: DistributedEnv, backend: str,
                      force: bool = False, command: list[str] | None = None,
                      progress: bool | None = None) -> Path:
    """Join the ranks' shards into ``out`` (atomically), check the joined store holds every
    shard's rows, and only then delete the shards. The provenance records the world size,
    the backend and every rank's host, device and rows."""
    from reidcli.store.merge import merge_shards
    from reidcli.store.reader import open_store

    missing = [str(p) for p in paths if not Path(p).exists()]
    if missing:
        raise OutputError(f"rank 0 cannot see the shard(s) {', '.join(missing)} to merge",
                          "write the output to a folder every machine shares, or extract "
                          f"with {param('merge', False)} and join the shards with reid store "
                          "merge")
    extra = {"distributed": {"world_size": env.world_size, "backend": backend,
                             "ranks": [r.as_dict() for r in reports]}}
    merged = merge_shards(out, list(paths), force=force, command=command,
                          provenance_extra=extra, progress=progress)
    expected = sum(int(r.rows or 0) for r in reports)
    with open_store(merged) as st:                     # verifies the records digest as well
        rows = int(st.num_rows)
    if rows != expected:
        raise OutputError(f"the merged store {merged} holds {rows} rows, the shards "
                          f"{expected}; the shards were kept", "run the extraction again")
    for p in paths:
        Path(p).unlink(missing_ok=True)
    return Path(merged)


def distributed_extract_model_store(layout: "StoreLayout | Callable[[], StoreLayout]",
                                    out: str | os.PathLike, model_path: str | os.PathLike, *,
                                    env: DistributedEnv | None = None, merge: bool = True,
                                    timeout: float = DEFAULT_TIMEOUT_S, device: str = "auto",
                                    requested_shard: tuple[int, int] | None = None,
                                    force: bool = False, progress: bool | None = True,
                                    command: list[str] | None = None,
                                    join_timeout: float | None = None,
                                    **extract_options: Any) -> DistributedResult:
    """:func:`reidcli.features.model_extract.extract_model_store` on every rank of a torchrun
    launch (``env`` defaults to the environment's), joined by rank 0 into ``out``.

    ``layout`` is a :class:`~reidcli.features.layout.StoreLayout` or a function returning one
    (built inside the ranks' error exchange, so a rank that cannot load the dataset makes
    every rank fail instead of leaving the others waiting). ``extract_options`` are
    ``extract_model_store``'s (``features``, ``maps``, ``batch_size`` …; ``inputs`` may be a
    function of the layout; not ``shard``: an explicit ``requested_shard`` is only checked
    against the launch). Only rank 0 shows progress. ``timeout`` and ``join_timeout`` are
    :func:`run_sharded`'s."""
    from reidcli.features.model_extract import extract_model_store

    env = env or DistributedEnv.from_environ()
    if env is None:
        raise UsageError("not a torchrun launch (WORLD_SIZE is unset or 1)",
                         "start it with torchrun --nproc_per_node N, or extract in one "
                         "process")
    if "shard" in extract_options:
        raise UsageError("the shard of a rank comes from the launch", "do not pass shard")

    def extract_shard(path: Path, shard: tuple[int, int], dev: str,
                      provenance: Mapping[str, Any]) -> Path:
        lay = layout() if callable(layout) else layout
        options = dict(extract_options)
        if callable(options.get("inputs")):
            options["inputs"] = options["inputs"](lay)
        return extract_model_store(lay, path, model_path, shard=shard, device=dev, force=force,
                                   progress=progress if env.rank == 0 else False,
                                   command=command,
                                   provenance_extra=provenance, **options)

    return run_sharded(out, extract_shard, env=env, device=device, merge=merge, force=force,
                       timeout=timeout, requested_shard=requested_shard, command=command,
                       progress=progress, join_timeout=join_timeout)


__all__ = ["DistributedEnv", "DistributedResult", "RankReport", "DEFAULT_TIMEOUT_S",
           "check_requested_shard", "distributed_extract_model_store", "merge_rank_shards",
           "rank_device", "run_sharded", "shard_path"]
