"""VIPeR loader on fake trees (docs/datasets.md; docs/methods/warca.md A8)."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

import reidcli.data as data
from reidcli.data import trials as trial_builders
from reidcli.data.datasets.viper import read_viper
from reidcli.errors import DatasetError, UsageError
from tests.cli.helpers import run_cli
from tests.data.fake_trees import viper

PIDS = [1, 3, 5, 7, 9, 11, 13, 15]          # pair indices 000, 002, ... 014, plus one


def _ids(frame) -> set[int]:
    return set(frame["pid"].tolist())


def _rel(split, folder: Path) -> dict[str, list[str]]:
    return {part: sorted(Path(p).relative_to(folder).as_posix()
                         for p in getattr(split, part)["path"])
            for part in ("train", "query", "gallery")}


def test_parse_pids_views_angles(tmp_path):
    folder = viper.build(tmp_path)
    records = read_viper(folder)
    assert len(records) == 16 and sorted(set(records["pid"])) == PIDS
    assert (records["pid"] == records["x_native_pid"] + 1).all()
    first = records[records["path"].str.endswith("cam_b/002_135.bmp")].iloc[0]
    assert (first["pid"], first["camid"], first["x_angle"]) == (3, 1, 135)
    assert records["frame"].isna().all() and set(records["split"]) == {"train"}
    assert {Path(p).parent.name: c for p, c in zip(records["path"], records["camid"])} == \
        {"cam_a": 0, "cam_b": 1}


@pytest.mark.parametrize("wrapper", [True, False])
def test_half_protocol_views_and_disjoint_ids(tmp_path, wrapper):
    folder = viper.build(tmp_path, wrapper=wrapper)
    for trial in (range(10) if wrapper else [4]):
        split = data.load("viper", tmp_path, trial=trial, test_ids=4)
        assert split.num_trials == 10 and split.eval_rule == "market"
        assert split.protocol == "half" and split.trial == trial
        assert len(split.query) == len(split.gallery) == 4 and len(split.train) == 8
        assert set(split.query["camid"]) == {0} and set(split.gallery["camid"]) == {1}
        assert set(split.train["camid"]) == {0, 1}
        assert _ids(split.query) == _ids(split.gallery)
        assert not _ids(split.query) & _ids(split.train)
        assert sorted(_ids(split.query) | _ids(split.train)) == PIDS
        assert all(Path(p).is_absolute() and str(folder) in p for p in split.train["path"])
    swapped = data.load("viper", tmp_path, trial=trial, test_ids=4, probe_cam="b")
    assert set(swapped.query["camid"]) == {1} and set(swapped.gallery["camid"]) == {0}
    assert _ids(swapped.query) == _ids(split.query)          # same persons, views swapped
    assert swapped.options["probe_cam"] == "b"


def _cached(folder: Path, key: str) -> list[dict]:
    return json.loads((folder / "reidcli_splits" / f"{key}.json").read_text())["trials"]


def test_trials_deterministic_per_seed_and_cached(tmp_path, monkeypatch):
    a = viper.build(tmp_path / "a")
    b = viper.build(tmp_path / "b")
    key = "viper_half_probea_p4_seed0"
    first = [_rel(data.load("viper", tmp_path / "a", trial=t, test_ids=4), a)
             for t in (0, 5, 9)]
    data.load("viper", tmp_path / "b", test_ids=4)
    stored = _cached(a, key)
    assert len(stored) == 10 and stored == _cached(b, key)   # same seed, fresh copy
    assert [{k: sorted(v) for k, v in stored[t].items()} for t in (0, 5, 9)] == first
    assert len({tuple(t["query"]) for t in stored}) > 1       # trials differ
    assert not any(os.path.isabs(p) for t in stored for p in t["train"])   # relative paths
    data.load("viper", tmp_path / "b", test_ids=4, seed=1)
    assert _cached(b, key.replace("seed0", "seed1")) != stored

    def no_draw(*args, **kwargs):
        raise AssertionError("trials were redrawn instead of read from the cache")

    monkeypatch.setattr(trial_builders, "protocol_rng", no_draw)
    moved = tmp_path / "moved"
    shutil.move(str(tmp_path / "a"), moved)                   # the cache travels along
    again = [_rel(data.load("viper", moved, trial=t, test_ids=4), moved / "viper" / "VIPeR")
             for t in (0, 5, 9)]
    assert again == first


def test_warca_splits_and_draws(tmp_path):
    viper.build(tmp_path)
    one = data.load("viper", tmp_path, protocol="warca", test_ids=4)
    # the paper's protocol by default: 10 splits × 10 draws, one probe per id
    assert one.num_trials == 100 and one.eval_kwargs == {"split": 0, "draw": 0}
    assert one.options["warca_draw"] == "probe_single" and one.eval_rule == "market"
    split = data.load("viper", tmp_path, protocol="warca", test_ids=4, draws=3, trial=7,
                      warca_draw="gallery_single")
    assert split.num_trials == 30 and split.eval_kwargs == {"split": 2, "draw": 1}
    assert split.protocol == "warca" and split.options["warca_draw"] == "gallery_single"
    # 2 images per person: one gallery image and one probe per test id, any camera
    assert len(split.gallery) == 4 and split.gallery["pid"].nunique() == 4
    assert _ids(split.query) == _ids(split.gallery) and len(split.query) == 4
    assert not set(split.query["path"]) & set(split.gallery["path"])
    assert len(split.train) == 8 and not _ids(split.train) & _ids(split.query)
    draws = [data.load("viper", tmp_path, protocol="warca", test_ids=4, draws=3, trial=t,
                       warca_draw="gallery_single") for t in (6, 7, 8)]                              # split 2, draws 0..2
    assert all(_ids(d.query) == _ids(split.query) for d in draws)
    data.load("viper", tmp_path, protocol="warca", test_ids=4, draws=10,
              warca_draw="gallery_single")
    tenth = _cached(tmp_path / "viper" / "VIPeR", "viper_warca_gallery_single_p4_d10_seed0")
    assert len(tenth) == 100 and len({tuple(d["gallery"]) for d in tenth[:10]}) > 1
    assert all(d["train"] == tenth[0]["train"] for d in tenth[:10])   # split 0's draws
    assert tenth[10]["train"] != tenth[0]["train"]
    probe = data.load("viper", tmp_path, protocol="warca", test_ids=4, draws=3, trial=7,
                      warca_draw="probe_single")
    assert _ids(probe.query) == _ids(split.query)             # same split, other draw rule
    assert len(probe.query) == 4 and probe.query["pid"].nunique() == 4


def test_errors_name_the_wrong_path_or_option(tmp_path):
    folder = viper.build(tmp_path)
    with pytest.raises(DatasetError, match=r"asked 9 test ids .* only 8 persons"):
        data.load("viper", tmp_path, test_ids=9)
    with pytest.raises(DatasetError, match="asked 9 test ids"):
        data.load("viper", tmp_path, test_ids=9, protocol="warca")
    with pytest.raises(DatasetError, match="asked 316 test ids"):
        data.load("viper", tmp_path)                          # paper size on a tiny tree
    with pytest.raises(UsageError, match="probe_cam='c'"):
        data.load("viper", tmp_path, test_ids=4, probe_cam="c")
    with pytest.raises(UsageError, match="protocol='random'"):
        data.load("viper", tmp_path, test_ids=4, protocol="random")
    with pytest.raises(UsageError, match="warca_draw"):
        data.load("viper", tmp_path, test_ids=4, protocol="warca", warca_draw="both")
    with pytest.raises(UsageError, match="test_ids=0"):
        data.load("viper", tmp_path, test_ids=0)
    with pytest.raises(UsageError, match="trial=10 is outside the trials 0..9"):
        data.load("viper", tmp_path, test_ids=4, trial=10)
    (folder / "cam_b" / "014_x.bmp").write_bytes(b"x")
    with pytest.raises(DatasetError, match=r"malformed image name .*cam_b/014_x\.bmp"):
        data.load("viper", tmp_path, test_ids=4)
    (folder / "cam_b" / "014_x.bmp").unlink()
    (folder / "cam_b" / "006_90.bmp").rename(folder / "cam_b" / "016_90.bmp")
    with pytest.raises(DatasetError, match=r"cam_a/006_135\.bmp has no counterpart"):
        data.load("viper", tmp_path, test_ids=4)
    with pytest.raises(DatasetError, match="no viper dataset"):
        data.load("viper", tmp_path / "nothing")


def test_reid_data_check(capsys, tmp_path):
    folder = viper.build(tmp_path)
    code, out, err = run_cli(capsys, "data", "check", "viper", "--root", tmp_path,
                             "--option", "test_ids=4")
    assert code == 0, err
    assert "half, trial 0 of 10" in out and "316 / 316 ≠" in out and "632 / 316 ≠" in out
    assert "warning" in out and "licence" in out
    (folder / "cam_a" / "zz.bmp").write_bytes(b"x")
    code, out, err = run_cli(capsys, "data", "check", "viper", "--root", tmp_path,
                             "--option", "test_ids=4")
    assert code == 1 and str(folder / "cam_a" / "zz.bmp") in err


@pytest.mark.skipif(not os.environ.get("REIDCLI_REAL_DATA"), reason="needs real VIPeR")
def test_real_counts():
    root = os.environ["REIDCLI_REAL_DATA"]
    split = data.load("viper", root)
    for part, (images, ids) in data.info("viper").counts.items():
        frame = getattr(split, part)
        assert (len(frame), frame["pid"].nunique()) == (images, ids)
    assert len(read_viper(data.registry.resolve_dataset_dir("viper", root))) == 1264
