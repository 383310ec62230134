"""C-DPCF / DPCF weight-map learning time on a CUHK01-sized problem (docs/methods/cdpcf.md, Table II).

Problem: 1,940 training images (485 persons × 2 views × 2 images), four layers with
D' = 256/512/1024/2048 channels on a 24 × 8 grid (S = 192), E = 64, K = 10, G = 6 — the
weight-map learning steps 3.1–3.4 only (projection, Σ_S/Σ_D, eigenproblem), maps in memory
as float16 (as stored). Prints ours beside the paper's Matlab seconds (Core i9-10940X), the
previous implementation (before issue 32: whole chunks projected by ``project_maps`` on
torch's threads, numpy Grams) on the same maps in the same run with the speed-up and the
largest absolute and relative differences of the learned maps and eigenvalues, and a
same-run reference: the pair-enumeration definition of Σ_S/Σ_D against our closed form on a
small subset. ``--repeats N`` times each path N times per layer, alternately; medians.

    python benchmarks/cdpcf_speed.py [--persons 485] [--without-r] [--repeats 1]

Like `reid`, it sets ``OMP_WAIT_POLICY=PASSIVE`` unless given: torch's OpenMP workers that
spin while they wait for a core slowed both paths ten-fold on a busy 2-core machine.
"""
from __future__ import annotations

import argparse
import os
import platform
import time
from types import SimpleNamespace

# as `reid` does before torch loads (reidcli/cli/main.py): idle OpenMP workers sleep
# instead of spinning on the shared cores; a value set by the caller is kept
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np

from reidcli.pooling.cdpcf import learn_weight_maps
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


def pooling_settings(method: str, K: int, E: int) -> dict:
    """:func:`learn_weight_maps`'s keywords for ``method`` (cdpcf: camera-specific maps)."""
    return {"K": K, "E": E, "grid": (6, 1), "seed": 0, "chunk": 256,
            "camera_specific": method == "cdpcf"}


# -- the previous implementation (before issue 32), kept to time it in the same run -------
def previous_learn_weight_maps(read, layer: str, layer_idx: int, rows: np.ndarray,
                               pids: np.ndarray, camids: np.ndarray,
                               **settings) -> dict[str, np.ndarray]:
    """:func:`learn_weight_maps` before issue 32 (same chunks, same eigen-solver): each chunk
    projected whole by :func:`project_maps` (float16 → float32 transposing copies, one
    torch.mm per block and area on torch's threads), then :meth:`CrossCameraScatter.add`
    (numpy Grams, person sums by ``reduceat``)."""
    config = SimpleNamespace(**settings)
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
    scatter = CrossCameraScatter(pids, camids, height * width,
                                 camera_specific=config.camera_specific, mask=mask)
    for start in range(0, len(rows), config.chunk):
        idx = np.arange(start, min(start + config.chunk, len(rows)))
        raw = read(layer, rows[idx])
        scatter.add(idx, raw.reshape(len(idx), channels, -1) if projection is None else
                    project_maps(raw, projection, positions))
    weights, values = top_eigenvectors(scatter.result(), config.K, context=f"layer {layer}")
    return {"weight_maps": weights, "eigenvalues": values}


def time_methods(runs: list[tuple[str, str, int]], persons: int, dtype, repeats: int,
                 previous: bool) -> dict[str, dict[str, float]]:
    """Per run label: seconds of the current and previous paths summed over the four layers
    (median of ``repeats`` per layer, the two paths alternately, so both see the same load)
    and the largest absolute and relative |Δ| of weight maps / eigenvalues."""
    pids, camids = labels(persons)
    rows = np.arange(len(pids))
    out = {label: {"new": 0.0, "old": 0.0, "maps": 0.0, "values": 0.0, "maps_rel": 0.0,
                   "values_rel": 0.0} for label, _, _ in runs}
    warm = layer_maps(64, 40, 0, dtype)                     # imports and thread pools, untimed
    for learn in (learn_weight_maps, previous_learn_weight_maps):
        learn(lambda _layer, r: warm[r[0]:r[-1] + 1], "warm-up", 0, rows[:40], pids[:40],
              camids[:40], **pooling_settings("cdpcf", K=2, E=8))
    for i, (layer, channels) in enumerate(LAYERS.items()):
        maps = layer_maps(channels, len(pids), i, dtype)
        read = lambda _layer, r, m=maps: m[r[0]:r[-1] + 1]   # noqa: E731 — rows are a range
        for label, method, e_dim in runs:
            config = pooling_settings(method, K=10, E=e_dim)
            paths = [("new", learn_weight_maps)]
            if previous:
                paths.append(("old", previous_learn_weight_maps))
            learned, seconds = {}, {name: [] for name, _ in paths}
            for _ in range(max(repeats, 1)):
                for name, learn in paths:
                    start = time.perf_counter()
                    learned[name] = learn(read, layer, i, rows, pids, camids, **config)
                    seconds[name].append(time.perf_counter() - start)
            for name, values in seconds.items():
                out[label][name] += float(np.median(values))
            if previous:
                for key, field in (("maps", "weight_maps"), ("values", "eigenvalues")):
                    old = learned["old"][field]
                    diff = np.abs(learned["new"][field] - old).max()
                    out[label][key] = max(out[label][key], float(diff))
                    out[label][f"{key}_rel"] = max(out[label][f"{key}_rel"],
                                                   float(diff / np.abs(old).max()))
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
             f"{'previous (s)':>14}{'prev./ours':>12}{'max|Δ maps|':>13}{'rel.':>9}"
             f"{'max|Δ eig.|':>13}{'rel.':>9}"))
    for label, _, _ in runs:
        t = times[label]
        line = (f"{label:<16}{t['new']:>10.2f}{PAPER[label]:>11.1f}"
                f"{PAPER[label] / t['new']:>9.1f}×")
        if not args.no_previous:
            line += (f"{t['old']:>14.2f}{t['old'] / t['new']:>11.1f}×"
                     f"{t['maps']:>13.1e}{t['maps_rel']:>9.1e}"
                     f"{t['values']:>13.1e}{t['values_rel']:>9.1e}")
        print(line)
    t_fast, t_slow, err = pair_enumeration_reference()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"finished; load {load:.2f}")
    print(f"same-run reference (80 images, conv2_x, C-DPCF Σ_S/Σ_D): closed form "
          f"{t_fast * 1e3:.1f} ms vs pair enumeration {t_slow * 1e3:.0f} ms "
          f"({t_slow / t_fast:.0f}× faster), max rel. difference {err:.1e}")


if __name__ == "__main__":
    main()
