"""A gallery streamed block by block scores exactly as the in-memory engine; store-level
streaming, the bf16 distance option and the normalisation shortcuts."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from reidcli.data.records import normalize_frame
from reidcli.evaluation.backend import NumpyBackend
from reidcli.evaluation.distances import FeatureMetric, QueryGallery, l2_normalize
from reidcli.evaluation.engine import EvalOptions, evaluate_trial
from reidcli.evaluation.errors import EvaluationError
from reidcli.evaluation.protocols import TrialLabels, get_protocol
from reidcli.evaluation.run import StoreEvalRequest, evaluate_store
from reidcli.evaluation.streamed import StreamedGallery, evaluate_streamed
from reidcli.store import StoreWriter


def problem(seed=0, nq=40, ng=300, ids=25, cams=4, dim=16, integer=False):
    """Random labels (junk and distractor gallery rows included) and features; ``integer``:
    ±1 features (every row of norm √dim, so cosine's normalised rows are exact too): every
    GEMM is exact in any block shape and distances tie often."""
    rng = np.random.default_rng(seed)
    q_pids = rng.integers(1, ids + 1, nq)
    q_pids[:2] = (0, -1)                                  # a distractor and a junk query
    g_pids = rng.integers(-1, ids + 1, ng)
    q_cams, g_cams = rng.integers(0, cams, nq), rng.integers(0, cams, ng)
    if integer:
        qf = rng.choice(np.float32([-1, 1]), (nq, dim))
        gf = rng.choice(np.float32([-1, 1]), (ng, dim))
    else:
        centres = rng.standard_normal((ids + 2, dim)).astype(np.float32)
        qf = centres[q_pids + 1] + rng.standard_normal((nq, dim)).astype(np.float32)
        gf = centres[g_pids + 1] + rng.standard_normal((ng, dim)).astype(np.float32)
    labels = TrialLabels.from_arrays(q_pids, q_cams, g_pids, g_cams)
    return labels, qf, gf


def both_paths(labels, qf, gf, metric, block_rows, protocol="market", **opts):
    backend = NumpyBackend(threads=1)
    options = EvalOptions(max_rank=20, gallery_block_rows=block_rows, **opts)
    in_memory = evaluate_trial(QueryGallery(FeatureMetric(metric, backend), qf, gf), labels,
                               get_protocol(protocol), options, backend=backend)
    reads = []

    def read(positions):
        reads.append(len(positions))
        return gf[positions].copy()

    source = StreamedGallery(FeatureMetric(metric, backend), qf.copy(), read, len(gf),
                             gf.shape[1])
    streamed = evaluate_streamed(source, labels, get_protocol(protocol), options,
                                 backend=backend)
    return in_memory, streamed, reads


@pytest.mark.parametrize("metric", ["euclidean", "sqeuclidean", "cosine"])
@pytest.mark.parametrize("block_rows", [1, 7, 64, 1000])
def test_streamed_gallery_gives_the_in_memory_ranks_with_exact_ties(metric, block_rows):
    labels, qf, gf = problem(seed=block_rows, integer=True)
    in_memory, streamed, reads = both_paths(labels, qf, gf, metric, block_rows)
    a, b = in_memory.outcomes, streamed.outcomes
    assert (a.status == b.status).all()
    np.testing.assert_array_equal(a.first_rank, b.first_rank)
    np.testing.assert_array_equal(a.ap, b.ap)
    np.testing.assert_array_equal(a.inp, b.inp)
    np.testing.assert_array_equal(in_memory.cmc, streamed.cmc)
    assert max(reads) <= block_rows            # never more than one block read at once


@pytest.mark.parametrize("protocol", ["market", "regdb", "single-shot", "single-shot-any"])
def test_streamed_gallery_matches_float_features_under_other_rules(protocol):
    labels, qf, gf = problem(seed=3, nq=60, ng=500, cams=6)
    in_memory, streamed, _ = both_paths(labels, qf, gf, "euclidean", 97, protocol=protocol,
                                        ap_convention="market-official")
    assert in_memory.mAP == pytest.approx(streamed.mAP, abs=1e-12)
    np.testing.assert_array_equal(in_memory.cmc, streamed.cmc)
    np.testing.assert_array_equal(in_memory.outcomes.first_rank,
                                  streamed.outcomes.first_rank)


def test_rules_that_need_whole_rows_are_refused():
    labels, qf, gf = problem()
    source = StreamedGallery(FeatureMetric("euclidean", NumpyBackend()), qf, lambda p: gf[p],
                             len(gf), gf.shape[1])
    with pytest.raises(EvaluationError, match="in memory"):
        evaluate_streamed(source, labels, get_protocol("cuhk03_sgs"))


# -- store level -------------------------------------------------------------------------------
def write_store(path, labels_seed=0, metric="euclidean", normalized=False, dim=16,
                train_rows=0):
    """A store of problem() as query and gallery rows (+ ``train_rows`` training rows)."""
    labels, qf, gf = problem(seed=labels_seed, dim=dim)
    if normalized:
        qf, gf = l2_normalize(qf), l2_normalize(gf)
    rng = np.random.default_rng(labels_seed + 1)
    t_pids = rng.integers(100, 110, train_rows)
    tf = rng.standard_normal((train_rows, dim)).astype(np.float32) + t_pids[:, None] % 3
    q_pids, g_pids = labels.query_pids, labels.gallery_pids
    n_q, n = len(q_pids), train_rows + len(q_pids) + len(g_pids)
    records = normalize_frame(pd.DataFrame({
        "path": [f"img/{i:05d}.jpg" for i in range(n)],
        "pid": np.concatenate([t_pids, q_pids, g_pids]),
        "camid": np.concatenate([rng.integers(0, 2, train_rows), labels.query_cams,
                                 labels.gallery_cams]),
        "split": ["train"] * train_rows + ["query"] * n_q + ["gallery"] * len(g_pids),
        "dataset": "synthetic"}))
    with StoreWriter(path, records, dataset="synthetic", provenance={"command": "test"}) as w:
        w.set_feature("emb", np.concatenate([tf, qf, gf]), metric=metric,
                      normalized=normalized)
    return path


def run(store, **kw):
    options = kw.pop("options", EvalOptions(max_rank=10, gallery_block_rows=50))
    return evaluate_store(StoreEvalRequest(store=store, device="cpu", options=options, **kw))


@pytest.mark.parametrize("metric", ["euclidean", "cosine"])
def test_store_evaluation_streams_on_request_with_the_same_numbers(tmp_path, metric):
    store = write_store(tmp_path / "s.h5", metric=metric)
    kept = run(store, stream="off")
    streamed = run(store, stream="on")
    assert streamed.meta["gallery_streamed"] == [0] and kept.meta["gallery_streamed"] == []
    assert streamed.trials[0].mAP == pytest.approx(kept.trials[0].mAP, abs=1e-12)
    np.testing.assert_array_equal(streamed.trials[0].cmc, kept.trials[0].cmc)


def test_auto_keeps_small_galleries_in_memory(tmp_path):
    store = write_store(tmp_path / "s.h5")
    assert run(store).meta["gallery_streamed"] == []


def test_streaming_with_reranking_is_refused_up_front(tmp_path):
    from reidcli.evaluation.rerank import RerankOptions
    store = write_store(tmp_path / "s.h5")
    with pytest.raises(EvaluationError, match="re-ranking"):
        run(store, stream="on", rerank=RerankOptions())


def test_bad_stream_and_precision_values_name_the_option(tmp_path):
    store = write_store(tmp_path / "s.h5")
    with pytest.raises(EvaluationError, match="stream"):
        run(store, stream="sometimes")
    with pytest.raises(EvaluationError, match="precision"):
        run(store, precision="fp8")


def test_bf16_distances_run_when_asked_and_the_report_says_so(tmp_path):
    store = write_store(tmp_path / "s.h5", dim=64)
    fp32 = run(store)
    bf16 = run(store, precision="bf16")
    assert fp32.meta["precision"] == "float32" and bf16.meta["precision"] == "bf16"
    # bf16 rounds the GEMM: per-query AP moves a little, the mean stays close
    assert bf16.trials[0].mAP == pytest.approx(fp32.trials[0].mAP, abs=0.05)
    backend = NumpyBackend()
    labels, qf, gf = problem(dim=64)
    d32 = QueryGallery(FeatureMetric("euclidean", backend), qf, gf).block(np.arange(5))
    d16 = QueryGallery(FeatureMetric("euclidean", backend, "bf16"), qf, gf).block(np.arange(5))
    assert d16.dtype == np.float32 and not np.array_equal(d16, d32)
    np.testing.assert_allclose(d16, d32, rtol=0.05)


def test_streamed_bf16_equals_in_memory_bf16(tmp_path):
    store = write_store(tmp_path / "s.h5", dim=64)
    a, b = run(store, precision="bf16", stream="off"), run(store, precision="bf16", stream="on")
    np.testing.assert_array_equal(a.trials[0].outcomes.first_rank,
                                  b.trials[0].outcomes.first_rank)


# -- normalisation without extra copies ----------------------------------------------------------
def test_cosine_skips_rows_marked_normalized_and_normalises_owned_rows_in_place():
    rows = l2_normalize(np.random.default_rng(0).standard_normal((50, 8)))
    metric = FeatureMetric("cosine", NumpyBackend())
    assert np.shares_memory(metric.prepare(rows, normalized=True).features, rows)
    raw = np.random.default_rng(1).standard_normal((50, 8)).astype(np.float32)
    expected = l2_normalize(raw)
    prepared = metric.prepare(raw, owned=True)
    assert np.shares_memory(prepared.features, raw)
    np.testing.assert_array_equal(prepared.features, expected)
    untouched = np.random.default_rng(2).standard_normal((5, 8)).astype(np.float32)
    copy = untouched.copy()
    metric.prepare(untouched)                       # not owned: the caller's rows stay
    np.testing.assert_array_equal(untouched, copy)


def test_normalized_store_feature_scores_as_before(tmp_path):
    """A store marked normalized skips cosine's normalisation; the numbers stay those of
    normalising again (the rows are unit already)."""
    store = write_store(tmp_path / "s.h5", metric="cosine", normalized=True)
    result = run(store)
    labels, qf, gf = problem()
    again = evaluate_trial(QueryGallery(FeatureMetric("cosine", NumpyBackend()), l2_normalize(qf),
                                        l2_normalize(gf)), labels, get_protocol("market"),
                           EvalOptions(max_rank=10))
    assert result.trials[0].mAP == pytest.approx(again.mAP, abs=1e-6)


@pytest.mark.parametrize("precision", ["float32", "bf16"])
def test_torch_backend_streams_like_numpy(precision):
    """The GPU code path (torch tensors), run on the CPU: same ranks as the NumPy backend."""
    from reidcli.evaluation.backend import TorchBackend
    labels, qf, gf = problem(seed=5, integer=True)
    results = []
    for backend in (NumpyBackend(threads=1), TorchBackend("cpu")):
        source = StreamedGallery(FeatureMetric("euclidean", backend, precision), qf.copy(),
                                 lambda p: gf[p].copy(), len(gf), gf.shape[1])
        results.append(evaluate_streamed(source, labels, get_protocol("market"),
                                         EvalOptions(max_rank=20, gallery_block_rows=33),
                                         backend=backend))
    np.testing.assert_array_equal(results[0].outcomes.first_rank, results[1].outcomes.first_rank)
    np.testing.assert_array_equal(results[0].outcomes.ap, results[1].outcomes.ap)


def test_streamed_gallery_through_a_fitted_projection(tmp_path):
    """Gallery blocks go through the fitted model's transform before the metric."""
    from reidcli.metric.fit import fit_feature_metric_store
    from reidcli.metric.pca import PCA
    store = write_store(tmp_path / "s.h5", train_rows=60)
    model = tmp_path / "pca.h5"
    fit_feature_metric_store(store, model, PCA(dim=6), progress=False)
    kept = run(store, model=model, stream="off")
    streamed = run(store, model=model, stream="on")
    assert streamed.meta["gallery_streamed"] == [0]
    assert streamed.trials[0].mAP == pytest.approx(kept.trials[0].mAP, abs=1e-12)
    np.testing.assert_array_equal(streamed.trials[0].cmc, kept.trials[0].cmc)
