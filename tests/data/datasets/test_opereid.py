"""OPeRID loader (toolkit layout, unconfirmed) on fake trees (docs/datasets.md; WARCA paper
Sect. 4.1)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

import reidcli.data as data
from reidcli.data.datasets.opereid import read_opereid
from reidcli.errors import DatasetError
from tests.cli.helpers import run_cli
from tests.data.fake_trees import warca_sets as trees

COUNTS = trees.image_counts(trees.OPEREID_IMAGES)
SINGLE = [pid for pid, n in COUNTS.items() if n == 1]


def test_parse_recursive_any_suffix(tmp_path):
    folder = trees.build_opereid(tmp_path)
    (folder / ".hidden").mkdir()
    trees.write_image(folder / ".hidden" / "junk.png")       # hidden folders are skipped
    records = read_opereid(folder)
    assert len(records) == sum(COUNTS.values())
    assert records["pid"].value_counts().to_dict() == COUNTS
    expected = sorted(cam - 1 for shots in trees.OPEREID_IMAGES.values() for _, cam, _ in shots)
    assert sorted(records["camid"]) == expected
    assert {Path(p).suffix for p in records["path"]} == {".png", ".jpg", ".bmp"}
    row = records[records["path"].str.endswith("b/deep/002_4_0001.bmp")].iloc[0]
    assert (row["pid"], row["camid"]) == (2, 3)


def test_warca_probe_single(tmp_path):
    folder = trees.build_opereid(tmp_path)
    split = data.load("operid", tmp_path, test_ids=3, draws=4, trial=9)
    assert split.name == "opereid" and split.num_trials == 40
    assert split.eval_kwargs == {"split": 2, "draw": 1} and split.eval_rule == "single_shot_any"
    trees.check_probe_single_trial(split, COUNTS, 3)
    stored = trees.cached_trials(folder, "opereid_warca_probe_single_p3_d4_seed0")
    single_names = [f"{pid:03d}_{cam}_0000.{suffix}" for pid in SINGLE
                    for _, cam, suffix in trees.OPEREID_IMAGES[pid]]
    trees.check_single_image_never_tests(stored, single_names)
    assert any("/" in p for t in stored for p in t["query"])   # relative paths keep sub-folders
    again = data.load("opereid", tmp_path, test_ids=3, draws=4, trial=9)
    assert again.query["path"].tolist() == split.query["path"].tolist()
    other = trees.build_opereid(tmp_path / "copy")
    data.load("opereid", tmp_path / "copy", test_ids=3, draws=4)
    assert trees.cached_trials(other, "opereid_warca_probe_single_p3_d4_seed0") == stored


def test_paper_defaults_and_errors(tmp_path):
    info = data.info("opereid")
    assert info.options["test_ids"] == 119 and info.counts["query"] == (119, 119)
    assert info.options["same_camera"] == "keep" and info.unconfirmed
    folder = trees.build_opereid(tmp_path)
    with pytest.raises(DatasetError, match="asked 119 test ids"):
        data.load("opereid", tmp_path)
    with pytest.raises(DatasetError, match="no opereid dataset"):
        data.load("opereid", tmp_path / "nothing")
    for bad in ("a/001_7_0.png", "b/001-2-0.jpg", "a/000_1_0.png", "a/001_0_0.png",
                "b/deep/IMG_0001.bmp"):
        path = trees.write_image(folder / bad)
        with pytest.raises(DatasetError, match=rf"malformed image name .*{bad}") as err:
            data.load("opereid", tmp_path, test_ids=3)
        message = str(err.value)
        assert "\n" not in message and "<pid>_<cam>_<anything>" in message
        assert "reid store import" in message
        path.unlink()


def test_cli_info_and_error(tmp_path, capsys):
    code, out, err = run_cli(capsys, "data", "info", "opereid")
    assert code == 0, err
    assert "cbsr.ia.ac.cn" in out and "licence agreement" in out
    folder = trees.build_opereid(tmp_path)
    trees.write_image(folder / "a" / "person1.png")
    code, out, err = run_cli(capsys, "data", "check", "opereid", "--root", tmp_path,
                             "--option", "test_ids=3")
    assert code == 1 and str(folder / "a" / "person1.png") in err


@pytest.mark.skipif(not os.environ.get("REIDCLI_REAL_DATA"), reason="needs real OPeRID")
def test_real_counts():
    root = os.environ["REIDCLI_REAL_DATA"]
    records = read_opereid(data.registry.resolve_dataset_dir("opereid", root))
    assert (len(records), records["pid"].nunique(), records["camid"].nunique()) == \
        (7413, 200, 6)
