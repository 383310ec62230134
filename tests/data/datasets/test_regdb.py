"""RegDB loader on a fake tree (docs/datasets.md E5, §5.12, §7)."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import reidcli.data as data
from reidcli.data.records import validate_frame
from reidcli.errors import DatasetError, UsageError
from reidcli.evaluation.arrays import evaluate_arrays
from tests.cli.helpers import run_cli
from tests.data.fake_trees import regdb as fake, write_image


def _rel(frame, folder):
    return [Path(p).relative_to(folder).as_posix() for p in frame["path"]]


def test_trial_one_v2t_exactly(tmp_path):
    folder = fake.build(tmp_path)
    split = data.load("regdb", tmp_path)
    assert (split.name, split.trial, split.num_trials) == ("regdb", 0, 10)
    assert split.eval_rule == "regdb" and split.protocol == "v2t"
    assert split.options == {"direction": "v2t"}
    assert _rel(split.train, folder) == sorted(
        fake.image_relpath(p, m, k) for p in (1, 2) for m in ("visible", "thermal")
        for k in (0, 1))
    assert _rel(split.query, folder) == [fake.image_relpath(p, "visible", k)
                                         for p in (3, 4) for k in (0, 1)]
    assert _rel(split.gallery, folder) == [fake.image_relpath(p, "thermal", k)
                                           for p in (3, 4) for k in (0, 1)]
    assert split.query["pid"].tolist() == [3, 3, 4, 4]
    assert split.query["x_label"].tolist() == [0, 0, 1, 1]      # renumbered in the file
    assert split.query["frame"].tolist() == [30, 31, 40, 41]
    assert set(split.query["camid"]) == {0} and set(split.query["modality"]) == {"visible"}
    assert set(split.gallery["camid"]) == {1} and set(split.gallery["modality"]) == {"infrared"}
    assert sorted(zip(split.train["pid"], split.train["camid"])) == [
        (1, 0), (1, 0), (1, 1), (1, 1), (2, 0), (2, 0), (2, 1), (2, 1)]
    assert set(split.train["split"]) == {"train"} and set(split.gallery["split"]) == {"gallery"}
    for part in (split.train, split.query, split.gallery):
        validate_frame(part)
        assert set(part["dataset"]) == set(part["domain"]) == {"regdb"}
    assert not set(split.train["pid"]) & (set(split.query["pid"]) | set(split.gallery["pid"]))


def test_trial_two_t2v_and_crlf(tmp_path):
    folder = fake.build(tmp_path, "regdb")
    split = data.load("regdb", tmp_path, trial=1, direction="t2v")
    assert split.trial == 1 and split.protocol == "t2v"
    assert set(split.train["pid"]) == {3, 4} and len(split.train) == 8
    assert set(split.query["modality"]) == {"infrared"} and set(split.query["camid"]) == {1}
    assert set(split.gallery["modality"]) == {"visible"} and set(split.gallery["camid"]) == {0}
    assert set(split.query["split"]) == {"query"} and set(split.gallery["split"]) == {"gallery"}
    assert split.query["pid"].tolist() == [1, 1, 2, 2]
    assert _rel(split.query, folder)[0] == "Thermal/1/male_front_t_00010_1.bmp"
    v2t = data.load("regdb", tmp_path, trial=1)
    assert v2t.query["path"].tolist() == split.gallery["path"].tolist()     # roles swapped
    assert v2t.gallery["path"].tolist() == split.query["path"].tolist()
    assert v2t.train["path"].tolist() == split.train["path"].tolist()
    assert (v2t.protocol, v2t.options) == ("v2t", {"direction": "v2t"})
    assert split.options == {"direction": "t2v"}


def test_e5_keeps_everything(tmp_path):
    fake.build(tmp_path)
    split = data.load("regdb", tmp_path)
    q, g = split.query, split.gallery
    d = np.where(q["pid"].to_numpy()[:, None] == g["pid"].to_numpy()[None, :], 0.0, 1.0)
    result = evaluate_arrays(q["pid"], q["camid"], g["pid"], g["camid"], distances=d,
                             protocol=split.eval_rule)
    assert result.num_valid_queries == 4 and result.cmc[0] == 1.0 and result.mAP == 1.0


def test_missing_or_broken_idx(tmp_path):
    folder = fake.build(tmp_path)
    with pytest.raises(DatasetError, match=r"missing file .*idx[/\\]train_visible_3\.txt"):
        data.load("regdb", tmp_path, trial=2)
    with pytest.raises(UsageError, match=r"trial=10 is outside the trials 0\.\.9"):
        data.load("regdb", tmp_path, trial=10)
    with pytest.raises(UsageError, match="direction"):
        data.load("regdb", tmp_path, direction="both")
    missing = folder / fake.image_relpath(4, "thermal", 1)
    missing.unlink()
    with pytest.raises(DatasetError, match=r"test_thermal_1\.txt line 4 lists .*"
                                           r"female_back_t_00041_4\.bmp, which does not exist"):
        data.load("regdb", tmp_path)
    write_image(missing, mode="L")
    idx = folder / "idx" / "train_visible_2.txt"
    text = idx.read_bytes().decode()
    assert "\r\n" in text
    idx.write_text(text.replace(" 0\r\n", "\r\n", 1))
    with pytest.raises(DatasetError, match=r"train_visible_2\.txt line 1 is not "
                                           r"'<relpath> <label>'"):
        data.load("regdb", tmp_path, trial=1)
    idx.write_text(text.replace("Visible/3/", "Thermal/3/", 1))
    with pytest.raises(DatasetError, match=r"train_visible_2\.txt line 1: Thermal/3/.* is not "
                                           r"Visible/<pid>/<name>\.bmp"):
        data.load("regdb", tmp_path, trial=1)
    idx.write_text(text + f"{fake.image_relpath(1, 'visible', 0)} 2\n")
    with pytest.raises(DatasetError, match="person 1 is in both the train and the test"):
        data.load("regdb", tmp_path, trial=1)


def test_folder_resolution(tmp_path):
    folder = fake.build(tmp_path / "a", "regdb")
    assert data.load("regdb", tmp_path / "a").query["path"].iloc[0].startswith(str(folder))
    assert len(data.load("regdb", folder).gallery) == 4          # the folder itself as root
    with pytest.raises(DatasetError, match="no regdb dataset"):
        data.load("regdb", tmp_path / "b")


def test_reid_data_check(capsys, tmp_path):
    folder = fake.build(tmp_path)
    code, out, err = run_cli(capsys, "data", "check", "regdb", "--root", tmp_path,
                             "--trial", "1", "--option", "direction=t2v")
    assert code == 0, err
    assert "t2v" in out and "trial 1 of 10" in out and "2,060 / 206" in out and "≠" in out
    (folder / fake.image_relpath(2, "visible", 0)).unlink()
    code, out, err = run_cli(capsys, "data", "check", "regdb", "--root", tmp_path)
    assert code == 1
    assert str(folder / fake.image_relpath(2, "visible", 0)) in err and "line 3" in err


@pytest.mark.skipif(not os.environ.get("REIDCLI_REAL_DATA"), reason="needs real datasets")
def test_real_counts():
    root = os.environ["REIDCLI_REAL_DATA"]
    for trial in (0, 9):
        split = data.load("regdb", root, trial=trial)
        assert (split.train["camid"] == 0).sum() == (split.train["camid"] == 1).sum() == 2060
        got = {part: (len(getattr(split, part)), getattr(split, part)["pid"].nunique())
               for part in ("train", "query", "gallery")}
        assert got == {"train": (4120, 206), "query": (2060, 206), "gallery": (2060, 206)}
        assert sorted(split.query["x_label"].unique()) == list(range(206))
    from reidcli.data.registry import resolve_dataset_dir
    folder = resolve_dataset_dir("regdb", root)
    assert len(list(folder.glob("Visible/*/*.bmp"))) + len(list(folder.glob(
        "Thermal/*/*.bmp"))) == 8240
