"""Speed and memory of k-reciprocal re-ranking: symmetric tiled neighbour pass vs full GEMM.

    python -m benchmarks.rerank_speed [--size market|small] [--dim 2048] [--peer [ARCHIVE]]

The problem is ``benchmarks.eval_speed.make_problem("market", dim)`` (3,368 queries ×
15,913 gallery, N = 19,281 items); ``--size small`` keeps its first 500 queries and 2,500
gallery rows (dim 128 unless ``--dim`` is given) for a quick run.

Each measurement runs in its own child process (wall time and peak RSS, ``ru_maxrss``, which
includes the problem's features) and covers what ``reid eval --rerank`` does per trial:
building :class:`~reidcli.evaluation.rerank.KReciprocalReranker` (neighbour pass, sparse V,
query expansion) and evaluating every query block (Market protocol). Rows:

* ``full GEMM``: ``symmetric=False``, the previous neighbour pass (every row block of the
  N×N distances, one GEMM of [rows, N] each);
* ``symmetric``: the default for feature metrics (tiles on and above the diagonal only);
* ``--peer``: torchreid's ``re_ranking`` (dense N×N arrays, float32), loaded from its sdist
  in ``~/.cache/reidcli-bench`` (``pip download torchreid --no-deps``) without installing,
  given the query-query, query-gallery and gallery-gallery distances of the same metric.

After timing, each child writes its re-ranked distances [Q, G] (float64) and the stored
neighbour lists to a scratch folder; the parent compares them (max |Δ|, rows whose k1+1
nearest differ) and the per-query metrics.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks._workers import answer_worker, run_worker
from benchmarks.eval_speed import make_problem

SMALL = dict(queries=500, gallery=2500, dim=128)
WHEEL_CACHE = Path(os.environ.get("REIDCLI_BENCH_CACHE", Path.home() / ".cache" / "reidcli-bench"))
PEER_MEMBER = "torchreid/reid/utils/rerank.py"
K1, K2, LAMBDA = 20, 6, 0.3


def problem_for(size: str, dim: int) -> dict:
    """The Market-sized problem, or its first SMALL queries / gallery rows."""
    problem = make_problem("market", dim)
    if size == "small":
        q, g = slice(0, SMALL["queries"]), slice(0, SMALL["gallery"])
        problem = {"q_pids": problem["q_pids"][q], "q_cams": problem["q_cams"][q],
                   "qf": problem["qf"][q].copy(), "g_pids": problem["g_pids"][g],
                   "g_cams": problem["g_cams"][g], "gf": problem["gf"][g].copy()}
    return problem


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _labels(problem):
    from reidcli.evaluation.protocols import TrialLabels, get_protocol
    return (TrialLabels.from_arrays(problem["q_pids"], problem["q_cams"], problem["g_pids"],
                                    problem["g_cams"]), get_protocol("market"))


def _metrics(result) -> dict:
    return {"mAP": float(result.mAP), "rank1": float(result.cmc[0]),
            "mINP": float(result.mINP), "ap": result.outcomes.ap.tolist()}


# -- workers (one per child process) ----------------------------------------------------------
def work_reranker(size, dim, symmetric, out_dir) -> dict:
    """Re-ranking + evaluation with the engine; then its distances and neighbours to disk."""
    from reidcli.evaluation.backend import NumpyBackend
    from reidcli.evaluation.distances import FeatureMetric
    from reidcli.evaluation.engine import EvalOptions, evaluate_trial
    from reidcli.evaluation.rerank import KReciprocalReranker, RerankOptions
    problem = problem_for(size, dim)
    labels, protocol = _labels(problem)
    backend = NumpyBackend()
    rss_before = _peak_rss_mb()
    start = time.perf_counter()
    rr = KReciprocalReranker(FeatureMetric("euclidean", backend), problem["qf"], problem["gf"],
                             RerankOptions(K1, K2, LAMBDA), symmetric=symmetric)
    setup = time.perf_counter() - start
    result = evaluate_trial(rr, labels, protocol, EvalOptions(), backend=backend)
    wall = time.perf_counter() - start
    peak = _peak_rss_mb()
    name = "symmetric" if symmetric else "full"
    _write_distances(Path(out_dir) / f"{name}.npy", rr.block, len(problem["q_pids"]),
                     len(problem["g_pids"]))
    np.save(Path(out_dir) / f"{name}_neighbours.npy", rr.initial)
    return {"wall_s": wall, "setup_s": setup, "peak_rss_mb": peak, "rss_before_mb": rss_before,
            **_metrics(result)}


def _write_distances(path: Path, block, num_query: int, num_gallery: int, step: int = 256):
    out = np.lib.format.open_memmap(path, mode="w+", dtype=np.float64,
                                    shape=(num_query, num_gallery))
    for s in range(0, num_query, step):
        out[s:s + step] = block(np.arange(s, min(num_query, s + step)))
    out.flush()
    del out


def load_peer(archive: Path):
    """torchreid's rerank.py read straight from its sdist / wheel (no install)."""
    import importlib.util
    source = None
    if archive.suffix == ".whl":
        import zipfile
        with zipfile.ZipFile(archive) as zf:
            source = zf.read(PEER_MEMBER).decode()
    else:
        with tarfile.open(archive) as tf:
            member = next(m for m in tf.getmembers() if m.name.endswith("/" + PEER_MEMBER))
            source = tf.extractfile(member).read().decode()
    spec = importlib.util.spec_from_loader("torchreid_rerank_peer", loader=None)
    module = importlib.util.module_from_spec(spec)
    exec(compile(source, f"{archive}!{PEER_MEMBER}", "exec"), module.__dict__)
    return module


def work_peer(size, dim, archive, out_dir) -> dict:
    """torchreid's dense re_ranking on the three distance matrices, then evaluation."""
    from reidcli.evaluation.backend import NumpyBackend
    from reidcli.evaluation.distances import FeatureMetric, MatrixDistances
    from reidcli.evaluation.engine import EvalOptions, evaluate_trial
    module = load_peer(Path(archive))
    problem = problem_for(size, dim)
    labels, protocol = _labels(problem)
    backend = NumpyBackend()
    metric = FeatureMetric("euclidean", backend)
    rss_before = _peak_rss_mb()
    start = time.perf_counter()
    q, g = metric.prepare(problem["qf"]), metric.prepare(problem["gf"])
    q_g, q_q, g_g = metric.pairwise(q, g), metric.pairwise(q, q), metric.pairwise(g, g)
    final = module.re_ranking(q_g, q_q, g_g, k1=K1, k2=K2, lambda_value=LAMBDA)
    del q_q, g_g
    setup = time.perf_counter() - start
    result = evaluate_trial(MatrixDistances(final), labels, protocol, EvalOptions(),
                            backend=backend)
    wall = time.perf_counter() - start
    peak = _peak_rss_mb()
    np.save(Path(out_dir) / "peer.npy", final.astype(np.float64))
    return {"wall_s": wall, "setup_s": setup, "peak_rss_mb": peak, "rss_before_mb": rss_before,
            **_metrics(result)}


WORKERS = {"reranker": work_reranker, "peer": work_peer}


def run_child(task: dict) -> dict:
    """Run one worker in a fresh Python process; returns its JSON result."""
    return run_worker("rerank_speed", task)


def find_peer(given: str | None) -> tuple[Path | None, str]:
    """(archive, message): the given torchreid sdist/wheel, a cached one, or pip download."""
    if given:
        path = Path(given)
        return (path, f"using {path}") if path.is_file() else (None, f"no such file {given}")
    found = sorted(WHEEL_CACHE.glob("torchreid-*"))
    if not found:
        WHEEL_CACHE.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "torchreid", "--no-deps",
                        "--no-build-isolation", "-d", str(WHEEL_CACHE), "-q"],
                       capture_output=True, text=True, timeout=300)
        found = sorted(WHEEL_CACHE.glob("torchreid-*"))
    if not found:
        return None, "torchreid unavailable (pip download torchreid failed); peer skipped"
    return found[-1], f"using {found[-1]}"


# -- comparison --------------------------------------------------------------------------------
def max_abs_diff(a_path: Path, b_path: Path, step: int = 512) -> float:
    a, b = np.load(a_path, mmap_mode="r"), np.load(b_path, mmap_mode="r")
    return max(float(np.abs(a[s:s + step] - b[s:s + step]).max())
               for s in range(0, len(a), step))


def metric_diffs(x: dict, y: dict) -> str:
    ap_x, ap_y = np.asarray(x["ap"], float), np.asarray(y["ap"], float)
    same = np.array_equal(np.isfinite(ap_x), np.isfinite(ap_y))
    ok = np.isfinite(ap_x) & np.isfinite(ap_y)
    return (f"|ΔmAP| {abs(x['mAP'] - y['mAP']):.2e}, |ΔR1| {abs(x['rank1'] - y['rank1']):.2e}, "
            f"|ΔmINP| {abs(x['mINP'] - y['mINP']):.2e}, max per-query |ΔAP| "
            f"{np.abs(ap_x[ok] - ap_y[ok]).max():.2e}, same valid queries {same}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", choices=("market", "small"), default="market")
    parser.add_argument("--dim", type=int, default=None,
                        help="feature dimension (default 2048; 128 with --size small)")
    parser.add_argument("--peer", nargs="?", const="", default=None,
                        help="also run torchreid's re_ranking (optional sdist/wheel path)")
    parser.add_argument("--json", help="also write all measurements as JSON")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return answer_worker(args.worker, WORKERS)
    dim = args.dim or (SMALL["dim"] if args.size == "small" else 2048)
    nq, ng = (SMALL["queries"], SMALL["gallery"]) if args.size == "small" else (3368, 15913)
    print(f"rerank_speed: {args.size} ({nq} queries × {ng} gallery, N = {nq + ng}), dim {dim}, "
          f"k1={K1} k2={K2} λ={LAMBDA}, euclidean; {os.cpu_count()} CPU(s), numpy "
          f"{np.__version__}; each row is a separate process (peak RSS includes the features)")
    results = {}
    with tempfile.TemporaryDirectory(prefix="rerank_speed_") as scratch:
        common = dict(size=args.size, dim=dim, out_dir=scratch)
        for name, symmetric in (("full", False), ("symmetric", True)):
            results[name] = run_child({"kind": "reranker", "symmetric": symmetric, **common})
            r = results[name]
            label = "full GEMM (previous)" if name == "full" else "symmetric tiles (new)"
            print(f"  {label:24s} {r['wall_s']:8.2f} s   peak RSS {r['peak_rss_mb']:7.0f} MB   "
                  f"(setup {r['setup_s']:.2f} s; mAP {r['mAP']:.4f}, R1 {r['rank1']:.4f}, "
                  f"mINP {r['mINP']:.4f})")
        full, sym = results["full"], results["symmetric"]
        print(f"  ratio full / symmetric   {full['wall_s'] / sym['wall_s']:8.2f} ×  end to end; "
              f"{full['setup_s'] / sym['setup_s']:.2f} × setup; peak RSS "
              f"{sym['peak_rss_mb'] - full['peak_rss_mb']:+.0f} MB")
        scratch_path = Path(scratch)
        nb_full = np.load(scratch_path / "full_neighbours.npy")
        nb_sym = np.load(scratch_path / "symmetric_neighbours.npy")
        differ = (nb_full[:, :K1 + 1] != nb_sym[:, :K1 + 1]).any(axis=1)
        diff = max_abs_diff(scratch_path / "full.npy", scratch_path / "symmetric.npy")
        results["agreement"] = {"max_abs_diff": diff, "rows_k1_neighbours_differ":
                                int(differ.sum()), "stored_lists_equal":
                                bool(np.array_equal(nb_full, nb_sym))}
        print(f"  agreement: re-ranked distances max |Δ| {diff:.2e}; neighbour lists "
              f"{'identical' if np.array_equal(nb_full, nb_sym) else 'differ'} "
              f"({int(differ.sum())} of {len(differ)} items differ in their k1+1 nearest); "
              + metric_diffs(full, sym))
        if args.peer is not None:
            archive, message = find_peer(args.peer or None)
            print(f"  peer: {message}")
            if archive is not None:
                peer = run_child({"kind": "peer", "archive": str(archive), **common})
                results["peer"] = peer
                pdiff = max_abs_diff(scratch_path / "symmetric.npy", scratch_path / "peer.npy")
                results["agreement_peer"] = {"max_abs_diff": pdiff}
                print(f"  torchreid re_ranking     {peer['wall_s']:8.2f} s   peak RSS "
                      f"{peer['peak_rss_mb']:7.0f} MB   (distances + re_ranking "
                      f"{peer['setup_s']:.2f} s; mAP {peer['mAP']:.4f}); ratio to symmetric "
                      f"{peer['wall_s'] / sym['wall_s']:.2f} ×; max |Δ| {pdiff:.2e} (float32, "
                      f"unstable argsort); " + metric_diffs(sym, peer))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
