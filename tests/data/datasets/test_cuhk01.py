"""CUHK01 loader on fake trees (docs/datasets.md; docs/methods/cdpcf.md; docs/methods/warca.md A8)."""
from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

import pytest

import reidcli.data as data
from reidcli.data import trials as trial_builders
from reidcli.data.datasets.cuhk01 import read_cuhk01
from reidcli.errors import DatasetError
from tests.cli.helpers import run_cli
from tests.data.fake_trees import cuhk01


def _ids(frame) -> set[int]:
    return set(frame["pid"].tolist())


def _cached(folder: Path, key: str) -> list[dict]:
    return json.loads((folder / "reidcli_splits" / f"{key}.json").read_text())["trials"]


def test_parse_views_and_frames(tmp_path):
    folder = cuhk01.build(tmp_path)
    records = read_cuhk01(folder)
    assert len(records) == 40 and sorted(set(records["pid"])) == list(range(1, 11))
    assert records["frame"].tolist() == [1, 2, 3, 4] * 10
    assert records["camid"].tolist() == [0, 0, 1, 1] * 10


def test_single_shot_protocol(tmp_path):
    folder = cuhk01.build(tmp_path)
    for trial in range(10):
        split = data.load("cuhk01", tmp_path, test_ids=4, trial=trial)
        assert split.protocol == "single_shot" and split.num_trials == 10
        assert len(split.train) == 6 * 4 and split.train["pid"].nunique() == 6
        assert len(split.query) == len(split.gallery) == 4
        assert set(split.query["frame"]) <= {1, 2} and set(split.gallery["frame"]) <= {3, 4}
        assert _ids(split.query) == _ids(split.gallery) and not _ids(split.train) & \
            _ids(split.query)
    stored = _cached(folder, "cuhk01_single_shot_p4_seed0")
    firsts = {p for t in stored for p in t["query"]}
    assert any(p.endswith("001.png") for p in firsts) and any(p.endswith("002.png")
                                                              for p in firsts)
    multi = data.load("cuhk01", tmp_path, test_ids=4, protocol="multi_shot", trial=9)
    assert _ids(multi.query) == _ids(split.query)             # same persons as single_shot
    assert len(multi.query) == len(multi.gallery) == 8
    assert set(multi.query["camid"]) == {0} and set(multi.gallery["camid"]) == {1}


def test_deterministic_and_cached(tmp_path, monkeypatch):
    a, b = cuhk01.build(tmp_path / "a"), cuhk01.build(tmp_path / "b")
    first = data.load("cuhk01", tmp_path / "a", test_ids=4, trial=3)
    data.load("cuhk01", tmp_path / "b", test_ids=4)
    key = "cuhk01_single_shot_p4_seed0"
    assert _cached(a, key) == _cached(b, key)
    assert all(p.startswith("campus/") for p in _cached(a, key)[0]["gallery"])
    data.load("cuhk01", tmp_path / "b", test_ids=4, seed=2)
    assert _cached(b, "cuhk01_single_shot_p4_seed2") != _cached(b, key)
    monkeypatch.setattr(trial_builders, "protocol_rng", None)
    again = data.load("cuhk01", tmp_path / "a", test_ids=4, trial=3)
    assert again.query["path"].tolist() == first.query["path"].tolist()
    assert again.gallery["path"].tolist() == first.gallery["path"].tolist()


@pytest.mark.parametrize("inner", ["campus", "", "CUHK01/campus"])
def test_zip_is_extracted_atomically(tmp_path, inner):
    folder = cuhk01.build(tmp_path, zipped=True, inner=inner)
    assert not (folder / "campus").exists()
    split = data.load("cuhk01", tmp_path, test_ids=4)
    assert sorted(p.name for p in (folder / "campus").iterdir()) == cuhk01.names(10)
    assert sorted(p.name for p in folder.iterdir()) == ["CUHK01.zip", "campus",
                                                        "reidcli_splits"]   # no temp left
    assert split.query["path"].str.contains("/campus/").all()
    os.utime(folder / "CUHK01.zip")                           # a second load reuses campus/
    assert data.load("cuhk01", tmp_path, test_ids=4).query["path"].tolist() == \
        split.query["path"].tolist()


def test_broken_zip_leaves_no_campus(tmp_path):
    folder = tmp_path / "cuhk01"
    folder.mkdir()
    (folder / "CUHK01.zip").write_bytes(b"not a zip")
    with pytest.raises(DatasetError, match=r"cannot extract .*CUHK01\.zip"):
        data.load("cuhk01", tmp_path, test_ids=4)
    with zipfile.ZipFile(folder / "CUHK01.zip", "w") as zf:
        zf.writestr("readme.txt", "no images")
    with pytest.raises(DatasetError, match="holds no PPPPNNN.png"):
        data.load("cuhk01", tmp_path, test_ids=4)
    assert sorted(p.name for p in folder.iterdir()) == ["CUHK01.zip"]


def test_warca(tmp_path):
    cuhk01.build(tmp_path, wrapper="CUHK01")
    split = data.load("cuhk01", tmp_path, protocol="warca", test_ids=4, trial=3, draws=1,
                      warca_draw="gallery_single")
    assert split.num_trials == 10 and split.eval_kwargs == {"split": 3, "draw": 0}
    assert len(split.gallery) == 4 and split.gallery["pid"].nunique() == 4
    assert len(split.query) == 12 and split.query.groupby("pid").size().eq(3).all()
    assert len(split.train) == 24 and not _ids(split.train) & _ids(split.query)
    probe = data.load("cuhk01", tmp_path, protocol="warca", test_ids=4, trial=30)
    assert probe.eval_kwargs == {"split": 3, "draw": 0}         # default: 10 draws per split
    assert len(probe.query) == 4 and len(probe.gallery) == 12
    assert _ids(probe.query) == _ids(split.query)


def test_errors_and_check(tmp_path, capsys):
    folder = cuhk01.build(tmp_path)
    code, out, err = run_cli(capsys, "data", "check", "cuhk01", "--root", tmp_path,
                             "--option", "test_ids=4")
    assert code == 0, err
    assert "1,940 / 485 ≠" in out and "same-view" in out
    with pytest.raises(DatasetError, match="asked 11 test ids .* only 10 persons"):
        data.load("cuhk01", tmp_path, test_ids=11)
    (folder / "campus" / "0003005.png").write_bytes(b"x")
    code, out, err = run_cli(capsys, "data", "check", "cuhk01", "--root", tmp_path,
                             "--option", "test_ids=4")
    assert code == 1 and str(folder / "campus" / "0003005.png") in err
    (folder / "campus" / "0003005.png").unlink()
    (folder / "campus").rename(folder / "images")
    with pytest.raises(DatasetError, match="no cuhk01 dataset"):
        data.load("cuhk01", tmp_path, test_ids=4)


@pytest.mark.skipif(not os.environ.get("REIDCLI_REAL_DATA"), reason="needs real CUHK01")
def test_real_counts():
    split = data.load("cuhk01", os.environ["REIDCLI_REAL_DATA"])
    for part, (images, ids) in data.info("cuhk01").counts.items():
        frame = getattr(split, part)
        assert (len(frame), frame["pid"].nunique()) == (images, ids)
