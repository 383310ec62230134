"""MSMT17 loader on fake V1/V2 trees (datasets.md §5.3, §7)."""
from __future__ import annotations

import pytest

import reidcli.data as data
from reidcli.errors import DatasetError
from tests.data.fake_trees import msmt17


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_lists_scopes_and_auto_version(tmp_path, version):
    msmt17.build(tmp_path, version)
    split = data.load("msmt17", tmp_path)
    assert split.options["version"] == version
    assert len(split.train) == 3 and len(split.val) == 1
    assert len(split.query) == 2 and len(split.gallery) == 3
    assert set(split.train["x_pid_scope"]) == {"train"} and set(split.query["x_pid_scope"]) == \
        {"test"}
    assert sorted(split.query["pid"]) == [1, 2] and sorted(split.query["x_native_pid"]) == [0, 1]
    assert sorted(split.gallery["camid"]) == [4, 5, 7]
    assert split.train["x_date_time"].iloc[0] == "0303morning"
    merged = data.load("msmt17", tmp_path, train_includes_val=True)
    assert len(merged.train) == 4 and len(merged.val) == 0


def test_missing_image_jpeg_fallback_and_bad_label(tmp_path):
    folder = msmt17.build(tmp_path)
    listed = folder / "test" / "0001" / "0001_001_08_0113noon_0041_1.jpg"
    listed.rename(listed.with_suffix(".jpeg"))
    assert any(p.endswith(".jpeg") for p in data.load("msmt17", tmp_path).gallery["path"])
    listed.with_suffix(".jpeg").unlink()
    with pytest.raises(DatasetError, match=r"list_gallery.txt line \d lists .*0041_1.jpg"):
        data.load("msmt17", tmp_path)
    other = tmp_path / "o"
    folder = msmt17.build(other)
    text = (folder / "list_query.txt").read_text().replace(".jpg 1", ".jpg 7")
    (folder / "list_query.txt").write_text(text)
    with pytest.raises(DatasetError, match="label 7 does not match"):
        data.load("msmt17", other)
