"""MSMT17 loader on fake V1/V2 trees (docs/datasets.md)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

import reidcli.data as data
from reidcli.data.records import encode_identities, validate_frame
from reidcli.errors import DatasetError, UsageError
from tests.cli.helpers import run_cli
from tests.data.fake_trees import msmt17


def _names(frame):
    return [Path(p).name for p in frame["path"]]


@pytest.mark.parametrize("version,wrapper", [("v1", True), ("v2", False)])
def test_parse_lists_exactly(tmp_path, version, wrapper):
    folder = msmt17.build(tmp_path, version, wrapper=wrapper)
    split = data.load("msmt17", tmp_path)
    assert split.options == {"version": version, "train_includes_val": False}
    assert split.eval_rule == "market" and split.num_trials == 1
    side = "train" if version == "v1" else "mask_train_v2"
    assert split.train["path"].tolist() == [str(folder / side / n) for n in (
        "0000/0000_000_01_0303morning_0015_0.jpg", "0000/0000_001_03_0303noon_0016_1.jpg",
        "0001/0001_000_02_0302afternoon_0007_0.jpg")]
    assert split.train["pid"].tolist() == [1, 1, 2]                 # label + 1
    assert split.train["x_native_pid"].tolist() == [0, 0, 1]
    assert split.train["camid"].tolist() == [0, 2, 1]
    assert split.train["frame"].tolist() == [15, 16, 7]
    assert split.train["x_date_time"].tolist() == ["0303morning", "0303noon", "0302afternoon"]
    assert set(split.train["split"]) == {"train"}
    assert _names(split.val) == ["0001_001_15_0113morning_0008_1.jpg",
                                 "0002_000_05_0114noon_0021_0.jpg"]
    assert split.val["camid"].tolist() == [14, 4] and set(split.val["split"]) == {"val"}
    assert split.query["pid"].tolist() == [1, 2] and split.query["camid"].tolist() == [3, 6]
    assert split.gallery["camid"].tolist() == [4, 5, 7]
    assert split.gallery["frame"].tolist() == [41, 42, 44]
    assert set(split.train["x_pid_scope"]) == set(split.val["x_pid_scope"]) == {"train"}
    assert set(split.query["x_pid_scope"]) == set(split.gallery["x_pid_scope"]) == {"test"}
    for part in (split.train, split.val, split.query, split.gallery):
        validate_frame(part)
    # train label 0 and test label 0 are different people: distinct identity keys
    _, classes = encode_identities(split.all_records())
    assert len(classes) == 3 + 2
    merged = data.load("msmt17", tmp_path, train_includes_val=True)
    assert len(merged.train) == 5 and len(merged.val) == 0
    assert set(merged.train["split"]) == {"train"} and merged.train["path"].is_monotonic_increasing
    assert sorted(merged.train["pid"].unique()) == [1, 2, 3]


def test_auto_prefers_v1_and_explicit_version(tmp_path):
    v2 = msmt17.build(tmp_path, "v2", wrapper=True)        # msmt17/MSMT17_V2 (earlier candidate)
    v1 = msmt17.build(tmp_path, "v1", wrapper=False)       # MSMT17_V1 at the root
    auto = data.load("msmt17", tmp_path)
    assert auto.options["version"] == "v1"
    assert all(p.startswith(str(v1 / "train")) for p in auto.train["path"])
    explicit = data.load("msmt17", tmp_path, version="v2")
    assert all(p.startswith(str(v2 / "mask_train_v2")) for p in explicit.train["path"])
    only_v2 = tmp_path / "other"
    msmt17.build(only_v2, "v2")
    assert data.load("msmt17", only_v2).options["version"] == "v2"
    with pytest.raises(DatasetError, match=r"missing folder .*MSMT17_V2[/\\]train"):
        data.load("msmt17", only_v2, version="v1")
    with pytest.raises(UsageError, match="version"):
        data.load("msmt17", tmp_path, version="v3")


def test_dataset_folder_as_root(tmp_path):
    folder = msmt17.build(tmp_path, "v1")
    assert len(data.load("msmt17", folder).query) == 2          # "." candidate


def test_jpeg_swap_and_missing_image(tmp_path):
    folder = msmt17.build(tmp_path, "v2", jpeg=True)
    gallery = data.load("msmt17", tmp_path).gallery
    assert _names(gallery)[0] == "0000_001_05_0113noon_0041_1.jpeg" and len(gallery) == 3
    (folder / "mask_test_v2" / "0000" / "0000_001_05_0113noon_0041_1.jpeg").unlink()
    with pytest.raises(DatasetError, match=r"list_gallery\.txt line 1 lists .*0000_001_05_"
                                           r"0113noon_0041_1\.jpg, which does not exist"):
        data.load("msmt17", tmp_path)


def test_bad_label_and_bad_line(tmp_path):
    folder = msmt17.build(tmp_path)
    text = (folder / "list_query.txt").read_text()
    (folder / "list_query.txt").write_text(text.replace("0043_0.jpg 1", "0043_0.jpg 7"))
    with pytest.raises(DatasetError, match=r"list_query\.txt line 2: label 7 does not match"):
        data.load("msmt17", tmp_path)
    (folder / "list_query.txt").write_text(text + "just-one-token\n")
    with pytest.raises(DatasetError, match=r"list_query\.txt line 4 is not '<relpath> <label>'"):
        data.load("msmt17", tmp_path)


def test_missing_pieces_name_the_path(tmp_path):
    folder = msmt17.build(tmp_path)
    (folder / "list_val.txt").unlink()
    with pytest.raises(DatasetError, match=r"missing file .*MSMT17_V1[/\\]list_val\.txt"):
        data.load("msmt17", tmp_path)
    with pytest.raises(DatasetError, match="no msmt17 dataset"):
        data.load("msmt17", tmp_path / "elsewhere")


def test_reid_data_check(capsys, tmp_path):
    folder = msmt17.build(tmp_path)
    code, out, err = run_cli(capsys, "data", "check", "msmt17", "--root", tmp_path)
    assert code == 0, err
    assert "val" in out and "11,659 / 3,060" in out and "≠" in out and "warning" in out
    code, out, err = run_cli(capsys, "data", "check", "msmt17", "--root", tmp_path,
                             "--option", "train_includes_val=true")
    assert code == 0, err
    (folder / "test" / "0001" / "0001_001_08_0113noon_0044_1.jpg").unlink()
    code, out, err = run_cli(capsys, "data", "check", "msmt17", "--root", tmp_path)
    assert code == 1 and "0001_001_08_0113noon_0044_1.jpg" in err and "line 3" in err


def test_info():
    info = data.info("msmt17")
    assert info.options == {"version": "auto", "train_includes_val": False}
    assert "train" not in info.counts and info.counts["gallery"] == (82161, 3060)
    assert any("list_val" in fact for fact in info.unconfirmed)


@pytest.mark.skipif(not os.environ.get("REIDCLI_REAL_DATA"), reason="needs real datasets")
def test_real_counts():
    root = os.environ["REIDCLI_REAL_DATA"]
    split = data.load("msmt17", root, train_includes_val=True)
    got = {part: (len(getattr(split, part)), getattr(split, part)["pid"].nunique())
           for part in ("train", "query", "gallery")}
    assert got == {"train": (32621, 1041), "query": (11659, 3060), "gallery": (82161, 3060)}
    assert split.all_records()["camid"].nunique() == 15
    default = data.load("msmt17", root)
    assert len(default.train) + len(default.val) == 32621       # the split itself: §9
