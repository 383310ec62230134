"""3DPeS loader on fake trees (docs/datasets.md; WARCA paper Sect. 4.1)."""
from __future__ import annotations

import os

import pytest

import reidcli.data as data
from reidcli.data.datasets.threedpes import read_3dpes
from reidcli.errors import DatasetError, UsageError
from tests.cli.helpers import run_cli
from tests.data.fake_trees import warca_sets as trees

COUNTS = trees.image_counts(trees.THREEDPES_IMAGES)
SINGLE = [pid for pid, n in COUNTS.items() if n == 1]


def test_parse_pids_cameras_rest(tmp_path):
    folder = trees.build_3dpes(tmp_path)
    records = read_3dpes(folder)
    assert len(records) == sum(COUNTS.values())
    assert records["pid"].value_counts().to_dict() == COUNTS
    expected = sorted(cam - 1 for shots in trees.THREEDPES_IMAGES.values() for cam, _ in shots)
    assert sorted(records["camid"]) == expected
    row = records[records["path"].str.endswith("4_5_0000012_2.bmp")].iloc[0]
    assert (row["pid"], row["camid"], row["x_name_rest"]) == (4, 4, "0000012_2")


def test_warca_probe_single_and_single_image_person(tmp_path):
    folder = trees.build_3dpes(tmp_path)
    split = data.load("threedpes", tmp_path, test_ids=4, trial=57)
    assert split.name == "3dpes" and split.protocol == "warca"
    assert split.num_trials == 100 and split.eval_kwargs == {"split": 5, "draw": 7}
    assert split.eval_rule == "single_shot_any" and split.options["same_camera"] == "keep"
    trees.check_probe_single_trial(split, COUNTS, 4)
    stored = trees.cached_trials(folder, "3dpes_warca_probe_single_p4_d10_seed0")
    assert len(stored) == 100
    single_names = [f"{pid}_{cam}_{frame:07d}_0.bmp" for pid in SINGLE
                    for cam, frame in trees.THREEDPES_IMAGES[pid]]
    trees.check_single_image_never_tests(stored, single_names)
    tested = {p.split("_")[0] for t in stored for p in t["query"]}
    assert len(tested) == len(COUNTS) - len(SINGLE)        # every eligible person tests once
    gallery_single = data.load("3dpes", tmp_path, test_ids=4, draws=3, trial=4,
                               warca_draw="gallery_single")
    assert gallery_single.num_trials == 30
    assert len(gallery_single.gallery) == gallery_single.gallery["pid"].nunique() == 4


def test_reproducible_per_seed(tmp_path):
    a = trees.build_3dpes(tmp_path / "a")
    b = trees.build_3dpes(tmp_path / "b")
    key = "3dpes_warca_probe_single_p4_d3_seed2"
    data.load("3dpes", tmp_path / "a", test_ids=4, draws=3, seed=2)
    data.load("3dpes", tmp_path / "b", test_ids=4, draws=3, seed=2)
    assert trees.cached_trials(a, key) == trees.cached_trials(b, key)
    data.load("3dpes", tmp_path / "a", test_ids=4, draws=3, seed=0)
    assert trees.cached_trials(a, key.replace("seed2", "seed0")) != trees.cached_trials(a, key)


def test_paper_defaults_and_errors(tmp_path):
    info = data.info("3dpes")
    assert info.options["test_ids"] == 95 and info.counts["query"] == (95, 95)
    assert info.options["draws"] == 10 and info.options["warca_draw"] == "probe_single"
    folder = trees.build_3dpes(tmp_path)
    eligible = len(COUNTS) - len(SINGLE)
    with pytest.raises(DatasetError, match=f"asked {eligible + 1} test ids .* only "
                                           f"{eligible} persons with ≥ 2"):
        data.load("3dpes", tmp_path, test_ids=eligible + 1)
    with pytest.raises(UsageError, match="same_camera"):
        data.load("3dpes", tmp_path, test_ids=4, same_camera="maybe")
    with pytest.raises(DatasetError, match="no 3dpes dataset"):
        data.load("3dpes", tmp_path / "nothing")
    for bad in ("x_1_3.bmp", "12-1-3.bmp", "0_1_3.bmp", "3_0_3.bmp", "3_1_4.jpg"):
        path = trees.write_image(folder / bad)
        with pytest.raises(DatasetError, match=rf"malformed image name .*{bad}"):
            data.load("3dpes", tmp_path, test_ids=4)
        path.unlink()


def test_cli_info(capsys):
    code, out, err = run_cli(capsys, "data", "info", "3dpes")
    assert code == 0, err
    assert "3DPeS_ReId_Snap.zip" in out and "RGB" in out and "test_ids=95" in out


@pytest.mark.skipif(not os.environ.get("REIDCLI_REAL_DATA"), reason="needs real 3DPeS")
def test_real_counts():
    root = os.environ["REIDCLI_REAL_DATA"]
    records = read_3dpes(data.registry.resolve_dataset_dir("3dpes", root))
    assert (len(records), records["pid"].nunique()) in ((1011, 192), (1012, 193))
    split = data.load("3dpes", root)
    assert (len(split.query), split.query["pid"].nunique()) == data.info("3dpes").counts["query"]
