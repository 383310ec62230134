"""C-DPCF / DPCF weight-map learning time on a CUHK01-sized problem (docs/methods/cdpcf.md, Table II).

Problem: 1,940 training images (485 persons × 2 views × 2 images), four layers with
D' = 256/512/1024/2048 channels on a 24 × 8 grid (S = 192), E = 64, K = 10, G = 6 — the
weight-map learning steps 3.1–3.4 only (projection, Σ_S/Σ_D, eigenproblem), maps in memory
as float16 (as stored). Prints ours beside the paper's Matlab seconds (Core i9-10940X) and a
same-run reference: the pair-enumeration definition of Σ_S/Σ_D against our closed form on a
small subset.

    python benchmarks/cdpcf_speed.py [--persons 485] [--without-r] [--repeats 1]
"""
from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np

from reidcli.pooling.cdpcf import PoolingConfig, learn_weight_maps
from reidcli.pooling.projection import project_maps, random_orthonormal_projection
from reidcli.pooling.geometry import area_positions, position_areas
from reidcli.pooling.pooled import flat_maps
from reidcli.pooling.weight_maps import camera_block_covariances

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


def time_method(method: str, e_dim: int, persons: int, dtype=np.float32) -> float:
    pids, camids = labels(persons)
    rows = np.arange(len(pids))
    config = PoolingConfig(method=method, K=10, E=e_dim, grid=(6, 1))
    total = 0.0
    for i, (layer, channels) in enumerate(LAYERS.items()):
        maps = layer_maps(channels, len(pids), i, dtype)
        read = lambda _layer, r, m=maps: m[r[0]:r[-1] + 1]   # noqa: E731 — rows are a range
        start = time.perf_counter()
        learn_weight_maps(read, layer, i, rows, pids, camids, config)
        total += time.perf_counter() - start
        del maps
    return total


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
    parser.add_argument("--maps-dtype", default="float32", choices=("float32", "float16"),
                        help="dtype of the in-memory maps (stores keep float16; the paper's "
                             "timing excludes reading maps)")
    args = parser.parse_args()
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
          f"{4 * args.persons} training images, layers {', '.join(LAYERS)}, E=64, K=10, G=6, "
          f"maps {args.maps_dtype} in memory")
    runs = [("DPCF", "dpcf", 64), ("C-DPCF", "cdpcf", 64)]
    if args.without_r:
        runs += [("DPCF (w/o R)", "dpcf", 0), ("C-DPCF (w/o R)", "cdpcf", 0)]
    print(f"{'method':<16}{'ours (s)':>10}{'paper (s)':>11}{'speed-up':>10}")
    for label, method, e_dim in runs:
        seconds = min(time_method(method, e_dim, args.persons, np.dtype(args.maps_dtype))
                      for _ in range(args.repeats))
        print(f"{label:<16}{seconds:>10.2f}{PAPER[label]:>11.1f}{PAPER[label] / seconds:>9.1f}×")
    t_fast, t_slow, err = pair_enumeration_reference()
    print(f"same-run reference (80 images, conv2_x, C-DPCF Σ_S/Σ_D): closed form "
          f"{t_fast * 1e3:.1f} ms vs pair enumeration {t_slow * 1e3:.0f} ms "
          f"({t_slow / t_fast:.0f}× faster), max rel. difference {err:.1e}")


if __name__ == "__main__":
    main()
