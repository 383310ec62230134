"""Row operations on a block of distances, on the CPU (NumPy) or a GPU (torch).

The ranking code needs three operations on a distance block ``d`` [b, g]: gather a few entries
per row, count the entries of each row below (and up to) a few values of that row
(:meth:`count_below`), and count exact ties. Everything else works on [b, k] arrays (k = a
query's gallery images of its own identity, a few dozen at most) in NumPy.

Counting by sorting every row and binary-searching the values is the general way (the torch
backend's, and the CPU's fallback). On the CPU most of a row never matters: only entries up to
the row's largest value can be counted, and in a re-ID ranking that is a few per cent of the
gallery (a query's last positive ranks early). The CPU backend therefore keeps those entries
only, orders them by (row, value) in one sort of 64-bit keys and finds every value's count with
one ``searchsorted``; rows are split over a small thread pool (NumPy releases the GIL). A block
whose kept share exceeds :data:`SELECTED_SHARE_MAX` (features that barely separate
identities) is counted by sorting its rows instead.
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from reidcli.device import device_name

#: rows × columns of the tie-resolution scratch array (bounds its memory)
_TIE_CHUNK_ELEMENTS = 1 << 22
#: the CPU counts a float32 block from its kept entries while they are at most this share
#: of the block; beyond it, sorting whole rows is cheaper (measured in docs/performance.md)
SELECTED_SHARE_MAX = 0.25


def cpu_threads() -> int:
    """Cores this process may use (affinity-aware)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - non-Linux
        return max(1, os.cpu_count() or 1)


class NumpyBackend:
    """CPU backend: distance blocks are NumPy arrays."""

    name = "cpu"
    is_torch = False

    def __init__(self, threads: int | None = None):
        self.threads = threads or cpu_threads()
        self._pool: ThreadPoolExecutor | None = None
        self._mask = np.empty(0, dtype=bool)

    def _mask_buffer(self, shape: tuple[int, int]) -> np.ndarray:
        """A bool scratch array of ``shape``, reused from block to block (fresh pages cost
        more than the comparison that fills them)."""
        size = shape[0] * shape[1]
        if self._mask.size < size:
            self._mask = np.empty(size, dtype=bool)
        return self._mask[:size].reshape(shape)

    # -- helpers -------------------------------------------------------------------------
    def to_numpy(self, array: Any) -> np.ndarray:
        return np.asarray(array)

    def gather(self, d: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """``d[i, cols[i, j]]`` → [b, k] (same dtype as ``d``)."""
        return np.take_along_axis(d, cols, axis=1)

    def sort_rows(self, d: np.ndarray) -> np.ndarray:
        """A row-sorted copy of ``d`` [b, g], copied and sorted on ``self.threads`` threads
        (each copies and sorts its own rows)."""
        d = np.asarray(d)
        b = d.shape[0]
        if self.threads <= 1 or b < 2 * self.threads or d.size < (1 << 18):
            out = np.array(d, copy=True, order="C")
            out.sort(axis=1)
            return out
        out = np.empty(d.shape, dtype=d.dtype)
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="reid-sort")

        def copy_and_sort(lo: int, hi: int) -> None:
            rows = out[lo:hi]
            np.copyto(rows, d[lo:hi])
            rows.sort(axis=1)

        bounds = np.linspace(0, b, self.threads + 1).astype(int)
        jobs = [self._pool.submit(copy_and_sort, lo, hi)
                for lo, hi in zip(bounds[:-1], bounds[1:]) if hi > lo]
        for job in jobs:
            job.result()
        return out

    def count_below(self, d: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(below, upto)``, int64 [b, k]: the entries of row i of ``d`` [b, g] that are
        ``< values[i, j]`` and ``<= values[i, j]`` ([b, k]; exact for finite values, any
        count for the infinite values that pad absent ones).

        float32 blocks: only each row's entries up to its largest finite value are kept
        and counted, each thread on its own rows (module doc); other blocks, or a kept
        share over :data:`SELECTED_SHARE_MAX` in any thread's rows: rows sorted, then
        :meth:`searchsorted`."""
        d = np.asarray(d)
        values = np.asarray(values, dtype=d.dtype)
        if d.dtype == np.float32 and d.ndim == 2 and d.size and values.shape[1]:
            mask = self._mask_buffer(d.shape)
            parts = self.map_row_slices(
                lambda rows: _count_kept(d[rows], mask[rows], values[rows]), d.shape[0], d.size)
            if all(part is not None for part in parts):
                return tuple(np.concatenate(counts) for counts in zip(*parts))
        return count_by_sorting(self, d, values)

    def map_row_chunks(self, fn, array: np.ndarray) -> list:
        """``fn`` applied to ``self.threads`` row chunks of ``array`` in parallel (NumPy
        releases the GIL in sorts and partitions); results in row order."""
        return self.map_row_slices(lambda rows: fn(array[rows]), array.shape[0], array.size)

    def map_row_slices(self, fn, num_rows: int, size: int) -> list:
        """``fn(slice)`` for ``self.threads`` slices splitting ``num_rows`` rows, in parallel
        (one call when the work of ``size`` elements is small); results in row order."""
        if self.threads <= 1 or num_rows < 2 * self.threads or size < (1 << 18):
            return [fn(slice(0, num_rows))]
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="reid-sort")
        bounds = np.linspace(0, num_rows, self.threads + 1).astype(int)
        jobs = [self._pool.submit(fn, slice(int(lo), int(hi)))
                for lo, hi in zip(bounds[:-1], bounds[1:]) if hi > lo]
        return [job.result() for job in jobs]

    def searchsorted(self, sorted_rows: np.ndarray, values: np.ndarray,
                     right: bool = False) -> np.ndarray:
        """Per-row ``searchsorted``: [b, g] sorted rows, [b, k] values → int64 [b, k].

        ``right=False`` counts entries ``< value``, ``right=True`` entries ``<= value``.
        A binary search over all rows at once: ``bit_length(g)`` vectorised steps.
        """
        b, g = sorted_rows.shape
        flat = sorted_rows.reshape(-1)
        values = np.asarray(values, dtype=sorted_rows.dtype)
        base = (np.arange(b, dtype=np.int64) * g)[:, None]
        lo = np.zeros(values.shape, dtype=np.int64)
        hi = np.full(values.shape, g, dtype=np.int64)
        if g == 0:
            return lo
        for _ in range(int(g).bit_length()):
            active = lo < hi
            if not active.any():
                break
            mid = (lo + hi) >> 1
            probe = flat[base + np.minimum(mid, g - 1)]
            go_right = (probe <= values) if right else (probe < values)
            go_right &= active
            lo = np.where(go_right, mid + 1, lo)
            hi = np.where(go_right | ~active, hi, mid)
        return lo

    def count_equal_before(self, d: np.ndarray, rows: np.ndarray, values: np.ndarray,
                           cols: np.ndarray) -> np.ndarray:
        """For each (row, value, col): #columns c' < col of that row with ``d == value``.

        Only called for the rare entries whose value is tied with another column.
        """
        out = np.zeros(len(rows), dtype=np.int64)
        g = d.shape[1]
        step = max(1, _TIE_CHUNK_ELEMENTS // max(g, 1))
        col_index = np.arange(g)
        for start in range(0, len(rows), step):
            sl = slice(start, start + step)
            equal = d[rows[sl]] == np.asarray(values[sl], dtype=d.dtype)[:, None]
            equal &= col_index[None, :] < cols[sl, None]
            out[sl] = equal.sum(axis=1)
        return out

    def has_nan(self, d: np.ndarray) -> bool:
        return bool(np.isnan(d).any())

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None


def count_by_sorting(backend, d, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``count_below`` of any backend: ``d`` [b, g]'s rows sorted, then ``values`` [b, k]
    binary-searched in them (``< value`` and ``<= value``)."""
    sorted_rows = backend.sort_rows(d)
    return (backend.searchsorted(sorted_rows, values, right=False),
            backend.searchsorted(sorted_rows, values, right=True))


def order_keys(values: np.ndarray) -> np.ndarray:
    """int64 keys in [0, 2³²) ordered as the float32 ``values`` (any shape): the IEEE bits
    with the sign flipped for positives and all bits flipped for negatives; −0.0 counts as
    +0.0."""
    bits = (np.asarray(values, dtype=np.float32) + np.float32(0.0)).view(np.uint32)
    bits = bits.astype(np.int64)
    return np.where(bits >= 1 << 31, (1 << 32) - 1 - bits, bits + (1 << 31))


def _count_kept(d: np.ndarray, mask: np.ndarray, values: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray] | None:
    """``NumpyBackend.count_below`` of the rows ``d`` [b, g] from their kept entries (every
    entry up to the row's largest finite value in ``values`` [b, k]; ``mask`` [b, g] bool
    scratch): one sort of (row, value) keys, one ``searchsorted`` of the values' keys. None
    when the kept entries exceed :data:`SELECTED_SHARE_MAX` of the rows."""
    reach = np.where(np.isfinite(values), values, -np.inf).max(axis=1)
    kept = np.flatnonzero(np.less_equal(d, reach[:, None], out=mask))
    if len(kept) > SELECTED_SHARE_MAX * d.size:
        return None
    row_keys = np.arange(len(d), dtype=np.int64) << 32
    keys = (kept // d.shape[1]) << 32 | order_keys(d.reshape(-1)[kept])
    keys.sort()
    starts = np.searchsorted(keys, row_keys)[:, None]
    probes = row_keys[:, None] | order_keys(values)
    return (np.searchsorted(keys, probes, side="left") - starts,
            np.searchsorted(keys, probes, side="right") - starts)


class TorchBackend:
    """GPU (or forced torch-on-CPU) backend: distance blocks are torch tensors."""

    is_torch = True

    def __init__(self, device: str):
        import torch

        self.torch = torch
        self.device = torch.device(device)
        self.name = f"torch:{self.device}"

    def to_numpy(self, array: Any) -> np.ndarray:
        if isinstance(array, np.ndarray):
            return array
        return array.detach().cpu().numpy()

    def _tensor(self, array: np.ndarray, like=None):
        t = self.torch.from_numpy(np.ascontiguousarray(array)).to(self.device)
        return t.to(like.dtype) if like is not None else t

    def gather(self, d, cols: np.ndarray) -> np.ndarray:
        idx = self._tensor(cols.astype(np.int64))
        return self.to_numpy(self.torch.gather(d, 1, idx))

    def sort_rows(self, d):
        return self.torch.sort(d, dim=1).values

    def count_below(self, d, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(below, upto)`` int64 [b, k] (:meth:`NumpyBackend.count_below`): rows sorted on
        the device, values binary-searched."""
        return count_by_sorting(self, d, values)

    def searchsorted(self, sorted_rows, values: np.ndarray, right: bool = False) -> np.ndarray:
        vals = self._tensor(values, like=sorted_rows)
        return self.to_numpy(self.torch.searchsorted(sorted_rows.contiguous(), vals.contiguous(),
                                                     right=right)).astype(np.int64)

    def count_equal_before(self, d, rows: np.ndarray, values: np.ndarray,
                           cols: np.ndarray) -> np.ndarray:
        out = np.zeros(len(rows), dtype=np.int64)
        g = d.shape[1]
        step = max(1, _TIE_CHUNK_ELEMENTS // max(g, 1))
        col_index = self.torch.arange(g, device=self.device)
        for start in range(0, len(rows), step):
            sl = slice(start, start + step)
            r = self._tensor(rows[sl].astype(np.int64))
            v = self._tensor(values[sl], like=d)
            c = self._tensor(cols[sl].astype(np.int64))
            equal = (d[r] == v[:, None]) & (col_index[None, :] < c[:, None])
            out[sl] = self.to_numpy(equal.sum(dim=1))
        return out

    def has_nan(self, d) -> bool:
        return bool(self.torch.isnan(d).any())

    def close(self) -> None:
        pass


def resolve_device(device: str) -> str:
    """``auto`` → ``cuda`` when torch sees a GPU, else ``cpu``; validate explicit choices
    (:func:`reidcli.device.device_name`)."""
    return device_name(device, owner="evaluation")


def make_backend(device: str, threads: int | None = None):
    """The backend for a resolved device (``cpu`` → NumPy, anything else → torch)."""
    if device == "cpu":
        return NumpyBackend(threads)
    return TorchBackend(device)
