"""Thread pools reused across calls (created on first use, grown on demand).

The sharded DART3 LITE pass (docs/methods/dart3.md) and the per-task C-DPCF statistics
(docs/methods/cdpcf.md) run fixed tasks on worker threads and merge the results in task
order, so the bits do not depend on the thread count; the pool only decides the speed.
"""
from __future__ import annotations

import contextlib
import functools
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Iterator


class ReusedThreadPool:
    """A :class:`ThreadPoolExecutor` named ``prefix``, created on first use and replaced by a
    larger one when more workers are asked for."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.pool: ThreadPoolExecutor | None = None
        self.size = 0
        self._lock = threading.Lock()

    def get(self, workers: int) -> ThreadPoolExecutor:
        """The pool, with at least ``workers`` threads."""
        with self._lock:
            if self.pool is None or self.size < workers:
                if self.pool is not None:
                    self.pool.shutdown(wait=True)
                self.pool = ThreadPoolExecutor(workers, thread_name_prefix=self.prefix)
                self.size = workers
            return self.pool


@functools.lru_cache(maxsize=1)
def torch_uses_openmp() -> bool:
    """Whether torch's intra-op threads are OpenMP's, whose count is per calling thread."""
    import torch
    return "parallel backend: OpenMP" in torch.__config__.parallel_info()


@contextlib.contextmanager
def one_intra_op_thread() -> Iterator[int]:
    """torch on one intra-op thread inside the block, the caller's count restored after.
    Yields how many worker threads the caller may run: its own thread count where torch
    uses OpenMP (each worker's GEMMs then run on one thread), else 1."""
    import torch
    threads = torch.get_num_threads()
    if threads == 1 or not torch_uses_openmp():
        yield threads if torch_uses_openmp() else 1
        return
    torch.set_num_threads(1)
    try:
        yield threads
    finally:
        torch.set_num_threads(threads)
