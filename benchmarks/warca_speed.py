"""WARCA training speed (docs/methods/warca.md): no per-iteration O(N) work.

    python -m benchmarks.warca_speed [--full] [--threads T] [--device cpu|cuda]
                                     [--dtype float32|float64] [--skip-kernel]
                                     [--pair-iterations K] [--ref-iterations K]
                                     [--precision-iterations K] [--precision-only]

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
* **current vs previous** — the D' = 100 VIPeR-sized problem stepped by the current loop and
  by the previous one (kept here as ``_reference_trainer_class``: per-anchor distance passes,
  gathers by the found mask, the old projection rule) in alternating blocks of 50
  iterations, so both see the same load; ``--pair-iterations`` each (default 300),
  milliseconds per iteration, seconds per 2,000 and the ratio previous / current.
* **float32 vs bf16** — timing: the D' = 100 VIPeR-sized run (toolkit defaults) stepped
  with ``precision="float32"`` and ``"bf16"`` (bfloat16 GEMM inputs) in alternating blocks
  of 50 iterations, ``--precision-iterations`` each (default 2,000: whole runs);
  milliseconds per iteration, seconds per 2,000 and the ratio float32 / bf16. Accuracy: the
  histogram-like rows are too easy (plain distances reach rank-1 100 %; with more noise no
  linear metric generalises from 316 ids), so both precisions are trained (defaults, D' =
  100, 2,000 iterations) on a VIPeR-sized set with structure a metric can learn —
  ``_viper_sized_structured``: a 40-d identity signal mixed into 2580 dims, per-camera
  offsets, noise — and scored by rank-1 on 316 further ids of that generator (camera 0
  queries, camera 1 gallery) beside plain Euclidean distance. ``--precision-only`` prints
  just these rows.
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


# -- the previous iteration (reference for the D' = 100 comparison) ----------------------------
def _reference_triplet_terms(zi, zj, zk, w, batch, margin, anchor="both"):
    """The previous triplet_terms: the same formulas (Eq. 12–14), one pass per term."""
    import torch
    from reidcli.metric.warca_objective import distance
    u_ij, u_ik = zi - zj, zi - zk
    d_ij, d_ik = distance(u_ij), distance(u_ik)
    h_ik = margin + d_ij - d_ik
    a_ik = (h_ik > 0).to(zi.dtype)
    e_ij, e_ik = u_ij / d_ij[:, None], u_ik / d_ik[:, None]
    c = 2.0 * w.to(zi.dtype) / batch
    if anchor == "both":
        u_jk = zj - zk
        d_jk = distance(u_jk)
        h_jk = margin + d_ij - d_jk
        a_jk = (h_jk > 0).to(zi.dtype)
        e_jk = u_jk / d_jk[:, None]
        hinge = torch.relu(h_ik) + torch.relu(h_jk)
        s = (a_ik + a_jk)[:, None]
        g_i = c[:, None] * (s * e_ij - a_ik[:, None] * e_ik)
        g_j = c[:, None] * (-s * e_ij - a_jk[:, None] * e_jk)
        g_k = c[:, None] * (a_ik[:, None] * e_ik + a_jk[:, None] * e_jk)
    else:
        hinge = torch.relu(h_ik)
        g_i = c[:, None] * a_ik[:, None] * (e_ij - e_ik)
        g_j = -c[:, None] * a_ik[:, None] * e_ij
        g_k = c[:, None] * a_ik[:, None] * e_ik
    return (c * hinge).sum(), hinge, g_i, g_j, g_k


def _reference_trainer_class():
    """A WARCATrainer whose step is the previous one: one distance pass per anchor and chunk,
    gathers by the found mask, projection choice N ≤ B·(2 + counted draws), G_Z scattered to
    all N rows whenever 3T > N, separate transposes and adds. Same sampling rule and update;
    kept only to time the current loop against it in the same process."""
    import torch
    from reidcli.metric.warca_objective import distance, rank_weights, regulariser
    from reidcli.metric.warca_trainer import WARCATrainer

    class ReferenceTrainer(WARCATrainer):
        def sample_negatives(self, i, j, zi, zj, embed=None, table=None):
            embed = embed or self._project
            B, S, N = i.numel(), self.s_eff, self.n
            dev = self.device
            found = torch.zeros(B, dtype=torch.bool, device=dev)
            n = torch.full((B,), S, dtype=torch.long, device=dev)
            k = torch.zeros(B, dtype=torch.long, device=dev)
            active = torch.arange(B, device=dev)
            y = self.labels[i]
            thr_all = self.margin + distance(zi - zj)
            a_cnt = torch.zeros(B, dtype=torch.long, device=dev)
            remaining, chunk, drawn = S, self._chunk0, 0
            while active.numel():
                m = active.numel()
                c = max(1, min(chunk, remaining))
                cand = torch.randint(0, N, (m, c), generator=self.gen, device=dev)
                drawn += m * c
                valid = self.labels[cand] != y[active][:, None]
                thr = thr_all[active][:, None]
                if table is not None:
                    viol = table[0][active[:, None], cand] < thr
                    if self.anchor == "both":
                        viol |= table[1][active[:, None], cand] < thr
                else:
                    zc = embed(cand)
                    viol = distance(zi[active][:, None, :] - zc) < thr
                    if self.anchor == "both":
                        viol |= distance(zj[active][:, None, :] - zc) < thr
                pos = a_cnt[:, None] + valid.cumsum(1)
                hit = valid & viol & (pos <= S)
                any_hit = hit.any(1)
                first = hit.to(torch.uint8).argmax(1)
                rows = torch.nonzero(any_hit).reshape(-1)
                if rows.numel():
                    f = first[rows]
                    dst = active[rows]
                    found[dst] = True
                    n[dst] = pos[rows, f]
                    k[dst] = cand[rows, f]
                cnt = pos[:, -1].clamp_(max=S)
                keep = ~any_hit & (cnt < S)
                active, a_cnt = active[keep], cnt[keep]
                if not active.numel():
                    break
                remaining = S - int(a_cnt.min())
                chunk *= 2
            self._drawn = drawn / max(B, 1)
            return found, n, k, embed(k)

        def step(self):
            B, P = self.batch, self.params
            i, j = self.sample_pairs(B)
            est = self._draw_estimate
            project_all = self.is_kernel or self.n <= B * (2 + est)
            self._chunk0 = int(min(64, max(2, 2 ** math.ceil(math.log2(max(est, 1.0))))))
            if project_all:
                Z = self.F @ P.T
                embed = Z.__getitem__
            else:
                Z, embed = None, self._project
            zi, zj = embed(i), embed(j)
            found, n, k, zk = self.sample_negatives(i, j, zi, zj, embed, None)
            self._draw_estimate = 0.8 * est + 0.2 * float(n.to(torch.float64).mean())
            sel = torch.nonzero(found).reshape(-1)
            w = torch.zeros(B, dtype=self.dtype, device=self.device)
            if sel.numel():
                kind = self.hyper["rank_weight"]
                negatives = None if kind == "log" else self.negatives[i[sel]]
                w[sel] = rank_weights(n[sel], kind, self.s_eff, negatives).to(self.dtype)
            loss, hinge, gi, gj, gk = _reference_triplet_terms(
                zi[sel], zj[sel], zk[sel], w[sel], B, self.margin, self.anchor)
            reg_obj, reg_grad = regulariser(P, P @ P.T, self.hyper["lam"], "aon", self.eye)
            rows = torch.cat([i[sel], j[sel], k[sel]])
            g = torch.cat([gi, gj, gk])
            if self.n < rows.numel():
                gz = torch.zeros(self.n, P.shape[0], dtype=self.dtype, device=self.device)
                grad = reg_grad.add_((self.F.T @ gz.index_add_(0, rows, g)).T)
            else:
                grad = reg_grad.add_((self.F[rows].T @ g).T)
            self.opt.step(P, grad)
            self.t += 1
            return {"objective": reg_obj + loss, "hinge_mean": hinge.sum() / B,
                    "violation_rate": found.to(self.dtype).mean(),
                    "mean_draws": n.to(self.dtype).mean()}

    return ReferenceTrainer


def _paired_timing(x, pids, camids, device, dtype, iterations: int, block: int = 50,
                   **hyper) -> dict:
    """{"current" | "reference": (wall, CPU) seconds per iteration} of the two loops on the
    same problem and seed, run in alternating blocks of ``block`` iterations so that both see
    the same machine load (process CPU time: what one thread would take on an idle core)."""
    from reidcli.metric.warca import WARCA
    estimator = WARCA(device=device, dtype=dtype, **hyper)
    current = estimator.trainer(x, pids, camids)
    reference = _reference_trainer_class()(x, pids, camids, estimator._validated_params())
    spent = {"current": [0.0, 0.0], "reference": [0.0, 0.0]}
    done = 0
    while done < iterations:
        steps = min(block, iterations - done)
        for name, tr in (("reference", reference), ("current", current)):
            start, cpu = time.perf_counter(), time.process_time()
            for _ in range(steps):
                tr.step()
            spent[name][0] += time.perf_counter() - start
            spent[name][1] += time.process_time() - cpu
        done += steps
    return {name: (wall / iterations, cpu / iterations) for name, (wall, cpu) in spent.items()}


def _viper_sized_structured(seed: int = 0, ids: int = 632, dim: int = 2580, rank: int = 40,
                            noise: float = 3.0):
    """(2·ids) × ``dim`` rows with a ``rank``-d identity signal (centre + 0.3 jitter) mixed
    into ``dim`` dims, a per-camera offset and i.i.d. noise, scaled by 1/sqrt(dim); 2 cameras,
    one image each. With the defaults plain Euclidean rank-1 on 316 ids is ~65 %."""
    rng = np.random.default_rng(seed)
    mixing = rng.standard_normal((rank, dim)) / math.sqrt(rank)
    centres = rng.standard_normal((ids, rank))
    pids, camids = np.repeat(np.arange(ids), 2), np.tile([0, 1], ids)
    offsets = rng.standard_normal((2, dim))
    signal = (centres[pids] + 0.3 * rng.standard_normal((2 * ids, rank))) @ mixing
    x = signal + offsets[camids] + noise * rng.standard_normal((2 * ids, dim))
    return (x / math.sqrt(dim)).astype(np.float32), pids, camids


def _precision_comparison(device, iterations: int, block: int = 50) -> None:
    """The float32 vs bf16 rows: both trainers (D' = 100, defaults, same seed) stepped in
    alternating blocks on the VIPeR-sized problem; then both trained on the structured
    VIPeR-sized set and scored on its 316 held-out ids."""
    from reidcli.metric.warca import WARCA
    print(f"\n== D'=100: precision float32 vs bf16, {iterations} iterations each, alternating "
          f"blocks ==")
    x, pids, camids = _viper_like()
    trainers = {p: WARCA(dim=100, device=device, precision=p).trainer(x, pids, camids)
                for p in ("float32", "bf16")}
    spent = {p: [0.0, 0.0] for p in trainers}
    done = 0
    while done < iterations:
        steps = min(block, iterations - done)
        for name, tr in trainers.items():
            start, cpu = time.perf_counter(), time.process_time()
            for _ in range(steps):
                tr.step()
            if tr.device.type == "cuda":
                import torch
                torch.cuda.synchronize(tr.device)
            spent[name][0] += time.perf_counter() - start
            spent[name][1] += time.process_time() - cpu
        done += steps
    wall = {}
    for name, tr in trainers.items():
        wall[name], cpu = (v / max(iterations, 1) for v in spent[name])
        print(f"{name:>8}: {wall[name] * 1e3:7.2f} ms/it wall ({wall[name] * 2000:6.1f} s per "
              f"2,000), {cpu * 1e3:7.2f} ms/it process CPU")
    print(f"float32 / bf16 = {wall['float32'] / wall['bf16']:.2f}× wall; load average now "
          f"{os.getloadavg()[0]:.2f}")

    x, pids, camids = _viper_sized_structured()
    train = pids < 316
    query, gallery = ~train & (camids == 0), ~train & (camids == 1)
    plain = _rank1(x[query], pids[query], x[gallery], pids[gallery])
    print(f"accuracy (structured VIPeR-sized set, defaults, D'=100, 2,000 iterations; 316 "
          f"held-out ids; plain Euclidean rank-1 {100 * plain:.1f} %):")
    for name in ("float32", "bf16"):
        tr = WARCA(dim=100, device=device, precision=name).trainer(
            x[train], pids[train], camids[train])
        tr.run()
        W = tr.params.detach().cpu().numpy().astype(np.float64)   # float32 W in both cases
        rank1 = _rank1(x[query] @ W.T, pids[query], x[gallery] @ W.T, pids[gallery])
        print(f"{name:>8}: held-out rank-1 {100 * rank1:5.1f} % (run {tr.wall_s:5.1f} s)")


def _rank1(zq, yq, zg, yg) -> float:
    """Rank-1 of queries zq [q, d] (pids yq) against the gallery zg [g, d] (pids yg),
    squared Euclidean distances."""
    zq, zg = np.asarray(zq, np.float64), np.asarray(zg, np.float64)
    d = (zq * zq).sum(1)[:, None] + (zg * zg).sum(1)[None] - 2 * zq @ zg.T
    return float((yg[d.argmin(1)] == yq).mean())


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
    parser.add_argument("--pair-iterations", type=int, default=300,
                        help="iterations of each loop in the current-vs-previous comparison "
                             "(D'=100; 0: skip)")
    parser.add_argument("--ref-iterations", type=int, default=3,
                        help="iterations of the per-triplet loop reference")
    parser.add_argument("--precision-iterations", type=int, default=2000,
                        help="iterations of each precision in the float32 vs bf16 comparison "
                             "(D'=100; 0: skip)")
    parser.add_argument("--precision-only", action="store_true",
                        help="only the float32 vs bf16 rows")
    args = parser.parse_args(argv)
    import torch
    if args.threads:
        torch.set_num_threads(args.threads)
    warnings.simplefilter("ignore")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), {os.cpu_count()} "
          f"CPU(s), device {args.device}, {args.dtype}, load average {load:.2f}")
    if args.precision_only:
        if args.precision_iterations:
            _precision_comparison(args.device, args.precision_iterations)
        return

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

    print(f"\n== D'=100: current vs previous loop, {args.pair_iterations} iterations each, "
          f"alternating blocks ==")
    if args.pair_iterations:
        timed = _paired_timing(x, pids, camids, args.device, args.dtype,
                               args.pair_iterations, dim=100)
        for name, label in (("current", "current"), ("reference", "previous")):
            wall, cpu = timed[name]
            print(f"{label:>9}: {wall * 1e3:7.2f} ms/it wall ({wall * 2000:6.1f} s per 2,000), "
                  f"{cpu * 1e3:7.2f} ms/it process CPU")
        (cur, cur_cpu), (ref, ref_cpu) = timed["current"], timed["reference"]
        print(f"previous / current = {ref / cur:.2f}× wall, {ref_cpu / cur_cpu:.2f}× CPU; "
              f"load average now {os.getloadavg()[0]:.2f}")

    if args.precision_iterations:
        _precision_comparison(args.device, args.precision_iterations)

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
