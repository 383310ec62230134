"""CUHK02 loader on fake trees (docs/datasets.md)."""
from __future__ import annotations

import os

import pytest

import reidcli.data as data
from reidcli.data.datasets.cuhk02 import read_cuhk02
from reidcli.errors import DatasetError, UsageError
from tests.cli.helpers import run_cli
from tests.data.fake_trees import cuhk02


def test_parse_pids_and_cameras_per_pair(tmp_path):
    folder = cuhk02.build(tmp_path)
    records = read_cuhk02(folder)
    assert len(records) == sum(cuhk02.IDS_PER_PAIR) * 4
    row = records[records["path"].str.endswith("P3/cam2/002_21.png")].iloc[0]
    assert (row["pid"], row["camid"], row["x_pair"]) == (30002, 5, 3)
    assert sorted(set(records["camid"])) == list(range(10))
    assert records.groupby("x_pair")["pid"].nunique().tolist() == list(cuhk02.IDS_PER_PAIR)
    assert records["frame"].isna().all()


@pytest.mark.parametrize("wrapper", [True, False])
def test_p5_test_protocol(tmp_path, wrapper):
    cuhk02.build(tmp_path, wrapper=wrapper)
    split = data.load("cuhk02", tmp_path)
    assert split.protocol == "p5_test" and split.num_trials == 1 and split.eval_rule == "market"
    assert set(split.query["camid"]) == {8} and set(split.gallery["camid"]) == {9}
    assert set(split.query["pid"]) == set(split.gallery["pid"]) == {50001, 50002, 50003}
    assert len(split.query) == len(split.gallery) == 6
    assert len(split.train) == (3 + 2 + 2 + 2) * 4 and split.train["pid"].max() < 50000
    assert split.train["pid"].nunique() == 9 and set(split.train["split"]) == {"train"}
    assert set(split.query["split"]) == {"query"}


def test_all_train_and_errors(tmp_path, capsys):
    folder = cuhk02.build(tmp_path)
    everything = data.load("cuhk02", tmp_path, protocol="all_train")
    assert len(everything.train) == 12 * 4 and len(everything.query) == 0
    assert everything.train["pid"].nunique() == 12
    with pytest.raises(UsageError, match="protocol='p1_test'"):
        data.load("cuhk02", tmp_path, protocol="p1_test")
    with pytest.raises(UsageError, match="unknown option"):
        data.load("cuhk02", tmp_path, seed=1)
    code, out, err = run_cli(capsys, "data", "check", "cuhk02", "--root", tmp_path)
    assert code == 0, err
    assert "6,308 / 1,577 ≠" in out and "7,267" in out
    (folder / "P2" / "cam1" / "x1.png").write_bytes(b"x")
    with pytest.raises(DatasetError, match=r"malformed image name .*P2/cam1/x1\.png"):
        data.load("cuhk02", tmp_path)
    (folder / "P2" / "cam1" / "x1.png").unlink()
    (folder / "P4" / "cam2").rename(folder / "P4" / "camB")
    code, out, err = run_cli(capsys, "data", "check", "cuhk02", "--root", tmp_path)
    assert code == 1 and str(folder / "P4" / "cam2") in err


@pytest.mark.skipif(not os.environ.get("REIDCLI_REAL_DATA"), reason="needs real CUHK02")
def test_real_counts():
    split = data.load("cuhk02", os.environ["REIDCLI_REAL_DATA"])
    for part, (images, ids) in data.info("cuhk02").counts.items():
        frame = getattr(split, part)
        assert (len(frame), frame["pid"].nunique()) == (images, ids)
