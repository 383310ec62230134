"""CUHK03 loader on a fake v7.3 mat (datasets.md §5.4, §7)."""
from __future__ import annotations

import h5py
import numpy as np
import pytest
from PIL import Image

import reidcli.data as data
from reidcli.errors import DatasetError, UsageError
from tests.data.fake_trees import cuhk03


def test_extraction_names_and_pixels(tmp_path):
    folder = cuhk03.build(tmp_path)
    split = data.load("cuhk03", tmp_path)                       # new protocol, detected
    images = sorted(p.name for p in (folder / "images_detected").iterdir())
    assert "1_001_1_01.png" in images and "1_002_2_10.png" not in images   # empty cell
    assert len(images) == 5 * 10 - 1 and not (folder / "images_detected.partial").exists()
    with h5py.File(folder / "cuhk03_release" / "cuhk-03.mat") as h5:
        table = h5[h5["detected"][0][0]][()].T
        want = h5[table[0, 0]][()].T
    got = np.asarray(Image.open(folder / "images_detected" / "1_001_1_01.png"))
    np.testing.assert_array_equal(got, want)
    assert len(split.train) == 19 and set(split.train["pid"]) == {1, 2}
    assert set(split.query["pid"]) == {3, 4, 5} and len(split.query) == 6
    assert set(split.query["camid"]) == {0, 1}
    assert len(split.gallery) == 30 - 6 and split.eval_rule == "market"


def test_classic_protocol_trials(tmp_path):
    cuhk03.build(tmp_path)
    split = data.load("cuhk03", tmp_path, protocol="classic", subset="labeled", trial=1)
    assert split.num_trials == 2 and split.eval_rule == "cuhk03_sgs"
    assert set(split.query["pid"]) == {2001, 1003}
    assert split.query["path"].tolist() == split.gallery["path"].tolist()
    assert not set(split.train["pid"]) & {2001, 1003} and split.eval_kwargs["n_repeats"] == 10
    assert set(split.query["frame"]) == set(range(1, 11))


def test_errors(tmp_path):
    folder = cuhk03.build(tmp_path)
    with pytest.raises(UsageError, match="subset"):
        data.load("cuhk03", tmp_path, subset="both")
    (folder / "cuhk03_new_protocol_config_labeled.mat").unlink()
    with pytest.raises(DatasetError, match="missing file .*config_labeled.mat"):
        data.load("cuhk03", tmp_path, subset="labeled")
    with pytest.raises(DatasetError, match="no cuhk03 dataset"):
        data.load("cuhk03", tmp_path / "elsewhere")
