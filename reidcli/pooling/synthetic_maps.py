"""Camera-biased toy conv maps for tests and demos (cdpcf.md §8.1).

Maps are D' = 16 channels on a 12 × 4 grid (S = 48), two cameras, one image per camera per
person. Each person has two part vectors; camera 0 shows them on rows (0, 4), camera 1 on rows
(3, 7) — the same stripes of a G = 3 grid but different rows, which only camera-specific maps
can follow. ``biased=False`` puts camera 1's parts on rows (0, 4) too (the control).
"""
from __future__ import annotations

import dataclasses

import numpy as np

CHANNELS, HEIGHT, WIDTH = 16, 12, 4
PART_ROWS = {0: (0, 4), 1: (3, 7)}
CONTROL_ROWS = {0: (0, 4), 1: (0, 4)}


@dataclasses.dataclass
class ToyMaps:
    """maps float32 [N, 16, 12, 4]; pids, camids int64 [N] (person-major, camera 0 first)."""

    maps: np.ndarray
    pids: np.ndarray
    camids: np.ndarray

    def read(self, layer: str, rows: np.ndarray) -> np.ndarray:
        """A :data:`reidcli.pooling.cdpcf.MapReader` over the in-memory maps (any layer)."""
        return self.maps[np.asarray(rows, dtype=np.int64)]


def toy_conv_maps(num_persons: int, seed: int, *, biased: bool = True,
                  first_pid: int = 1) -> ToyMaps:
    """Render ``num_persons`` persons × 2 cameras with ``Generator(PCG64(seed))`` (§8.1).

    Image (p, c): row clutter r_h = 0.7·ε_h shared by the row's 4 columns; part j's row gets
    a_{p,j} + 0.8·η instead; F[:, h, w] = 0.5 + r_h + 0.3·ξ_{h,w}.
    """
    rng = np.random.Generator(np.random.PCG64(seed))
    rows_of = PART_ROWS if biased else CONTROL_ROWS
    parts = rng.standard_normal((num_persons, 2, CHANNELS))              # a_{p,j}
    n = 2 * num_persons
    rows = 0.7 * rng.standard_normal((n, HEIGHT, CHANNELS))              # r_h per image
    noise = rng.standard_normal((n, 2, CHANNELS))                         # η per part
    pids = np.repeat(np.arange(first_pid, first_pid + num_persons), 2)
    camids = np.tile(np.array([0, 1]), num_persons)
    for i in range(n):
        p, c = i // 2, i % 2
        for j, h in enumerate(rows_of[c]):
            rows[i, h] = parts[p, j] + 0.8 * noise[i, j]
    xi = 0.3 * rng.standard_normal((n, CHANNELS, HEIGHT, WIDTH))
    maps = 0.5 + rows.transpose(0, 2, 1)[:, :, :, None] + xi
    return ToyMaps(maps.astype(np.float32), pids.astype(np.int64), camids.astype(np.int64))


def toy_problem(seed: int, *, biased: bool = True, train_persons: int = 150,
                test_persons: int = 100) -> tuple[ToyMaps, ToyMaps]:
    """(train, test) of §8.1: 150 training persons from ``seed``, 100 others from seed+1000."""
    train = toy_conv_maps(train_persons, seed, biased=biased, first_pid=1)
    test = toy_conv_maps(test_persons, seed + 1000, biased=biased, first_pid=10_001)
    return train, test
