"""Person30K manifest loader on a fake copy (docs/datasets.md)."""
from __future__ import annotations

from pathlib import Path

import pytest

import reidcli.data as data
from reidcli.data.records import validate_frame
from reidcli.errors import DatasetError, UsageError
from tests.cli.helpers import run_cli
from tests.data.fake_trees import person30k as fake


def _names(frame):
    return [Path(p).name for p in frame["path"]]


def test_train_and_test_a_exactly(tmp_path):
    folder = fake.build(tmp_path)
    split = data.load("person30k", tmp_path)
    assert split.eval_rule == "market" and split.num_trials == 1
    assert split.protocol == "test_a" and split.options == {"test_subset": "A"}
    assert split.train["path"].tolist() == [
        str(folder / fake.relpath("train", "s01", 1, 0, "a")),
        str(folder / fake.relpath("train", "s01", 1, 1, "a")),
        str(folder / fake.relpath("train", "s02", 2, 3, "a"))]
    assert split.train["pid"].tolist() == [1, 1, 2]
    assert split.train["camid"].tolist() == [0, 1, 3]
    assert split.train["domain"].tolist() == split.train["x_site"].tolist() == \
        ["s01", "s01", "s02"]
    assert set(split.train["x_scenario"]) == {"supermarket"}
    assert set(split.train["split"]) == {"train"} and split.train["frame"].isna().all()
    # first image by sorted path per (pid, camera) of pids seen by ≥ 2 cameras
    assert _names(split.query) == ["00010_c0_a.jpg", "00010_c2_a.jpg"]
    assert _names(split.gallery) == ["00000_c0_a.jpg", "00000_c2_a.jpg", "00010_c0_b.jpg",
                                     "00011_c5_a.jpg"]
    assert split.gallery["pid"].tolist() == [0, 0, 10, 11]      # distractors never query
    assert set(split.query["split"]) == {"query"} and set(split.gallery["split"]) == {"gallery"}
    for part in (split.train, split.query, split.gallery):
        validate_frame(part)
        assert set(part["dataset"]) == {"person30k"}
        assert set(part["x_subset"]) <= {"train", "test_a"}


def test_other_subsets(tmp_path):
    fake.build(tmp_path)
    b = data.load("person30k", tmp_path, test_subset="B")
    assert b.query["pid"].tolist() == [20, 20] and b.query["camid"].tolist() == [1, 2]
    assert len(b.gallery) == 0 and set(b.query["domain"]) == {"s03"}
    assert len(b.train) == 3 and b.protocol == "test_b"
    assert data.load("person30k", tmp_path, test_subset="b").options == {"test_subset": "B"}
    with pytest.raises(DatasetError, match="no person of test_c .* two cameras"):
        data.load("person30k", tmp_path, test_subset="C")
    with pytest.raises(UsageError, match="test_subset"):
        data.load("person30k", tmp_path, test_subset="D")


def _rewrite(folder, old, new):
    manifest = folder / "manifest.csv"
    text = manifest.read_text()
    assert old in text
    manifest.write_text(text.replace(old, new, 1))


@pytest.mark.parametrize("old,new,message", [
    ("scenario,subset", "kind,subset", r"lacks column\(s\) scenario \(has: path, pid, "
                                       r"camid, site, kind, subset\)"),
    (",10,0,s01", ",ten,0,s01", r"line 5: column pid holds 'ten', expected an integer"),
    (",1,1,s01", ",1,-1,s01", r"line 2: column camid holds '-1', expected an integer"),
    (",supermarket,test_b", ",supermarket,test_x", r"line 11: column subset holds 'test_x'"),
    (",s02,supermarket,train", ",,supermarket,train", r"line 4: column site holds ''"),
    ("images/train/s01/00001_c1_a.jpg", "images/train/s01/00001_c0_a.jpg",
     r"line 3: column path holds .*00001_c0_a\.jpg', expected each image listed once"),
    ("images/train/s02/00002_c3_a.jpg", "/abs/00002_c3_a.jpg",
     r"line 4: column path holds '/abs/00002_c3_a\.jpg', expected a path relative"),
    ("images/train/s02/00002_c3_a.jpg", "images/train/s02/00002_c9_a.jpg",
     r"line 4 lists .*images[/\\]train[/\\]s02[/\\]00002_c9_a\.jpg, which does not exist"),
])
def test_manifest_validation(tmp_path, old, new, message):
    folder = fake.build(tmp_path)
    _rewrite(folder, old, new)
    with pytest.raises(DatasetError, match=message):
        data.load("person30k", tmp_path)


def test_resolution_and_missing_manifest(tmp_path):
    folder = fake.build(tmp_path / "a", "Person30K")
    assert data.load("person30k", tmp_path / "a").train["path"].iloc[0].startswith(str(folder))
    assert len(data.load("person30k", folder).query) == 2       # the folder itself as root
    (folder / "manifest.csv").write_text("")
    with pytest.raises(DatasetError, match="cannot parse .*manifest.csv"):
        data.load("person30k", folder)
    (folder / "manifest.csv").unlink()
    with pytest.raises(DatasetError, match="no person30k dataset"):
        data.load("person30k", folder)


def test_info_states_the_assumption():
    info = data.info("person30k")
    assert info.options == {"test_subset": "A"} and info.eval_rule == "market"
    assert any("toolkit assumption" in n and "unconfirmed" in n for n in info.notes)
    assert any("query" in fact for fact in info.unconfirmed)


def test_reid_data_info_and_check(capsys, tmp_path):
    folder = fake.build(tmp_path)
    code, out, err = run_cli(capsys, "data", "info", "person30k")
    assert code == 0 and "toolkit assumption" in out and "manifest.csv" in out
    code, out, err = run_cli(capsys, "data", "check", "person30k", "--root", tmp_path,
                             "--option", "test_subset=B")
    assert code == 0, err
    assert "test_b" in out and "568,977 / 12,000" in out and "warning" in out
    (folder / fake.relpath("test_a", "s01", 10, 2, "a")).unlink()
    code, out, err = run_cli(capsys, "data", "check", "person30k", "--root", tmp_path)
    assert code == 1 and "line 7" in err
    assert str(folder / fake.relpath("test_a", "s01", 10, 2, "a")) in err
