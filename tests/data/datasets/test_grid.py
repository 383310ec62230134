"""GRID loader on a fake tree (docs/datasets.md)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import scipy.io

import reidcli.data as data
from reidcli.data.datasets.grid import read_grid
from reidcli.data.records import validate_frame
from reidcli.data.registry import resolve_dataset_dir
from reidcli.errors import DatasetError, UsageError
from tests.cli.helpers import run_cli
from tests.data.fake_trees import grid


def _names(frame):
    return [Path(p).name for p in frame["path"]]


def test_records_parsed_exactly(tmp_path):
    folder = grid.build(tmp_path)
    split = data.load("grid", tmp_path, expected_train_ids=3)
    everything = split.all_records()
    assert len(everything) == 6 + 6 + 3                     # every image used in trial 0
    for row in everything.itertuples():
        name = Path(row.path).name
        assert Path(row.path).parent.parent == folder
        view = Path(row.path).parent.name
        assert row.pid == int(name[:4]) and row.camid == {"probe": 0, "gallery": 1}[view]
        want_cam = grid.camera_of(row.pid, view) if row.pid else int(name.split("_")[1])
        assert row.x_physical_cam == want_cam - 1
        assert row.modality == "visible" and row.dataset == row.domain == "grid"
    assert everything["frame"].isna().all()
    for part in (split.train, split.query, split.gallery):
        validate_frame(part)
        assert part["path"].is_monotonic_increasing


def test_official_partitions(tmp_path):
    folder = grid.build(tmp_path)
    mat = scipy.io.loadmat(folder / "features_and_partitions.mat")
    parts = grid.partitions(6, 3)
    for k in range(10):
        want = set(mat["trainIdxAll"][0][k][0][0][2][0].astype(int))
        assert want == set(parts[k].tolist())
        split = data.load("grid", tmp_path, trial=k, expected_train_ids=3)
        assert split.num_trials == 10 and split.trial == k and split.eval_rule == "market"
        assert split.protocol == "official_mat"
        assert set(split.train["pid"]) == want and len(split.train) == 6
        assert set(split.train["camid"]) == {0, 1} and set(split.train["split"]) == {"train"}
        test = set(range(1, 7)) - want
        assert set(split.query["pid"]) == test and len(split.query) == 3
        assert set(split.query["camid"]) == {0} and set(split.gallery["camid"]) == {1}
        assert set(split.gallery["pid"]) == test | {0} and len(split.gallery) == 3 + 3
        assert (split.gallery["pid"] == 0).sum() == 3            # all distractors, always
        assert not set(split.train["pid"]) & set(split.query["pid"])
        assert not set(split.train["pid"]) & set(split.gallery["pid"])
    assert not (folder / "reidcli_splits").exists()             # fixed partitions: no cache


def test_random_protocol_seeded_and_cached(tmp_path):
    folder = grid.build(tmp_path, persons=8)                   # mat sized for 8 persons/3
    first = [data.load("grid", tmp_path, protocol="random", expected_train_ids=4, trial=t)
             for t in range(10)]
    cache = folder / "reidcli_splits" / "grid_random_n4_seed0.json"
    payload = json.loads(cache.read_text())
    assert len(payload["trials"]) == 10
    assert all(not p.startswith("/") for p in payload["trials"][0]["query"])
    again = [data.load("grid", tmp_path, protocol="random", expected_train_ids=4, trial=t)
             for t in range(10)]
    trains = []
    for a, b in zip(first, again):
        assert a.train["path"].tolist() == b.train["path"].tolist()
        assert a.gallery["path"].tolist() == b.gallery["path"].tolist()
        assert len(a.train) == 8 and a.train["pid"].nunique() == 4
        assert len(a.query) == 4 and len(a.gallery) == 4 + 3
        assert (a.gallery["pid"] == 0).sum() == 3
        assert not set(a.train["pid"]) & (set(a.query["pid"]) | set(a.gallery["pid"]))
        assert set(a.query["pid"]) == set(a.gallery["pid"]) - {0}
        trains.append(tuple(sorted(set(a.train["pid"]))))
    assert len(set(trains)) > 1                                # trials differ
    # same seed from scratch (cache deleted) → same trials; another seed → other trials
    cache.unlink()
    rebuilt = data.load("grid", tmp_path, protocol="random", expected_train_ids=4, trial=3)
    assert rebuilt.train["path"].tolist() == first[3].train["path"].tolist()
    seeds = [tuple(sorted(set(data.load("grid", tmp_path, protocol="random", seed=s,
                                        expected_train_ids=4, trial=0).train["pid"])))
             for s in (1, 2, 3)]
    assert any(s != trains[0] for s in seeds)


def test_wrapper_variants(tmp_path):
    bare = grid.build(tmp_path / "a", wrapper=False)
    assert bare.name == "underground_reid"
    split = data.load("grid", tmp_path / "a", expected_train_ids=3)
    assert split.query["path"].iloc[0].startswith(str(bare))
    assert len(data.load("grid", bare, expected_train_ids=3).gallery) == 6   # folder as root


def test_partition_errors(tmp_path):
    folder = grid.build(tmp_path)
    with pytest.raises(DatasetError, match=r"10 partitions with \[3, .*expected 10 × 125"):
        data.load("grid", tmp_path)
    mat = folder / "features_and_partitions.mat"
    grid.write_mat(mat, grid.partitions(6, 3)[:9])
    with pytest.raises(DatasetError, match="9 partitions"):
        data.load("grid", tmp_path, expected_train_ids=3)
    grid.write_mat(mat, [[1, 2, 9]] * 10)
    with pytest.raises(DatasetError, match="partition 1 of .* lists person 0009"):
        data.load("grid", tmp_path, expected_train_ids=3)
    scipy.io.savemat(mat, {"other": np.zeros(3)})
    with pytest.raises(DatasetError, match=r"no variable trainIdxAll \(has: other\)"):
        data.load("grid", tmp_path, expected_train_ids=3)
    mat.write_bytes(b"not a mat file")
    with pytest.raises(DatasetError, match="cannot read .*features_and_partitions.mat"):
        data.load("grid", tmp_path, expected_train_ids=3)
    mat.unlink()
    with pytest.raises(DatasetError, match=r"missing file .*features_and_partitions\.mat"):
        data.load("grid", tmp_path, expected_train_ids=3)
    # the random protocol needs no mat
    assert len(data.load("grid", tmp_path, protocol="random", expected_train_ids=3).query) == 3
    with pytest.raises(UsageError, match="protocol"):
        data.load("grid", tmp_path, protocol="half")
    with pytest.raises(UsageError, match="trial=10 is outside the trials 0..9"):
        data.load("grid", tmp_path, protocol="random", expected_train_ids=3, trial=10)


def test_layout_errors(tmp_path):
    folder = grid.build(tmp_path)
    bad = folder / "gallery" / "0003_9_1_2_3_4.jpeg"          # camera 9 does not exist
    bad.write_bytes(b"")
    with pytest.raises(DatasetError, match=r"malformed image name .*0003_9_1_2_3_4\.jpeg"):
        data.load("grid", tmp_path, expected_train_ids=3)
    bad.unlink()
    (folder / "probe" / "0000_1_5_5_5_5.jpeg").write_bytes(b"")
    with pytest.raises(DatasetError, match=r"0000_1_5_5_5_5\.jpeg is in probe/"):
        data.load("grid", tmp_path, expected_train_ids=3)
    with pytest.raises(DatasetError, match="no grid dataset"):
        data.load("grid", tmp_path / "nowhere")


def test_reid_data_check(capsys, tmp_path):
    folder = grid.build(tmp_path)
    code, out, err = run_cli(capsys, "data", "check", "grid", "--root", tmp_path,
                             "--option", "expected_train_ids=3")
    assert code == 0, err
    assert "official_mat" in out and "900 / 126" in out and "≠" in out
    assert "warning" in out and "3rd field" in out
    (folder / "features_and_partitions.mat").unlink()
    code, out, err = run_cli(capsys, "data", "check", "grid", "--root", tmp_path)
    assert code == 1 and str(folder / "features_and_partitions.mat") in err


def test_info():
    info = data.info("grid")
    assert info.options == {"protocol": "official_mat", "seed": 0, "expected_train_ids": 125}
    assert info.counts == {"train": (250, 125), "query": (125, 125), "gallery": (900, 126)}
    assert info.candidates[:2] == ("grid/underground_reid", "underground_reid")


@pytest.mark.skipif(not os.environ.get("REIDCLI_REAL_DATA"), reason="needs real datasets")
def test_real_counts():
    root = os.environ["REIDCLI_REAL_DATA"]
    for protocol in ("official_mat", "random"):
        split = data.load("grid", root, protocol=protocol, trial=4)
        got = {part: (len(getattr(split, part)), getattr(split, part)["pid"].nunique())
               for part in ("train", "query", "gallery")}
        assert got == {"train": (250, 125), "query": (125, 125), "gallery": (900, 126)}
    everything = read_grid(resolve_dataset_dir("grid", root))
    assert (everything["camid"] == 0).sum() == 250 and (everything["camid"] == 1).sum() == 1025
    assert (everything["pid"] == 0).sum() == 775 and everything["pid"].nunique() == 251
    assert everything["x_physical_cam"].nunique() == 8
