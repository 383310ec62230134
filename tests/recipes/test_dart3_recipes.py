"""recipes/dart3_*.sh: the synthetic chain (shrunk in the default run, full size under
``-m slow``), and the real-data recipes on tiny fake trees."""
from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from reidcli.paper.compare import DART3_CLAIMS
from tests.recipes.helpers import (FULL_TIMEOUT_S, ONE_THREAD, RECIPES, claim_verdicts,
                                   recipe_env, run_recipe, shrunk_notice)

METHODS = ("No-adapt", "TENT", "TEMP", "Norm", "DART3", "DART3 LITE")
#: 60 + 30 persons (~1,400 images), BoT trained 1 epoch on 200 images of cameras 0–4
SHRUNK = dict(DART3_TRAIN_IDS="60", DART3_TEST_IDS="30", BOT_EPOCHS="1", BOT_MAX_IMAGES="200")
#: the methods of the paper's claims (each `reid adapt` costs seconds of start-up alone; TENT
#: runs in the fake-tree test below, through the same branch of the chain as TEMP)
SHRUNK_METHODS = {"none": "No-adapt", "norm": "Norm", "dart3": "DART3", "dart3-lite": "DART3 LITE"}


def _run(script: str, *args, **env) -> str:
    return run_recipe(script, *args, **ONE_THREAD, **env)


def write_market_tree(folder: Path, *, train_ids=10, test_ids=8, cams=6, seed=0,
                      duke_names=False) -> Path:
    """A tiny Market-1501-layout tree (DukeMTMC names with ``duke_names``): every id in every
    camera, with a per-camera colour cast so the cameras are biased."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    cast = rng.integers(-60, 60, (cams, 3))
    looks = rng.integers(40, 215, (train_ids + test_ids + 1, 3))

    def save(sub: str, pid: int, cam: int, k: int) -> None:
        (folder / sub).mkdir(parents=True, exist_ok=True)
        img = np.clip(looks[pid] + cast[cam] + rng.normal(0, 25, (64, 32, 3)), 0, 255)
        name = f"{pid:04d}_c{cam + 1}_f{k:07d}.jpg" if duke_names else \
            f"{pid:04d}_c{cam + 1}s1_{k:06d}_00.jpg"
        Image.fromarray(img.astype(np.uint8)).save(folder / sub / name)

    for pid in range(1, train_ids + 1):
        for cam in range(cams):
            save("bounding_box_train", pid, cam, 100 * pid + cam)
    for pid in range(train_ids + 1, train_ids + test_ids + 1):
        for cam in range(cams):
            save("query", pid, cam, 100 * pid + cam)
            for k in range(2):
                save("bounding_box_test", pid, cam, 100 * pid + 10 * k + cam + 7)
    return folder


def _check_setting_a(out: str, work: Path, images: int, methods=METHODS) -> dict[str, str]:
    """Every method of ``methods`` and the upper bound (all cameras, as many images) ran."""
    for label in (*methods, "Upper Bound"):
        assert re.search(rf"^│ {re.escape(label)} +│", out, flags=re.M), label
    assert "TransReID mAP / R1" in out and "CLIP-ReID mAP / R1" in out    # the paper's columns
    report = json.loads((work / "dart3-lite.json").read_text())
    assert report["protocol"] == "camera-split"
    assert set(report["per_camera"]["cameras"]) == {"5", "6", "7"}      # the unseen cameras
    cfg = json.loads((work / "backbone" / "config.json").read_text())
    upper = json.loads((work / "upper" / "config.json").read_text())
    assert upper["num_images"] == cfg["num_images"] == images
    assert upper["config"]["train_cams"] is None and cfg["config"]["train_cams"] == [0, 1, 2, 3, 4]
    # DART3 LITE removes camera clusters (0.28 → 0.07 shrunk)
    assert report["nmi"]["nmi"] < json.loads((work / "none.json").read_text())["nmi"]["nmi"]
    return claim_verdicts(out, DART3_CLAIMS)


def test_dart3_synthetic_recipe_shrunk(tmp_path):
    out = _run("dart3_synthetic.sh", tmp_path, UPPER="1", DART3_METHODS=" ".join(SHRUNK_METHODS),
               **SHRUNK)
    _check_setting_a(out, tmp_path, int(SHRUNK["BOT_MAX_IMAGES"]), SHRUNK_METHODS.values())
    notice = shrunk_notice(out)
    assert all(f"{knob}={value}" in notice for knob, value in SHRUNK.items()), notice
    meta = json.loads((tmp_path / "data" / "synthetic" / "dart3" / "meta.json").read_text())
    assert (meta["params"]["num_train_ids"], meta["params"]["num_test_ids"]) == (60, 30)


@pytest.mark.slow
def test_dart3_synthetic_recipe_full(tmp_path):
    out = _run("dart3_synthetic.sh", tmp_path, timeout=FULL_TIMEOUT_S, BOT_MAX_IMAGES="1000",
               UPPER="1")
    verdicts = _check_setting_a(out, tmp_path, 1000)
    assert verdicts["Norm ≥ No-adapt"] == verdicts["DART3 LITE > No-adapt"] == "PASS"
    assert shrunk_notice(out).startswith("SHRUNK run (BOT_MAX_IMAGES=1000)")


def test_setting_a_recipe_on_a_fake_market_tree(tmp_path):
    data = tmp_path / "data"
    write_market_tree(data / "Market-1501-v15.09.15")
    # every method and the upper bound run in the synthetic recipe's test; here the wrapper
    out = _run("dart3_market_5cam.sh", tmp_path / "work", "--preset", "tiny", "--epochs", "1",
               "--quiet", REIDCLI_DATA=str(data), UPPER="0", DART3_METHODS="none tent")
    assert "No-adapt" in out and "TENT" in out
    assert "85.7 / 94.0" in out                   # CLIP-ReID No-adapt, Table 1 Market 5-cam
    work = tmp_path / "work"
    report = json.loads((work / "tent.json").read_text())
    assert set(report["per_camera"]["cameras"]) == {"5"}                  # camera c6 unseen
    cfg = json.loads((work / "backbone" / "config.json").read_text())
    assert cfg["num_images"] == 50                                        # 10 ids × 5 cameras


def test_cross_dataset_recipe_on_fake_trees(tmp_path):
    data = tmp_path / "data"
    write_market_tree(data / "Market-1501-v15.09.15")
    write_market_tree(data / "DukeMTMC-reID", seed=1, cams=8, duke_names=True)
    out = _run("dart3_cross_dataset.sh", tmp_path / "work", "--preset", "tiny", "--epochs",
               "1", "--quiet", REIDCLI_DATA=str(data), PAIRS="market1501:dukemtmc",
               DART3_METHODS="none dart3-lite")
    assert "market_to_duke" in out and "47.2 / 64.9" in out      # TransReID No-adapt, Tab 2
    assert (tmp_path / "work" / "market_to_duke" / "upper.json").is_file()


@pytest.mark.parametrize("name", ["msmt17_5cam", "msmt17_10cam", "duke_5cam", "market_5cam",
                                  "cross_dataset"])
def test_real_recipes_need_reidcli_data(tmp_path, name):
    env = recipe_env()
    env.pop("REIDCLI_DATA", None)
    proc = subprocess.run(["bash", str(RECIPES / f"dart3_{name}.sh"), str(tmp_path)],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode != 0 and "REIDCLI_DATA" in proc.stderr
