"""Loaders of the small two-view datasets on fake trees (datasets.md §5.5-5.10, §5.13, §7)."""
from __future__ import annotations

import os

import numpy as np
import pytest

import reidcli.data as data
from reidcli.errors import DatasetError, UsageError
from tests.cli.helpers import run_cli
from tests.data.fake_trees import small_sets


def _ids(frame):
    return set(frame["pid"].tolist())


def test_viper_half_protocol_views_and_pids(tmp_path):
    small_sets.viper(tmp_path)
    split = data.load("viper", tmp_path, trial=3, test_ids=4)
    assert split.num_trials == 10 and split.eval_rule == "market"
    assert len(split.query) == len(split.gallery) == 4 and len(split.train) == 8
    assert set(split.query["camid"]) == {0} and set(split.gallery["camid"]) == {1}
    assert _ids(split.query) == _ids(split.gallery) and not _ids(split.query) & _ids(split.train)
    assert sorted(_ids(split.query) | _ids(split.train)) == [1, 3, 5, 7, 9, 11, 13, 15]
    row = split.train.iloc[0]
    assert row["pid"] == row["x_native_pid"] + 1 and "x_angle" in split.train
    swapped = data.load("viper", tmp_path, trial=3, test_ids=4, probe_cam="b")
    assert set(swapped.query["camid"]) == {1}
    again = data.load("viper", tmp_path / "viper", trial=3, test_ids=4)   # wrapper or not
    assert again.query["path"].tolist() == split.query["path"].tolist()
    assert (tmp_path / "viper" / "VIPeR" / "reidcli_splits").is_dir()


def test_viper_warca_draws(tmp_path):
    small_sets.viper(tmp_path)
    split = data.load("viper", tmp_path, protocol="warca", test_ids=4, draws=3, trial=7)
    assert split.num_trials == 30 and split.eval_kwargs == {"split": 2, "draw": 1}
    assert len(split.gallery) == 4 and len(split.query) == 4      # 2 images per id


def test_viper_errors(tmp_path):
    folder = small_sets.viper(tmp_path)
    (folder / "cam_b" / "bad.bmp").write_bytes(b"x")
    with pytest.raises(DatasetError, match=r"malformed image name .*cam_b/bad\.bmp"):
        data.load("viper", tmp_path)
    (folder / "cam_b" / "bad.bmp").unlink()
    with pytest.raises(DatasetError, match="asked 20 test ids"):
        data.load("viper", tmp_path, test_ids=20)
    with pytest.raises(UsageError, match="probe_cam"):
        data.load("viper", tmp_path, test_ids=4, probe_cam="c")
    with pytest.raises(DatasetError, match="no viper dataset"):
        data.load("viper", tmp_path / "nothing")


def test_prid450s_ignores_masks(tmp_path):
    small_sets.prid450s(tmp_path)
    split = data.load("prid450s", tmp_path, test_ids=3)
    assert len(split.train) == 10 and len(split.query) == 3
    assert all("img_" in p for p in split.train["path"])


@pytest.mark.parametrize("zipped", [False, True])
def test_cuhk01_single_shot_and_zip(tmp_path, zipped):
    small_sets.cuhk01(tmp_path, zipped=zipped)
    split = data.load("cuhk01", tmp_path, test_ids=4, trial=1)
    assert len(split.train) == 6 * 4 and len(split.query) == len(split.gallery) == 4
    assert set(split.query["frame"]) <= {1, 2} and set(split.gallery["frame"]) <= {3, 4}
    assert (tmp_path / "cuhk01" / "campus").is_dir()
    assert not (tmp_path / "cuhk01" / "campus.partial").exists()
    multi = data.load("cuhk01", tmp_path, test_ids=4, protocol="multi_shot")
    assert len(multi.query) == len(multi.gallery) == 8


def test_prid2011_dg_gallery_adds_unpaired_persons(tmp_path):
    small_sets.prid2011(tmp_path)
    split = data.load("prid", tmp_path, test_ids=3, trial=2, shared_ids=6)
    assert len(split.train) == 0 and len(split.query) == 3
    assert len(split.gallery) == 3 + 4                       # + cam_b-only persons 7..10
    assert {20007, 20008, 20009, 20010} <= _ids(split.gallery)
    assert not {10007, 10008} & (_ids(split.query) | _ids(split.gallery))   # cam_a-only unused
    half = data.load("prid2011", tmp_path, test_ids=3, protocol="half", shared_ids=6)
    assert len(half.train) == 6 and not _ids(half.train) & _ids(half.query)


def test_ilids_dg_pairs_and_pseudo_cameras(tmp_path):
    small_sets.ilids(tmp_path)
    split = data.load("qmul_ilids", tmp_path, test_ids=4)
    assert len(split.query) == len(split.gallery) == 4 and len(split.train) == 0
    merged = split.query.merge(split.gallery, on="pid")
    assert (merged["path_x"] != merged["path_y"]).all()
    assert (merged["camid_x"] != merged["camid_y"]).all()
    assert split.query["x_pseudo_cam"].all()
    warca = data.load("ilids", tmp_path, protocol="warca", test_ids=3,
                      warca_draw="probe_single")
    assert len(warca.query) == 3 and len(warca.train) > 0


def test_cuhk02_p5_test_and_all_train(tmp_path):
    small_sets.cuhk02(tmp_path)
    split = data.load("cuhk02", tmp_path)
    assert set(split.query["camid"]) == {8} and set(split.gallery["camid"]) == {9}
    assert len(split.train) == (3 + 2 + 2 + 2) * 4 and split.train["pid"].min() == 10001
    assert data.load("cuhk02", tmp_path, protocol="all_train").train.shape[0] == 12 * 4


def test_reid_data_check_on_fake_trees(capsys, tmp_path):
    small_sets.viper(tmp_path)
    code, out, err = run_cli(capsys, "data", "check", "viper", "--root", tmp_path, "--option",
                             "test_ids=4")
    assert code == 0, err
    assert "query" in out and "316 / 316" in out and "≠" in out and "warning" in out
    code, out, err = run_cli(capsys, "data", "check", "prid450s", "--root", tmp_path)
    assert code == 1 and "no prid450s dataset" in err


@pytest.mark.skipif(not os.environ.get("REIDCLI_REAL_DATA"), reason="needs real datasets")
@pytest.mark.parametrize("name", ["viper", "prid450s", "cuhk01"])
def test_real_counts(name):
    split = data.load(name, os.environ["REIDCLI_REAL_DATA"])
    info = data.info(name)
    for part, (images, ids) in info.counts.items():
        frame = getattr(split, part)
        assert (len(frame), frame["pid"].nunique()) == (images, ids)
