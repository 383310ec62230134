"""The shared Market-1501 folder parser (market1501, dukemtmc, synthetic)."""
from __future__ import annotations

import pytest
from PIL import Image

from reidcli.data.datasets.market_folder import (DUKE_NAME, MARKET_NAME, load_market_layout,
                                                 parse_market_folder)
from reidcli.errors import DatasetError


def _touch(folder, *names):
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        Image.new("RGB", (4, 8)).save(folder / name)


def test_market_names_junk_and_distractors(tmp_path):
    _touch(tmp_path / "bounding_box_test", "0002_c1s1_000451_03.jpg", "0000_c3s2_000101_01.jpg",
           "-1_c1s1_000401_03.jpg")
    (tmp_path / "bounding_box_test" / "Thumbs.db").write_text("x")
    frame = parse_market_folder(tmp_path / "bounding_box_test", "gallery", dataset="market1501")
    assert frame["pid"].tolist() == [0, 2]           # sorted by name; junk dropped
    assert frame["camid"].tolist() == [2, 0]
    assert frame["frame"].tolist() == [101, 451]
    assert frame["x_sequence"].tolist() == [2, 1] and frame["x_bbox"].tolist() == [1, 3]
    kept = parse_market_folder(tmp_path / "bounding_box_test", "gallery", dataset="m",
                               keep_junk=True)
    assert sorted(kept["pid"].tolist()) == [-1, 0, 2]


def test_malformed_name_and_camera_range(tmp_path):
    _touch(tmp_path / "q", "0002_c1s1_000451.jpg")
    with pytest.raises(DatasetError, match=r"malformed image name .*0002_c1s1_000451\.jpg"):
        parse_market_folder(tmp_path / "q", "query", dataset="m")
    _touch(tmp_path / "r", "0002_c7s1_000451_00.jpg")
    with pytest.raises(DatasetError, match="camera c7 out of range 1..6"):
        parse_market_folder(tmp_path / "r", "query", dataset="m")
    assert parse_market_folder(tmp_path / "r", "query", dataset="s", cam_range=(1, 9))[
        "camid"].tolist() == [6]
    with pytest.raises(DatasetError, match="missing folder"):
        parse_market_folder(tmp_path / "nope", "query", dataset="m")


def test_duke_names_and_layout(tmp_path):
    _touch(tmp_path / "bounding_box_train", "0005_c2_f0046985.jpg")
    _touch(tmp_path / "query", "0007_c8_f0000001.jpg")
    _touch(tmp_path / "bounding_box_test", "0007_c1_f0000002.jpg", "0009_c1_f0000003.jpg")
    split = load_market_layout(tmp_path, dataset="dukemtmc", pattern=DUKE_NAME,
                               cam_range=(1, 8))
    assert split.train["camid"].tolist() == [1] and split.train["frame"].tolist() == [46985]
    assert split.query["camid"].tolist() == [7]
    assert len(split.gallery) == 2 and split.eval_rule == "market"
    assert "x_sequence" not in split.train
    assert MARKET_NAME.match("0005_c2_f0046985.jpg") is None
