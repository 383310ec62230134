"""Multi-source DG training records (reidcli.training.sources; docs/datasets.md "DG training
compositions"): label / cam / dom arrays, domain filter, pseudo-cameras, manifest, Mixed A/B."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import reidcli.data as data
from reidcli.errors import DatasetError, InputFileError, ParameterError, UsageError
from reidcli.training import sources as src
from tests.data.fake_trees import cuhk02 as cuhk02_tree, cuhk03 as cuhk03_tree
from tests.data.fake_trees import cuhk_sysu as sysu_tree, msmt17 as msmt17_tree
from tests.training.conftest import DG_SYNTHETIC_NAME

SYNTH = {"synthetic": {"name": DG_SYNTHETIC_NAME}}
D012 = ["synthetic/d0", "synthetic/d1", "synthetic/d2"]


def _keys(frame: pd.DataFrame) -> list[tuple]:
    """(dataset, domain, pid) per row, built here from the raw columns."""
    return list(zip(frame["dataset"], frame["domain"], frame["pid"].astype(int)))


def _reference(root, split: str = "train", domains=D012) -> pd.DataFrame:
    loaded = data.load("synthetic", root, name=DG_SYNTHETIC_NAME)
    frame = loaded.train if split == "train" else loaded.all_records()
    return frame[(frame["pid"] > 0) & frame["domain"].isin(domains)]


def _with_synthetic(tmp_path: Path, dg_root: Path) -> Path:
    """A data root under ``tmp_path`` that also sees the shared synthetic dataset."""
    (tmp_path / "synthetic").symlink_to(dg_root / "synthetic", target_is_directory=True)
    return tmp_path


def test_three_domains_labels_cams_doms(dg_synthetic_root):
    out = src.multi_source_records(["synthetic"], dg_synthetic_root, source_options=SYNTH,
                                   domains=["d0", "synthetic/d1", "D2"])
    rec = out.records
    ref = _reference(dg_synthetic_root)
    assert sorted(rec["path"]) == sorted(ref["path"]) and rec["path"].is_monotonic_increasing
    assert "synthetic/d3" not in set(rec["domain"]) and (rec["pid"] > 0).all()
    # label: contiguous, one per (dataset, domain, pid) and back
    keys = _keys(rec)
    assert sorted(set(rec["label"])) == list(range(out.num_ids))
    assert out.num_ids == len(set(_keys(ref))) == ref.groupby("domain")["pid"].nunique().sum()
    pairs = set(zip(keys, rec["label"]))
    assert len(pairs) == len({k for k, _ in pairs}) == len({lab for _, lab in pairs})
    assert [(k[0], k[1], k[3]) for k in (out.label_keys[i] for i in rec["label"])] == keys
    assert out.label_keys == sorted(out.label_keys)
    # pids restart per domain: the same pid in two domains is two labels
    shared = rec.groupby("pid")["domain"].nunique()
    pid = int(shared.idxmax())
    assert shared.max() > 1 and rec.loc[rec["pid"] == pid, "label"].nunique() == shared.max()
    # cam: one per (domain, camid)
    cam_pairs = list(zip(rec["domain"], rec["camid"].astype(int)))
    assert [out.cam_keys[c] for c in rec["cam"]] == cam_pairs
    assert out.cam_keys == sorted(set(cam_pairs)) and out.num_cams == len(set(cam_pairs))
    # dom
    assert out.dom_names == D012 and set(rec["dom"]) == {0, 1, 2}
    assert [out.dom_names[d] for d in rec["dom"]] == rec["domain"].tolist()
    assert out.pseudo_camera_sources == [] and not rec["pseudo_camera"].any()
    camids = dict(zip(ref["path"], ref["camid"]))
    assert [camids[p] for p in rec["path"]] == rec["camid"].tolist()
    for col in ("label", "cam", "dom"):
        assert rec[col].dtype == np.int64


def test_source_split_all_and_subsample(dg_synthetic_root):
    every = src.multi_source_records("synthetic", dg_synthetic_root, source_options=SYNTH,
                                     source_split="all", domains="d0,d1,d2")
    assert len(every.records) == len(_reference(dg_synthetic_root, "all"))
    assert len(every.records) > len(_reference(dg_synthetic_root))
    assert set(every.records["split"]) == {"train"}
    small = [src.multi_source_records(["synthetic"], dg_synthetic_root, source_options=SYNTH,
                                      max_images=40, subsample_seed=s) for s in (0, 0, 1)]
    assert [len(s.records) for s in small] == [40, 40, 40]
    assert small[0].records["path"].tolist() == small[1].records["path"].tolist()
    assert small[0].records["path"].tolist() != small[2].records["path"].tolist()
    assert sorted(set(small[0].records["label"])) == list(range(small[0].num_ids))
    with pytest.raises(ParameterError, match="max_images=0"):
        src.multi_source_records(["synthetic"], dg_synthetic_root, source_options=SYNTH,
                                 max_images=0)


def test_domain_spellings_and_errors(dg_synthetic_root):
    present = ["cuhksysu", "market1501", "synthetic/d0", "synthetic/d3"]
    assert src.select_domains("d3", present) == ["synthetic/d3"]
    assert src.select_domains(["SYNTHETIC/D0", "market", "cuhk-sysu"], present) == \
        ["synthetic/d0", "market1501", "cuhksysu"]
    with pytest.raises(UsageError, match=r"unknown domain 'd7' .*synthetic/d0, synthetic/d3"):
        src.select_domains("d3,d7", present)
    with pytest.raises(UsageError, match="names no domain"):
        src.select_domains(" , ", present)
    with pytest.raises(UsageError, match=r"unknown domain 'd9'.*synthetic/d1"):
        src.multi_source_records(["synthetic"], dg_synthetic_root, source_options=SYNTH,
                                 domains=["d9"])
    with pytest.raises(UsageError, match="source_split='val' is unknown"):
        src.multi_source_records(["synthetic"], dg_synthetic_root, source_split="val")


def test_pseudo_cameras_balanced_and_seeded(tmp_path, dg_synthetic_root):
    root = _with_synthetic(tmp_path, dg_synthetic_root)
    sysu_tree.build(root)
    both = src.multi_source_records(["synthetic", "cuhk-sysu"], root,
                                    source_options=SYNTH, domains="d0,cuhksysu", seed=3)
    rec = both.records
    assert both.pseudo_camera_sources == ["cuhksysu"]
    assert both.dom_names == ["cuhksysu", "synthetic/d0"]
    sysu = rec[rec["dataset"] == "cuhksysu"]
    assert sysu["pseudo_camera"].all() and not rec.loc[rec["dataset"] != "cuhksysu",
                                                       "pseudo_camera"].any()
    assert set(sysu["camid"]) == {0, 1}
    assert {k for k in both.cam_keys if k[0] == "cuhksysu"} == {("cuhksysu", 0),
                                                                 ("cuhksysu", 1)}
    for pid, count in sysu_tree.PERSONS.items():
        per_cam = sysu.loc[sysu["pid"] == pid, "camid"].value_counts()
        assert per_cam.sum() == count
        assert per_cam.get(0, 0) - per_cam.get(1, 0) in ((0,) if count % 2 == 0 else (1,))
    synth = rec[rec["dataset"] == "synthetic"]
    camids = dict(zip(_reference(root, domains=["synthetic/d0"])["path"],
                      _reference(root, domains=["synthetic/d0"])["camid"]))
    assert [camids[p] for p in synth["path"]] == synth["camid"].tolist()
    # seeded per identity: the same without the other source, other seeds give other splits
    alone = src.multi_source_records(["cuhksysu"], root, seed=3).records
    assert dict(zip(alone["path"], alone["camid"])) == dict(zip(sysu["path"], sysu["camid"]))
    draws = {tuple(src.multi_source_records(["cuhksysu"], root, seed=s).records["camid"])
             for s in range(6)}
    assert len(draws) > 1


def test_one_camid_source_gets_pseudo_cameras():
    frame = pd.DataFrame({"dataset": ["a", "a", "b", "b", "c"], "camid": [2, 2, 0, 1, 0],
                          "x_no_camera_labels": [np.nan, np.nan, np.nan, np.nan, True]})
    assert src.sources_without_cameras(frame) == ["a", "c"]
    assert src.sources_without_cameras(frame.drop(columns="x_no_camera_labels")) == ["a", "c"]
    frame.loc[4, "x_no_camera_labels"] = np.nan
    frame = pd.concat([frame, frame.iloc[[4]].assign(camid=1)], ignore_index=True)
    assert src.sources_without_cameras(frame) == ["a"]


def test_manifest_round_trip(tmp_path, dg_synthetic_root):
    out = src.multi_source_records(["synthetic"], dg_synthetic_root, source_options=SYNTH,
                                   domains="d0,d1")
    path = tmp_path / "run.train_manifest.csv"
    assert src.write_train_manifest(path, out) == path
    back = src.read_train_manifest(path)
    assert tuple(back.columns) == src.MANIFEST_COLUMNS
    pd.testing.assert_frame_equal(back, out.records.loc[:, list(src.MANIFEST_COLUMNS)]
                                  .reset_index(drop=True), check_dtype=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]
    smaller = src.multi_source_records(["synthetic"], dg_synthetic_root,
                                       source_options=SYNTH, domains="d0")
    src.write_train_manifest(path, smaller)
    assert len(src.read_train_manifest(path)) == len(smaller.records) < len(back)
    path.write_text("path,pid\nx,1\n")
    with pytest.raises(InputFileError, match="lacks the column"):
        src.read_train_manifest(path)


def test_source_specs():
    specs = {s.dataset: s for s in src.source_specs(
        ["mixed_b"], {"market": {"keep_junk": True}})}
    assert set(specs) == {"msmt17", "cuhk03", "market1501", "dukemtmc"}
    assert dict(specs["msmt17"].options) == {"train_includes_val": True}
    assert dict(specs["market1501"].options) == {"keep_junk": True}
    assert {s.split for s in specs.values()} == {"train"}
    a = {s.dataset: s for s in src.source_specs("Mixed-A")}
    assert dict(a["cuhk02"].options) == {"protocol": "all_train"} and "cuhksysu" in a
    plain = src.source_specs("duke, cuhk_sysu")
    assert [(s.dataset, s.split) for s in plain] == [("dukemtmc", "train"),
                                                     ("cuhksysu", "train")]
    with pytest.raises(UsageError, match="market1501 is named twice"):
        src.source_specs(["mixed_b", "market"])
    with pytest.raises(UsageError, match="source options for viper, which is not a source"):
        src.source_specs(["market"], {"viper": {}})
    with pytest.raises(UsageError, match="no source dataset"):
        src.source_specs([])
    with pytest.raises(UsageError, match="unknown dataset"):
        src.source_specs(["nope"])


# -- Mixed A / Mixed B on fake trees ---------------------------------------------------------
def _market_tree(folder: Path, duke: bool, ids=(1, 2, 3), cams=(1, 2)) -> None:
    from tests.data.fake_trees import write_image
    for sub, pids in (("bounding_box_train", ids), ("query", (7,)),
                      ("bounding_box_test", (7,))):
        for pid in pids:
            for cam in cams:
                name = (f"{pid:04d}_c{cam}_f{100 * pid + cam:07d}.jpg" if duke
                        else f"{pid:04d}_c{cam}s1_{100 * pid + cam:06d}_00.jpg")
                write_image(folder / sub / name)


def _mixed_root(root: Path) -> Path:
    cuhk02_tree.build(root)
    cuhk03_tree.build(root)
    msmt17_tree.build(root)
    sysu_tree.build(root)
    _market_tree(root / "market1501" / "Market-1501-v15.09.15", duke=False)
    _market_tree(root / "dukemtmc", duke=True)
    return root


def test_mixed_a_and_b_on_fake_trees(tmp_path):
    root = _mixed_root(tmp_path)
    a = src.multi_source_records(["mixed_a"], root, source_split="all")
    assert a.dom_names == ["cuhk02", "cuhk03", "cuhksysu", "dukemtmc", "market1501"]
    assert a.pseudo_camera_sources == ["cuhksysu"]
    rec = a.records
    assert sorted(set(rec["label"])) == list(range(a.num_ids))
    assert a.num_ids == len(set(_keys(rec)))
    for name in a.dom_names:
        loaded = data.load(name, root, **({"protocol": "all_train"} if name == "cuhk02" else {}))
        everything = loaded.all_records()
        assert (rec["dataset"] == name).sum() == (everything["pid"] > 0).sum()
    market_train = data.load("market1501", root).train
    assert (rec["dataset"] == "market1501").sum() > len(market_train)   # query/gallery too
    own = src.multi_source_records(["mixed_a"], root, source_split=None)
    assert len(own.records) == len(rec)                 # Mixed A's own choice is "all"
    # CUHK02's cameras lie in its five pairs; CUHK03's two views are shared by its pairs
    groups = rec.groupby("dataset")["cam_group"].agg(lambda g: sorted(set(g)))
    assert groups["cuhk02"] == [1, 2, 3, 4, 5]
    assert all(groups[d] == [-1] for d in groups.index if d != "cuhk02")
    cuhk02 = rec[rec["dataset"] == "cuhk02"]
    assert (cuhk02.groupby("camid")["cam_group"].nunique() == 1).all()
    # the camera split cuts CUHK02 pair by pair: every one of its identities has images on
    # both sides in every epoch, in both split modes (a blind split of its 10 cameras
    # leaves the identities of a pair whose two cameras land on one side out)
    from reidcli.data.samplers import CameraSplitSampler
    ids02 = set(cuhk02["label"])
    for split in ("global", "per-domain"):
        sampler = CameraSplitSampler(rec["label"], rec["cam"], rec["dom"], p=2, k=1,
                                     split=split, camera_groups=rec["cam_group"].to_numpy())
        for epoch in range(4):
            sampler.set_epoch(epoch)
            support, _ = sampler.camera_split()
            on_s = {(d, c) for d, c in support}
            for pair, cams in cuhk02.groupby("cam_group")["cam"]:
                sides = {(int(rec.loc[cams.index[0], "dom"]), c) in on_s for c in set(cams)}
                assert sides == {True, False}, (split, epoch, pair)
            eligible = set(sampler._eligible(sampler._sides(None, 0))[0].tolist())
            assert ids02 <= eligible
        blind = CameraSplitSampler(rec["label"], rec["cam"], rec["dom"], p=2, k=1,
                                   split=split)
        left_out = [len(ids02 - set(blind._eligible(blind._sides(e, 0))[0].tolist()))
                    for e in range(8)]
        assert max(left_out) > 0                      # what the pairs fix
    b = src.multi_source_records("mixed_b", root)
    assert b.dom_names == ["cuhk03", "dukemtmc", "market1501", "msmt17"]
    assert b.pseudo_camera_sources == []
    msmt = data.load("msmt17", root, train_includes_val=True).train
    assert (b.records["dataset"] == "msmt17").sum() == (msmt["pid"] > 0).sum()
    market = data.load("market1501", root).train
    assert (b.records["dataset"] == "market1501").sum() == len(market)
    assert len(b.cam_keys) == len(set(zip(b.records["domain"], b.records["camid"])))
    # a missing source is an error naming it, not a skip
    (root / "cuhksysu").rename(root / "elsewhere")
    with pytest.raises(DatasetError, match="^no cuhksysu dataset under"):
        src.multi_source_records(["mixed_a"], root, source_split="all")
