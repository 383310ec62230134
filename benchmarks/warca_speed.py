"""WARCA training speed (docs/methods/warca.md): no per-iteration O(N) work.

    python -m benchmarks.warca_speed [--full] [--threads T] [--device cpu|cuda]
                                     [--dtype float32|float64] [--skip-kernel]

Rows:

* **scaling** — seconds per 100 iterations (after 5 warm-up iterations, setup excluded) for
  N = 2k and 20k rows (``--full``: also 200k), 4 rows per id, D = 64, D' = 16, in two
  settings: ``default`` (B = 512, S = 512, γ = 1) and ``worst`` (B = 128, S = 32, γ = −1e9:
  every pair uses all S draws, as in T7). The last column is t(N) / t(2k).
* **VIPeR-sized** — one full training run (2,000 iterations, toolkit defaults: B = 512,
  S = 512, λ = 1e-3, η = 0.1) on 632 × 2580 HistLBP-like non-negative features (316 ids × 2
  cameras, per-stripe L1-normalised), linear primal with D' = 40 (the default) and D' = 100
  (the paper's VIPeR setting), and the χ²-RBF kernel (D' = 40; kernel-matrix build timed
  apart).
* **reference** — rPCCA from ``reidcli.metric.rpcca`` on the same problem when that module
  exists; otherwise a per-triplet Python-loop WARCA (sequential negative draws, one
  projection per draw, one outer product per triplet; the same update) timed over a few
  iterations and extrapolated to 2,000. Ratios are reference / WARCA.

The default run finishes in well under 2 minutes on 2 CPU cores. Timings on a shared machine
are noisy (OpenMP threads stall when the cores are busy); the load average is printed.
"""
from __future__ import annotations

import argparse
import importlib
import math
import os
import time
import warnings

import numpy as np


def _viper_like(seed: int = 0, ids: int = 316, dim: int = 2580):
    """632 × 2580 non-negative histogram-like rows (6 stripes, L1 per stripe), 2 cameras."""
    rng = np.random.default_rng(seed)
    proto = rng.gamma(0.5, 1.0, (ids, dim))
    pids = np.repeat(np.arange(ids), 2)
    camids = np.tile([0, 1], ids)
    x = proto[pids] * rng.gamma(4.0, 0.25, (2 * ids, dim)) + 0.5 * rng.gamma(0.5, 1.0,
                                                                               (2 * ids, dim))
    stripes = x.reshape(len(x), 6, -1)
    x = (stripes / stripes.sum(-1, keepdims=True)).reshape(len(x), dim)
    return x.astype(np.float32), pids, camids


def _scaling(sizes, device, dtype) -> None:
    from reidcli.metric.warca import WARCA
    print("\n== scaling: seconds per 100 iterations (D = 64, D' = 16, 4 rows per id) ==")
    print(f"{'N':>9} {'setting':>8} {'s/100 it':>9} {'draws/pair':>11} {'vs 2k':>7}")
    rng = np.random.default_rng(0)
    settings = {"default": dict(batch_size=512, max_draws=512, margin=1.0),
                "worst": dict(batch_size=128, max_draws=32, margin=-1e9)}
    base = {}
    for n in sizes:
        x = rng.standard_normal((n, 64)).astype(np.float32)
        pids = np.repeat(np.arange(n // 4), 4)
        for name, kw in settings.items():
            tr = WARCA(dim=16, device=device, dtype=dtype, **kw).trainer(x, pids, None)
            for _ in range(5):
                tr.step()
            start = time.perf_counter()
            draws = 0.0
            for _ in range(100):
                draws += float(tr.step()["mean_draws"])
            sec = time.perf_counter() - start
            base.setdefault(name, sec)
            print(f"{n:>9,} {name:>8} {sec:>9.3f} {draws / 100:>11.1f} {sec / base[name]:>7.2f}")


def _train(x, pids, camids, device, dtype, **hyper):
    """(setup seconds, training seconds, trainer) of one full run."""
    from reidcli.metric.warca import WARCA
    start = time.perf_counter()
    tr = WARCA(device=device, dtype=dtype, **hyper).trainer(x, pids, camids)
    setup = time.perf_counter() - start
    tr.run()
    return setup, tr.wall_s, tr


def _reference_loop(x, pids, iterations: int, dim: int = 40, batch: int = 512,
                    max_draws: int = 512, lam: float = 1e-3, lr: float = 0.1,
                    margin: float = 1.0, seed: int = 0) -> float:
    """Seconds per iteration of a per-triplet Python-loop WARCA (same rule, Adam constant)."""
    rng = np.random.default_rng(seed)
    n, d = x.shape
    x = x.astype(np.float64)
    W = rng.standard_normal((dim, d)) / math.sqrt(d)
    m, v = np.zeros_like(W), np.zeros_like(W)
    by_id: dict[int, list[int]] = {}
    for r, p in enumerate(pids):
        by_id.setdefault(int(p), []).append(r)
    pairs = [(a, b) for rows in by_id.values() for t, a in enumerate(rows) for b in rows[t + 1:]]
    s_eff = min(max_draws, n)
    start = time.perf_counter()
    for _ in range(iterations):
        grad = 2 * lam * (W @ W.T - np.eye(dim)) @ W
        for _ in range(batch):
            i, j = pairs[rng.integers(len(pairs))]
            zi, zj = W @ x[i], W @ x[j]
            dij = math.sqrt(float((zi - zj) @ (zi - zj)) + 1e-12)
            count = 0
            while count < s_eff:
                k = int(rng.integers(n))
                if pids[k] == pids[i]:
                    continue
                count += 1
                zk = W @ x[k]
                dik = math.sqrt(float((zi - zk) @ (zi - zk)) + 1e-12)
                djk = math.sqrt(float((zj - zk) @ (zj - zk)) + 1e-12)
                aik, ajk = margin + dij - dik > 0, margin + dij - djk > 0
                if aik or ajk:
                    c = 2 * (1 + math.log(s_eff / count)) / batch
                    uij = (zi - zj) / dij
                    grad += c * (aik + ajk) * np.outer(uij, x[i] - x[j])
                    if aik:
                        grad -= c * np.outer((zi - zk) / dik, x[i] - x[k])
                    if ajk:
                        grad -= c * np.outer((zj - zk) / djk, x[j] - x[k])
                    break
        m = 0.9 * m + 0.1 * grad
        v = 0.999 * v + 0.001 * grad * grad
        W -= lr * (m / 0.1) / (np.sqrt(v / 0.001) + 1e-8)
    return (time.perf_counter() - start) / iterations


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--full", action="store_true", help="also N = 200k in the scaling rows")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32", choices=("float32", "float64"))
    parser.add_argument("--skip-kernel", action="store_true", help="no χ² kernel run")
    parser.add_argument("--ref-iterations", type=int, default=3,
                        help="iterations of the per-triplet loop reference")
    args = parser.parse_args(argv)
    import torch
    if args.threads:
        torch.set_num_threads(args.threads)
    warnings.simplefilter("ignore")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), {os.cpu_count()} "
          f"CPU(s), device {args.device}, {args.dtype}, load average {load:.2f}")

    _scaling([2_000, 20_000] + ([200_000] if args.full else []), args.device, args.dtype)

    print("\n== VIPeR-sized: 632 × 2580, 2,000 iterations, B = 512, S = 512 ==")
    x, pids, camids = _viper_like()
    runs = {}
    for label, hyper in (("linear D'=40", dict(dim=40)), ("linear D'=100", dict(dim=100)),
                         ("chi2rbf D'=40", dict(dim=40, kernel="chi2rbf"))):
        if args.skip_kernel and "chi2" in label:
            continue
        setup, train, tr = _train(x, pids, camids, args.device, args.dtype, **hyper)
        runs[label] = train
        sv = tr.singular_values()
        print(f"{label:>14}: train {train:6.2f} s ({train / 20:.3f} s per 100 it), setup "
              f"{setup:5.2f} s{' (kernel matrix)' if 'chi2' in label else ''}; "
              f"cond(W) {sv.max() / max(sv.min(), 1e-30):.2f}")

    print("\n== reference ==")
    try:
        rpcca = importlib.import_module("reidcli.metric.rpcca")
        fit = getattr(rpcca, "fit_rpcca_arrays")
    except (ImportError, AttributeError):
        fit = None
    if fit is not None:
        for label, hyper, ours in (("rPCCA-L D'=40", dict(dim=40), "linear D'=40"),
                                   ("rPCCA-χ² D'=40", dict(dim=40, kernel="chi2rbf"),
                                    "chi2rbf D'=40")):
            if ours not in runs:
                continue
            start = time.perf_counter()
            try:
                fit(x, pids, camids, **hyper)
            except Exception as exc:                      # a different hyperparameter set
                print(f"{label}: not run ({exc})")
                continue
            sec = time.perf_counter() - start
            print(f"{label:>14}: {sec:6.2f} s (setup included); rPCCA / WARCA = "
                  f"{sec / runs[ours]:.2f}")
    per_it = _reference_loop(x, pids, args.ref_iterations)
    ref_total = per_it * 2000
    ours = runs["linear D'=40"]
    print(f"per-triplet loop (NumPy, {args.ref_iterations} iterations, D'=40): "
          f"{per_it:.3f} s per iteration → {ref_total:.0f} s per 2,000 (extrapolated); "
          f"loop / WARCA = {ref_total / ours:.1f}×")


if __name__ == "__main__":
    main()
