"""SYSU-MM01, RegDB and Person30K loaders on fake trees (datasets.md §5.11-5.14, §7)."""
from __future__ import annotations

import numpy as np
import pytest

import reidcli.data as data
from reidcli.evaluation.arrays import evaluate_arrays
from reidcli.errors import DatasetError, UsageError
from tests.data.fake_trees import vi_sets


def test_sysu_splits_modalities_and_gallery_sampling(tmp_path):
    vi_sets.sysu(tmp_path)
    split = data.load("sysu", tmp_path, trial=0)
    assert split.eval_rule == "sysu" and split.num_trials == 10
    assert set(split.train["pid"]) == {1, 2, 3}
    assert set(split.query["camid"] + 1) <= {3, 6} and set(split.query["modality"]) == \
        {"infrared"}
    assert len(split.query) == 15                    # IR images of test ids 4..7
    assert set(split.gallery["camid"] + 1) <= {1, 2, 4, 5}
    assert set(split.gallery["modality"]) == {"visible"}
    # single-shot: one image per (id, gallery camera)
    assert not split.gallery.duplicated(["pid", "camid"]).any() and len(split.gallery) == 9
    again = data.load("sysu", tmp_path, trial=0)
    assert again.gallery["path"].tolist() == split.gallery["path"].tolist()
    other = [data.load("sysu", tmp_path, trial=t).gallery["path"].tolist() for t in range(1, 4)]
    assert any(o != split.gallery["path"].tolist() for o in other)
    indoor = data.load("sysu", tmp_path, mode="indoor", shots=10)
    assert set(indoor.gallery["camid"] + 1) <= {1, 2} and len(indoor.gallery) == 15
    assert len(data.load("sysu", tmp_path, train_includes_val=False).train["pid"].unique()) == 2


def test_sysu_cam3_queries_skip_cam2_gallery():
    """E4 on a hand-made matrix: a cam-3 query's cam-2 match is removed, a cam-6 one kept."""
    q_pids, q_cams = np.array([4, 4]), np.array([2, 5])          # cams 3 and 6 (0-based)
    g_pids, g_cams = np.array([4, 5, 4]), np.array([1, 0, 3])    # cams 2, 1, 4
    d = np.array([[0.1, 0.2, 0.3], [0.1, 0.2, 0.3]])
    result = evaluate_arrays(q_pids, q_cams, g_pids, g_cams, distances=d, protocol="sysu")
    # query 0 loses the cam-2 match → its positive is at rank 2; query 1 finds it at rank 1
    assert result.cmc[0] == pytest.approx(0.5) and result.cmc[1] == pytest.approx(1.0)


def test_sysu_errors(tmp_path):
    folder = vi_sets.sysu(tmp_path)
    with pytest.raises(UsageError, match="mode"):
        data.load("sysu", tmp_path, mode="outdoor")
    (folder / "exp" / "test_id.txt").write_text("4;5")
    with pytest.raises(DatasetError, match="test_id.txt holds something other"):
        data.load("sysu", tmp_path)


def test_regdb_trials_directions_and_labels(tmp_path):
    vi_sets.regdb(tmp_path)
    v2t = data.load("regdb", tmp_path, trial=0)
    assert v2t.eval_rule == "regdb" and v2t.num_trials == 10
    assert set(v2t.query["modality"]) == {"visible"} and set(v2t.gallery["camid"]) == {1}
    assert set(v2t.train["pid"]) == {1, 2} and set(v2t.query["pid"]) == {3, 4}
    assert sorted(set(v2t.query["x_label"])) == [0, 1] and len(v2t.train) == 8
    t2v = data.load("regdb", tmp_path, trial=1, direction="t2v")
    assert set(t2v.query["modality"]) == {"infrared"} and set(t2v.query["pid"]) == {1, 2}
    with pytest.raises(DatasetError, match="missing file .*train_visible_3.txt"):
        data.load("regdb", tmp_path, trial=2)


def test_regdb_missing_listed_image(tmp_path):
    folder = vi_sets.regdb(tmp_path)
    (folder / "Thermal" / "4" / "male_front_t_00041_4.bmp").unlink()
    with pytest.raises(DatasetError, match=r"test_thermal_1.txt line \d+ lists"):
        data.load("regdb", tmp_path)


def test_person30k_manifest_rule(tmp_path):
    vi_sets.person30k(tmp_path)
    split = data.load("person30k", tmp_path)
    assert len(split.train) == 3 and set(split.train["domain"]) == {"site1", "site2"}
    assert split.query["pid"].tolist() == [10, 10]          # pid 11 has one camera only
    assert sorted(split.query["camid"]) == [0, 2] and len(split.gallery) == 2
    b = data.load("person30k", tmp_path, test_subset="B")
    assert len(b.query) == 2 and len(b.gallery) == 0


def test_person30k_bad_manifest(tmp_path):
    folder = vi_sets.person30k(tmp_path)
    text = (folder / "manifest.csv").read_text().replace("scenario,", "kind,")
    (folder / "manifest.csv").write_text(text)
    with pytest.raises(DatasetError, match="lacks column\\(s\\) scenario"):
        data.load("person30k", tmp_path)
