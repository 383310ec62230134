"""Seeded protocols on loaded records (reidcli.data.protocols)."""
from __future__ import annotations

import json

import numpy as np
import pytest

import reidcli.data as data
from reidcli.errors import DatasetError, UsageError


@pytest.fixture(scope="module")
def cdpcf_root(tmp_path_factory):
    from reidcli.data.synthetic import generate
    root = tmp_path_factory.mktemp("cdpcf")
    generate(root, "cdpcf", overrides={"num_train_ids": 20, "height": 32,
                                       "width": 16}, progress=False)
    return root


def _load(root, trial=0, **kw):
    return data.load("synthetic", root, name="cdpcf", protocol="single_shot_half",
                     domain="synthetic/d1", trial=trial, **kw)


def test_single_shot_half_views_sizes_and_disjoint_ids(cdpcf_root):
    split = _load(cdpcf_root, trial=4)
    assert split.num_trials == 10 and split.protocol == "single_shot_half"
    assert set(split.query["camid"]) == {0} and set(split.gallery["camid"]) == {1}
    test_ids = set(split.query["pid"])
    assert len(test_ids) == 100 == len(split.query)
    assert set(split.gallery["pid"]) - {0} == test_ids
    assert not test_ids & set(split.train["pid"])
    assert len(split.train) == 200 and set(split.train["camid"]) == {0, 1}
    assert (split.gallery["pid"] == 0).sum() > 0           # distractors stay in the gallery
    assert set(split.train["domain"]) == {"synthetic/d1"}


def test_trials_deterministic_cached_and_different(cdpcf_root):
    a, b = _load(cdpcf_root, trial=2), _load(cdpcf_root, trial=2)
    assert a.query["path"].tolist() == b.query["path"].tolist()
    assert a.query["path"].tolist() != _load(cdpcf_root, trial=3).query["path"].tolist()
    cache = list((cdpcf_root / "synthetic" / "cdpcf" / "reidcli_splits").glob("*.json"))
    assert len(cache) == 1
    payload = json.loads(cache[0].read_text())
    first = payload["trials"][2]["query"][0]
    assert not first.startswith("/") and first.startswith("d1/")   # relative to the dataset
    assert len(_load(cdpcf_root, trial=0, n_test_ids=40).query) == 40


def test_protocol_errors(cdpcf_root):
    with pytest.raises(UsageError, match="unknown protocol 'nope'"):
        data.load("synthetic", cdpcf_root, name="cdpcf", protocol="nope")
    with pytest.raises(DatasetError, match="trials 0..9, not 10"):
        _load(cdpcf_root, trial=10)
    with pytest.raises(DatasetError, match="asked 300 test ids"):
        _load(cdpcf_root, n_test_ids=300)
    with pytest.raises(UsageError, match="no records of domain"):
        data.load("synthetic", cdpcf_root, name="cdpcf", protocol="single_shot_half",
                  domain="synthetic/d7")


def test_camera_holdout_on_any_dataset(tiny_synthetic_root, default_synthetic_root):
    split = data.load("synthetic", default_synthetic_root, protocol="camera_holdout",
                      train_cams="0,1")
    assert set(split.train["camid"]) == {0, 1} and split.options["train_cams"] == [0, 1]
    assert not {0, 1} & set(split.query["camid"]) and not {0, 1} & set(split.gallery["camid"])
    by_count = data.load("synthetic", default_synthetic_root, protocol="camera_holdout",
                         num_train_cams=2)
    assert by_count.options["train_cams"] == [0, 1]
    with pytest.raises(UsageError, match="proper subset"):
        data.load("synthetic", default_synthetic_root, protocol="camera_holdout",
                  train_cams="0,1,2,3,4,5,6,7,8,9")


def test_domain_holdout(tmp_path):
    from reidcli.data.synthetic import generate
    generate(tmp_path, "dg", overrides={"num_train_ids": 6, "num_test_ids": 4, "height": 32,
                                        "width": 16}, progress=False)
    split = data.load("synthetic", tmp_path, name="dg", protocol="domain_holdout",
                      target_domain="synthetic/d3")
    assert "synthetic/d3" not in set(split.train["domain"])
    assert set(split.query["domain"]) == {"synthetic/d3"} == set(split.gallery["domain"])
    with pytest.raises(UsageError, match="target_domain"):
        data.load("synthetic", tmp_path, name="dg", protocol="domain_holdout",
                  target_domain="synthetic/d9")


def test_compose_sources_keeps_identities_apart(tmp_path):
    from reidcli.data.protocols import compose_sources
    from reidcli.data.records import identity_keys
    from tests.data.fake_trees import small_sets
    small_sets.viper(tmp_path)
    small_sets.prid450s(tmp_path)
    mixed = compose_sources([("viper", {"test_ids": 4}), ("prid450s", {"test_ids": 3})],
                            tmp_path)
    assert len(mixed.train) == 16 + 16 and set(mixed.train["split"]) == {"train"}
    assert identity_keys(mixed.train).nunique() == 16    # viper 8 + prid 8, never merged
    with pytest.raises(UsageError, match="unknown composition"):
        compose_sources("mixed_c")
