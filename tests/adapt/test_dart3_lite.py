"""DART3 LITE, Norm and No-adapt on the biased embeddings: docs/methods/dart3.md T1–T7."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from reidcli.adapt import AdaptConfig, adapt_features, inputs_from_arrays
from reidcli.evaluation.arrays import evaluate_arrays
from reidcli.evaluation.scores import nmi_camera_bias
from reidcli.synthetic.camera_bias import synthetic_bias
from tests.adapt.helpers import STRONG_LITE


def _inputs(seed):
    e = synthetic_bias(seed)
    return e, inputs_from_arrays(e.query, e.query_cam, e.gallery, e.gallery_cam)


def _map(e, out):
    """mAP with --feat-norm none (Euclidean on the raw adapted rows), market rule."""
    return evaluate_arrays(e.query_pid, e.query_cam, e.gallery_pid, e.gallery_cam,
                           query_features=out.queries, gallery_features=out.gallery).mAP


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_t1_norm_and_lite_remove_the_bias(seed):
    e, inputs = _inputs(seed)
    m_none = _map(e, adapt_features(inputs, AdaptConfig("none")))
    m_norm = _map(e, adapt_features(inputs, AdaptConfig("norm")))
    m_lite = _map(e, adapt_features(inputs, AdaptConfig("dart3", **STRONG_LITE)))
    assert m_none < 0.25
    assert m_norm > 0.6 and m_norm >= m_none + 0.4
    assert m_lite > 0.6 and m_lite >= m_norm - 0.01


@pytest.mark.parametrize("seed", [0, 1])
def test_t2_nmi_of_camera_clusters_drops(seed):
    e, inputs = _inputs(seed)

    def nmi(out):
        feats = np.concatenate([out.queries, out.gallery])
        cams = np.concatenate([e.query_cam, e.gallery_cam])
        return nmi_camera_bias(feats, cams, k="cams", seed=0)["nmi"]

    assert nmi(adapt_features(inputs, AdaptConfig("none"))) > 0.6
    assert nmi(adapt_features(inputs, AdaptConfig("norm"))) < 0.2
    assert nmi(adapt_features(inputs, AdaptConfig("dart3", **STRONG_LITE))) < 0.2


def test_t3_gallery_side_is_frozen():
    e, inputs = _inputs(0)
    cfg = AdaptConfig("dart3", lr=1e-2, steps=5)
    out = adapt_features(inputs, cfg)
    norm = adapt_features(inputs, AdaptConfig("norm"))
    np.testing.assert_array_equal(out.arrays["M_g"], norm.arrays["M_g"])
    np.testing.assert_array_equal(out.arrays["S_g"], norm.arrays["S_g"])
    np.testing.assert_array_equal(out.gallery, norm.gallery)         # G̃ of the initial stats
    assert not np.array_equal(out.arrays["M_q"], out.arrays["M_q_init"])   # queries moved
    # the gallery parameters are buffers without gradient
    from reidcli.adapt.dart3 import CameraShiftScale
    module = CameraShiftScale(out.stats)
    assert not module.mean_g.requires_grad and not module.std_g.requires_grad
    assert {n for n, _ in module.named_parameters()} == \
        {f"{k}.{c}" for k in ("mean_q", "std_q") for c in range(4)}


def test_t4_batch_of_one():
    e, inputs = _inputs(1)
    out = adapt_features(inputs, AdaptConfig("dart3", batch_size=1, lr=1e-2))
    assert np.isfinite(out.queries).all()
    assert len(out.loop.losses) == len(e.query)
    for c in np.unique(inputs.query_codes):
        assert not np.array_equal(out.arrays["M_q"][c], out.arrays["M_q_init"][c])
    assert (out.arrays["S_q"] > 0).all()


def test_t5_episodic_runs_reset_every_batch():
    e, inputs = _inputs(2)
    norm = adapt_features(inputs, AdaptConfig("norm"))
    one = adapt_features(inputs, AdaptConfig("dart3", episodic=True, steps=1, emit="pre",
                                             lr=1e-2))
    np.testing.assert_allclose(one.queries, norm.queries, atol=1e-6)           # (a)
    order = np.random.default_rng(5).permutation(len(e.query))
    fwd = adapt_features(inputs, AdaptConfig("dart3", episodic=True, steps=3, lr=1e-2,
                                             batch_size=8, order=order))
    batches = [order[i:i + 8] for i in range(0, len(order), 8)]
    reverse = np.concatenate(batches[::-1])
    rev = adapt_features(inputs, AdaptConfig("dart3", episodic=True, steps=3, lr=1e-2,
                                             batch_size=8, order=reverse))
    np.testing.assert_array_equal(fwd.queries, rev.queries)                   # (b)
    assert not np.allclose(fwd.queries, norm.queries, atol=1e-4)              # it did adapt
    np.testing.assert_array_equal(fwd.arrays["M_q"], fwd.arrays["M_q_init"])  # (c)
    np.testing.assert_array_equal(fwd.arrays["S_q"], fwd.arrays["S_q_init"])


def test_t6_non_episodic_state_carries_over():
    e, inputs = _inputs(0)
    norm = adapt_features(inputs, AdaptConfig("norm"))
    out = adapt_features(inputs, AdaptConfig("dart3", steps=1, emit="pre", order="stored",
                                             lr=1e-2, batch_size=8))
    first = out.arrays["batch_id"] == 0
    np.testing.assert_allclose(out.queries[first], norm.queries[first], atol=1e-6)
    later = [b for b in range(1, 10)
             if np.abs(out.queries[out.arrays["batch_id"] == b]
                       - norm.queries[out.arrays["batch_id"] == b]).max() > 1e-6]
    assert later


def test_t7_a_camera_without_queries_keeps_its_initial_parameters():
    e = synthetic_bias(1)
    keep = e.query_cam != 3                                  # camera 3: gallery rows only
    inputs = inputs_from_arrays(e.query[keep], e.query_cam[keep], e.gallery, e.gallery_cam)
    out = adapt_features(inputs, AdaptConfig("dart3", lr=1e-2, steps=3, batch_size=4))
    np.testing.assert_array_equal(out.arrays["M_q"][3], out.arrays["M_q_init"][3])
    np.testing.assert_array_equal(out.arrays["S_q"][3], out.arrays["S_q_init"][3])
    for c in range(3):
        assert not np.array_equal(out.arrays["M_q"][c], out.arrays["M_q_init"][c])


def test_paper_defaults_stay_within_a_hair_of_norm():
    e, inputs = _inputs(0)
    m_norm = _map(e, adapt_features(inputs, AdaptConfig("norm")))
    m_lite = _map(e, adapt_features(inputs, AdaptConfig("dart3")))     # lr 1e-4, T 1, B 8
    assert abs(m_lite - m_norm) <= 0.001


def test_same_seed_same_numbers_and_order_follows_the_seed():
    _, inputs = _inputs(0)
    a = adapt_features(inputs, AdaptConfig("dart3", lr=1e-2, seed=4))
    b = adapt_features(inputs, AdaptConfig("dart3", lr=1e-2, seed=4))
    c = adapt_features(inputs, AdaptConfig("dart3", lr=1e-2, seed=5))
    np.testing.assert_array_equal(a.queries, b.queries)
    assert not np.array_equal(a.arrays["order"], c.arrays["order"])


def test_split_by_query_camera_runs_one_stream_per_camera():
    e, inputs = _inputs(0)
    out = adapt_features(inputs, AdaptConfig("dart3", lr=1e-2, split_by_query_camera=True,
                                             batch_size=8))
    cams_per_batch = [np.unique(e.query_cam[out.arrays["batch_id"] == b])
                      for b in range(len(out.loop.losses))]
    assert all(len(c) == 1 for c in cams_per_batch)
    assert out.loop.stream_cameras == [0, 1, 2, 3]
    # each camera's stream is independent: replaying camera 2's stream alone gives the same
    # outputs and the same final parameters of camera 2
    seq = out.arrays["order"][e.query_cam[out.arrays["order"]] == 2]
    sel2 = np.flatnonzero(e.query_cam == 2)
    only2 = inputs_from_arrays(e.query, e.query_cam, e.gallery, e.gallery_cam,
                               query_cams_selected=[2])
    alone = adapt_features(only2, AdaptConfig("dart3", lr=1e-2, batch_size=8,
                                              order=np.searchsorted(sel2, seq)))
    np.testing.assert_array_equal(alone.queries, out.queries[sel2])
    np.testing.assert_array_equal(alone.arrays["M_q"][2], out.arrays["M_q"][2])
    np.testing.assert_array_equal(out.arrays["M_q"][0] != out.arrays["M_q_init"][0],
                                  np.ones(e.query.shape[1], bool))


def test_grounding_rows_join_the_loss_and_their_outputs_are_dropped():
    e = synthetic_bias(0)
    pool_cam = np.full(30, 9)
    pool = np.random.default_rng(0).normal(size=(30, e.query.shape[1])).astype(np.float32)
    inputs = inputs_from_arrays(e.query, e.query_cam, e.gallery, e.gallery_cam,
                                grounding=pool, grounding_cams=pool_cam)
    plain = adapt_features(inputs, AdaptConfig("dart3", lr=1e-2))
    grounded = adapt_features(inputs, AdaptConfig("dart3", lr=1e-2, grounding=4))
    assert grounded.queries.shape == plain.queries.shape
    assert not np.allclose(grounded.loop.losses, plain.loop.losses)
    code = int(np.flatnonzero(inputs.cameras.cam_ids == 9)[0])   # stats from the pool
    np.testing.assert_allclose(grounded.stats.mean_q[code], pool.mean(0), atol=1e-5)


def test_sgd_and_post_emission_options():
    e, inputs = _inputs(1)
    pre = adapt_features(inputs, AdaptConfig("dart3", lr=1e-2, order="stored"))
    post = adapt_features(inputs, AdaptConfig("dart3", lr=1e-2, order="stored", emit="post"))
    sgd = adapt_features(inputs, AdaptConfig("dart3", lr=10.0, optimizer="sgd"))
    assert not np.allclose(pre.queries, post.queries)
    assert not np.array_equal(sgd.arrays["M_q"], sgd.arrays["M_q_init"])
    assert torch.isfinite(torch.as_tensor(sgd.queries)).all()


def test_bf16_precision_keeps_the_map():
    e, inputs = _inputs(1)
    m32 = _map(e, adapt_features(inputs, AdaptConfig("dart3", **STRONG_LITE)))
    m16 = _map(e, adapt_features(inputs, AdaptConfig("dart3", precision="bf16",
                                                     **STRONG_LITE)))
    assert abs(m16 - m32) < 0.01


def test_gallery_is_normalised_and_prepared_once_per_run_not_per_batch():
    """G̃, its squared norms and its shards are built once; each batch and step costs one
    loss evaluation against that same prepared gallery (issue 21)."""
    from unittest import mock

    from reidcli.adapt import dart3, losses, norm

    e, inputs = _inputs(0)
    prepared, evaluated = [], []
    real_prepare, real_passes = losses.PreparedGallery, losses._shard_passes
    real_normalise = norm.normalize_by_camera

    def prepare(*args, **kwargs):
        prepared.append(real_prepare(*args, **kwargs))
        return prepared[-1]

    def passes(z, zg, z_sq, gallery, *rest):
        evaluated.append(gallery)
        return real_passes(z, zg, z_sq, gallery, *rest)

    cfg = AdaptConfig("dart3", batch_size=8, steps=2)
    with mock.patch.object(dart3, "PreparedGallery", side_effect=prepare), \
            mock.patch.object(losses, "_shard_passes", side_effect=passes), \
            mock.patch.object(norm, "normalize_by_camera",
                              side_effect=real_normalise) as normalise:
        out = adapt_features(inputs, cfg)
    n_batches = -(-len(e.query) // 8)
    assert len(prepared) == 1 and normalise.call_count == 1
    assert len(evaluated) == n_batches * 2 == out.arrays["loss"].size
    assert all(g is prepared[0] for g in evaluated)
