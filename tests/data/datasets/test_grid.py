"""GRID loader on a fake tree (datasets.md §5.8, §7)."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.io

import reidcli.data as data
from reidcli.errors import DatasetError
from tests.data.fake_trees import grid


def test_official_partitions_and_distractors(tmp_path):
    folder = grid.build(tmp_path)
    mat = scipy.io.loadmat(folder / "features_and_partitions.mat")
    for k in (0, 7):
        want = set(mat["trainIdxAll"][0][k][0][0][2][0].astype(int))
        split = data.load("grid", tmp_path, trial=k, expected_train_ids=3)
        assert set(split.train["pid"]) == want and len(split.train) == 6
        assert set(split.query["pid"]) == set(range(1, 7)) - want
        assert set(split.query["camid"]) == {0} and set(split.gallery["camid"]) == {1}
        assert (split.gallery["pid"] == 0).sum() == 3 and len(split.gallery) == 3 + 3
    assert split.num_trials == 10
    assert split.train["x_physical_cam"].between(0, 7).all()


def test_random_protocol_and_errors(tmp_path):
    grid.build(tmp_path)
    split = data.load("grid", tmp_path, protocol="random", expected_train_ids=3, trial=1)
    assert len(split.query) == 3 and (split.gallery["pid"] == 0).sum() == 3
    with pytest.raises(DatasetError, match="expected 10 × 125"):
        data.load("grid", tmp_path)
    other = tmp_path / "b"
    folder = grid.build(other, mat=False)
    with pytest.raises(DatasetError, match="missing file .*features_and_partitions.mat"):
        data.load("grid", other, expected_train_ids=3)
    scipy.io.savemat(folder / "features_and_partitions.mat", {"other": np.zeros(3)})
    with pytest.raises(DatasetError, match="no variable trainIdxAll"):
        data.load("grid", other, expected_train_ids=3)
