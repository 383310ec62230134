"""CUHK03 loader on a fake v7.3 mat (docs/datasets.md)."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import reidcli.data as data
from reidcli.data.datasets import cuhk03 as loader
from reidcli.data.records import validate_frame
from reidcli.errors import DatasetError, UsageError
from tests.cli.helpers import run_cli
from tests.data.fake_trees import cuhk03


def _names(frame):
    return [Path(p).name for p in frame["path"]]


def _partials(folder: Path):
    return [p.name for p in folder.iterdir() if loader.PARTIAL in p.name]


def test_extraction_names_pixels_and_defaults(tmp_path):
    folder = cuhk03.build(tmp_path)
    split = data.load("cuhk03", tmp_path)                        # new protocol, detected
    assert split.options == {"subset": "detected", "protocol": "new"}
    images = sorted(os.listdir(folder / "images_detected"))
    assert images == sorted(cuhk03.image_names("detected")) and len(images) == 49
    assert "1_001_1_01.png" in images and "2_002_2_10.png" in images
    assert "1_002_2_10.png" not in images                        # the empty cell is skipped
    assert not (folder / "images_labeled").exists() and not _partials(folder)
    assert (folder / "images_detected").stat().st_mode & 0o777 == 0o755
    for name, (pair, person, col) in (("1_001_1_01.png", (1, 1, 1)),
                                      ("2_001_2_07.png", (2, 1, 7))):
        got = np.asarray(Image.open(folder / "images_detected" / name))
        assert got.shape == (cuhk03.HEIGHT, cuhk03.WIDTH, 3)     # H×W×3, storage transposed
        np.testing.assert_array_equal(got, cuhk03.pixel_image("detected", pair, person, col))
    labeled = data.load("cuhk03", tmp_path, subset="labeled")
    assert len(os.listdir(folder / "images_labeled")) == 50
    got = np.asarray(Image.open(labeled.train["path"].iloc[0]))
    np.testing.assert_array_equal(got, cuhk03.pixel_image("labeled", 1, 1, 1))


@pytest.mark.parametrize("subset,n_train", [("detected", 19), ("labeled", 20)])
def test_new_protocol(tmp_path, subset, n_train):
    cuhk03.build(tmp_path)
    split = data.load("cuhk03", tmp_path, subset=subset)
    assert split.eval_rule == "market" and split.protocol == "new" and split.num_trials == 1
    assert len(split.train) == n_train and sorted(split.train["pid"].unique()) == [1, 2]
    assert sorted(split.query["pid"]) == [3, 3, 4, 4, 5, 5]     # mat labels, not pair*1000
    assert _names(split.query) == ["1_003_1_01.png", "1_003_2_06.png", "2_001_1_01.png",
                                   "2_001_2_06.png", "2_002_1_01.png", "2_002_2_06.png"]
    assert split.query["camid"].tolist() == [0, 1] * 3
    assert len(split.gallery) == 24 and set(split.gallery["pid"]) == {3, 4, 5}
    assert not set(split.train["pid"]) & set(split.gallery["pid"])
    for part in (split.train, split.query, split.gallery):
        validate_frame(part)
        views = [int(n.split("_")[2]) - 1 for n in _names(part)]
        assert part["camid"].tolist() == views                    # camId - 1
        assert part["frame"].tolist() == [int(n[8:10]) for n in _names(part)]
        assert part["path"].is_monotonic_increasing
    assert set(split.train["x_pair"]) == {1} and set(split.gallery["x_pair"]) == {1, 2}


def test_classic_protocol_trials(tmp_path):
    folder = cuhk03.build(tmp_path)
    first = data.load("cuhk03", tmp_path, protocol="classic")
    assert first.num_trials == 2 and first.trial == 0 and first.eval_rule == "cuhk03_sgs"
    assert first.eval_kwargs == {"n_repeats": 10} and first.protocol == "classic"
    assert sorted(first.query["pid"].unique()) == [1001, 1002] and len(first.query) == 19
    split = data.load("cuhk03", tmp_path, protocol="classic", subset="labeled", trial=1)
    assert sorted(split.query["pid"].unique()) == [1003, 2001] and len(split.query) == 20
    assert split.query["path"].tolist() == split.gallery["path"].tolist()
    assert sorted(split.train["pid"].unique()) == [1001, 1002, 2002] and len(split.train) == 30
    assert set(split.query["frame"]) == set(range(1, 11)) and set(split.query["camid"]) == {0, 1}
    again = data.load("cuhk03", folder, protocol="classic", subset="labeled", trial=1)
    assert again.train["path"].tolist() == split.train["path"].tolist()
    with pytest.raises(UsageError, match="trial=2 is outside the trials 0..1"):
        data.load("cuhk03", tmp_path, protocol="classic", trial=2)


def test_classic_split_feeds_e2(tmp_path):
    from reidcli.evaluation.arrays import evaluate_arrays
    from reidcli.evaluation.engine import EvalOptions

    cuhk03.build(tmp_path)
    split = data.load("cuhk03", tmp_path, protocol="classic", subset="labeled", trial=1)
    q, g = split.query, split.gallery
    same = q["pid"].to_numpy()[:, None] == g["pid"].to_numpy()[None, :]
    # every other identity is closer than the true one: the sampled true match is at rank 2
    dist = np.where(same, 0.5, 0.1).astype(np.float32)
    res = evaluate_arrays(q["pid"], q["camid"], g["pid"], g["camid"], distances=dist,
                          protocol=split.eval_rule,
                          options=EvalOptions(max_rank=2,
                                              sgs_repeats=split.eval_kwargs["n_repeats"]))
    assert res.num_valid_queries == 20 and res.mAP is None
    np.testing.assert_allclose(res.cmc[:2], [0.0, 1.0])


def test_interrupted_extraction_never_looks_complete(tmp_path, monkeypatch):
    folder = cuhk03.build(tmp_path)
    stale = folder / f"images_detected{loader.PARTIAL}999999999-x"      # dead process
    stale.mkdir()
    (stale / "1_001_1_01.png").write_bytes(b"")
    calls = []
    real_save = Image.Image.save

    def flaky_save(self, *args, **kwargs):
        calls.append(1)
        if len(calls) > 5:
            raise KeyboardInterrupt
        return real_save(self, *args, **kwargs)

    monkeypatch.setattr(Image.Image, "save", flaky_save)
    with pytest.raises(KeyboardInterrupt):
        data.load("cuhk03", tmp_path)
    assert not (folder / "images_detected").exists() and not _partials(folder)
    monkeypatch.setattr(Image.Image, "save", real_save)
    assert len(data.load("cuhk03", tmp_path).train) == 19


def test_read_only_folder_is_a_clear_error(tmp_path, monkeypatch):
    folder = cuhk03.build(tmp_path)

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(tempfile, "mkdtemp", refuse)      # root ignores chmod: simulate it
    with pytest.raises(DatasetError, match=r"cannot create the image cache .*images_detected "
                                           r"\(Permission denied\) — make .* writable"):
        data.load("cuhk03", tmp_path)
    monkeypatch.undo()
    data.load("cuhk03", tmp_path)                          # extract once, writable
    folder.chmod(0o555)
    try:
        monkeypatch.setattr(tempfile, "mkdtemp", refuse)
        assert len(data.load("cuhk03", tmp_path).query) == 6   # extracted: no write needed
    finally:
        folder.chmod(0o755)


def test_malformed_mats_name_file_and_key(tmp_path):
    folder = cuhk03.build(tmp_path)
    cuhk03.write_new_protocol(folder, "labeled", drop="gallery_idx")
    with pytest.raises(DatasetError, match=r"cuhk03_new_protocol_config_labeled\.mat lacks the "
                                           r"key\(s\) gallery_idx —"):
        data.load("cuhk03", tmp_path, subset="labeled")
    mat = folder / "cuhk03_release" / "cuhk-03.mat"
    cuhk03.write_release_mat(mat, drop="testsets")
    with pytest.raises(DatasetError, match=r"cuhk-03\.mat has no variable 'testsets'"):
        data.load("cuhk03", tmp_path, protocol="classic")
    cuhk03.write_release_mat(mat, drop="labeled")
    with pytest.raises(DatasetError, match=r"cuhk-03\.mat has no variable 'labeled'"):
        data.load("cuhk03", tmp_path, subset="labeled", protocol="classic")
    assert not (folder / "images_labeled").exists() and not _partials(folder)
    mat.write_bytes(b"MATLAB 5.0 MAT-file, not hdf5")
    with pytest.raises(DatasetError, match=r"cuhk-03\.mat is not a MATLAB v7\.3"):
        data.load("cuhk03", tmp_path, subset="labeled", protocol="classic")


def test_resolution_and_missing_pieces(tmp_path):
    bare = cuhk03.build(tmp_path / "bare", wrapper=False)       # the root itself
    assert len(data.load("cuhk03", bare).query) == 6
    folder = cuhk03.build(tmp_path / "wrapped")
    (folder / "cuhk03_new_protocol_config_detected.mat").unlink()
    with pytest.raises(DatasetError, match=r"missing file .*config_detected\.mat"):
        data.load("cuhk03", tmp_path / "wrapped")
    (folder / "cuhk03_release" / "cuhk-03.mat").unlink()
    with pytest.raises(DatasetError, match=r"missing file .*cuhk03_release[/\\]cuhk-03\.mat"):
        data.load("cuhk03", tmp_path / "wrapped", subset="labeled")
    with pytest.raises(DatasetError, match="no cuhk03 dataset"):
        data.load("cuhk03", tmp_path / "elsewhere")
    with pytest.raises(UsageError, match="subset"):
        data.load("cuhk03", bare, subset="both")
    with pytest.raises(UsageError, match="protocol"):
        data.load("cuhk03", bare, protocol="old")


def test_reid_data_check(capsys, tmp_path):
    folder = cuhk03.build(tmp_path)
    code, out, err = run_cli(capsys, "data", "check", "cuhk03", "--root", tmp_path)
    assert code == 0, err
    assert "7,365 / 767" in out and "≠" in out and "eval rule market" in out
    code, out, err = run_cli(capsys, "data", "check", "cuhk03", "--root", tmp_path,
                             "--option", "protocol=classic", "--trial", "1")
    assert code == 0 and "cuhk03_sgs" in out
    (folder / "cuhk03_new_protocol_config_labeled.mat").unlink()
    code, out, err = run_cli(capsys, "data", "check", "cuhk03", "--root", tmp_path,
                             "--option", "subset=labeled")
    assert code == 1 and str(folder / "cuhk03_new_protocol_config_labeled.mat") in err


def test_info_states_defaults():
    info = data.info("cuhk03")
    assert info.options == {"subset": "detected", "protocol": "new", "draws": 10,
                            "warca_draw": "probe_single", "same_camera": "drop"}
    assert "protocol=new" in info.protocol and "subset=detected" in info.protocol
    assert info.counts == {"train": (7365, 767), "query": (1400, 700), "gallery": (5332, 700)}


@pytest.mark.skipif(not os.environ.get("REIDCLI_REAL_DATA"), reason="needs real datasets")
def test_real_counts():
    root = os.environ["REIDCLI_REAL_DATA"]
    expected = {"labeled": {"train": (7368, 767), "query": (1400, 700),
                            "gallery": (5328, 700)},
                "detected": {"train": (7365, 767), "query": (1400, 700),
                             "gallery": (5332, 700)}}
    for subset, counts in expected.items():
        split = data.load("cuhk03", root, subset=subset)
        for part, want in counts.items():
            frame = getattr(split, part)
            assert (len(frame), frame["pid"].nunique()) == want
        classic = data.load("cuhk03", root, subset=subset, protocol="classic", trial=3)
        assert classic.num_trials == 20 and classic.query["pid"].nunique() == 100
        assert classic.train["pid"].nunique() == 1367


def test_warca_protocol_on_standard_splits(tmp_path, monkeypatch):
    cuhk03.build(tmp_path)
    with pytest.raises(DatasetError, match="holds 2 test splits; the WARCA protocol uses"):
        data.load("cuhk03", tmp_path, protocol="warca", subset="labeled")
    monkeypatch.setattr(loader, "WARCA_SPLITS", 2)          # the fake release has 2 testsets
    split = data.load("cuhk03", tmp_path, protocol="warca", subset="labeled", draws=3,
                      trial=4)
    assert split.num_trials == 6 and split.eval_kwargs == {"split": 1, "draw": 1}
    assert split.eval_rule == "market" and split.options["warca_draw"] == "probe_single"
    # split 1 = testsets cell 2: one probe per test person, its other images are the gallery
    assert sorted(split.query["pid"]) == [1003, 2001]
    assert set(split.gallery["pid"]) == {1003, 2001} and len(split.gallery) == 20 - 2
    assert not set(split.query["path"]) & set(split.gallery["path"])
    assert sorted(split.train["pid"].unique()) == [1001, 1002, 2002] and len(split.train) == 30
    draws = [data.load("cuhk03", tmp_path, protocol="warca", subset="labeled", draws=3,
                       trial=t).query["path"].tolist() for t in (3, 4, 5)]
    assert len({tuple(d) for d in draws}) > 1                # the draws differ
    gal = data.load("cuhk03", tmp_path, protocol="warca", subset="labeled", draws=3, trial=4,
                    warca_draw="gallery_single")
    assert len(gal.gallery) == 2 and len(gal.query) == 18
