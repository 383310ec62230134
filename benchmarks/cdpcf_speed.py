"""C-DPCF / DPCF weight-map learning time on a CUHK01-sized problem (docs/methods/cdpcf.md, Table II).

Problem: 1,940 training images (485 persons × 2 views × 2 images), four layers with
D' = 256/512/1024/2048 channels on a 24 × 8 grid (S = 192), E = 64, K = 10, G = 6 — the
weight-map learning steps 3.1–3.4 only (projection, Σ_S/Σ_D, eigenproblem), maps in memory
as float16 (as stored). Prints ours beside the paper's Matlab seconds (Core i9-10940X), the
previous implementation on the same maps in the same run (whole-chunk float16 → float32
conversion, per-image numpy GEMMs, one-hot person sums) with the speed-up and the largest
differences of the learned maps, and a same-run reference: the pair-enumeration definition
of Σ_S/Σ_D against our closed form on a small subset.

    python benchmarks/cdpcf_speed.py [--persons 485] [--without-r] [--repeats 1]

Like `reid`, it sets ``OMP_WAIT_POLICY=PASSIVE`` unless given: torch's OpenMP workers that
spin while they wait for a core slowed both paths ten-fold on a busy 2-core machine.
"""
from __future__ import annotations

import argparse
import os
import platform
import time

# as `reid` does before torch loads (reidcli/cli/main.py): idle OpenMP workers sleep
# instead of spinning on the shared cores; a value set by the caller is kept
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np

from reidcli.pooling.cdpcf import PoolingConfig, learn_weight_maps
from reidcli.pooling.geometry import area_positions, position_areas, same_area_mask
from reidcli.pooling.pooled import flat_maps
from reidcli.pooling.projection import project_maps, random_orthonormal_projection
from reidcli.pooling.weight_maps import (CrossCameraScatter, camera_block_covariances,
                                         top_eigenvectors)

LAYERS = {"conv2_x": 256, "conv3_x": 512, "conv4_x": 1024, "conv5_x": 2048}
PAPER = {"DPCF": 43.6, "DPCF (w/o R)": 1163.9, "C-DPCF": 49.0, "C-DPCF (w/o R)": 1684.4}


def labels(persons: int) -> tuple[np.ndarray, np.ndarray]:
    """pids/camids of persons × 2 views × 2 images (CUHK01's training set)."""
    pids = np.repeat(np.arange(1, persons + 1), 4)
    camids = np.tile([0, 0, 1, 1], persons)
    return pids, camids


def layer_maps(channels: int, n: int, layer: int, dtype=np.float32) -> np.ndarray:
    rng = np.random.default_rng(layer)
    return rng.standard_normal((n, channels, 24, 8), dtype=np.float32).astype(dtype)


# -- the previous implementation (before per-block conversion), kept to time it -------------
def previous_project_maps(maps: np.ndarray, projection: np.ndarray | None,
                          positions: list[np.ndarray]) -> np.ndarray:
    """q [n, E, S]: the whole chunk converted to float32, then per area n numpy GEMMs."""
    maps = np.asarray(maps)
    dtype = np.float64 if maps.dtype == np.float64 else np.float32
    n, channels = maps.shape[:2]
    flat = maps.reshape(n, channels, -1)
    if projection is None:
        return flat.astype(dtype, copy=False)
    proj_t = projection.astype(dtype, copy=False).T
    flat = flat.astype(dtype, copy=False)
    out = np.empty((n, projection.shape[1], flat.shape[2]), dtype=dtype)
    for g, pos in enumerate(positions):
        block = proj_t[:, g * channels:(g + 1) * channels]
        if len(pos) and pos[-1] - pos[0] + 1 == len(pos):
            cols = slice(int(pos[0]), int(pos[-1]) + 1)
            out[:, :, cols] = np.matmul(block, flat[:, :, cols])
        else:
            out[:, :, pos] = np.matmul(block, flat[:, :, pos])
    return out


class PreviousScatter(CrossCameraScatter):
    """The previous :meth:`CrossCameraScatter.add`: q copied whole to float64, Grams of
    boolean-indexed copies, person sums y_{p,c} by a dense one-hot product."""

    def add(self, index: np.ndarray, q: np.ndarray) -> None:
        index = np.asarray(index, dtype=np.int64)
        n, rows, s = q.shape
        if self._rows is None:
            self._rows = rows
            c, p = self.num_cameras, len(self.persons)
            self._self_same = np.zeros((c, s, s))
            self._self_all = np.zeros((c, s, s))
            self._sums = np.zeros((p, c, rows * s))
        self._seen[index] = True
        q = np.asarray(q, dtype=np.float64)
        cams = self.cam_index[index]
        for c in np.unique(cams):
            pick = cams == c
            qc = q[pick].reshape(-1, s)
            w_same = self.weight_same[index[pick]]
            gram = qc.T @ qc
            self._self_all[c] += self.weight_all[index[pick][0]] * gram
            if np.all(w_same == w_same[0]):
                self._self_same[c] += w_same[0] * gram
            else:
                a = qc * np.repeat(np.sqrt(w_same), rows)[:, None]
                self._self_same[c] += a.T @ a
        groups = self.person_index[index] * self.num_cameras + cams
        uniq, inverse = np.unique(groups, return_inverse=True)
        onehot = np.zeros((len(uniq), n))
        onehot[inverse, np.arange(n)] = 1.0
        self._sums.reshape(-1, rows * s)[uniq] += onehot @ q.reshape(n, rows * s)


def previous_learn_weight_maps(read, layer: str, layer_idx: int, rows: np.ndarray,
                               pids: np.ndarray, camids: np.ndarray,
                               config: PoolingConfig) -> dict[str, np.ndarray]:
    """The previous :func:`learn_weight_maps` (same chunks, same eigen-solver)."""
    first = read(layer, rows[:1])
    channels, height, width = first.shape[1:]
    areas = position_areas(height, width, config.grid)
    positions = area_positions(areas)
    projection = mask = None
    if config.E == 0:
        mask = same_area_mask(areas)
    else:
        projection = random_orthonormal_projection(len(positions) * channels, config.E,
                                                   config.seed, layer_idx)
    scatter = PreviousScatter(pids, camids, height * width,
                              camera_specific=config.camera_specific, mask=mask)
    for start in range(0, len(rows), config.chunk):
        idx = np.arange(start, min(start + config.chunk, len(rows)))
        scatter.add(idx, previous_project_maps(read(layer, rows[idx]), projection, positions))
    weights, values = top_eigenvectors(scatter.result(), config.K, context=f"layer {layer}")
    return {"weight_maps": weights, "eigenvalues": values}


def time_methods(runs: list[tuple[str, str, int]], persons: int, dtype, repeats: int,
                 previous: bool) -> dict[str, dict[str, float]]:
    """Per run label: seconds of the current and previous paths summed over the four layers
    (best of ``repeats`` per layer) and the largest |Δ| of weight maps / eigenvalues."""
    pids, camids = labels(persons)
    rows = np.arange(len(pids))
    out = {label: {"new": 0.0, "old": 0.0, "maps": 0.0, "values": 0.0}
           for label, _, _ in runs}
    warm = layer_maps(64, 40, 0, dtype)                     # imports and thread pools, untimed
    for learn in (learn_weight_maps, previous_learn_weight_maps):
        learn(lambda _layer, r: warm[r[0]:r[-1] + 1], "warm-up", 0, rows[:40], pids[:40],
              camids[:40], PoolingConfig(method="cdpcf", K=2, E=8, grid=(6, 1)))
    for i, (layer, channels) in enumerate(LAYERS.items()):
        maps = layer_maps(channels, len(pids), i, dtype)
        read = lambda _layer, r, m=maps: m[r[0]:r[-1] + 1]   # noqa: E731 — rows are a range
        for label, method, e_dim in runs:
            config = PoolingConfig(method=method, K=10, E=e_dim, grid=(6, 1))
            paths = [("new", learn_weight_maps)]
            if previous:
                paths.append(("old", previous_learn_weight_maps))
            learned = {}
            for name, learn in paths:
                best = np.inf
                for _ in range(repeats):
                    start = time.perf_counter()
                    learned[name] = learn(read, layer, i, rows, pids, camids, config)
                    best = min(best, time.perf_counter() - start)
                out[label][name] += best
            if previous:
                for key, field in (("maps", "weight_maps"), ("values", "eigenvalues")):
                    diff = np.abs(learned["new"][field] - learned["old"][field]).max()
                    out[label][key] = max(out[label][key], float(diff))
        del maps
    return out


def pair_enumeration_reference(persons: int = 20) -> tuple[float, float, float]:
    """(closed-form s, enumeration s, max rel. difference) for conv2_x-sized maps."""
    pids, camids = labels(persons)
    maps = layer_maps(256, len(pids), 0, np.float64)
    areas = position_areas(24, 8, (6, 1))
    proj = random_orthonormal_projection(6 * 256, 64, 0, 0)
    q = project_maps(flat_maps(maps), proj, area_positions(areas))
    start = time.perf_counter()
    fast = camera_block_covariances(q, pids, camids, camera_specific=True)
    t_fast = time.perf_counter() - start
    start = time.perf_counter()
    s = q.shape[2]
    n = len(q)
    big = np.zeros((n, q.shape[1], 2 * s))
    for i in range(n):
        big[i, :, camids[i] * s:(camids[i] + 1) * s] = q[i]
    same = np.zeros((2 * s, 2 * s))
    diff = np.zeros_like(same)
    n_same = n_diff = 0
    for i in range(n):
        for j in range(n):
            if camids[i] == camids[j]:
                continue
            d = big[i] - big[j]
            if pids[i] == pids[j]:
                same += d.T @ d
                n_same += 1
            else:
                diff += d.T @ d
                n_diff += 1
    t_slow = time.perf_counter() - start
    err = max(np.abs(fast.sigma_same - same / n_same).max() / np.abs(same / n_same).max(),
              np.abs(fast.sigma_diff - diff / n_diff).max() / np.abs(diff / n_diff).max())
    return t_fast, t_slow, err


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--persons", type=int, default=485)
    parser.add_argument("--without-r", action="store_true", help="also time E = 0 (w/o R)")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--maps-dtype", default="float16", choices=("float32", "float16"),
                        help="dtype of the in-memory maps (stores keep float16; the paper's "
                             "timing excludes reading maps)")
    parser.add_argument("--no-previous", action="store_true",
                        help="skip timing the previous implementation")
    args = parser.parse_args()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"load {load:.2f}, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}; "
          f"{4 * args.persons} training images, layers {', '.join(LAYERS)}, "
          f"E=64, K=10, G=6, maps {args.maps_dtype} in memory")
    runs = [("DPCF", "dpcf", 64), ("C-DPCF", "cdpcf", 64)]
    if args.without_r:
        runs += [("DPCF (w/o R)", "dpcf", 0), ("C-DPCF (w/o R)", "cdpcf", 0)]
    times = time_methods(runs, args.persons, np.dtype(args.maps_dtype), args.repeats,
                         not args.no_previous)
    print(f"{'method':<16}{'ours (s)':>10}{'paper (s)':>11}{'speed-up':>10}"
          + ("" if args.no_previous else
             f"{'previous (s)':>14}{'ours/prev.':>12}{'max|Δ maps|':>13}{'max|Δ eig.|':>13}"))
    for label, _, _ in runs:
        t = times[label]
        line = (f"{label:<16}{t['new']:>10.2f}{PAPER[label]:>11.1f}"
                f"{PAPER[label] / t['new']:>9.1f}×")
        if not args.no_previous:
            line += (f"{t['old']:>14.2f}{t['old'] / t['new']:>11.1f}×"
                     f"{t['maps']:>13.1e}{t['values']:>13.1e}")
        print(line)
    t_fast, t_slow, err = pair_enumeration_reference()
    print(f"same-run reference (80 images, conv2_x, C-DPCF Σ_S/Σ_D): closed form "
          f"{t_fast * 1e3:.1f} ms vs pair enumeration {t_slow * 1e3:.0f} ms "
          f"({t_slow / t_fast:.0f}× faster), max rel. difference {err:.1e}")


if __name__ == "__main__":
    main()
