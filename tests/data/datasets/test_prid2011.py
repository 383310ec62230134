"""PRID2011 single-shot loader on fake trees (docs/datasets.md)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import reidcli.data as data
from reidcli.data import trials as trial_builders
from reidcli.data.datasets.prid2011 import read_prid2011
from reidcli.errors import DatasetError
from tests.cli.helpers import run_cli
from tests.data.fake_trees import prid2011

OPTS = {"test_ids": 3, "shared_ids": 6}     # fake tree: 6 shared, 2 cam_a-only, 4 cam_b-only
CAM_B_ONLY = {20007, 20008, 20009, 20010}
CAM_A_ONLY = {10007, 10008}


def _ids(frame) -> set[int]:
    return set(frame["pid"].tolist())


def _cached(folder: Path, key: str) -> list[dict]:
    return json.loads((folder / "reidcli_splits" / f"{key}.json").read_text())["trials"]


def test_parse_shared_and_single_camera_persons(tmp_path):
    folder = prid2011.build(tmp_path)
    records = read_prid2011(folder, shared_ids=6)
    assert len(records) == 8 + 10
    assert _ids(records) == set(range(1, 7)) | CAM_A_ONLY | CAM_B_ONLY
    row = records[records["path"].str.endswith("cam_b/person_0009.png")].iloc[0]
    assert (row["pid"], row["camid"], row["x_native_pid"]) == (20009, 1, 9)
    assert not records["path"].str.contains("multi_shot").any()


@pytest.mark.parametrize("wrapper", [True, False])
def test_dg_gallery_adds_gallery_only_persons(tmp_path, wrapper):
    folder = prid2011.build(tmp_path, wrapper=wrapper)
    split = data.load("prid", tmp_path, trial=2, **OPTS)
    assert split.name == "prid2011" and split.protocol == "dg" and split.num_trials == 10
    assert len(split.train) == 0 and len(split.query) == 3
    assert set(split.query["camid"]) == {0} and set(split.gallery["camid"]) == {1}
    assert len(split.gallery) == 3 + 4 and CAM_B_ONLY <= _ids(split.gallery)
    assert _ids(split.query) <= set(range(1, 7)) and _ids(split.query) < _ids(split.gallery)
    used = {p for t in _cached(folder, "prid2011_dg_p3_shared6_seed0")
            for p in t["query"] + t["gallery"] + t["train"]}
    assert not any(p.startswith("cam_a/person_000" + n) for p in used for n in "78")


def test_half_protocol(tmp_path):
    prid2011.build(tmp_path)
    dg = data.load("prid2011", tmp_path, trial=4, **OPTS)
    half = data.load("prid2011", tmp_path, trial=4, protocol="half", **OPTS)
    assert half.protocol == "half" and len(half.train) == 6
    assert _ids(half.train) == set(range(1, 7)) - _ids(half.query)
    assert set(half.train["camid"]) == {0, 1} and not _ids(half.train) & CAM_A_ONLY
    assert half.query["path"].tolist() == dg.query["path"].tolist()     # same test persons
    assert half.gallery["path"].tolist() == dg.gallery["path"].tolist()


def test_deterministic_and_cached(tmp_path, monkeypatch):
    a, b = prid2011.build(tmp_path / "a"), prid2011.build(tmp_path / "b")
    first = data.load("prid2011", tmp_path / "a", trial=5, **OPTS)
    data.load("prid2011", tmp_path / "b", **OPTS)
    key = "prid2011_dg_p3_shared6_seed0"
    assert _cached(a, key) == _cached(b, key)
    assert len({tuple(t["query"]) for t in _cached(a, key)}) > 1
    data.load("prid2011", tmp_path / "b", seed=4, **OPTS)
    assert _cached(b, key.replace("seed0", "seed4")) != _cached(b, key)
    monkeypatch.setattr(trial_builders, "protocol_rng", None)
    again = data.load("prid2011", tmp_path / "a", trial=5, **OPTS)
    assert again.query["path"].tolist() == first.query["path"].tolist()
    assert again.gallery["path"].tolist() == first.gallery["path"].tolist()


def test_errors_and_check(tmp_path, capsys):
    folder = prid2011.build(tmp_path)
    code, out, err = run_cli(capsys, "data", "check", "prid", "--root", tmp_path,
                             "--option", "test_ids=3", "--option", "shared_ids=6")
    assert code == 0, err
    assert "649 / 649 ≠" in out and "gallery" in out and "warning" in out
    with pytest.raises(DatasetError, match=r"cam_a/person_0009\.png is missing"):
        data.load("prid2011", tmp_path, test_ids=3)           # default shared_ids=200
    with pytest.raises(DatasetError, match="asked 7 test ids .* only 6 shared persons"):
        data.load("prid2011", tmp_path, test_ids=7, shared_ids=6)
    (folder / "cam_b" / "person_0002.png").unlink()
    code, out, err = run_cli(capsys, "data", "check", "prid2011", "--root", tmp_path,
                             "--option", "test_ids=3", "--option", "shared_ids=6")
    assert code == 1 and str(folder / "cam_b" / "person_0002.png") in err


@pytest.mark.skipif(not os.environ.get("REIDCLI_REAL_DATA"), reason="needs real PRID2011")
def test_real_counts():
    root = os.environ["REIDCLI_REAL_DATA"]
    split = data.load("prid2011", root)
    for part, (images, ids) in data.info("prid2011").counts.items():
        frame = getattr(split, part)
        assert (len(frame), frame["pid"].nunique()) == (images, ids)
    records = read_prid2011(data.registry.resolve_dataset_dir("prid2011", root))
    assert records["camid"].value_counts().to_dict() == {0: 385, 1: 749}
    assert records["pid"].nunique() == 934
