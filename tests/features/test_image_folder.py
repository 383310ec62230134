"""Any image folder (issue 31): records from a folder or a CSV list (`reid extract --images`,
`--query-images`, `--images-list`, `--pattern`), and the whole chain extract → eval →
eval --search → plot ranklist on a folder of Market-named files and on an unlabelled one."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from reidcli.features.image_folder import compile_pattern, image_layout, image_records
from reidcli.store.reader import open_store
from tests.faults.helpers import reid_in_process

COLOURS = {1: (200, 20, 20), 2: (20, 200, 20), 3: (20, 20, 200)}


def _jpeg(path: Path, colour, seed: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    noise = np.random.default_rng(seed).integers(0, 25, (32, 16, 3))
    Image.fromarray(np.clip(np.array(colour) + noise, 0, 255).astype(np.uint8)).save(path)


def make_market_folder(root: Path) -> Path:
    """``root/market``: query/ (3 ids, c3), bounding_box_test/ (3 ids × c1, c2, a junk -1 and
    a distractor 0000), and gt_bbox/ (not a split folder: never read)."""
    folder = root / "market"
    for pid in (1, 2, 3):
        _jpeg(folder / "query" / f"{pid:04d}_c3s1_000151_00.jpg", COLOURS[pid], pid)
        for cam in (1, 2):
            _jpeg(folder / "bounding_box_test" / f"{pid:04d}_c{cam}s1_000{cam}51_00.jpg",
                  COLOURS[pid], 10 * pid + cam)
    _jpeg(folder / "bounding_box_test" / "-1_c1s1_000001_00.jpg", (90, 90, 90), 40)
    _jpeg(folder / "bounding_box_test" / "0000_c2s1_000002_00.jpg", (90, 90, 90), 41)
    _jpeg(folder / "gt_bbox" / "0001_c1s1_000151_00.jpg", COLOURS[1], 42)
    return folder


def make_unlabelled_folder(root: Path) -> tuple[Path, Path]:
    """(gallery folder with sub-folders camA/ and camB/, flat query folder): names carry no
    labels."""
    gallery, query = root / "gallery", root / "queries"
    for i in range(6):
        _jpeg(gallery / ("camA" if i % 2 else "camB") / f"img{i}.png", COLOURS[i % 3 + 1], i)
    for i in range(2):
        _jpeg(query / f"q{i}.jpg", COLOURS[i + 1], 100 + i)
    return gallery, query


def test_market_named_folder_gives_splits_labels_and_where_each_row_came_from(tmp_path):
    folder = make_market_folder(tmp_path)
    frame, where = image_records(folder, pattern="market")
    assert sorted(frame["split"].value_counts().items()) == [("gallery", 8), ("query", 3)]
    assert not frame["path"].str.contains("gt_bbox").any()          # not a split folder
    by_name = {Path(p).name: r for p, r in zip(frame["path"], frame.itertuples())}
    assert by_name["0002_c3s1_000151_00.jpg"].pid == 2
    assert by_name["0002_c3s1_000151_00.jpg"].camid == 2             # c3 → 0-based 2
    assert by_name["-1_c1s1_000001_00.jpg"].pid == -1                # junk kept as -1
    assert by_name["0000_c2s1_000002_00.jpg"].pid == 0               # distractor
    assert set(frame["dataset"]) == {"images"}
    assert set(frame["x_source"]) == {str((folder / "query").absolute()),
                                      str((folder / "bounding_box_test").absolute())}
    assert where["split_folders"] == ["query", "bounding_box_test"] and where["labelled"]


def test_unlabelled_folder_rows_have_pid_minus_one_and_folder_cameras(tmp_path):
    gallery, query = make_unlabelled_folder(tmp_path)
    layout = image_layout(gallery, query)
    rec = layout.records
    assert (rec["pid"] == -1).all() and layout.dataset == "images"
    cams = {(r.split, r.x_folder): r.camid for r in rec.itertuples()}
    # sorted distinct sub-folders of all rows: "" (the flat query folder), camA, camB
    assert cams == {("query", ""): 0, ("gallery", "camA"): 1, ("gallery", "camB"): 2}
    trial = layout.trials[0]
    assert len(trial["query_idx"]) == 2 and len(trial["gallery_idx"]) == 6
    assert set(rec["split"].to_numpy()[trial["query_idx"]]) == {"query"}
    assert not layout.options["source"]["labelled"]
    # the provenance never hashes the folder above both (it may be /): each one's listing
    assert layout.image_folder() is None
    assert set(layout.options["source"]["listing_sha256"]) == {str(gallery.absolute()),
                                                               str(query.absolute())}
    assert image_layout(gallery).image_folder() == str(gallery.absolute())


def test_images_list_reads_relative_paths_and_optional_labels(tmp_path):
    gallery, query = make_unlabelled_folder(tmp_path)
    listed = tmp_path / "list.csv"
    with open(listed, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["path", "pid", "camid", "split"])
        w.writerow(["queries/q0.jpg", "7", "1", "query"])
        w.writerow([str(gallery / "camA" / "img1.png"), "7", "", ""])
        w.writerow(["gallery/camB/img0.png", "", "3", "gallery"])
    frame, where = image_records(images_list=listed)
    rows = {Path(p).name: r for p, r in zip(frame["path"], frame.itertuples())}
    assert (rows["q0.jpg"].pid, rows["q0.jpg"].camid, rows["q0.jpg"].split) == (7, 1, "query")
    assert (rows["img1.png"].pid, rows["img1.png"].camid, rows["img1.png"].split) == \
        (7, 0, "gallery")                                    # empty camid: camera 0
    assert (rows["img0.png"].pid, rows["img0.png"].camid) == (-1, 3)   # empty pid: unlabelled
    assert set(frame["x_line"]) == {2, 3, 4} and where["images_list"] == str(listed)


def test_pattern_groups_cam_is_one_based_camid_zero_based_and_unmatched_skipped(tmp_path):
    for name in ("p12-cam2-x.jpg", "p5-cam1-y.jpg", "readme.png"):
        _jpeg(tmp_path / "f" / name, (1, 2, 3), 0)
    frame, where = image_records(tmp_path / "f", pattern=r"p(?P<pid>\d+)-cam(?P<cam>\d)",
                                 skip_unmatched=True)
    assert sorted(zip(frame["pid"], frame["camid"])) == [(5, 0), (12, 1)]
    assert where["skipped_unmatched"] == 1
    assert compile_pattern(r"p(?P<pid>\d+)-cam(?P<camid>\d)").parse("p3-cam2.jpg") == \
        {"pid": 3, "camid": 2}


def _chain(tmp_path, capsys, extract_args, store):
    code, out, err = reid_in_process("extract", *extract_args, "--out", store, capsys=capsys)
    assert code == 0, err
    return err


def test_chain_on_market_named_folder(tmp_path, capsys):
    # done-when: extract --images DIR → eval / eval --search / plot ranklist (labelled)
    folder = make_market_folder(tmp_path)
    store = tmp_path / "market.h5"
    err = _chain(tmp_path, capsys, ["--images", folder, "--pattern", "market"], store)
    assert "3 query, 8 gallery" in err
    code, out, err = reid_in_process("eval", "--store", store, "--json", tmp_path / "r.json",
                                     "--quiet", capsys=capsys)
    assert code == 0, err
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["num_valid_queries"] == 3                     # every query has its match
    assert report["cmc"][0] == pytest.approx(1.0)               # colours separate the ids
    assert report["trials"][0]["gallery_size"] == 8 - 1         # junk -1 left out (E1)
    code, out, err = reid_in_process("eval", "--store", store, "--search", "2", capsys=capsys)
    assert code == 0, err
    lines = list(csv.DictReader(out.splitlines()))
    assert len(lines) == 6 and {r["query_pid"] for r in lines} == {"1", "2", "3"}
    assert all(r["gallery_pid"] == r["query_pid"] for r in lines if r["rank"] == "1")
    code, out, err = reid_in_process("plot", "ranklist", "--store", store, "--out",
                                     tmp_path / "rl.png", "--max-rank", "3", capsys=capsys)
    assert code == 0, err
    assert (tmp_path / "rl.png").stat().st_size > 0


def test_chain_on_unlabelled_folder_with_a_model(tmp_path, capsys, tiny_pcb_model):
    # done-when: the same chain on an unlabelled folder, features from a trained network
    gallery, query = make_unlabelled_folder(tmp_path)
    store = tmp_path / "u.h5"
    err = _chain(tmp_path, capsys, ["--images", gallery, "--query-images", query,
                                    "--model", tiny_pcb_model, "--features", "pcb_g",
                                    "--device", "cpu", "--batch-size", "4"], store)
    assert "unlabelled" in err
    with open_store(store) as st:
        assert st.dataset == "images" and st.num_rows == 8
        assert (st.records["pid"] == -1).all()
        assert set(st.records["x_source"]) == {str(gallery.absolute()), str(query.absolute())}
    code, out, err = reid_in_process("eval", "--store", store, capsys=capsys)
    assert code == 2 and "--search" in err and "unlabelled" in err       # refuses, points on
    code, out, err = reid_in_process("eval", "--store", store, "--search", "3", "--csv",
                                     tmp_path / "top.csv", capsys=capsys)
    assert code == 0, err
    rows = list(csv.DictReader((tmp_path / "top.csv").read_text().splitlines()))
    assert len(rows) == 2 * 3
    assert all(r["gallery_path"].startswith(str(gallery.absolute())) for r in rows)
    dists = [float(r["distance"]) for r in rows[:3]]
    assert dists == sorted(dists)
    code, out, err = reid_in_process("plot", "ranklist", "--store", store, "--out",
                                     tmp_path / "u.png", "--max-rank", "3", capsys=capsys)
    assert code == 0, err


@pytest.fixture(scope="module")
def tiny_pcb_model(tmp_path_factory):
    """A randomly initialised PCB on the ``tiny`` backbone, saved as model.pt."""
    import torch

    from reidcli.models.checkpoint import ModelSpec, build_model, save_model
    torch.manual_seed(1)
    spec = ModelSpec(kind="pcb", backbone="tiny", num_classes=4, input_size=(96, 32))
    path = tmp_path_factory.mktemp("tinypcb") / "model.pt"
    save_model(path, build_model(spec), spec)
    return path
