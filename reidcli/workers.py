"""Thread pools reused across calls (created on first use, grown on demand).

The sharded DART3 LITE pass (docs/methods/dart3.md) and the per-task C-DPCF statistics
(docs/methods/cdpcf.md) run fixed tasks on worker threads and merge the results in task
order, so the bits do not depend on the thread count; the pool only decides the speed.
"""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor


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
