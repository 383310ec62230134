"""PK, cross-modality and camera-split batch samplers (reidcli.data.samplers)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from reidcli.data.samplers import (CameraSplitSampler, CrossModalitySampler, EpochTaggedSampler,
                                   PKSampler)
from reidcli.errors import UsageError

# 12 identities with 1..9 images each, rows shuffled so that indices are not grouped by id
COUNTS = [5, 2, 4, 8, 1, 6, 4, 9, 3, 4, 7, 4]
LABELS = np.random.default_rng(7).permutation(np.repeat(np.arange(12), COUNTS))


def _check_pk_batch(batch, labels, p, k):
    ids = labels[np.asarray(batch)].reshape(p, k)
    assert len(batch) == p * k
    assert (ids == ids[:, :1]).all(), "K consecutive images of one identity"
    assert len(set(ids[:, 0])) == p, "P distinct identities"


def test_pk_batches_follow_bot_epoch():
    sampler = PKSampler(LABELS, p=3, k=2, seed=1)
    batches = list(sampler)
    assert len(batches) == len(sampler) > 0
    for batch in batches:
        _check_pk_batch(batch, LABELS, 3, 2)
    flat = np.concatenate(batches)
    # each identity contributes at most max(1, n // k) chunks of k images
    chunks = {i: max(1, n // 2) for i, n in enumerate(COUNTS)}
    used = np.bincount(LABELS[flat], minlength=12)
    assert all(used[i] <= 2 * chunks[i] for i in range(12))
    assert len(batches) <= sum(chunks.values()) // 3
    # the one-image identity is sampled with replacement; others never repeat an image
    single = np.flatnonzero(LABELS == 4)[0]
    repeats = {int(i) for i, c in zip(*np.unique(flat, return_counts=True)) if c > 1}
    assert repeats <= {int(single)}
    assert (flat == single).sum() in (0, 2)
    # P = all identities, each with 2K images: the epoch uses every image exactly once
    even = np.repeat(np.arange(6), 8)
    exact = list(PKSampler(even, p=6, k=4, seed=5))
    assert len(exact) == 2 and sorted(np.concatenate(exact).tolist()) == list(range(48))
    # one chunk per identity (K..2K−1 images): ⌊ids/P⌋ batches, each identity at most once
    one = np.repeat(np.arange(7), [4, 5, 6, 7, 4, 5, 6])
    batches = list(PKSampler(one, p=3, k=4, seed=5))
    assert len(batches) == 2 and len(set(one[np.concatenate(batches)])) == 6


def test_pk_determinism_per_seed_and_epoch():
    a = PKSampler(LABELS, p=4, k=4, seed=3)
    epoch0 = list(a)
    assert list(PKSampler(LABELS, p=4, k=4, seed=3)) == epoch0
    assert list(PKSampler(LABELS, p=4, k=4, seed=4)) != epoch0
    a.set_epoch(1)
    epoch1 = list(a)
    assert epoch1 != epoch0
    b = PKSampler(LABELS, p=4, k=4, seed=3)
    b.set_epoch(1)
    assert list(b) == epoch1
    a.set_epoch(0)
    assert list(a) == epoch0


@pytest.mark.parametrize("replicas", [2, 3])
def test_pk_ranks_disjoint_and_equal(replicas):
    for epoch in (0, 1):
        full = PKSampler(LABELS, p=2, k=2, seed=0)
        full.set_epoch(epoch)
        total = full.all_batches()
        ranks = []
        for rank in range(replicas):
            s = PKSampler(LABELS, p=2, k=2, seed=0, num_replicas=replicas, rank=rank)
            s.set_epoch(epoch)
            ranks.append(list(s))
            assert len(ranks[-1]) == len(s) == len(total) // replicas
        seen = [tuple(b) for r in ranks for b in r]
        assert len(set(seen)) == len(seen)                       # no batch on two ranks
        usable = len(total) - len(total) % replicas                # trimmed, then dealt
        assert sorted(seen) == sorted(tuple(b) for b in total[:usable])
        sets = [set(np.concatenate(r).tolist()) for r in ranks]   # no image on two ranks
        for i in range(replicas):
            for j in range(i + 1, replicas):
                assert not sets[i] & sets[j]


def test_pk_errors():
    with pytest.raises(UsageError, match="12 identities cannot fill batches of P=13"):
        PKSampler(LABELS, p=13, k=2)
    with pytest.raises(UsageError, match="must be >= 1"):
        PKSampler(LABELS, p=2, k=0)
    with pytest.raises(UsageError, match="rank 2 of 2"):
        PKSampler(LABELS, p=2, k=2, num_replicas=2, rank=2)


def _vi_data():
    labels = np.repeat(np.arange(7), 6)
    modality = np.tile(np.array(["visible"] * 4 + ["infrared"] * 2), 7)
    modality[labels == 5] = "visible"                          # id 5: visible only
    modality[(labels == 6)] = ["infrared"] * 5 + ["visible"]    # id 6: a single visible image
    return labels, modality


def test_cross_modality_balance_and_layout():
    labels, modality = _vi_data()
    sampler = CrossModalitySampler(labels, modality, p=3, k=2, seed=0)
    n_vis = int((modality == "visible").sum())
    assert len(sampler) == -(-max(n_vis, 42 - n_vis) // 6)          # ⌈max(Nv, Ni)/(P·K)⌉
    batches = list(sampler)
    assert len(batches) == len(sampler)
    for batch in batches:
        batch = np.asarray(batch)
        vis, ir = batch[:6], batch[6:]
        assert len(batch) == 12
        assert (modality[vis] == "visible").all() and (modality[ir] == "infrared").all()
        assert (labels[vis] == labels[ir]).all()                    # same ids, same order
        ids = labels[vis].reshape(3, 2)
        assert (ids == ids[:, :1]).all() and len(set(ids[:, 0])) == 3
        assert 5 not in set(labels[batch])
    used = np.concatenate(batches)
    assert 6 in set(labels[used])                                   # drawn with replacement
    as_int = (modality == "infrared").astype(int)
    assert list(CrossModalitySampler(labels, as_int, p=3, k=2, seed=0)) == batches
    other = CrossModalitySampler(labels, modality, p=3, k=2, seed=0, iterations=4)
    other.set_epoch(1)
    assert len(list(other)) == 4 and list(other) != batches[:4]
    with pytest.raises(UsageError, match="6 identities have both"):
        CrossModalitySampler(labels, modality, p=7, k=2)


def _camera_data():
    """3 domains: d0 with 4 cams, d1 with 3 cams, d2 with 3 cams; 10 ids per domain, each
    seen in every camera of its domain (2 images per camera)."""
    labels, camids, domains = [], [], []
    cams = {"a": 4, "b": 3, "c": 3}
    for d, (name, n_cam) in enumerate(cams.items()):
        for pid in range(10):
            for cam in range(n_cam):
                labels += [d * 100 + pid] * 2
                camids += [cam] * 2
                domains += [name] * 2
    return np.array(labels), np.array(camids), np.array(domains)


def test_camera_split_rule_and_pairs():
    labels, camids, domains = _camera_data()
    sampler = CameraSplitSampler(labels, camids, domains, p=4, k=3, seed=0)
    assert len(sampler) == len(labels) // (2 * 4 * 3)
    support, query = sampler.camera_split()
    assert not set(support) & set(query)
    assert set(support) | set(query) == set(zip(domains.tolist(), camids.tolist()))
    count = lambda side, d: sum(1 for dom, _ in side if dom == d)           # noqa: E731
    # d0 (even): larger half = support; d1 (odd): larger half = query; d2 (even): support
    assert (count(support, "a"), count(query, "a")) == (2, 2)
    assert (count(support, "b"), count(query, "b")) == (1, 2)
    assert (count(support, "c"), count(query, "c")) == (2, 1)
    keys = np.array([f"{d}/{c}" for d, c in zip(domains, camids)])
    s_keys = {f"{d}/{c}" for d, c in support}
    q_keys = {f"{d}/{c}" for d, c in query}
    pairs = list(sampler)
    assert len(pairs) == len(sampler)
    for sup, qry in pairs:
        sup, qry = np.asarray(sup), np.asarray(qry)
        assert len(sup) == len(qry) == 12
        assert set(keys[sup]) <= s_keys and set(keys[qry]) <= q_keys
        assert (labels[sup] == labels[qry]).all()                  # same ids, same order
        ids = labels[sup].reshape(4, 3)
        assert (ids == ids[:, :1]).all() and len(set(ids[:, 0])) == 4
    flat = CameraSplitSampler(labels, camids, domains, p=4, k=3, seed=0, flat=True)
    assert list(flat) == [s + q for s, q in pairs]


def test_camera_split_determinism_epochs_and_resplit():
    labels, camids, domains = _camera_data()
    a = CameraSplitSampler(labels, camids, domains, p=4, k=2, seed=1)
    b = CameraSplitSampler(labels, camids, domains, p=4, k=2, seed=1)
    assert a.camera_split() == b.camera_split() and list(a) == list(b)
    splits = {str(a.camera_split(epoch=e)) for e in range(5)}
    assert len(splits) > 1
    a.set_epoch(3)
    assert a.camera_split() == b.camera_split(epoch=3)
    per_iter = CameraSplitSampler(labels, camids, domains, p=4, k=2, seed=1, resplit="iter")
    assert len({str(per_iter.camera_split(step=s)) for s in range(6)}) > 1


def test_camera_split_eligibility_and_errors():
    labels, camids, domains = _camera_data()
    # ids 0-4 of domain a only appear in camera 0: never eligible (no query-side image)
    only_cam0 = (domains == "a") & (labels % 100 < 5)
    camids = np.where(only_cam0, 0, camids)
    sampler = CameraSplitSampler(labels, camids, domains, p=4, k=2, seed=2, iterations=30)
    drawn = set(labels[np.concatenate([np.concatenate(p) for p in sampler])].tolist())
    assert not drawn & set(range(5)) and len(drawn) > 4
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lone = CameraSplitSampler(labels, np.where(domains == "b", 0, camids), domains, p=4, k=2)
    assert any("single camera" in str(w.message) for w in caught)
    support, query = lone.camera_split()
    assert ("b", 0) in support and not any(d == "b" for d, _ in query)
    with pytest.raises(UsageError, match="identities have images in both"):
        list(CameraSplitSampler(labels, camids, domains, p=40, k=2))
    with pytest.raises(UsageError, match="resplit"):
        CameraSplitSampler(labels, camids, domains, resplit="batch")


def test_camera_split_global_groups_and_redraw():
    """split="global" halves all cameras at once (DMG-Net paper §4.1: C/2 support cameras);
    camera groups are halved on their own; a split leaving < P eligible ids is redrawn."""
    labels, camids, domains = _camera_data()
    every = set(zip(domains.tolist(), camids.tolist()))
    glob = CameraSplitSampler(labels, camids, domains, p=2, k=2, seed=0, split="global")
    per_domain_counts = set()
    for epoch in range(12):
        support, query = glob.camera_split(epoch=epoch)
        assert (len(support), len(query)) == (5, 5) and set(support) | set(query) == every
        per_domain_counts.add(tuple(sum(d == n for d, _ in support) for n in "abc"))
    assert len(per_domain_counts) > 1 and any(c != (2, 1, 2) for c in per_domain_counts)
    # domain a's 4 cameras as two pairs {0,1}, {2,3}: one camera of each pair per side
    groups = np.where(domains == "a", camids // 2, -1)
    for split in ("global", "per-domain"):
        paired = CameraSplitSampler(labels, camids, domains, p=2, k=2, seed=3, split=split,
                                    camera_groups=groups)
        for epoch in range(6):
            support, _ = paired.camera_split(epoch=epoch)
            s_a = {c for d, c in support if d == "a"}
            assert len(s_a & {0, 1}) == 1 and len(s_a & {2, 3}) == 1
    with pytest.raises(UsageError, match="camera groups"):
        CameraSplitSampler(labels, camids, domains, camera_groups=np.arange(len(labels)) % 2)
    with pytest.raises(UsageError, match="split"):
        CameraSplitSampler(labels, camids, domains, split="domain")
    # two domains of two cameras: a global split puts both cameras of a domain on one side
    # in 1/3 of the draws; P = 10 needs both domains' 5 ids, so such splits are redrawn
    two = np.isin(domains, ["b", "c"]) & (camids < 2) & (labels % 100 < 5)
    sampler = CameraSplitSampler(labels[two], camids[two], domains[two], p=10, k=1, seed=0,
                                 split="global")
    redrawn = 0
    for epoch in range(10):
        support, _ = sampler.camera_split(epoch=epoch)
        assert {d for d, _ in support} == {"b", "c"}
        first = sampler._split_sides(sampler._split_rng(epoch, 0))
        redrawn += sampler._eligible_count(first) < 10
        sampler.set_epoch(epoch)
        assert len(list(sampler)) == len(sampler)
    assert redrawn > 0


def test_pk_sampler_fixed_iterations():
    labels = np.repeat(np.arange(6), 4)
    one_pass = PKSampler(labels, p=2, k=2, seed=4)
    fixed = PKSampler(labels, p=2, k=2, seed=4, iterations=len(one_pass) + 5)
    batches = list(fixed)
    assert len(batches) == len(fixed) == len(one_pass) + 5
    assert batches[:len(one_pass)] == list(one_pass)       # the pass first, then the next
    assert all(len(set(labels[b])) == 2 for b in batches)
    assert list(PKSampler(labels, p=2, k=2, seed=4, iterations=2)) == list(one_pass)[:2]


def test_epoch_tagged_sampler_numbers_each_drawn_copy():
    """Every item carries (epoch, rank, step, copy, index); copies of one row in a batch are
    numbered 0, 1, … in draw order (the seed of their fresh augmentation)."""
    inner = PKSampler(np.repeat(np.arange(6), 1), p=2, k=3, seed=0, num_replicas=2, rank=1)
    tagged = EpochTaggedSampler(inner, 6)
    tagged.set_epoch(4)
    assert inner.epoch == 4 and len(tagged) == len(inner)
    for step, (draws, rows) in enumerate(zip(tagged, inner)):
        assert [d.index for d in draws] == rows
        assert {(d.epoch, d.rank, d.step) for d in draws} == {(4, 1, step)}
        assert [d.copy for d in draws] == [rows[:j].count(r) for j, r in enumerate(rows)]
        assert len(set(draws)) == len(draws)
