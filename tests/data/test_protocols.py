"""Seeded and derived protocols (reidcli.data.protocols; docs/datasets.md)."""
from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

import reidcli.data as data
from reidcli.data import compositions, protocols, registry
from reidcli.data.records import identity_keys
from reidcli.errors import DatasetError, UsageError

SMALL = {"height": 32, "width": 16}


def _generate(root, preset, **overrides):
    from reidcli.data.synthetic import generate
    return generate(root, preset, overrides={**SMALL, **overrides}, progress=False)


@pytest.fixture(scope="module")
def cdpcf_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("cdpcf")
    # source d0 shrunk; target d1 keeps its 200 test ids (1 image per camera)
    _generate(root, "cdpcf", num_train_ids=4, num_test_ids=2, imgs_per_id_cam=1,
              num_distractors=8, num_junk=0)
    return root


@pytest.fixture(scope="module")
def dart3_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("dart3")
    _generate(root, "dart3", num_train_ids=12, num_test_ids=8, imgs_per_id_cam=2,
              cams_per_id_min=4, num_distractors=2, num_junk=0)
    return root


@pytest.fixture(scope="module")
def warca_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("warca")
    _generate(root, "warca", num_train_ids=10, num_test_ids=10, num_distractors=2,
              num_junk=1)
    return root


@pytest.fixture(scope="module")
def dg_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("dg")
    _generate(root, "dg", num_cameras=3, num_train_ids=5, num_test_ids=4, imgs_per_id_cam=1,
              num_distractors=1, num_junk=0)
    return root


def _ssh(root, trial=0, **kw):
    return data.load("synthetic", root, name="cdpcf", protocol="single_shot_half",
                     domain="synthetic/d1", trial=trial, **kw)


def _paths(frame):
    return frame["path"].tolist()


def _ids(frame):
    return set(identity_keys(frame[frame["pid"] > 0]))


# -- single_shot_half (C-DPCF) ------------------------------------------------------------------
def test_single_shot_half_views_sizes_and_disjoint_ids(cdpcf_root):
    split = _ssh(cdpcf_root, trial=4)
    assert split.num_trials == 10 and split.protocol == "single_shot_half"
    assert set(split.query["camid"]) == {0} and set(split.gallery["camid"]) == {1}
    test_ids = set(split.query["pid"])
    assert len(test_ids) == 100 == len(split.query)        # one probe image per test id
    assert set(split.gallery["pid"]) - {0} == test_ids
    assert (split.gallery["pid"] > 0).sum() == 100          # one gallery image per test id
    assert not test_ids & set(split.train["pid"])
    assert len(split.train) == 200 and set(split.train["camid"]) == {0, 1}
    records = data.load("synthetic", cdpcf_root, name="cdpcf", domains="1").all_records()
    distractors = records[(records["pid"] == 0) & (records["camid"] == 1)]
    assert len(distractors) > 0                            # gallery-camera distractors ...
    assert set(distractors["path"]) <= set(split.gallery["path"])   # ... stay in the gallery
    assert (split.gallery["pid"] == 0).sum() == len(distractors)
    assert set(split.all_records()["domain"]) == {"synthetic/d1"}
    swapped = _ssh(cdpcf_root, trial=4, probe_cam=1, gallery_cam=0)
    assert set(swapped.query["camid"]) == {1} and set(swapped.gallery["camid"]) == {0}


def test_single_shot_half_cached_deterministic_and_seeded(cdpcf_root, monkeypatch):
    first = _ssh(cdpcf_root, trial=2)
    cache = list((cdpcf_root / "synthetic" / "cdpcf" / "reidcli_splits").glob(
        "single_shot_half_synthetic-d1_p0g1_n100_t10_seed0.json"))
    assert len(cache) == 1
    payload = json.loads(cache[0].read_text())
    rel = payload["trials"][2]["query"][0]
    assert not rel.startswith("/") and rel.startswith("d1/")   # relative to the dataset
    # the second load reads the JSON: drawing again would fail
    monkeypatch.setattr(protocols, "two_view_trials", lambda *a, **k: pytest.fail("redrawn"))
    again = _ssh(cdpcf_root, trial=2)
    for part in ("train", "query", "gallery"):
        assert _paths(getattr(first, part)) == _paths(getattr(again, part))
    monkeypatch.undo()
    assert _paths(first.query) != _paths(_ssh(cdpcf_root, trial=3).query)
    # another seed draws other trials (direct call: the synthetic loader's seed is its tree's)
    records = data.load("synthetic", cdpcf_root, name="cdpcf", domains="1").all_records()
    root = cdpcf_root / "synthetic" / "cdpcf"
    seed0, seed1 = (protocols.apply_protocol(records, "single_shot_half", trial=2, seed=s,
                                             dataset_root=root, domain="synthetic/d1")
                    for s in (0, 1))
    assert _paths(seed0.query) == _paths(first.query)
    assert _paths(seed1.query) != _paths(first.query)
    assert len(_ssh(cdpcf_root, trial=0, n_test_ids=40).query) == 40


def test_train_ids_limit_subsets(cdpcf_root):
    split = _ssh(cdpcf_root, trial=7, train_ids_limit=10, repeats=5)
    base = _ssh(cdpcf_root, trial=1)
    assert split.num_trials == 50 and split.trial == 7
    assert split.eval_kwargs == {"split": 1, "repeat": 2}
    assert split.options["train_ids_limit"] == 10 and split.options["repeats"] == 5
    assert len(set(split.train["pid"])) == 10 and len(split.train) == 20   # both views
    assert set(split.train["pid"]) <= set(base.train["pid"])
    assert _paths(split.query) == _paths(base.query)
    assert _paths(split.gallery) == _paths(base.gallery)
    other = _ssh(cdpcf_root, trial=8, train_ids_limit=10, repeats=5)
    assert set(other.train["pid"]) != set(split.train["pid"])
    assert _paths(other.query) == _paths(base.query)
    # the draw of docs/methods/cdpcf.md, as reid fit-pooling --train-ids makes it
    ids = np.unique(base.train["pid"].to_numpy(np.int64))
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([0, 11, 1, 2, 10])))
    assert set(split.train["pid"]) == set(rng.choice(ids, size=10, replace=False).tolist())
    # the protocol's own option and the registry's generic one agree
    records = data.load("synthetic", cdpcf_root, name="cdpcf").all_records()
    direct = protocols.single_shot_half(records, trial=7, seed=0, domain="synthetic/d1",
                                        dataset_root=cdpcf_root / "synthetic" / "cdpcf",
                                        train_ids_limit=10, repeats=5)
    assert _paths(direct.train) == _paths(split.train)
    assert direct.eval_kwargs == split.eval_kwargs and direct.num_trials == 50
    for limit in (30, 50, 100):
        assert _ssh(cdpcf_root, trial=3, train_ids_limit=limit).train["pid"].nunique() \
            == limit
    with pytest.raises(UsageError, match="exceeds the 100 training ids"):
        _ssh(cdpcf_root, train_ids_limit=101)
    with pytest.raises(UsageError, match="trial=50 is outside the trials 0..49"):
        protocols.single_shot_half(records, trial=50, seed=0, domain="synthetic/d1",
                                   dataset_root=cdpcf_root / "synthetic" / "cdpcf",
                                   train_ids_limit=10)


def test_train_ids_limit_on_any_dataset(tmp_path):
    from tests.data.fake_trees import prid450s as prid450s_tree, viper as viper_tree
    viper_tree.build(tmp_path)
    split = data.load("viper", tmp_path, trial=5, test_ids=4, train_ids_limit=2, repeats=3)
    base = data.load("viper", tmp_path, trial=1, test_ids=4)
    assert split.num_trials == 30 and split.eval_kwargs == {"split": 1, "repeat": 2}
    assert split.train["pid"].nunique() == 2
    assert set(split.train["pid"]) <= set(base.train["pid"])
    assert _paths(split.query) == _paths(base.query)


def test_protocol_errors(cdpcf_root):
    with pytest.raises(UsageError, match="unknown protocol 'nope'.*camera_holdout"):
        data.load("synthetic", cdpcf_root, name="cdpcf", protocol="nope")
    with pytest.raises(UsageError, match="trial=10 is outside the trials 0..9"):
        _ssh(cdpcf_root, trial=10)
    with pytest.raises(DatasetError, match="asked 300 test ids"):
        _ssh(cdpcf_root, n_test_ids=300)
    with pytest.raises(UsageError, match="no records of domain"):
        data.load("synthetic", cdpcf_root, name="cdpcf", protocol="single_shot_half",
                  domain="synthetic/d7")


# -- WARCA -----------------------------------------------------------------------------------
def _warca(root, trial=0, **kw):
    return data.load("synthetic", root, name="warca", protocol="warca", trial=trial, **kw)


def test_warca_splits_and_draws(warca_root):
    split = _warca(warca_root, trial=4, test_ids=8, draws=3, warca_draw="gallery_single")
    assert split.num_trials == 30 and split.eval_kwargs == {"split": 1, "draw": 1}
    test = set(split.query["pid"])
    assert len(test) == 8 and set(split.gallery["pid"]) == test       # no distractors
    assert len(split.gallery) == 8 and len(split.query) == 8 * 3      # 4 images per id
    assert not test & set(split.train["pid"]) and 0 not in set(split.train["pid"])
    assert split.train["pid"].nunique() == 20 - 8
    same_split = _warca(warca_root, trial=5, test_ids=8, draws=3, warca_draw="gallery_single")
    assert set(same_split.query["pid"]) == test                        # same split, new draw
    assert _paths(same_split.train) == _paths(split.train)
    assert _paths(same_split.gallery) != _paths(split.gallery)
    assert set(_warca(warca_root, trial=6, test_ids=8, draws=3,
                      warca_draw="gallery_single").query["pid"]) != test
    again = _warca(warca_root, trial=4, test_ids=8, draws=3, warca_draw="gallery_single")
    assert _paths(again.query) == _paths(split.query)
    probe = _warca(warca_root, trial=0, test_ids=8)                   # the paper's default
    assert probe.options["warca_draw"] == "probe_single"
    assert len(probe.query) == 8 and len(probe.gallery) == 24
    assert _warca(warca_root).num_trials == 100                        # 10 splits × 10 draws
    assert _warca(warca_root).query["pid"].nunique() == 10              # default P = half
    with pytest.raises(UsageError, match="warca_draw"):
        _warca(warca_root, warca_draw="both")


def test_warca_never_tests_single_image_ids(warca_root):
    records = data.load("synthetic", warca_root, name="warca").all_records()
    one = records[records["pid"] == 3].index[1:]
    records = records.drop(index=one)                  # pid 3 keeps one image
    root = warca_root / "synthetic" / "warca"
    for t in range(10):
        split = protocols.warca_protocol(records, trial=t, seed=0, dataset_root=root,
                                         test_ids=19)
        assert 3 not in set(split.query["pid"]) | set(split.gallery["pid"])
        assert 3 in set(split.train["pid"])
    with pytest.raises(DatasetError, match="only 19 persons"):
        protocols.warca_protocol(records, trial=0, seed=0, dataset_root=root, test_ids=20)


def test_generic_builders_match_the_loaders(tmp_path):
    """single_shot_half / warca_protocol share the loaders' trial builders
    (reidcli.data.trials): same records and seed → the same trials."""
    from reidcli.data.datasets.viper import read_viper
    from tests.data.fake_trees import prid450s as prid450s_tree, viper as viper_tree
    folder = viper_tree.build(tmp_path)
    records = read_viper(folder)
    for t in (0, 3):
        own = data.load("viper", tmp_path, trial=t, test_ids=4)
        generic = protocols.single_shot_half(records, trial=t, seed=0, dataset_root=folder,
                                             n_test_ids=4, name="viper")
        own_w = data.load("viper", tmp_path, trial=t, protocol="warca", test_ids=4, draws=2)
        generic_w = protocols.warca_protocol(records, trial=t, seed=0, dataset_root=folder,
                                             test_ids=4, draws=2, name="viper")
        for a, b in ((own, generic), (own_w, generic_w)):
            for part in ("train", "query", "gallery"):
                assert _paths(getattr(a, part)) == _paths(getattr(b, part))
        assert generic_w.eval_kwargs == own_w.eval_kwargs == {"split": t // 2, "draw": t % 2}


# -- DART3 camera hold-out ---------------------------------------------------------------------
def test_camera_holdout_default_lowest_cameras(dart3_root):
    split = data.load("synthetic", dart3_root, name="dart3", protocol="camera_holdout")
    assert split.protocol == "camera_holdout"
    assert set(split.train["camid"]) == {0, 1, 2, 3, 4}
    assert set(split.query["camid"]) <= {5, 6, 7} and set(split.gallery["camid"]) <= {5, 6, 7}
    assert set(split.train["split"]) == {"train"}
    assert split.options["train_cams"] == [0, 1, 2, 3, 4]
    assert split.options["unseen_cams"] == [5, 6, 7]
    assert split.eval_kwargs == {"eval_protocol": "camera-split", "train_cams": [0, 1, 2, 3, 4],
                                 "query_cams": sorted(set(split.query["camid"])),
                                 "per_camera": True}
    full = data.load("synthetic", dart3_root, name="dart3")
    expected = full.query[full.query["camid"] >= 5]
    assert _paths(split.query) == _paths(expected)
    wide = data.load("synthetic", dart3_root, name="dart3", protocol="camera_holdout",
                     train_cams="0-4", gallery_cams="all")
    assert _paths(wide.gallery) == _paths(full.gallery) and _paths(wide.query) == \
        _paths(split.query)
    # the same through apply_protocol on all records (what the synthetic loader would do)
    direct = protocols.apply_protocol(full.all_records(), "camera_holdout", trial=0, seed=0,
                                      dataset_root=dart3_root, train_cams=[0, 1, 2, 3, 4])
    for part in ("train", "query", "gallery"):
        assert _paths(getattr(direct, part)) == _paths(getattr(split, part))


def test_camera_holdout_choices_and_errors(dart3_root, tiny_synthetic_root):
    split = data.load("synthetic", dart3_root, name="dart3", protocol="camera_holdout",
                      train_cams="1,3,5")
    assert set(split.train["camid"]) == {1, 3, 5}
    assert not {1, 3, 5} & (set(split.query["camid"]) | set(split.gallery["camid"]))
    assert data.load("synthetic", dart3_root, name="dart3", protocol="camera_holdout",
                     num_train_cams=2).options["train_cams"] == [0, 1]
    with pytest.raises(UsageError, match="proper subset"):
        data.load("synthetic", dart3_root, name="dart3", protocol="camera_holdout",
                  train_cams="0,1,2,3,4,5,6,7")
    with pytest.raises(UsageError, match="not a list of camera ids"):
        data.load("synthetic", dart3_root, name="dart3", protocol="camera_holdout",
                  train_cams="a,b")
    # one unseen camera (Market 5/1 analogue): an unseen-only gallery has no cross-camera match
    with pytest.raises(DatasetError, match="gallery_cams=all"):
        data.load("synthetic", tiny_synthetic_root, name="tiny", protocol="camera_holdout",
                  train_cams=0)
    one = data.load("synthetic", tiny_synthetic_root, name="tiny", protocol="camera_holdout",
                    train_cams=0, gallery_cams="all")
    assert set(one.query["camid"]) == {1} and set(one.gallery["camid"]) == {0, 1}


def test_loader_declared_protocol_is_left_to_the_loader(dart3_root, monkeypatch):
    entry = registry._REGISTRY["synthetic"]
    seen = {}

    def loader(root, trial, **options):
        seen.update(options)
        return entry.loader(root, trial, **options)

    info = dataclasses.replace(entry.info, protocols=("camera_holdout",))
    monkeypatch.setitem(registry._REGISTRY, "synthetic",
                        dataclasses.replace(entry, info=info, loader=loader))
    split = data.load("synthetic", dart3_root, name="dart3", protocol="camera_holdout",
                      train_cams="0,1")
    assert seen["protocol"] == "camera_holdout" and seen["train_cams"] == "0,1"
    assert set(split.train["camid"]) == {0, 1}


# -- DMG-Net domain hold-out -------------------------------------------------------------------
def test_domain_holdout(dg_root):
    split = data.load("synthetic", dg_root, name="dg", protocol="domain_holdout",
                      target_domain="synthetic/d3")
    assert split.protocol == "domain_holdout"
    assert set(split.train["domain"]) == {"synthetic/d0", "synthetic/d1", "synthetic/d2"}
    assert set(split.train["split"]) == {"train"}
    assert set(split.query["domain"]) == {"synthetic/d3"} == set(split.gallery["domain"])
    full = data.load("synthetic", dg_root, name="dg")
    assert _paths(split.query) == _paths(full.query[full.query["domain"] == "synthetic/d3"])
    assert len(split.train) == (full.train["domain"] != "synthetic/d3").sum()
    direct = protocols.apply_protocol(full.all_records(), "domain_holdout", trial=0, seed=0,
                                      dataset_root=dg_root, target_domain="d3")
    assert _paths(direct.train) == _paths(split.train)
    assert _paths(direct.gallery) == _paths(split.gallery)
    two = data.load("synthetic", dg_root, name="dg", protocol="domain_holdout",
                    target_domain="d3", train_domains="d0,d1")
    assert set(two.train["domain"]) == {"synthetic/d0", "synthetic/d1"}
    with pytest.raises(UsageError, match="target_domain"):
        data.load("synthetic", dg_root, name="dg", protocol="domain_holdout",
                  target_domain="synthetic/d9")
    with pytest.raises(UsageError, match="includes the target"):
        data.load("synthetic", dg_root, name="dg", protocol="domain_holdout",
                  target_domain="d3", train_domains="d2,d3")


def test_reduced_id_subset_draws_positions_of_the_sorted_ids():
    ids = np.array([7, 3, 3, -1, 9, 12, 7, 20, -1])
    keep = protocols.reduced_id_subset(ids, 2, seed=4, trial=1, repeat=3)
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([4, 11, 1, 3, 2])))
    chosen = rng.choice(np.array([3, 7, 9, 12, 20]), size=2, replace=False)
    assert keep.tolist() == np.isin(ids, chosen).tolist() and not keep[ids < 0].any()
    # ids that sort the persons the same way draw the same persons
    same = protocols.reduced_id_subset(ids * 10 + 1, 2, seed=4, trial=1, repeat=3)
    assert same.tolist() == keep.tolist()
    with pytest.raises(UsageError, match=r"parameter train_ids=6 exceeds the 5 training ids"):
        protocols.reduced_id_subset(ids, 6, seed=0, trial=0, repeat=0, parameter="train_ids")


def test_one_camera_parser():
    from reidcli.cameras import parse_cameras
    assert parse_cameras("0,6, 7", "query_cams") == [0, 6, 7]
    assert parse_cameras("0-2,5", "train_cams") == [0, 1, 2, 5]
    assert parse_cameras([3, 1.0, 3], "train_cams") == [1, 3]
    assert parse_cameras(None, "x") is None and parse_cameras(" ", "x") is None
    assert parse_cameras("c3,6", "ir_cameras", first=1, repeats=False) == [3, 6]
    with pytest.raises(UsageError, match="train_cams='-1' holds camera -1"):
        parse_cameras("-1", "train_cams")
    with pytest.raises(UsageError, match="ir_cameras='3,3' names a camera twice"):
        parse_cameras("3,3", "ir_cameras", first=1, repeats=False)


# -- Mixed A / Mixed B compositions --------------------------------------------------------------
def test_compose_sources_keeps_identities_apart(tmp_path):
    from tests.data.fake_trees import prid450s as prid450s_tree, viper as viper_tree
    viper_tree.build(tmp_path)
    prid450s_tree.build(tmp_path)
    mixed = compositions.compose_sources([("viper", {"test_ids": 4}),
                                          ("prid450s", {"test_ids": 3})], tmp_path)
    assert len(mixed.train) == 16 + 16 and set(mixed.train["split"]) == {"train"}
    assert identity_keys(mixed.train).nunique() == 16    # viper 8 + prid 8, never merged
    assert set(mixed.train["dataset"]) == {"viper", "prid450s"}
    assert len(mixed.query) == 0 == len(mixed.gallery)
    train_only = compositions.compose_sources(
        [compositions.Source("viper", (("test_ids", 4),), split="train"),
         ("prid450s", {"test_ids": 3}, "train")], tmp_path)
    assert len(train_only.train) == 4 * 2 + 5 * 2
    assert train_only.options == {"sources": ["viper", "prid450s"], "source_split": None}
    assert len(compositions.compose_sources([("viper", {"test_ids": 4})], tmp_path,
                                            source_split="train").train) == 8
    with pytest.raises(UsageError, match="unknown composition"):
        compositions.compose_sources("mixed_c")
    with pytest.raises(UsageError, match="source_split='val' is unknown"):
        compositions.compose_sources(["viper"], tmp_path, source_split="val")


def test_compose_sources_missing_source_is_an_error(tmp_path):
    """A registered source without data is the loader's own one-line DatasetError, never a
    silent skip; an unregistered name is a UsageError."""
    from tests.data.fake_trees import viper as viper_tree
    viper_tree.build(tmp_path)
    with pytest.raises(DatasetError, match=r"^no cuhksysu dataset under .*tried") as info:
        compositions.compose_sources([("viper", {"test_ids": 4}), "cuhksysu"], tmp_path)
    assert "\n" not in info.value.message
    with pytest.raises(UsageError, match="unknown dataset 'nope'"):
        compositions.compose_sources([("viper", {"test_ids": 4}), "nope"], tmp_path)


def test_mixed_presets():
    a = {s.dataset: s for s in compositions.MIXED_A}
    b = {s.dataset: s for s in compositions.MIXED_B}
    assert set(a) == {"cuhk02", "cuhk03", "market1501", "dukemtmc", "cuhksysu"}
    assert {s.split for s in a.values()} == {"all"}
    assert registry.canonical_name("cuhksysu") == "cuhksysu"      # registered, not optional
    assert dict(a["cuhk02"].options) == {"protocol": "all_train"}
    assert set(b) == {"msmt17", "cuhk03", "market1501", "dukemtmc"}
    assert {s.split for s in b.values()} == {"train"}
    assert compositions.COMPOSITIONS == {"mixed_a": compositions.MIXED_A,
                                         "mixed_b": compositions.MIXED_B}
