"""Speed and memory of `reid eval`'s engine beside a straightforward per-query NumPy evaluator.

    python -m benchmarks.eval_speed [--sizes market,msmt17,person30k] [--dim 2048] [--rerank]
                                    [--cosine] [--bf16] [--stream DIR [--in-memory-too]]
                                    [--ref-queries market=all,msmt17=1000] [--peer [WHEEL]]
                                    [--rounds 3] [--baseline-tree DIR]

Builds Market-1501-sized (3,368 × 15,913, 751 ids + 2,793 distractors, 6 cameras) and
MSMT17-sized (11,659 × 82,161, 3,060 ids, 15 cameras) random problems: every identity is
seen by 2–6 cameras, one query per (identity, camera), gallery images spread over the
identity's cameras (so same-camera positives exist and are removed by the E1 rule);
features are identity centre + camera bias + noise.

Every measurement runs in its own child process, so each reports its own wall time and peak
RSS (``ru_maxrss``, which includes the problem's features). Rows:

* ``engine``: the engine `reid eval` runs (block-wise GEMM distances → ranking → metrics),
  from features; ``of which distances`` times the same distance blocks alone.
* ``engine (ranking only)``: the engine on a precomputed distance matrix (Market only: the
  matrix of MSMT17 would need 3.8 GB), the input the per-query evaluators get.
* ``reference``: a per-query NumPy evaluator written here (stable argsort of each row, drop
  same id & camera, CMC/AP/INP from the ranked list). Run on a subset of queries when asked
  and then extrapolated linearly — the output says so.
* ``re-ranking``: k-reciprocal re-ranking (k1=20, k2=6, λ=0.3) + evaluation, Market size.
* ``--peer``: fast-reid's ``rank.py`` (Python path) loaded from a pip-downloaded wheel; at
  Market size also the whole command against the peer's fast path and the GEMM floor
  (:func:`whole_command_rows`): fast-reid's compiled evaluator (``rank_cy.pyx`` from its
  wheel, Cythonised with Cython from the package index into the benchmark's cache and built
  with the C compiler Python was built with) after its fp32 distance GEMM, the fp32 GEMM of
  the Q × G product alone (the floor no evaluator can beat), and `reid eval --store S
  --json R` as a whole process. When the extension cannot be built (no network, no
  compiler) one line says why and the peer's Python evaluator is timed instead, labelled.
* ``--cosine``: cosine distances prepared three ways — the previous path (every set
  normalised into new arrays through a second temporary copy), rows normalised in place
  (what `reid eval` now does with rows it read), rows a store marks ``normalized`` (no pass).
* ``--bf16``: the engine with ``precision="bf16"`` (bfloat16 GEMM) against float32: time and
  how many queries keep their first-positive rank.
* ``--stream DIR``: the problem written as a store in DIR (once; reused by later runs), then
  the whole `reid eval` with the gallery streamed from the store block by block against the
  gallery in memory. ``person30k`` (2,000 × 1,000,000, 2048-d: an 8 GB store) runs only this
  row (streamed; ``--in-memory-too`` adds the in-memory run, ~10 GB).

Metrics are compared per query (first-positive rank, AP, INP) between the engine and every
evaluator on the queries that evaluator ran.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks._workers import answer_worker, run_worker

SIZES = {
    # queries, gallery images of test ids, distractors, ids, cameras
    "market": dict(queries=3368, gallery=15913, distractors=2793, ids=751, cams=6),
    "msmt17": dict(queries=11659, gallery=82161, distractors=0, ids=3060, cams=15),
    # Person30K scale: a 1,000,000-image gallery (8 GB of 2048-d float32), evaluated from a
    # store on disk with the gallery streamed (--stream DIR); 2,000 queries
    "person30k": dict(queries=2000, gallery=1_000_000, distractors=0, ids=30000, cams=100),
}
#: sizes whose features are not held in memory: only the streamed store rows run
STORE_ONLY_SIZES = ("person30k",)
DEFAULT_REF_QUERIES = {"market": "all", "msmt17": "1000"}
PEER_QUERIES = 300
WHEEL_CACHE = Path(os.environ.get("REIDCLI_BENCH_CACHE", Path.home() / ".cache" / "reidcli-bench"))


# -- the problem -------------------------------------------------------------------------------
def make_labels(size: str, dim: int, seed: int = 0) -> dict:
    """Labels of a random problem with re-ID structure (see module doc), and the identity
    centres and camera biases its features are drawn around (:func:`feature_rows`)."""
    spec = SIZES[size]
    rng = np.random.default_rng([seed, dim, spec["queries"]])
    n_ids, n_cams = spec["ids"], spec["cams"]
    cams_per_id = rng.integers(2, 7, n_ids)
    pairs = np.concatenate([np.stack([np.full(k, i), rng.choice(n_cams, k, replace=False)], 1)
                            for i, k in enumerate(cams_per_id)])          # (id, cam) pairs
    # one query per (id, cam) pair, trimmed or topped up to the target count
    q_pairs = pairs[rng.permutation(len(pairs))[:spec["queries"]]]
    if len(q_pairs) < spec["queries"]:
        extra = pairs[rng.integers(0, len(pairs), spec["queries"] - len(q_pairs))]
        q_pairs = np.concatenate([q_pairs, extra])
    n_id_gallery = spec["gallery"] - spec["distractors"]
    per_pair = 1 + rng.multinomial(n_id_gallery - len(pairs), np.full(len(pairs), 1 / len(pairs)))
    g_pairs = np.repeat(pairs, per_pair, axis=0)
    q_pids, q_cams = q_pairs[:, 0] + 1, q_pairs[:, 1]
    g_pids = np.concatenate([g_pairs[:, 0] + 1, np.zeros(spec["distractors"], np.int64)])
    g_cams = np.concatenate([g_pairs[:, 1], rng.integers(0, n_cams, spec["distractors"])])
    order = rng.permutation(len(g_pids))                  # gallery in "record" order
    g_pids, g_cams = g_pids[order], g_cams[order]
    # unit noise; centre and camera spreads ∝ dim^-1/4 keep the metrics similar for any dim
    scale = dim ** -0.25
    centres = rng.standard_normal((n_ids + 1, dim), dtype=np.float32) * np.float32(2.2 * scale)
    biases = rng.standard_normal((n_cams, dim), dtype=np.float32) * np.float32(0.9 * scale)
    return dict(q_pids=q_pids, q_cams=q_cams, g_pids=g_pids, g_cams=g_cams, centres=centres,
                biases=biases, seed=seed, dim=dim)


#: rows per draw of :func:`feature_rows` (blocks are seeded by their first row)
FEATURE_BLOCK = 4096


def feature_rows(labels: dict, role: str, start: int, stop: int) -> np.ndarray:
    """float32 features [stop - start, dim] of ``role`` (query | gallery) rows start:stop
    (``start`` a multiple of FEATURE_BLOCK): the same rows whatever the reading order."""
    assert start % FEATURE_BLOCK == 0
    pids, cams = labels[f"{role[0]}_pids"], labels[f"{role[0]}_cams"]
    stream = 1 if role == "query" else 2
    stop = min(stop, len(pids))
    out = np.empty((stop - start, labels["dim"]), dtype=np.float32)
    for lo in range(start, stop, FEATURE_BLOCK):
        sl = slice(lo, min(lo + FEATURE_BLOCK, stop))
        noise = np.random.default_rng([labels["seed"], stream, lo]).standard_normal(
            (sl.stop - lo, labels["dim"]), dtype=np.float32)
        out[lo - start:sl.stop - start] = (labels["centres"][pids[sl]]
                                           + labels["biases"][cams[sl]] + noise)
    return out


def make_problem(size: str, dim: int, seed: int = 0) -> dict:
    """Labels and float32 features of a random problem with re-ID structure (see module doc)."""
    labels = make_labels(size, dim, seed)
    return dict(q_pids=labels["q_pids"], q_cams=labels["q_cams"], g_pids=labels["g_pids"],
                g_cams=labels["g_cams"],
                qf=feature_rows(labels, "query", 0, len(labels["q_pids"])),
                gf=feature_rows(labels, "gallery", 0, len(labels["g_pids"])))


def reference_rows(dist_rows: np.ndarray, q_pids, q_cams, g_pids, g_cams) -> dict:
    """Straightforward per-query E1 evaluation of some query rows (one loop per query)."""
    n = len(dist_rows)
    first = np.full(n, -1)
    ap = np.full(n, np.nan)
    inp = np.full(n, np.nan)
    for i in range(n):
        order = np.argsort(dist_rows[i], kind="stable")
        keep = ~((g_pids[order] == q_pids[i]) & (g_cams[order] == q_cams[i]))
        keep &= g_pids[order] != -1
        matches = g_pids[order][keep] == q_pids[i]
        if not matches.any():
            continue
        hits = np.flatnonzero(matches)
        first[i] = hits[0]
        ap[i] = np.mean(np.arange(1, len(hits) + 1) / (hits + 1.0))
        inp[i] = len(hits) / (hits[-1] + 1.0)
    return {"first": first, "ap": ap, "inp": inp}


def _engine_block_rows(num_gallery: int, num_queries: int) -> int:
    """Query rows per block of the engine's default blocking of the whole query set."""
    from reidcli.evaluation.engine import EvalOptions
    return EvalOptions().rows_per_block(num_gallery, num_queries)


def _subset(n: int, spec: str, num_gallery: int) -> np.ndarray:
    """The first queries (queries are in random order), rounded up to whole engine blocks:
    BLAS may round a distance differently for another block shape, so the evaluators that
    run on a subset get the very same distance blocks as the engine."""
    if spec == "all" or int(spec) >= n:
        return np.arange(n)
    step = _engine_block_rows(num_gallery, n)
    return np.arange(min(n, -(-int(spec) // step) * step))


# -- workers (one per child process) ----------------------------------------------------------
def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


class _PreviousCosinePrepare:
    """The cosine preparation of the code before issue 21 (the previous path, for the ratio):
    every prepared set normalised into a new array, through a second temporary copy."""

    @staticmethod
    def prepare(metric, features):
        from reidcli.evaluation.distances import Points
        feats = np.ascontiguousarray(features, dtype=np.float32)
        norms = np.sqrt(np.einsum("ij,ij->i", feats, feats, dtype=np.float64))
        feats = (feats / np.maximum(norms, 1e-12)[:, None].astype(np.float32)).astype(
            np.float32)
        return Points(feats, None)


def _engine_parts(problem, metric="euclidean", precision="float32", prepare="owned"):
    """backend, labels, distance source, protocol of a problem. ``prepare`` (cosine):
    ``previous`` (the old copying normalisation), ``owned`` (normalised in place),
    ``normalized`` (rows already unit: a store feature marked normalized)."""
    from reidcli.evaluation.backend import NumpyBackend
    from reidcli.evaluation.distances import FeatureMetric, QueryGallery
    from reidcli.evaluation.protocols import TrialLabels, get_protocol
    backend = NumpyBackend()
    labels = TrialLabels.from_arrays(problem["q_pids"], problem["q_cams"], problem["g_pids"],
                                     problem["g_cams"])
    feature_metric = FeatureMetric(metric, backend, precision)
    if prepare == "previous":
        feature_metric.prepare = lambda f, **_: _PreviousCosinePrepare.prepare(feature_metric, f)
    source = QueryGallery(feature_metric, problem["qf"], problem["gf"],
                          owned=prepare == "owned", normalized=prepare == "normalized")
    return backend, labels, source, get_protocol("market")


def _per_query(result) -> dict:
    out = result.outcomes
    return {"first": out.first_rank.tolist(), "ap": out.ap.tolist(), "inp": out.inp.tolist()}


def work_engine(size, dim, seed, rerank=False, metric="euclidean", precision="float32",
                prepare="owned") -> dict:
    from reidcli.evaluation.engine import EvalOptions, evaluate_trial
    problem = make_problem(size, dim, seed)
    if prepare == "normalized":                   # unit rows as stored (not timed)
        from reidcli.evaluation.distances import l2_normalize
        for key in ("qf", "gf"):
            l2_normalize(problem[key], inplace=True)
    rss_before = _peak_rss_mb()
    start = time.perf_counter()
    backend, labels, source, protocol = _engine_parts(problem, metric, precision, prepare)
    prepare_s = time.perf_counter() - start
    extra = {}
    start = time.perf_counter()
    if rerank:
        from reidcli.evaluation.rerank import KReciprocalReranker
        source = KReciprocalReranker(source.metric, problem["qf"], problem["gf"])
        extra["rerank_setup_s"] = time.perf_counter() - start
    result = evaluate_trial(source, labels, protocol, EvalOptions(), backend=backend)
    wall = time.perf_counter() - start
    peak = _peak_rss_mb()
    if not rerank:          # the same distance blocks alone (no ranking)
        t0 = time.perf_counter()
        step = _engine_block_rows(len(problem["g_pids"]), len(problem["q_pids"]))
        for s in range(0, len(problem["q_pids"]), step):
            source.block(np.arange(s, min(s + step, len(problem["q_pids"]))))
        extra["distances_s"] = time.perf_counter() - t0
    return {"wall_s": wall + (0.0 if rerank else prepare_s), "prepare_s": prepare_s,
            "peak_rss_mb": peak,
            "rss_before_mb": rss_before,
            "mAP": result.mAP, "mINP": result.mINP, "rank1": float(result.cmc[0]),
            "num_valid": result.num_valid_queries, "per_query": _per_query(result), **extra}


def _distance_matrix(problem, rows=None) -> np.ndarray:
    """Distances of query ``rows`` (default all) in the engine's own blocks."""
    from reidcli.evaluation.backend import NumpyBackend
    from reidcli.evaluation.distances import FeatureMetric, QueryGallery
    source = QueryGallery(FeatureMetric("euclidean", NumpyBackend()), problem["qf"], problem["gf"])
    rows = np.arange(len(problem["q_pids"])) if rows is None else rows
    step = _engine_block_rows(len(problem["g_pids"]), len(problem["q_pids"]))
    return np.concatenate([source.block(rows[s:s + step]) for s in range(0, len(rows), step)])


def work_engine_matrix(size, dim, seed) -> dict:
    from reidcli.evaluation.distances import MatrixDistances
    from reidcli.evaluation.engine import EvalOptions, evaluate_trial
    problem = make_problem(size, dim, seed)
    dist = _distance_matrix(problem)
    backend, labels, _, protocol = _engine_parts(problem)
    rss_before = _peak_rss_mb()
    start = time.perf_counter()
    result = evaluate_trial(MatrixDistances(dist), labels, protocol, EvalOptions(),
                            backend=backend)
    return {"wall_s": time.perf_counter() - start, "peak_rss_mb": _peak_rss_mb(),
            "rss_before_mb": rss_before, "mAP": result.mAP}


def work_reference(size, dim, seed, subset_spec) -> dict:
    problem = make_problem(size, dim, seed)
    subset = _subset(len(problem["q_pids"]), subset_spec, len(problem["g_pids"]))
    rss_before = _peak_rss_mb()
    t0 = time.perf_counter()
    dist = _distance_matrix(problem, subset)
    t_dist = time.perf_counter() - t0
    t0 = time.perf_counter()
    ref = reference_rows(dist, problem["q_pids"][subset], problem["q_cams"][subset],
                         problem["g_pids"], problem["g_cams"])
    t_rank = time.perf_counter() - t0
    factor = len(problem["q_pids"]) / len(subset)
    return {"queries_run": int(len(subset)), "queries_total": int(len(problem["q_pids"])),
            "subset": subset.tolist(), "ranking_s": t_rank, "distances_s": t_dist,
            "ranking_s_all": t_rank * factor,
            "distances_s_all": t_dist * factor, "peak_rss_mb": _peak_rss_mb(),
            "rss_before_mb": rss_before,
            "per_query": {k: v.tolist() for k, v in ref.items()}}


def load_peer(wheel: Path, compiled: bool = False):
    """fast-reid's evaluation/rank.py loaded straight from its wheel (no install); with
    ``compiled``, its ``evaluate_cy`` comes from the ``rank_cy`` extension built by
    :func:`build_peer_extension` (its folder on ``sys.path``)."""
    import importlib.util
    import warnings
    import zipfile
    with zipfile.ZipFile(wheel) as zf:
        source = zf.read("fastreid/evaluation/rank.py").decode()
    spec = importlib.util.spec_from_loader("fastreid_rank_peer", loader=None)
    module = importlib.util.module_from_spec(spec)
    source = source.replace("from .rank_cylib.rank_cy import evaluate_cy",
                            "from rank_cy import evaluate_cy" if compiled
                            else "raise ImportError('Cython extension not built')")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exec(compile(source, f"{wheel}!fastreid/evaluation/rank.py", "exec"), module.__dict__)
    return module


def work_peer(size, dim, seed, wheel, queries) -> dict:
    module = load_peer(Path(wheel))
    problem = make_problem(size, dim, seed)
    subset = _subset(len(problem["q_pids"]), str(queries), len(problem["g_pids"]))
    dist = _distance_matrix(problem, subset)
    rss_before = _peak_rss_mb()
    start = time.perf_counter()
    cmc, aps, inps = module.evaluate_rank(dist, problem["q_pids"][subset], problem["g_pids"],
                                          problem["q_cams"][subset], problem["g_cams"],
                                          max_rank=50, use_cython=False)
    wall = time.perf_counter() - start
    # fast-reid ranks with an unstable argsort: flag queries with a positive tied in distance
    # with another gallery entry, where its order (and AP) may differ from a stable ranking
    tied = []
    for i, q in enumerate(subset):
        row = dist[i]
        values, counts = np.unique(row, return_counts=True)
        positive = problem["g_pids"] == problem["q_pids"][q]
        tied.append(bool(np.isin(row[positive], values[counts > 1]).any()))
    return {"queries_run": int(len(subset)), "queries_total": int(len(problem["q_pids"])),
            "tied_positive": tied,
            "ranking_s": wall, "ranking_s_all": wall * len(problem["q_pids"]) / len(subset),
            "peak_rss_mb": _peak_rss_mb(), "rss_before_mb": rss_before,
            "ap": [float(a) for a in aps], "inp": [float(a) for a in inps],
            "cmc": np.asarray(cmc).tolist(), "subset": subset.tolist()}


def work_write_store(size, dim, seed, path, metric="euclidean", normalized=False) -> dict:
    """Write the problem as a feature store (query rows first, then gallery rows), block by
    block (a Person30K-sized gallery never sits in memory). An existing store written with the
    same size, dim, seed and metric is kept."""
    import pandas as pd

    from reidcli.data.records import normalize_frame
    from reidcli.evaluation.distances import l2_normalize
    from reidcli.store import StoreWriter
    key = json.dumps({"size": size, "dim": dim, "seed": seed, "metric": metric,
                      "normalized": normalized})
    if Path(path).is_file():
        from reidcli.errors import ReidError
        from reidcli.store import open_store
        try:
            with open_store(path) as st:
                if st.provenance.get("eval_speed_problem") == key:
                    return {"path": path, "reused": True}
        except ReidError:
            pass
    labels = make_labels(size, dim, seed)
    nq, ng = len(labels["q_pids"]), len(labels["g_pids"])
    records = normalize_frame(pd.DataFrame({
        "path": [f"query/{i:06d}.jpg" for i in range(nq)] +
                [f"gallery/{i:07d}.jpg" for i in range(ng)],
        "pid": np.concatenate([labels["q_pids"], labels["g_pids"]]),
        "camid": np.concatenate([labels["q_cams"], labels["g_cams"]]),
        "split": ["query"] * nq + ["gallery"] * ng, "dataset": "synthetic"}))
    start = time.perf_counter()
    with StoreWriter(path, records, dataset="", force=True,
                     provenance={"command": "eval_speed", "eval_speed_problem": key}) as writer:
        writer.add_feature("emb", dim, metric=metric, normalized=normalized)
        for role, n in (("query", nq), ("gallery", ng)):
            for lo in range(0, n, 16 * FEATURE_BLOCK):
                rows = feature_rows(labels, role, lo, lo + 16 * FEATURE_BLOCK)
                writer.append_feature("emb", l2_normalize(rows, inplace=True)
                                      if normalized else rows)
    return {"path": path, "reused": False, "write_s": time.perf_counter() - start}


def work_cli(args) -> dict:
    """`reid eval ARGS` in this process (its peak RSS is the command's)."""
    from reidcli.cli.main import main as reid_main
    start = time.perf_counter()
    try:
        reid_main(list(args))
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    return {"wall_s": time.perf_counter() - start, "peak_rss_mb": _peak_rss_mb(), "code": code}


def _gemm_features(size, dim, seed):
    problem = make_problem(size, dim, seed)
    return problem, np.ascontiguousarray(problem["qf"]), np.ascontiguousarray(problem["gf"])


def work_gemm_floor(size, dim, seed) -> dict:
    """The fp32 GEMM of the whole Q × G product, once with NumPy and once with torch (on
    this process's threads); the floor is the faster one."""
    _, qf, gf = _gemm_features(size, dim, seed)
    (qf[:64] @ gf[:64].T).sum()                              # BLAS threads started
    start = time.perf_counter()
    qf @ gf.T
    numpy_s = time.perf_counter() - start
    out = {"numpy_s": numpy_s}
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        qt, gt = torch.from_numpy(qf), torch.from_numpy(gf)
        torch.mm(qt[:64], gt[:64].T)
        start = time.perf_counter()
        torch.mm(qt, gt.T)
        out["torch_s"] = time.perf_counter() - start
    out["floor_s"] = min(v for k, v in out.items() if k.endswith("_s"))
    return out


def work_peer_whole(size, dim, seed, wheel, build_dir=None, queries=None) -> dict:
    """fast-reid's evaluation of the whole trial from features in memory: its euclidean
    distance (torch fp32 ``addmm_``, as its ``compute_euclidean_distance``; NumPy's GEMM where
    torch is missing), then ``evaluate_rank`` — its compiled ``rank_cy`` when ``build_dir``
    holds it, else its Python evaluator on ``queries`` queries, extrapolated."""
    if build_dir:
        sys.path.insert(0, build_dir)
    module = load_peer(Path(wheel), compiled=bool(build_dir))
    problem, qf, gf = _gemm_features(size, dim, seed)
    q_pids, q_cams = problem["q_pids"], problem["q_cams"]
    subset = np.arange(len(q_pids)) if build_dir or not queries else \
        np.arange(min(int(queries), len(q_pids)))
    start = time.perf_counter()
    try:
        import torch
        qt, gt = torch.from_numpy(qf[subset]), torch.from_numpy(gf)
        m, n = len(qt), len(gt)
        dist = (torch.pow(qt, 2).sum(dim=1, keepdim=True).expand(m, n)
                + torch.pow(gt, 2).sum(dim=1, keepdim=True).expand(n, m).t())
        dist.addmm_(qt, gt.t(), beta=1, alpha=-2)
        dist = dist.numpy()
        gemm = "torch addmm"
    except ImportError:
        q = qf[subset]
        dist = (q * np.float32(-2.0)) @ gf.T
        dist += np.einsum("ij,ij->i", q, q)[:, None]
        dist += np.einsum("ij,ij->i", gf, gf)[None, :]
        gemm = "numpy"
    distances_s = time.perf_counter() - start
    start = time.perf_counter()
    cmc, aps, inps = module.evaluate_rank(dist, q_pids[subset], problem["g_pids"],
                                          q_cams[subset], problem["g_cams"], max_rank=50,
                                          use_cython=bool(build_dir))
    ranking_s = time.perf_counter() - start
    factor = len(q_pids) / len(subset)
    return {"compiled": bool(build_dir), "gemm": gemm, "queries_run": int(len(subset)),
            "queries_total": int(len(q_pids)), "distances_s": distances_s * factor,
            "ranking_s": ranking_s * factor, "wall_s": (distances_s + ranking_s) * factor,
            "mAP": float(np.mean(aps)), "peak_rss_mb": _peak_rss_mb()}


WORKERS = {"engine": work_engine, "engine_matrix": work_engine_matrix,
           "reference": work_reference, "peer": work_peer, "write_store": work_write_store,
           "cli": work_cli, "gemm_floor": work_gemm_floor, "peer_whole": work_peer_whole}


def run_child(task: dict) -> dict:
    """Run one worker in a fresh Python process; returns its JSON result."""
    return run_worker("eval_speed", task)


# -- peer wheel --------------------------------------------------------------------------------
def find_peer_wheel(given: str | None) -> tuple[Path | None, str]:
    """(wheel, message): the given wheel, a cached one, or one fetched with pip download."""
    if given:
        path = Path(given)
        if path.is_file():
            return path, f"using {path}"
        return None, f"--peer {given}: no such wheel file"
    cached = sorted(WHEEL_CACHE.glob("fastreid-*.whl"))
    if cached:
        return cached[-1], f"using cached {cached[-1]}"
    WHEEL_CACHE.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run([sys.executable, "-m", "pip", "download", "fastreid==1.4.0",
                           "--no-deps", "-d", str(WHEEL_CACHE), "-q"],
                          capture_output=True, text=True, timeout=300)
    cached = sorted(WHEEL_CACHE.glob("fastreid-*.whl"))
    if proc.returncode != 0 or not cached:
        return None, ("fast-reid wheel unavailable (pip download fastreid==1.4.0 failed: "
                      f"{(proc.stderr or proc.stdout).strip().splitlines()[-1:]}); peer "
                      "comparison skipped — pass --peer PATH/TO/fastreid-*.whl")
    return cached[-1], f"downloaded {cached[-1]}"


def build_peer_extension(wheel: Path) -> tuple[Path | None, str]:
    """(folder holding fast-reid's compiled ``rank_cy`` extension, message), built once into
    the cache: ``rank_cy.pyx`` from the wheel → C with Cython (this interpreter's, else
    ``pip install --target`` into the cache) → the extension with the C compiler Python was
    built with (its own ``setup.py`` does the same through distutils). None and the reason
    when any step fails."""
    import sysconfig
    import zipfile

    folder = WHEEL_CACHE / f"rank_cy-{wheel.stem}-{sys.implementation.cache_tag}"
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    built = folder / f"rank_cy{suffix}"
    if built.is_file():
        return folder, f"compiled rank_cy cached in {folder}"
    folder.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as zf:
        (folder / "rank_cy.pyx").write_bytes(
            zf.read("fastreid/evaluation/rank_cylib/rank_cy.pyx"))
    env = dict(os.environ)
    try:
        import Cython  # noqa: F401
    except ImportError:
        target = WHEEL_CACHE / f"cython-{sys.implementation.cache_tag}"
        if not (target / "Cython").is_dir():
            proc = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--target",
                                   str(target), "cython"], capture_output=True, text=True,
                                  timeout=600)
            if proc.returncode != 0:
                return None, ("cannot install Cython (pip install --target: "
                              f"{_last_line(proc)})")
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(target),
                                                          env.get("PYTHONPATH")]))
    proc = subprocess.run([sys.executable, "-m", "cython", "-3", "rank_cy.pyx", "-o",
                           "rank_cy.c"], cwd=folder, env=env, capture_output=True, text=True,
                          timeout=600)
    if proc.returncode != 0:
        return None, f"Cython failed on rank_cy.pyx: {_last_line(proc)}"
    cc = (sysconfig.get_config_var("CC") or "cc").split()
    includes = [f"-I{sysconfig.get_paths()['include']}", f"-I{np.get_include()}"]
    proc = subprocess.run(cc + ["-O3", "-shared", "-fPIC", "-DNPY_NO_DEPRECATED_API=0",
                                *includes, "rank_cy.c", "-o", built.name], cwd=folder,
                          capture_output=True, text=True, timeout=600)
    if proc.returncode != 0 or not built.is_file():
        return None, f"compiling rank_cy.c failed ({' '.join(cc)}): {_last_line(proc)}"
    return folder, f"built fast-reid's rank_cy into {folder}"


def _last_line(proc) -> str:
    lines = (proc.stderr or proc.stdout or "").strip().splitlines()
    return lines[-1] if lines else f"exit {proc.returncode}"


#: the whole `reid eval` as a user runs it (``reid`` is this console script)
REID_LAUNCHER = ("import sys; from reidcli.cli.main import main; sys.argv[0] = 'reid'; "
                 "sys.exit(main())")


def time_whole_command(args: list[str], tree: str | None = None) -> dict:
    """Wall seconds and CPU seconds (user + system) of ``reid ARGS`` in a fresh interpreter,
    interpreter start and imports included (bytecode written: a warm-up run comes first).
    ``tree``: a folder holding another ``reidcli`` package (e.g. the previous release's),
    run instead of this checkout's."""
    root = Path(tree) if tree else Path(__file__).resolve().parents[1]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", REID_LAUNCHER, *args], cwd=root, env=env,
                          capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise RuntimeError(f"reid {' '.join(args)} failed:\n{proc.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": wall, "cpu_s": cpu}


def whole_command_rows(args, common: dict, wheel: Path | None, eng: dict) -> dict:
    """Issue 32: `reid eval --store S --json R` as a whole process against the fp32 GEMM
    floor and fast-reid's evaluation (compiled when it builds), all in this run, interleaved
    over ``--rounds`` rounds (medians)."""
    import statistics
    import tempfile

    build_dir, message = (None, "no fast-reid wheel") if wheel is None \
        else build_peer_extension(wheel)
    print(f"  peer fast path: {message}" + ("" if build_dir else
          " — timing fast-reid's Python evaluator instead (labelled 'Python')"))
    folder = (Path(args.via_store) if args.via_store else Path(tempfile.mkdtemp())).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    store = folder / f"eval_speed_{common['size']}_{common['dim']}_whole.h5"
    report = folder / "eval_speed_whole.json"
    run_child({"kind": "write_store", "path": str(store), **common})
    cli_args = ["eval", "--store", str(store), "--json", str(report), "--force", "--quiet",
                "--device", "cpu"]
    time_whole_command(cli_args)                         # warm-up: page cache, bytecode
    baseline = args.baseline_tree
    if baseline:
        time_whole_command(cli_args, baseline)
    rounds: dict[str, list] = {"floor": [], "peer": [], "whole": [], "baseline": []}
    load_before = os.getloadavg()
    for _ in range(args.rounds):                         # interleaved: load drifts hit all
        if baseline:
            rounds["baseline"].append(time_whole_command(cli_args, baseline))
        rounds["floor"].append(run_child({"kind": "gemm_floor", **common}))
        rounds["peer"].append(run_child({"kind": "peer_whole", "wheel": str(wheel),
                                         "build_dir": str(build_dir) if build_dir else None,
                                         "queries": args.peer_queries, **common})
                              if wheel is not None else None)
        rounds["whole"].append(time_whole_command(cli_args))
    med = statistics.median
    floor = med(r["floor_s"] for r in rounds["floor"])
    whole = med(r["wall_s"] for r in rounds["whole"])
    whole_cpu = med(r["cpu_s"] for r in rounds["whole"])
    mAP = json.loads(report.read_text())["mAP"]
    load_after = os.getloadavg()
    out = {"floor_s": floor, "whole_s": whole, "whole_cpu_s": whole_cpu, "rounds": rounds,
           "mAP": mAP, "peer_compiled": bool(build_dir),
           "load_average": {"before": load_before, "after": load_after}}
    print(f"  load average (1, 5, 15 min) before the rounds "
          f"{', '.join(f'{v:.2f}' for v in load_before)}; after "
          f"{', '.join(f'{v:.2f}' for v in load_after)} ({os.cpu_count()} CPUs)")
    f = rounds["floor"][0]
    print(f"  fp32 GEMM floor (Q×G product)  {floor:8.2f} s   (median of {args.rounds}; "
          f"numpy {med(r['numpy_s'] for r in rounds['floor']):.2f} s"
          + (f", torch {med(r['torch_s'] for r in rounds['floor']):.2f} s" if "torch_s" in f
             else "") + ")")
    print(f"  engine in process (features)  {eng['wall_s']:8.2f} s   ({eng['wall_s'] / floor:.2f}"
          " × the floor; features already in memory)")
    if wheel is not None:
        peer = med(r["wall_s"] for r in rounds["peer"])
        p0 = rounds["peer"][0]
        label = "compiled rank_cy" if build_dir else "Python evaluator"
        ext = "" if p0["queries_run"] == p0["queries_total"] else \
            f"; ran {p0['queries_run']} of {p0['queries_total']} queries, extrapolated"
        print(f"  fast-reid ({label:16s}) {peer:8.2f} s   (distances "
              f"{med(r['distances_s'] for r in rounds['peer']):.2f} s by {p0['gemm']} + "
              f"evaluate_rank {med(r['ranking_s'] for r in rounds['peer']):.2f} s; features "
              f"in memory, imports not counted{ext}; mAP {p0['mAP']:.4f})")
        out.update(peer_s=peer, peer_label=label)
    print(f"  reid eval --store --json (whole process) {whole:6.2f} s   (CPU {whole_cpu:.2f} s; "
          f"interpreter start, imports, store read, provenance hashing included; "
          f"mAP {mAP:.4f})")
    if baseline:
        base = med(r["wall_s"] for r in rounds["baseline"])
        out.update(baseline_s=base,
                   baseline_cpu_s=med(r["cpu_s"] for r in rounds["baseline"]))
        print(f"  the same, reidcli of {baseline}  {base:6.2f} s   (CPU "
              f"{out['baseline_cpu_s']:.2f} s; ratio this checkout / that one "
              f"{whole / base:.2f} ×)")
    print(f"  ratio whole command / GEMM floor {whole / floor:5.2f} ×"
          + (f";  whole command / fast-reid ({out['peer_label']}) "
             f"{whole / out['peer_s']:5.2f} ×" if "peer_s" in out else ""))
    if not args.via_store:
        store.unlink(missing_ok=True)
        report.unlink(missing_ok=True)
        folder.rmdir()
    return out


# -- comparison and printing --------------------------------------------------------------------
def compare(engine_pq: dict, subset, other_first, other_ap, other_inp) -> dict:
    """Per-query agreement of the engine with another evaluator on ``subset`` queries.

    other_first: first-positive ranks [len(subset)] (or None); other_ap / other_inp: either
    [len(subset)] with NaN for skipped queries, or only the valid queries in order.
    """
    subset = np.asarray(subset, dtype=np.int64)
    first = np.asarray(engine_pq["first"])[subset]
    valid = first >= 0
    ap_e, inp_e = np.asarray(engine_pq["ap"])[subset], np.asarray(engine_pq["inp"])[subset]
    ap_o, inp_o = np.asarray(other_ap, float), np.asarray(other_inp, float)
    if len(ap_o) == valid.sum() and len(ap_o) != len(subset):
        ap_o, inp_o = _expand(ap_o, valid), _expand(inp_o, valid)
    same_valid = bool(np.array_equal(valid, np.isfinite(ap_o)))
    return {"queries": int(len(subset)), "same_valid_queries": same_valid,
            "first_rank_equal": None if other_first is None
            else bool(np.array_equal(first, np.asarray(other_first))),
            "max_ap_diff": float(np.nanmax(np.abs(ap_e[valid] - ap_o[valid]))) if valid.any()
            else 0.0,
            "max_inp_diff": float(np.nanmax(np.abs(inp_e[valid] - inp_o[valid])))
            if valid.any() else 0.0}


def _expand(values: np.ndarray, valid: np.ndarray) -> np.ndarray:
    out = np.full(len(valid), np.nan)
    out[valid] = values
    return out


def cosine_rows(common: dict, store_dir: str | None = None) -> dict:
    """Issue 21 item 1: cosine preparation, previous path against the new ones; with
    ``store_dir``, also the whole `reid eval` on a cosine store marked normalized against the
    same problem stored as euclidean (the two should now need the same memory)."""
    rows = {prep: run_child({"kind": "engine", "metric": "cosine", "prepare": prep, **common})
            for prep in ("previous", "owned", "normalized")}
    prev = rows["previous"]
    labels = {"previous": "cosine, previous (normalised copies)",
              "owned": "cosine, normalised in place  ", "normalized": "cosine, store normalized   "}
    for prep, r in rows.items():
        ratio = "" if prep == "previous" else (
            f"   ratio to previous: time {r['wall_s'] / prev['wall_s']:.2f} ×, peak "
            f"{r['peak_rss_mb'] / prev['peak_rss_mb']:.2f} ×; "
            f"|ΔmAP| {abs(r['mAP'] - prev['mAP']):.1e}")
        print(f"  {labels[prep]} {r['wall_s']:8.2f} s   peak RSS {r['peak_rss_mb']:7.0f} MB   "
              f"(preparation {r['prepare_s']:.2f} s){ratio}")
        r.pop("per_query")
    if store_dir:
        Path(store_dir).mkdir(parents=True, exist_ok=True)
        for metric in ("euclidean", "cosine"):
            store = Path(store_dir) / f"eval_speed_{common['size']}_{common['dim']}_{metric}.h5"
            run_child({"kind": "write_store", "path": str(store), "metric": metric,
                       "normalized": metric == "cosine", **common})
            cli = run_child({"kind": "cli", "args": ["eval", "--store", str(store), "--quiet",
                                                      "--device", "cpu", "--stream", "off"]})
            rows[f"cli_{metric}"] = cli
            print(f"  reid eval, {metric:9s} store    {cli['wall_s']:8.2f} s   peak RSS "
                  f"{cli['peak_rss_mb']:7.0f} MB   (exit {cli['code']}"
                  + ("; features marked normalized)" if metric == "cosine" else ")"))
    return rows


def bf16_rows(common: dict, fp32: dict) -> dict:
    """Issue 21 item 3: bf16 distance GEMM against the float32 engine of the same run."""
    r = run_child({"kind": "engine", "precision": "bf16", **common})
    a, b = fp32["per_query"], r["per_query"]
    same_first = float(np.mean(np.asarray(a["first"]) == np.asarray(b["first"])))
    print(f"  engine, bf16 distances        {r['wall_s']:8.2f} s   peak RSS "
          f"{r['peak_rss_mb']:7.0f} MB   (distances {r['distances_s']:.2f} s)   ratio to float32: "
          f"{r['wall_s'] / fp32['wall_s']:.2f} × end to end, "
          f"{r['distances_s'] / fp32['distances_s']:.2f} × distances; ΔR1 "
          f"{r['rank1'] - fp32['rank1']:+.1e}, ΔmAP {r['mAP'] - fp32['mAP']:+.1e}, "
          f"same first rank for {100 * same_first:.2f} % of queries")
    r.pop("per_query")
    return {**r, "same_first_rank_fraction": same_first}


def stream_rows(args, size: str, common: dict) -> dict:
    """Issue 21 item 7: `reid eval` with the gallery streamed from the store against the
    in-memory path, on a store written once in ``args.stream`` (kept for later runs)."""
    Path(args.stream).mkdir(parents=True, exist_ok=True)
    store = Path(args.stream) / f"eval_speed_{size}_{args.dim}.h5"
    wrote = run_child({"kind": "write_store", "path": str(store), **common})
    print(f"  store {store} ({store.stat().st_size / 2**30:.2f} GiB) "
          + ("reused" if wrote["reused"] else f"written in {wrote['write_s']:.1f} s"))
    out = {}
    modes = ["on"] + (["off"] if size not in STORE_ONLY_SIZES or args.in_memory_too else [])
    for mode in modes:
        report_path = Path(args.stream) / f"eval_speed_{size}_{mode}.json"
        cli = run_child({"kind": "cli", "args": ["eval", "--store", str(store), "--json",
                                                  str(report_path), "--force", "--quiet",
                                                  "--device", "cpu", "--stream", mode]})
        report = json.loads(report_path.read_text())
        out[mode] = {**cli, "eval_s": report.get("seconds"), "mAP": report["mAP"],
                     "mINP": report["mINP"], "cmc": report["cmc"]}
        print(f"  reid eval --stream {mode:3s}        {cli['wall_s']:8.2f} s   peak RSS "
              f"{cli['peak_rss_mb']:7.0f} MB   (exit {cli['code']}; evaluation "
              f"{report.get('seconds', float('nan')):.2f} s, the rest reads records and hashes "
              f"the store for provenance; mAP {report['mAP']:.4f}, R1 {report['cmc'][0]:.4f})")
    if "off" in out:
        on, off = out["on"], out["off"]
        diff = max(abs(on["mAP"] - off["mAP"]), abs(on["mINP"] - off["mINP"]),
                   float(np.max(np.abs(np.subtract(on["cmc"], off["cmc"])))))
        print(f"  ratio streamed / in memory    time {on['wall_s'] / off['wall_s']:.2f} ×, peak "
              f"RSS {on['peak_rss_mb'] / off['peak_rss_mb']:.2f} ×; max |Δ| of mAP, mINP, CMC "
              f"{diff:.1e}")
        out["max_metric_diff"] = diff
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="market,msmt17")
    parser.add_argument("--dim", type=int, default=2048, help="feature dimension")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ref-queries", default="",
                        help="per size: e.g. market=all,msmt17=1000 (subset → extrapolated)")
    parser.add_argument("--rerank", action="store_true", help="also time Market re-ranking")
    parser.add_argument("--peer", nargs="?", const="", default=None,
                        help="compare with fast-reid's rank.py (optional wheel path)")
    parser.add_argument("--peer-queries", type=int, default=PEER_QUERIES)
    parser.add_argument("--baseline-tree", metavar="DIR",
                        help="--peer, Market size: also time the whole `reid eval` with the "
                             "reidcli package in DIR (e.g. `git archive` of an older commit)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="--peer, Market size: interleaved rounds of the GEMM floor, "
                             "fast-reid and the whole `reid eval` (medians)")
    parser.add_argument("--via-store", metavar="DIR",
                        help="also write each problem as a store in DIR and time the whole "
                             "`reid eval --store` command (reads, provenance hashing included)")
    parser.add_argument("--cosine", action="store_true",
                        help="cosine rows: the previous copying normalisation against rows "
                             "normalised in place and rows a store marks normalized")
    parser.add_argument("--bf16", action="store_true",
                        help="bf16 distance GEMM against float32: time and agreement")
    parser.add_argument("--stream", metavar="DIR",
                        help="write each size's store in DIR (kept and reused) and time "
                             "`reid eval --stream on` against `--stream off` (person30k: "
                             "streamed only unless --in-memory-too)")
    parser.add_argument("--in-memory-too", action="store_true",
                        help="with --stream: also run person30k with its gallery in memory "
                             "(needs ~10 GB)")
    parser.add_argument("--json", help="also write all measurements as JSON")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return answer_worker(args.worker, WORKERS)

    ref_queries = dict(DEFAULT_REF_QUERIES)
    for item in filter(None, args.ref_queries.split(",")):
        key, value = item.split("=")
        ref_queries[key] = value
    sizes = [s for s in args.sizes.split(",") if s]
    print(f"eval_speed: dim {args.dim}, seed {args.seed}, {os.cpu_count()} CPU(s), "
          f"numpy {np.__version__}; each row is a separate process (peak RSS includes the "
          "problem's features)")
    results: dict = {}
    for size in sizes:
        spec = SIZES[size]
        sub = ref_queries.get(size, "all")
        common = dict(size=size, dim=args.dim, seed=args.seed)
        print(f"\n== {size}: {spec['queries']} queries × {spec['gallery']} gallery "
              f"({spec['ids']} ids, {spec['cams']} cams, {spec['distractors']} distractors)")
        if size in STORE_ONLY_SIZES:
            if not args.stream:
                print("  (store-only size: give --stream DIR)")
            else:
                results[size] = {"stream": stream_rows(args, size, common)}
            continue
        eng = run_child({"kind": "engine", **common})
        ref = run_child({"kind": "reference", "subset_spec": sub, **common})
        row = {"engine": eng, "reference": ref}
        extrap = ref["queries_run"] < ref["queries_total"]
        note = (f" — ran {ref['queries_run']} of {ref['queries_total']} queries, times "
                "extrapolated linearly" if extrap else "")
        ref_total = ref["ranking_s_all"] + ref["distances_s_all"]
        print(f"  engine (features → metrics)   {eng['wall_s']:8.2f} s   peak RSS "
              f"{eng['peak_rss_mb']:7.0f} MB   (of which distances {eng['distances_s']:.2f} s; "
              f"mAP {eng['mAP']:.4f}, R1 {eng['rank1']:.4f}, mINP {eng['mINP']:.4f})")
        if size == "market":
            mat = run_child({"kind": "engine_matrix", **common})
            row["engine_matrix"] = mat
            print(f"  engine (ranking only, matrix) {mat['wall_s']:8.2f} s   peak RSS "
                  f"{mat['peak_rss_mb']:7.0f} MB")
        print(f"  reference per-query NumPy     {ref_total:8.2f} s   peak RSS "
              f"{ref['peak_rss_mb']:7.0f} MB   (ranking {ref['ranking_s_all']:.2f} s + "
              f"distances {ref['distances_s_all']:.2f} s){note}")
        cmp_ref = compare(eng["per_query"], ref["subset"], ref["per_query"]["first"],
                          ref["per_query"]["ap"], ref["per_query"]["inp"])
        row["agreement_reference"] = cmp_ref
        print(f"  ratio reference / engine      {ref_total / eng['wall_s']:8.1f} ×  end to end; "
              + (f"{ref['ranking_s_all'] / row['engine_matrix']['wall_s']:.1f} × ranking only"
                 if "engine_matrix" in row else
                 f"{ref['ranking_s_all'] / max(eng['wall_s'] - eng['distances_s'], 1e-9):.1f}"
                 " × ranking (engine minus its distance time)"))
        print(f"  agreement on {ref['queries_run']} queries: same valid queries "
              f"{cmp_ref['same_valid_queries']}, first ranks equal "
              f"{cmp_ref['first_rank_equal']}, max |ΔAP| {cmp_ref['max_ap_diff']:.2e}, "
              f"max |ΔINP| {cmp_ref['max_inp_diff']:.2e}")
        if args.peer is not None and size == "market":
            wheel, message = find_peer_wheel(args.peer or None)
            print(f"  peer: {message}")
            if wheel is not None:
                peer = run_child({"kind": "peer", "wheel": str(wheel),
                                  "queries": args.peer_queries, **common})
                row["peer"] = peer
                cmp_peer = compare(eng["per_query"], peer["subset"], None, peer["ap"],
                                   peer["inp"])
                ap_e = np.asarray(eng["per_query"]["ap"])[peer["subset"]]
                ap_p = _expand(np.asarray(peer["ap"]), np.isfinite(ap_e))
                differ = np.abs(np.nan_to_num(ap_e - ap_p)) > 1e-9
                tied = np.asarray(peer["tied_positive"])
                cmp_peer.update(queries_differing=int(differ.sum()),
                                differing_with_tied_positive=int((differ & tied).sum()))
                row["agreement_peer"] = cmp_peer
                pext = (f" — ran {peer['queries_run']} of {peer['queries_total']} queries, "
                        "extrapolated" if peer["queries_run"] < peer["queries_total"] else "")
                print(f"  fast-reid rank.py (Python)    {peer['ranking_s_all']:8.2f} s   ranking "
                      f"only{pext}; ratio to engine ranking "
                      f"{peer['ranking_s_all'] / row['engine_matrix']['wall_s']:.1f} ×; "
                      f"max |ΔAP| {cmp_peer['max_ap_diff']:.2e} on "
                      f"{cmp_peer['queries_differing']} queries, "
                      f"{cmp_peer['differing_with_tied_positive']} of them with a positive tied "
                      "in distance (fast-reid's argsort is not stable)")
        if args.peer is not None and size == "market":
            row["whole"] = whole_command_rows(args, common, wheel, eng)
        if args.rerank and size == "market":
            rr = run_child({"kind": "engine", "rerank": True, **common})
            row["rerank"] = rr
            n = spec["queries"] + spec["gallery"]
            print(f"  re-ranking + evaluation       {rr['wall_s']:8.2f} s   peak RSS "
                  f"{rr['peak_rss_mb']:7.0f} MB   (setup {rr['rerank_setup_s']:.2f} s; mAP "
                  f"{rr['mAP']:.4f} vs {eng['mAP']:.4f} without; not measured: the dense "
                  f"formulation's ~24 B per N² would be {24 * n * n / 2**30:.1f} GiB for "
                  f"N = {n})")
        if args.via_store:
            Path(args.via_store).mkdir(parents=True, exist_ok=True)
            store = Path(args.via_store) / f"eval_speed_{size}_{args.dim}.h5"
            out = Path(args.via_store) / f"eval_speed_{size}_{args.dim}.json"
            run_child({"kind": "write_store", "path": str(store), **common})
            cli = run_child({"kind": "cli", "args": ["eval", "--store", str(store), "--json",
                                                      str(out), "--force", "--quiet",
                                                      "--device", "cpu"]})
            report = json.loads(out.read_text())
            row["cli"] = {**cli, "mAP": report["mAP"]}
            print(f"  reid eval --store (whole CLI)  {cli['wall_s']:8.2f} s   peak RSS "
                  f"{cli['peak_rss_mb']:7.0f} MB   (exit {cli['code']}; mAP {report['mAP']:.4f}; "
                  "includes reading the store and hashing it for provenance)")
            store.unlink()
        if args.cosine:
            row["cosine"] = cosine_rows(common, args.stream)
        if args.bf16:
            row["bf16"] = bf16_rows(common, eng)
        if args.stream:
            row["stream"] = stream_rows(args, size, common)
        results[size] = row
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
