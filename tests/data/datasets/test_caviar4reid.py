"""CAVIAR4REID loader on fake trees (docs/datasets.md; WARCA paper Sect. 4.1)."""
from __future__ import annotations

import os

import pytest

import reidcli.data as data
from reidcli.data.datasets.caviar4reid import read_caviar4reid
from reidcli.errors import DatasetError, UsageError
from tests.cli.helpers import run_cli
from tests.data.fake_trees import warca_sets as trees

COUNTS = trees.image_counts(trees.CAVIAR_IMAGES)


def test_parse_pids_numbers_assumed_cameras(tmp_path):
    folder = trees.build_caviar4reid(tmp_path)
    records = read_caviar4reid(folder)
    assert len(records) == sum(COUNTS.values())
    assert records["pid"].value_counts().to_dict() == COUNTS
    row = records[records["path"].str.endswith("0004014.jpg")].iloc[0]
    assert (row["pid"], row["frame"], row["camid"]) == (4, 14, 1)
    assert (records["camid"] == (records["frame"] > 10).astype(int)).all()
    one_camera = records[records["pid"].isin([2, 5])]
    assert set(one_camera["camid"]) == {0}


def test_warca_probe_single_defaults(tmp_path):
    folder = trees.build_caviar4reid(tmp_path)
    split = data.load("caviar", tmp_path, test_ids=3, trial=23)
    assert split.name == "caviar4reid" and split.protocol == "warca"
    assert split.num_trials == 10 * 10 and split.eval_kwargs == {"split": 2, "draw": 3}
    assert split.options["warca_draw"] == "probe_single" and split.options["draws"] == 10
    assert split.eval_rule == "single_shot_any"                  # same_camera=keep
    trees.check_probe_single_trial(split, COUNTS, 3)
    stored = trees.cached_trials(folder, "caviar4reid_warca_probe_single_p3_d10_seed0")
    assert len(stored) == 100
    assert all(t["train"] == stored[20]["train"] for t in stored[20:30])   # one split
    assert len({tuple(t["query"]) for t in stored[20:30]}) > 1            # draws differ
    assert len({tuple(t["train"]) for t in stored[::10]}) > 1             # splits differ
    drop = data.load("caviar4reid", tmp_path, test_ids=3, draws=2, same_camera="drop")
    assert drop.eval_rule == "market" and drop.num_trials == 20


def test_reproducible_per_seed(tmp_path):
    a = trees.build_caviar4reid(tmp_path / "a")
    b = trees.build_caviar4reid(tmp_path / "b")
    first = data.load("caviar4reid", tmp_path / "a", test_ids=4, draws=2, trial=5)
    again = data.load("caviar4reid", tmp_path / "b", test_ids=4, draws=2, trial=5)
    assert [p.replace(str(b), str(a)) for p in again.query["path"]] == \
        first.query["path"].tolist()
    key = "caviar4reid_warca_probe_single_p4_d2_seed0"
    assert trees.cached_trials(a, key) == trees.cached_trials(b, key)
    data.load("caviar4reid", tmp_path / "b", test_ids=4, draws=2, seed=5)
    assert trees.cached_trials(b, key.replace("seed0", "seed5")) != trees.cached_trials(b, key)


def test_paper_defaults_and_errors(tmp_path):
    info = data.info("caviar4reid")
    assert info.options["test_ids"] == 36 and info.counts["query"] == (36, 36)
    assert info.options["protocol"] == "warca" and info.options["seed"] == 0
    folder = trees.build_caviar4reid(tmp_path)
    with pytest.raises(DatasetError, match="asked 36 test ids .* only 8 persons"):
        data.load("caviar4reid", tmp_path)                    # paper P on a tiny tree
    with pytest.raises(UsageError, match="protocol='half'"):
        data.load("caviar4reid", tmp_path, test_ids=3, protocol="half")
    with pytest.raises(DatasetError, match="no caviar4reid dataset"):
        data.load("caviar4reid", tmp_path / "nothing")
    for bad in ("0003_01.jpg", "0003021.jpg", "0000001.jpg", "0003000.jpg"):
        path = trees.write_image(folder / bad)
        with pytest.raises(DatasetError, match=rf"malformed image name .*{bad}"):
            data.load("caviar4reid", tmp_path, test_ids=3)
        path.unlink()


def test_cli_info_and_check(tmp_path, capsys):
    code, out, err = run_cli(capsys, "data", "info", "caviar")
    assert code == 0, err
    assert "lorisbazzani" in out and "CAVIARa" in out and "research" in out
    trees.build_caviar4reid(tmp_path)
    code, out, err = run_cli(capsys, "data", "check", "caviar4reid", "--root", tmp_path,
                             "--option", "test_ids=3")
    assert code == 0, err
    assert "warca, trial 0 of 100" in out and "36 / 36 ≠" in out and "camera" in out


@pytest.mark.skipif(not os.environ.get("REIDCLI_REAL_DATA"), reason="needs real CAVIAR4REID")
def test_real_counts():
    root = os.environ["REIDCLI_REAL_DATA"]
    records = read_caviar4reid(data.registry.resolve_dataset_dir("caviar4reid", root))
    assert (len(records), records["pid"].nunique()) == (1220, 72)
    split = data.load("caviar4reid", root)
    assert (len(split.query), split.query["pid"].nunique()) == \
        data.info("caviar4reid").counts["query"]
