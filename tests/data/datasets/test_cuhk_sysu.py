"""CUHK-SYSU crops loader on fake trees (docs/datasets.md)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

import reidcli.data as data
from reidcli.data.datasets.cuhk_sysu import NO_CAMERA_COLUMN, read_cuhk_sysu
from reidcli.data.records import validate_frame
from reidcli.errors import DatasetError, UsageError
from tests.cli.helpers import run_cli
from tests.data.fake_trees import cuhk_sysu as fake


def test_names_pids_scenes_and_no_cameras(tmp_path):
    folder = fake.build(tmp_path)
    records = validate_frame(read_cuhk_sysu(folder), "cuhksysu")
    names = [Path(p).name for p in records["path"]]
    assert names == sorted(fake.crop_names(), key=str.encode)
    assert len(records) == sum(fake.PERSONS.values())
    pid_of_name = {n: int(n[1:n.index("_")]) for n in fake.crop_names()}
    assert records["pid"].tolist() == [pid_of_name[n] for n in names]
    assert records.groupby("pid").size().to_dict() == fake.PERSONS
    scenes = [int(n.split("_")[1][1:]) for n in names]
    assert records["x_scene"].tolist() == scenes
    assert set(records["camid"]) == {0} and records[NO_CAMERA_COLUMN].all()
    assert set(records["dataset"]) == {"cuhksysu"} == set(records["domain"])
    assert set(records["split"]) == {"train"} and records["frame"].isna().all()


@pytest.mark.parametrize("folder", ["cuhksysu", "cuhk_sysu", "CUHK-SYSU", "cuhk-sysu", "."])
def test_load_every_candidate_folder_and_alias(tmp_path, folder):
    fake.build(tmp_path, folder=folder)
    for name in ("cuhksysu", "cuhk_sysu", "cuhk-sysu"):
        split = data.load(name, tmp_path)
        assert split.name == "cuhksysu" and split.protocol == "train_only"
        assert len(split.train) == sum(fake.PERSONS.values())
        assert len(split.query) == 0 == len(split.gallery)
        assert split.options["camera_labels"] is False
        assert len(split.all_records()) == len(split.train)


def test_png_names_and_negative_pid(tmp_path):
    folder = fake.build(tmp_path, png_names=True)
    (folder / "cropped_images" / "p-1_s77_1.jpg").write_bytes(
        (folder / "cropped_images" / fake.crop_names()[0]).read_bytes())
    records = read_cuhk_sysu(folder)
    last = max(fake.PERSONS)
    png = records[records["path"].str.endswith(".png")]
    assert len(png) == fake.PERSONS[last] and set(png["pid"]) == {last}
    assert set(png["x_scene"]) == {-1}                   # p<pid>_n<k>: no scene token
    junk = records[records["path"].str.endswith("p-1_s77_1.jpg")]
    assert junk["pid"].tolist() == [-1] and junk["x_scene"].tolist() == [77]


def test_errors_and_cli(tmp_path, capsys):
    with pytest.raises(DatasetError, match=r"no cuhksysu dataset under .*tried"):
        data.load("cuhksysu", tmp_path)
    folder = fake.build(tmp_path)
    with pytest.raises(UsageError, match="trial=1 is outside the one trial"):
        data.load("cuhksysu", tmp_path, trial=1)
    code, out, err = run_cli(capsys, "data", "check", "cuhk-sysu", "--root", tmp_path)
    assert code == 0, err
    images, ids = sum(fake.PERSONS.values()), len(fake.PERSONS)
    rows = [[c.strip() for c in line.split("│")[1:-1]] for line in out.splitlines()]
    train_row = next(r for r in rows if r[:1] == ["train"])
    assert train_row[1:4] == [str(images), str(ids), "1"]
    assert "34,574 / 11,934 ≠" in out and "unconfirmed" in out
    code, out, err = run_cli(capsys, "data", "info", "cuhksysu")
    assert code == 0, err
    assert "cropped_images" in out and "no camera labels" in out
    (folder / "cropped_images" / "person_1.jpg").write_bytes(b"x")
    with pytest.raises(DatasetError, match=r"malformed image name .*person_1\.jpg"):
        data.load("cuhksysu", tmp_path)
    code, out, err = run_cli(capsys, "data", "check", "cuhksysu", "--root", tmp_path)
    assert code == 1 and "person_1.jpg" in err


def test_empty_crop_folder_is_an_error(tmp_path):
    (tmp_path / "cuhksysu" / "cropped_images").mkdir(parents=True)
    with pytest.raises(DatasetError, match="no image in"):
        data.load("cuhksysu", tmp_path)


@pytest.mark.skipif(not os.environ.get("REIDCLI_REAL_DATA"), reason="needs real CUHK-SYSU")
def test_real_counts():
    split = data.load("cuhksysu", os.environ["REIDCLI_REAL_DATA"])
    images, ids = data.info("cuhksysu").counts["train"]
    assert (len(split.train), split.train["pid"].nunique()) == (images, ids)
