"""QMUL iLIDS loader on fake trees (docs/datasets.md; docs/methods/warca.md A8)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import reidcli.data as data
from reidcli.data import trials as trial_builders
from reidcli.data.datasets.ilids import read_ilids
from reidcli.errors import DatasetError
from tests.cli.helpers import run_cli
from tests.data.fake_trees import ilids

SINGLE = 6            # person 0006 has one image in the fake tree


def _ids(frame) -> set[int]:
    return set(frame["pid"].tolist())


def _cached(folder: Path, key: str) -> list[dict]:
    return json.loads((folder / "reidcli_splits" / f"{key}.json").read_text())["trials"]


def test_parse_pseudo_cameras(tmp_path):
    folder = ilids.build(tmp_path)
    records = read_ilids(folder)
    assert len(records) == sum(ilids.IMAGES_PER_ID) and records["pid"].nunique() == 9
    row = records[records["path"].str.endswith("0005004.jpg")].iloc[0]
    assert (row["pid"], row["camid"], row["frame"], row["x_pseudo_cam"]) == (5, 3, 4, True)
    assert (records["camid"] == records["frame"] - 1).all()


@pytest.mark.parametrize("wrapper", [True, False])
def test_dg_protocol(tmp_path, wrapper):
    folder = ilids.build(tmp_path, wrapper=wrapper)
    split = data.load("qmul_ilids", tmp_path, test_ids=4, trial=1)
    assert split.name == "ilids" and split.protocol == "dg" and split.num_trials == 10
    assert len(split.train) == 0 and len(split.query) == len(split.gallery) == 4
    assert _ids(split.query) == _ids(split.gallery) and split.query["pid"].nunique() == 4
    merged = split.query.merge(split.gallery, on="pid")
    assert (merged["path_x"] != merged["path_y"]).all()
    assert (merged["camid_x"] != merged["camid_y"]).all()     # E1 removes no true match
    assert split.query["x_pseudo_cam"].all()
    stored = _cached(folder, "ilids_dg_p4_seed0")
    assert all(not t["train"] for t in stored)
    used = {Path(p).name[:4] for t in stored for p in t["query"]}
    assert f"{SINGLE:04d}" not in used and len(used) > 4       # single-image id never tested
    chosen = {Path(p).name for t in stored for p in t["query"] + t["gallery"]}
    assert any(name[4:7] not in ("001", "002") for name in chosen)   # images are drawn


def test_deterministic_and_cached(tmp_path, monkeypatch):
    a, b = ilids.build(tmp_path / "a"), ilids.build(tmp_path / "b")
    first = data.load("ilids", tmp_path / "a", test_ids=4, trial=7)
    data.load("ilids", tmp_path / "b", test_ids=4)
    assert _cached(a, "ilids_dg_p4_seed0") == _cached(b, "ilids_dg_p4_seed0")
    data.load("ilids", tmp_path / "b", test_ids=4, seed=3)
    assert _cached(b, "ilids_dg_p4_seed3") != _cached(b, "ilids_dg_p4_seed0")
    monkeypatch.setattr(trial_builders, "protocol_rng", None)
    monkeypatch.setattr("reidcli.data.datasets.ilids.protocol_rng", None)
    again = data.load("ilids", tmp_path / "a", test_ids=4, trial=7)
    assert again.query["path"].tolist() == first.query["path"].tolist()
    assert again.gallery["path"].tolist() == first.gallery["path"].tolist()


def test_warca(tmp_path):
    folder = ilids.build(tmp_path)
    split = data.load("ilids", tmp_path, protocol="warca", test_ids=3, draws=2, trial=3,
                      warca_draw="gallery_single")
    assert split.num_trials == 20 and split.eval_kwargs == {"split": 1, "draw": 1}
    assert len(split.gallery) == 3 and split.gallery["pid"].nunique() == 3
    assert _ids(split.query) == _ids(split.gallery)
    assert len(split.train) + len(split.query) + len(split.gallery) == sum(ilids.IMAGES_PER_ID)
    assert not _ids(split.train) & _ids(split.query)
    stored = _cached(folder, "ilids_warca_gallery_single_p3_d2_seed0")
    assert all(f"{SINGLE:04d}001.jpg" in t["train"] for t in stored)
    probe = data.load("ilids", tmp_path, protocol="warca", test_ids=3, trial=10)
    assert probe.options["warca_draw"] == "probe_single" and probe.num_trials == 100
    assert len(probe.query) == 3 and _ids(probe.query) == _ids(split.query)   # split 1
    keep = data.load("ilids", tmp_path, protocol="warca", test_ids=3, trial=10,
                     same_camera="keep")
    assert keep.eval_rule == "single_shot_any" and probe.eval_rule == "market"
    with pytest.raises(Exception, match="same_camera"):
        data.load("ilids", tmp_path, protocol="warca", test_ids=3, same_camera="maybe")


def test_errors_and_check(tmp_path, capsys):
    folder = ilids.build(tmp_path)
    code, out, err = run_cli(capsys, "data", "check", "ilids", "--root", tmp_path,
                             "--option", "test_ids=4")
    assert code == 0, err
    assert "dg, trial 0 of 10" in out and "60 / 60 ≠" in out and "warning" in out
    with pytest.raises(DatasetError, match="asked 9 test ids .* only 8 persons with ≥ 2"):
        data.load("ilids", tmp_path, test_ids=9)
    (folder / "0002000.jpg").write_bytes(b"x")
    with pytest.raises(DatasetError, match=r"malformed image name .*0002000\.jpg"):
        data.load("ilids", tmp_path, test_ids=4)
    (folder / "0002000.jpg").rename(folder / "0002_01.jpg")
    code, out, err = run_cli(capsys, "data", "check", "ilids", "--root", tmp_path,
                             "--option", "test_ids=4")
    assert code == 1 and str(folder / "0002_01.jpg") in err


@pytest.mark.skipif(not os.environ.get("REIDCLI_REAL_DATA"), reason="needs real iLIDS")
def test_real_counts():
    root = os.environ["REIDCLI_REAL_DATA"]
    split = data.load("ilids", root)
    for part, (images, ids) in data.info("ilids").counts.items():
        frame = getattr(split, part)
        assert (len(frame), frame["pid"].nunique()) == (images, ids)
    records = read_ilids(data.registry.resolve_dataset_dir("ilids", root))
    assert (len(records), records["pid"].nunique()) == (476, 119)
