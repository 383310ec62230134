"""Evaluation on several processes or machines under ``torchrun`` (docs/evaluation.md,
"Evaluation across machines").

``torchrun --nnodes N --nproc_per_node M reid eval --store S`` starts ``N·M`` copies of the
command. Every rank streams each trial's gallery (:mod:`reidcli.evaluation.streamed`) but
reads and ranks only its own contiguous run of the gallery blocks — the very blocks one
process uses, so every block gives the numbers it gives in one process. Per group of a trial
two partial results are merged:

1. the distance of every (query, special) pair, computed by the rank whose blocks hold the
   special's column. The float64 values travel as their 64-bit patterns, summed as integers
   where only the owner contributes a non-zero pattern: every rank then holds the bits one
   process computes, and orders the specials identically (ties by column);
2. per (query, special), the non-special columns ranked before it: a sum over gallery blocks
   in one process (ties broken by column index, docs/datasets.md), a sum over the ranks of
   their blocks' sums here — integers, so the total is the same.

From these every rank derives the ranks, CMC, AP and INP of one process, bit for bit.

Before each merge the ranks exchange their status (one ``all_gather_object``). A rank whose
work failed reports its error there instead, so the others stop at once with an error naming
it rather than wait for data that never comes; a rank that died or stalls makes the others
give up after ``timeout`` seconds. Rank 0 builds and writes the report, only after the last
exchange confirmed that every rank succeeded. The ranks meet through the announced, bounded
rendezvous of :mod:`reidcli.distributed_env` (``REIDCLI_DIST_JOIN_TIMEOUT``).
"""
from __future__ import annotations

import dataclasses
import socket
import warnings
from typing import Any, Callable, Sequence, TypeVar

import numpy as np

from reidcli.distributed_env import (MAX_TIMEOUT_S, Launch, join_process_group,
                                     native_stderr_held, torch_error_line)
from reidcli.errors import OutputError, UsageError
from reidcli.naming import param

#: seconds an exchange waits for the slowest rank (the rendezvous: REIDCLI_DIST_JOIN_TIMEOUT)
DEFAULT_TIMEOUT_S = 1800.0

T = TypeVar("T")


class RankFailure(OutputError):
    """A failure every rank has been told of (a rank failed, died or stalled): raised on the
    other ranks, never exchanged again."""


@dataclasses.dataclass
class GallerySplit:
    """This rank's share of every streamed gallery and the exchanges with the other ranks.

    ``device``: where the merged arrays travel (``cpu`` for gloo, ``cuda:<LOCAL_RANK>`` for
    nccl); ``timeout_s`` bounds every exchange."""

    rank: int
    world_size: int
    backend: str = "gloo"
    device: str = "cpu"
    timeout_s: float = DEFAULT_TIMEOUT_S
    #: every rank's {rank, host, device} after the last exchange
    ranks: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    #: a failure was exchanged (or the exchange broke): no more exchanges
    failed: bool = False

    def block_range(self, num_blocks: int) -> tuple[int, int]:
        """Blocks ``first … last-1`` of a gallery's ``num_blocks`` are this rank's: contiguous
        runs, as even as the count allows (ranks past the number of blocks get none)."""
        return (self.rank * num_blocks // self.world_size,
                (self.rank + 1) * num_blocks // self.world_size)

    # -- merges --------------------------------------------------------------------------
    def merge_distances(self, values: np.ndarray, mine: np.ndarray,
                        present: np.ndarray) -> np.ndarray:
        """The (query, special) distances of all ranks, float64 [n, k] (inf where not
        ``present``). ``values`` [n, k] holds this rank's where ``mine``; each present entry
        is some rank's: its bit pattern, summed with the zeros of the others, comes back
        unchanged (signed zeros and NaN payloads included)."""
        bits = np.where(mine, values, 0.0).astype(np.float64).view(np.int64)
        merged = self._sum(bits, "distances").view(np.float64)
        return np.where(present, merged, np.inf)

    def merge_counts(self, counts: np.ndarray) -> np.ndarray:
        """Per (query, special) count of columns ranked before it, summed over the ranks'
        blocks. int64 [n, k]."""
        return self._sum(np.asarray(counts, dtype=np.int64), "counts")

    def _sum(self, array: np.ndarray, what: str) -> np.ndarray:
        """Element-wise int64 sum of ``array`` over the ranks, after a status exchange that
        checks every rank reached the same merge with the same shape."""
        import torch
        import torch.distributed as dist

        self.exchange(step=f"{what} {'x'.join(map(str, array.shape))}")
        tensor = torch.from_numpy(np.ascontiguousarray(array, dtype=np.int64).copy())
        tensor = tensor.to(self.device)
        try:
            with native_stderr_held():
                dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
        except (RuntimeError, ValueError) as exc:
            self.failed = True
            raise self._broken(exc) from None
        return tensor.cpu().numpy()

    # -- status exchanges ----------------------------------------------------------------
    def exchange(self, error: BaseException | None = None, step: str = "done") -> None:
        """Tell every rank this one's status (its ``error``, else that it reached ``step``)
        and learn theirs. Raises ``error`` itself when given; else :class:`RankFailure`
        naming the ranks that failed, or when the ranks are at different steps."""
        import torch.distributed as dist

        mine = {"rank": self.rank, "host": socket.gethostname(), "device": self.device,
                "step": step,
                "error": None if error is None else (str(error) or error.__class__.__name__)}
        gathered: list[Any] = [None] * self.world_size
        try:
            with native_stderr_held():               # torch's C++ log of a failed collective
                dist.all_gather_object(gathered, mine)
        except (RuntimeError, ValueError) as exc:    # a rank died or stayed past the timeout
            self.failed = True
            if error is not None:                    # this rank's own error tells more
                raise error from None
            raise self._broken(exc) from None
        self.ranks = [{k: g[k] for k in ("rank", "host", "device")} for g in gathered]
        if error is not None:
            self.failed = True
            raise error
        failed = [g for g in gathered if g["error"] is not None]
        if failed:
            self.failed = True
            first = failed[0]
            raise RankFailure(f"rank{'s' if len(failed) > 1 else ''} "
                              f"{', '.join(str(g['rank']) for g in failed)} of "
                              f"{self.world_size} failed (rank {first['rank']}: "
                              f"{first['error']}); no report was written",
                              "fix the cause and run again")
        steps = {g["step"] for g in gathered}
        if len(steps) > 1:
            self.failed = True
            other = next(g for g in gathered if g["step"] != step)
            raise RankFailure(f"the ranks disagree on the evaluation (rank {self.rank}: "
                              f"{step}, rank {other['rank']}: {other['step']}); no report was "
                              "written", "give every rank the same store, model and options "
                              "(the same files on every machine)")

    def _broken(self, exc: BaseException) -> RankFailure:
        text = str(exc).lower()
        closed = "closed" in text or "reset by peer" in text or "broken pipe" in text
        what = (f"rank {self.rank}: another rank stopped or gave up waiting" if closed else
                f"rank {self.rank}: not every rank reported within {self.timeout_s:g} s")
        return RankFailure(f"{what} ({torch_error_line(exc)}); no report was written",
                           "see the failing rank's error; raise "
                           f"{param('timeout', int(self.timeout_s))} if a rank is only slower")

    def settle(self, work: Callable[[], T]) -> T:
        """Run ``work`` and exchange its outcome: its result once every rank succeeded; its
        own error on this rank, :class:`RankFailure` on the others."""
        try:
            result = work()
        except Exception as exc:
            if self.failed:                          # already told to (or by) every rank
                raise
            self.exchange(exc)                       # raises exc
            raise                                    # pragma: no cover - exchange raised
        self.exchange()
        return result


def rank_device(device: str, launch: Launch) -> str:
    """The device this rank computes distances on: ``auto``/``cuda`` → ``cuda:<LOCAL_RANK>``
    when torch sees a GPU; a GPU index this machine lacks is refused naming ``LOCAL_RANK``."""
    from reidcli.device import device_name

    name = device_name(device, launch.local_rank, owner="evaluation")
    if name.startswith("cuda:"):
        import torch

        count = torch.cuda.device_count()
        if int(name.split(":", 1)[1]) >= count:
            raise UsageError(f"this rank would evaluate on {name} (LOCAL_RANK="
                             f"{launch.local_rank}) but torch sees {count} "
                             f"GPU{'s' * (count != 1)} on this machine",
                             f"start at most {count} rank{'s' * (count != 1)} per machine "
                             f"(torchrun --nproc_per_node {max(count, 1)}), or evaluate on "
                             f"{param('device', 'cpu')}")
    return name


def check_launch_requests(requests: Sequence[Any], launch: Launch) -> None:
    """What a torchrun launch cannot evaluate, refused on every rank before they meet: a
    gallery kept in memory (``stream`` off), re-ranking and NMI (whole distance matrices)."""
    for request in requests:
        why = None
        if request.stream == "off":
            why = f"{param('stream', 'off')} keeps the gallery in memory"
        elif request.rerank is not None:
            why = "k-reciprocal re-ranking needs every pairwise distance"
        elif request.nmi:
            why = "NMI clusters every feature at once"
        if why is not None:
            raise UsageError(f"a torchrun launch ({launch.world_size} ranks) splits a streamed "
                             f"gallery over its ranks, but {why}",
                             "evaluate in one process (without torchrun)")


def evaluate_on_ranks(requests: Sequence[Any], launch: Launch, *,
                      timeout: float = DEFAULT_TIMEOUT_S,
                      join_timeout: float | None = None):
    """``reid eval`` on this rank of a torchrun launch: every request
    (:class:`~reidcli.evaluation.run.StoreEvalRequest`, one per store) evaluated with its
    gallery streamed and split over the ranks. Returns what one process's
    :func:`~reidcli.evaluation.run.evaluate_store` (one request) or
    :func:`~reidcli.evaluation.multi.evaluate_stores` returns, the same numbers on every rank,
    with a ``distributed`` entry (world size, backend, every rank's host and device) in the
    meta / reports. Only rank 0 shows progress and warnings; only rank 0 should report.

    ``timeout`` (seconds) bounds every exchange; the rendezvous waits ``join_timeout``
    (default ``REIDCLI_DIST_JOIN_TIMEOUT`` or 300 s), never more than ``timeout``. Raises on
    every rank when any rank failed. Errors before the ranks meet (a malformed ``timeout``,
    ``device`` or an evaluation a launch cannot split) are raised at once."""
    import torch.distributed as dist

    from reidcli.evaluation.multi import evaluate_requests

    requests = list(requests)
    if not requests:
        raise UsageError("no store to evaluate", f"give at least one {param('store')}")
    if not 0 < timeout <= MAX_TIMEOUT_S:             # NaN and inf included
        raise UsageError(f"{param('timeout', timeout)} must be a number of seconds in "
                         f"(0, {MAX_TIMEOUT_S:g}]",
                         f"e.g. {param('timeout', int(DEFAULT_TIMEOUT_S))}")
    check_launch_requests(requests, launch)
    devices = {rank_device(r.device, launch) for r in requests}
    if len(devices) != 1:                              # pragma: no cover - one --device
        raise UsageError("the stores of a launch are evaluated on one device",
                         f"give one {param('device')}")
    device = devices.pop()
    backend = "nccl" if device.startswith("cuda") else "gloo"
    if backend == "nccl":
        import torch
        torch.cuda.set_device(torch.device(device))   # NCCL binds a rank to its device
    created = join_process_group(backend, launch, timeout_s=float(timeout),
                                 join_timeout_s=join_timeout)
    try:
        split = GallerySplit(rank=launch.rank, world_size=launch.world_size, backend=backend,
                             device=device, timeout_s=float(timeout))
        progress = launch.rank == 0
        mine = [dataclasses.replace(r, stream="on", device=device, split=split,
                                    options=dataclasses.replace(
                                        r.options, progress=r.options.progress and progress))
                for r in requests]

        def work():
            with warnings.catch_warnings():
                if launch.rank != 0:                 # rank 0 says it once
                    warnings.simplefilter("ignore")
                return evaluate_requests(mine)

        evaluation = split.settle(work)
        info = {"world_size": launch.world_size, "backend": backend, "ranks": split.ranks}
        if hasattr(evaluation, "meta"):
            evaluation.meta["distributed"] = info
        else:
            for report in evaluation.reports:
                report["distributed"] = info
        return evaluation
    finally:
        if created and dist.is_initialized():
            dist.destroy_process_group()


__all__ = ["DEFAULT_TIMEOUT_S", "GallerySplit", "RankFailure", "check_launch_requests",
           "evaluate_on_ranks", "rank_device"]
