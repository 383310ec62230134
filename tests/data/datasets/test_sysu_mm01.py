"""SYSU-MM01 loader on a fake tree and E4 on its splits (docs/datasets.md E4, §5.11, §7)."""
from __future__ import annotations

import hashlib
import json
import os
import random
import re
from pathlib import Path

import numpy as np
import pytest
import scipy.io

import reidcli.data as data
from reidcli.data.records import validate_frame
from reidcli.errors import DatasetError, UsageError
from reidcli.evaluation.arrays import evaluate_arrays
from reidcli.features.layout import dataset_layout
from tests.cli.helpers import run_cli
from tests.data.fake_trees import sysu_mm01 as fake


def _pairs(frame):
    return sorted(zip(frame["pid"], frame["camid"] + 1))


def test_records_parsed_exactly(tmp_path):
    folder = fake.build(tmp_path)
    split = data.load("sysu_mm01", tmp_path)
    assert split.name == "sysu_mm01" and split.eval_rule == "sysu" and split.num_trials == 10
    assert split.options == {"mode": "all", "shots": 1, "train_includes_val": True,
                             "draws": "seeded", "seed": 0}
    assert split.protocol == "all_search_1shot_seeded"
    everything = split.all_records()
    for row in everything.itertuples():
        rel = Path(row.path).relative_to(folder).parts
        cam = int(rel[0][3:])
        assert row.camid == cam - 1 and row.pid == int(rel[1]) and rel[1] == f"{row.pid:04d}"
        assert row.frame == int(rel[2][:4])
        assert row.modality == ("infrared" if cam in (3, 6) else "visible")
        assert row.x_location == {1: 1, 2: 2, 3: 2, 4: 4, 5: 5, 6: 6}[cam]
        assert row.dataset == row.domain == "sysu_mm01"
    for part in (split.train, split.query, split.gallery):
        validate_frame(part)
        assert part["path"].is_monotonic_increasing
    # train = ids 1, 2 (train) + 3 (val), every camera: 6 visible + 6 infrared images
    assert set(split.train["pid"]) == {1, 2, 3} and len(split.train) == 12
    assert (split.train["modality"] == "infrared").sum() == 6
    assert set(split.train["camid"] + 1) == {1, 2, 3, 4, 6}
    # query = every IR image of the test ids (cams 3 and 6)
    assert len(split.query) == 3 + 3 + 2 + 2 + 2
    assert set(split.query["modality"]) == {"infrared"}
    assert set(zip(split.query["pid"], split.query["camid"] + 1)) == {
        (4, 3), (4, 6), (5, 3), (6, 6), (7, 6)}
    # all-search single-shot gallery: one image per (test id, visible camera that saw it)
    assert _pairs(split.gallery) == [(4, 1), (4, 2), (4, 4), (4, 5), (5, 1), (5, 2), (6, 2),
                                     (6, 5), (7, 4)]
    assert set(split.gallery["modality"]) == {"visible"}
    test_ids = set(split.query["pid"]) | set(split.gallery["pid"])
    assert test_ids == {4, 5, 6, 7} and not test_ids & set(split.train["pid"])


def test_modes_shots_and_val(tmp_path):
    fake.build(tmp_path)
    multi = data.load("sysu", tmp_path, shots=10)
    assert len(multi.gallery) == 4 * 3 + 2 * 2 + 2 * 2 + 2            # every visible image
    two = data.load("sysu", tmp_path, shots=2, trial=5)
    assert len(two.gallery) == 4 * 2 + 2 * 2 + 2 * 2 + 2
    assert two.gallery.groupby(["pid", "camid"]).size().max() == 2
    indoor = data.load("sysu", tmp_path, mode="indoor")
    assert _pairs(indoor.gallery) == [(4, 1), (4, 2), (5, 1), (5, 2), (6, 2)]   # 7: no indoor
    assert len(indoor.query) == 12 and indoor.protocol == "indoor_search_1shot_seeded"
    assert len(data.load("sysu", tmp_path, mode="indoor", shots=10).gallery) == 6 + 4 + 2
    alone = data.load("sysu", tmp_path, train_includes_val=False)
    assert set(alone.train["pid"]) == {1, 2} and len(alone.train) == 8
    assert alone.query["path"].tolist() == indoor.query["path"].tolist()
    with pytest.raises(UsageError, match="mode"):
        data.load("sysu", tmp_path, mode="outdoor")
    with pytest.raises(UsageError, match="shots"):
        data.load("sysu", tmp_path, shots=0)
    with pytest.raises(UsageError, match="trial=10 is outside the trials 0..9"):
        data.load("sysu", tmp_path, trial=10)


def test_ten_trials_deterministic_and_cached(tmp_path):
    folder = fake.build(tmp_path)
    first = [data.load("sysu", tmp_path, trial=t).gallery["path"].tolist() for t in range(10)]
    cache = folder / "reidcli_splits" / "sysu_seeded_all_shots1_val1_seed0.json"
    payload = json.loads(cache.read_text())
    assert [t["gallery"] for t in payload["trials"]] == \
        [[Path(p).relative_to(folder).as_posix() for p in g] for g in first]
    assert len({tuple(g) for g in first}) > 1                  # each trial re-samples
    assert all(len(g) == 9 for g in first)
    for t in (0, 9):                                           # reload from the JSON cache
        assert data.load("sysu", tmp_path, trial=t).gallery["path"].tolist() == first[t]
    cache.unlink()
    assert data.load("sysu", tmp_path, trial=4).gallery["path"].tolist() == first[4]
    assert json.loads(cache.read_text())["trials"] == payload["trials"]   # seed alone decides
    data.load("sysu", tmp_path, seed=1)
    other = json.loads((cache.parent / "sysu_seeded_all_shots1_val1_seed1.json").read_text()
                       )["trials"]
    assert [t["gallery"] for t in other] != [t["gallery"] for t in payload["trials"]]
    assert [t["query"] for t in other] == [t["query"] for t in payload["trials"]]


def test_e4_cam3_queries_skip_cam2_and_dedup_cmc_hand_matrix():
    """E4 by hand: gallery [id4 cam2, id5 cam1, id5 cam4, id4 cam1, id4 cam5]."""
    g_pids, g_cams = np.array([4, 5, 5, 4, 4]), np.array([2, 1, 4, 1, 5]) - 1
    q_pids, q_cams = np.array([4, 4]), np.array([3, 6]) - 1
    row = np.array([0.1, 0.2, 0.3, 0.4, 0.5])
    result = evaluate_arrays(q_pids, q_cams, g_pids, g_cams, distances=np.stack([row, row]),
                             protocol=data.info("sysu").eval_rule)
    # cam-3 query: cam-2 gallery removed → ranked ids 5, 5, 4, 4 → de-duplicated 5, 4:
    # first match at rank 2 (not 3); AP over the full list: (1/3 + 2/4) / 2
    # cam-6 query: nothing removed → rank 1; AP (1 + 2/4 + 3/5) / 3
    assert result.outcomes.first_rank.tolist() == [1, 0]
    assert result.cmc[0] == pytest.approx(0.5) and result.cmc[1] == pytest.approx(1.0)
    assert result.mAP == pytest.approx(((1 / 3 + 2 / 4) / 2 + (1 + 2 / 4 + 3 / 5) / 3) / 2)
    assert result.mINP == pytest.approx((2 / 4 + 3 / 5) / 2)


def test_e4_on_loaded_split(tmp_path):
    """The loader's camids meet E4: same-room (cam 2) gallery is invisible to cam-3 queries."""
    fake.build(tmp_path)
    split = data.load("sysu", tmp_path, shots=10)
    q, g = split.query, split.gallery
    same = q["pid"].to_numpy()[:, None] == g["pid"].to_numpy()[None, :]
    cam2 = (g["camid"].to_numpy() + 1 == 2)[None, :]
    d = np.where(same & cam2, 0.0, np.where(same, 1.0, 0.5))     # cam-2 match is the best
    args = (q["pid"], q["camid"], g["pid"], g["camid"])
    result = evaluate_arrays(*args, distances=d, protocol=split.eval_rule)
    got = {(p, c + 1): r for p, c, r in zip(q["pid"], q["camid"], result.outcomes.first_rank)}
    # cam 6 with a cam-2 match → rank 1; cam 3 → cam 2 skipped, the 3 other ids come first
    # (de-duplicated; 6 resp. 13 images without de-duplication); id 7 has no cam-2 image
    assert got == {(4, 6): 0, (6, 6): 0, (4, 3): 3, (5, 3): 3, (7, 6): 3}
    assert result.cmc[0] == pytest.approx(5 / 12) and result.cmc[3] == pytest.approx(1.0)
    ap_4_cam3 = np.mean([i / (6 + i) for i in range(1, 10)])   # 9 positives after 6 others
    first4 = np.flatnonzero((q["pid"] == 4) & (q["camid"] == 2))[0]
    assert result.outcomes.ap[first4] == pytest.approx(ap_4_cam3)
    plain = evaluate_arrays(*args, distances=d, protocol="regdb")   # E5: no location removal
    assert plain.outcomes.first_rank[first4] == 0


def test_folder_variants(tmp_path):
    fake.build(tmp_path / "a", "SYSU-MM01/ori_data")
    assert len(data.load("sysu_mm01", tmp_path / "a").query) == 12
    folder = fake.build(tmp_path / "b", "sysu-mm01")
    assert data.load("SYSU", tmp_path / "b").query["path"].iloc[0].startswith(str(folder))
    assert len(data.load("sysu", folder).gallery) == 9           # the folder itself as root
    with pytest.raises(DatasetError, match="no sysu_mm01 dataset"):
        data.load("sysu", tmp_path / "c")


def test_layout_errors(tmp_path):
    folder = fake.build(tmp_path)
    exp = folder / "exp"
    (exp / "test_id.txt").write_text("4;5")
    with pytest.raises(DatasetError, match=r"test_id\.txt holds something other than integer ids "
                                           r"\(found '4;5'"):
        data.load("sysu", tmp_path)
    (exp / "test_id.txt").write_text("4,5,3")
    with pytest.raises(DatasetError, match=r"id 3 is in both .*val_id\.txt and .*test_id\.txt"):
        data.load("sysu", tmp_path)
    (exp / "test_id.txt").write_text("4,5,6,7,8")
    with pytest.raises(DatasetError, match="test id 8 .* no image folder 0008/"):
        data.load("sysu", tmp_path)
    (exp / "test_id.txt").write_text("4,5,6,7")
    (folder / "cam5" / "0006" / "x.jpg").write_bytes(b"")
    with pytest.raises(DatasetError, match=r"malformed image name .*cam5[/\\]0006[/\\]x\.jpg"):
        data.load("sysu", tmp_path)
    (folder / "cam5" / "0006" / "x.jpg").unlink()
    (exp / "val_id.txt").unlink()
    with pytest.raises(DatasetError, match=r"missing file .*exp[/\\]val_id\.txt"):
        data.load("sysu", tmp_path)


def test_reid_data_check(capsys, tmp_path):
    folder = fake.build(tmp_path)
    code, out, err = run_cli(capsys, "data", "check", "sysu", "--root", tmp_path)
    assert code == 0, err
    flat = " ".join(out.split())                               # rich wraps long lines
    assert "all_search_1shot_seeded" in flat and "eval rule sysu" in flat
    assert "3,803 / 96" in flat and "≠" in flat
    assert "warning" in flat and "rand_perm_cam.mat row names the i-th image" in flat
    code, out, err = run_cli(capsys, "data", "check", "sysu", "--root", tmp_path,
                             "--option", "shots=10", "--option", "mode=indoor")
    assert code == 0, err
    assert "indoor_search_10shot_seeded" in " ".join(out.split())
    for image in (folder / "cam4").glob("*/*.jpg"):
        image.unlink()
    for person in (folder / "cam4").iterdir():
        person.rmdir()
    (folder / "cam4").rmdir()
    code, out, err = run_cli(capsys, "data", "check", "sysu", "--root", tmp_path)
    assert code == 1 and f"missing folder {folder / 'cam4'}" in err


# -- gallery draw families (docs/datasets.md "SYSU-MM01 gallery draws") ---------------------------
def _official_gallery(folder, perms, trial, cams, shots):
    """The official evaluation restated: row ``trial + 1`` (MATLAB) of each test person's
    permutation, first ``shots`` 1-based entries, naming images in folder name order."""
    picked = []
    for pid in fake.TEST:
        for cam in cams:
            if (cam, pid) not in perms:
                continue
            person = folder / f"cam{cam}" / f"{pid:04d}"
            names = sorted(os.listdir(person))
            matlab_row = trial + 1
            picked += [str(person / names[i - 1]) for i in perms[cam, pid][matlab_row - 1][:shots]]
    return sorted(picked)


def _agw_gallery(folder, trial, cams):
    """AGW's process_gallery_sysu restated: random.seed(trial), ids of test_id.txt's first
    line as sorted '%04d' strings, one random.choice per camera over the sorted listing."""
    rng = random.Random(trial)
    ids = (folder / "exp" / "test_id.txt").read_text().splitlines()[0].split(",")
    picked = []
    for pid in sorted("%04d" % int(i) for i in ids):
        for cam in cams:
            person = os.path.join(folder, f"cam{cam}", pid)
            if os.path.isdir(person):
                picked.append(rng.choice(sorted(person + "/" + n for n in os.listdir(person))))
    return picked


@pytest.mark.parametrize("mode,cams", [("all", (1, 2, 4, 5)), ("indoor", (1, 2))])
def test_official_draws_are_the_permutation_rows(tmp_path, mode, cams):
    folder = fake.build(tmp_path)
    perms = fake.random_permutations(seed=3)
    fake.write_rand_perm(folder / "exp" / "rand_perm_cam.mat", perms)
    seeded_query = data.load("sysu", tmp_path, mode=mode).query["path"].tolist()
    for shots in (1, 2, 10):
        galleries = []
        for trial in range(10):
            split = data.load("sysu", tmp_path, mode=mode, shots=shots, trial=trial,
                              draws="official")
            got = split.gallery["path"].tolist()
            assert got == _official_gallery(folder, perms, trial, cams, shots)
            assert split.query["path"].tolist() == seeded_query
            galleries.append(tuple(got))
        size = sum(min(shots, fake.SEEN[p].get(c, 0)) for p in fake.TEST for c in cams)
        assert {len(g) for g in galleries} == {size}
        if shots == 10:                                         # every image, every trial
            assert len(set(galleries)) == 1
        else:
            assert len(set(galleries)) > 1                      # rows differ per trial


def test_official_perm_file_option_and_rebuild_on_new_file(tmp_path):
    folder = fake.build(tmp_path)
    path = fake.write_rand_perm(tmp_path / "perms" / "rand_perm_cam.mat",
                                fake.random_permutations(seed=1))
    split = data.load("sysu", tmp_path, draws="official", perm_file=str(path), trial=2)
    assert split.protocol == "all_search_1shot_official"
    assert split.options["draws"] == "official" and split.options["perm_file"] == str(path)
    assert split.options["perm_sha1"] == hashlib.sha1(path.read_bytes()).hexdigest()
    assert "seed" not in split.options
    assert split.gallery["path"].tolist() == _official_gallery(
        folder, fake.random_permutations(seed=1), 2, (1, 2, 4, 5), 1)
    assert (folder / "reidcli_splits" / "sysu_official_all_shots1_val1.json").is_file()
    other = fake.random_permutations(seed=2)
    fake.write_rand_perm(path, other)                          # the cache must not be trusted
    for trial in (0, 2):
        again = data.load("sysu", tmp_path, draws="official", perm_file=str(path), trial=trial)
        assert again.gallery["path"].tolist() == _official_gallery(
            folder, other, trial, (1, 2, 4, 5), 1)


def test_official_without_or_with_a_wrong_file(tmp_path):
    folder = fake.build(tmp_path)
    default = folder / "exp" / "rand_perm_cam.mat"
    with pytest.raises(DatasetError) as caught:
        data.load("sysu", tmp_path, draws="official")
    message = caught.value.message
    assert str(default) in message and "perm_file" in message and "\n" not in message
    assert caught.value.exit_code == 2
    with pytest.raises(DatasetError, match=re.escape(str(tmp_path / "nope.mat"))):
        data.load("sysu", tmp_path, draws="official", perm_file=str(tmp_path / "nope.mat"))
    perms = fake.random_permutations()
    short = dict(perms)
    short[1, 4] = perms[1, 4][:, :2]                            # cam1/0004 holds 3 images
    fake.write_rand_perm(default, short)
    with pytest.raises(DatasetError, match=r"permutes 2 image\(s\) of person 4 in camera 1, "
                                           r"but .*cam1[/\\]0004 holds 3"):
        data.load("sysu", tmp_path, draws="official")
    broken = dict(perms)
    broken[2, 5] = perms[2, 5].copy()
    broken[2, 5][4] = 1                                         # row 5: [1, 1]
    fake.write_rand_perm(default, broken)
    with pytest.raises(DatasetError, match=r"row 5 of person 5 in camera 2 is not a "
                                           r"permutation of 1\.\.2"):
        data.load("sysu", tmp_path, draws="official")
    fake.write_rand_perm(default, perms)
    good_file = default.read_bytes()
    scipy.io.savemat(default, {"perm": np.zeros((2, 2))})
    with pytest.raises(DatasetError, match=r"has no variable 'rand_perm_cam' \(variables: perm\)"):
        data.load("sysu", tmp_path, draws="official")
    default.write_bytes(b"not a mat file" * 20)
    with pytest.raises(DatasetError, match="is not a readable MATLAB"):
        data.load("sysu", tmp_path, draws="official")
    default.write_bytes(good_file)
    assert len(data.load("sysu", tmp_path, draws="official").gallery) == 9


@pytest.mark.parametrize("mode,cams", [("all", (1, 2, 4, 5)), ("indoor", (1, 2))])
def test_agw_draws_restate_agw(tmp_path, mode, cams):
    folder = fake.build(tmp_path)
    galleries = []
    for trial in range(10):
        split = data.load("sysu", tmp_path, mode=mode, draws="agw", trial=trial)
        assert split.gallery["path"].tolist() == sorted(_agw_gallery(folder, trial, cams))
        assert split.gallery.groupby(["pid", "camid"]).size().max() == 1
        galleries.append(split.gallery["path"].tolist())
    assert galleries[0] != galleries[1]
    with pytest.raises(UsageError, match="single-shot only"):
        data.load("sysu", tmp_path, mode=mode, draws="agw", shots=10)


def test_agw_draws_count_every_folder_entry(tmp_path):
    """AGW chooses among all of os.listdir's entries: a draw landing on a non-image entry
    (which AGW would then fail to open) cannot be reproduced and is an error; the listing is
    part of the cache fingerprint."""
    folder = fake.build(tmp_path)
    clean = data.load("sysu", tmp_path, draws="agw", trial=4).gallery["path"].tolist()
    extra = folder / "cam5" / "0004" / "Thumbs.db"
    extra.write_bytes(b"")
    hits = [t for t in range(10)
            if any(p.endswith("Thumbs.db") for p in _agw_gallery(folder, t, (1, 2, 4, 5)))]
    assert hits
    with pytest.raises(DatasetError, match=rf"AGW's draw of trial {hits[0]} picks "
                                           r".*Thumbs\.db, which is not an image"):
        data.load("sysu", tmp_path, draws="agw", trial=4)
    extra.unlink()
    assert data.load("sysu", tmp_path, draws="agw", trial=4).gallery["path"].tolist() == clean


def test_draw_family_in_protocol_options_cache_and_store_layout(tmp_path):
    folder = fake.build(tmp_path)
    fake.write_rand_perm(folder / "exp" / "rand_perm_cam.mat", fake.random_permutations())
    for draws in ("seeded", "official", "agw"):
        split = data.load("sysu", tmp_path, mode="indoor", draws=draws)
        assert split.protocol == f"indoor_search_1shot_{draws}"
        assert split.options["draws"] == draws and ("seed" in split.options) == (
            draws == "seeded")
        layout = dataset_layout("sysu", tmp_path, trials="0,1", progress=False,
                                mode="indoor", draws=draws)
        assert layout.protocol == split.protocol and layout.options["draws"] == draws
    assert sorted(p.name for p in (folder / "reidcli_splits").iterdir()) == [
        "sysu_agw_indoor_shots1_val1.json", "sysu_official_indoor_shots1_val1.json",
        "sysu_seeded_indoor_shots1_val1_seed0.json"]
    with pytest.raises(UsageError, match="draws='random' must be one of auto, seeded"):
        data.load("sysu", tmp_path, draws="random")
    with pytest.raises(UsageError, match="seed=1 applies to draws=seeded only"):
        data.load("sysu", tmp_path, draws="agw", seed=1)
    with pytest.raises(UsageError, match="perm_file applies to draws=official only"):
        data.load("sysu", tmp_path, draws="seeded", perm_file="x.mat")
    # the default draws are the official ones when the permutation file is present
    default = data.load("sysu", tmp_path, mode="indoor")
    assert default.protocol == "indoor_search_1shot_official"
    assert default.options["draws"] == "official"
    with pytest.raises(UsageError, match="seed=1 applies to draws=seeded only.*official"):
        data.load("sysu", tmp_path, seed=1)
    with pytest.raises(DatasetError, match="x.mat, which does not exist"):
        data.load("sysu", tmp_path, perm_file="x.mat")       # perm_file implies official
    (folder / "exp" / "rand_perm_cam.mat").unlink()
    assert data.load("sysu", tmp_path).protocol == "all_search_1shot_seeded"


def test_reid_data_info_and_check_name_the_draws(capsys, tmp_path):
    code, out, err = run_cli(capsys, "data", "info", "sysu")
    assert code == 0, err
    flat = " ".join(out.split())
    assert "draws='auto'" in flat and "perm_file=None" in flat
    assert "draws=official" in flat and "draws=agw" in flat and "rand_perm_cam.mat" in flat
    fake.build(tmp_path)
    code, out, err = run_cli(capsys, "data", "check", "sysu", "--root", tmp_path,
                             "--option", "draws=agw")
    assert code == 0, err
    assert "all_search_1shot_agw" in " ".join(out.split())
    code, out, err = run_cli(capsys, "data", "check", "sysu", "--root", tmp_path,
                             "--option", "draws=official")
    assert code == 1 and "rand_perm_cam.mat" in err and "draws=seeded" in err


@pytest.mark.skipif(not os.environ.get("REIDCLI_REAL_DATA"), reason="needs real datasets")
def test_real_counts():
    root = os.environ["REIDCLI_REAL_DATA"]
    split = data.load("sysu_mm01", root)
    assert (split.train["modality"] == "visible").sum() == 22258
    assert (split.train["modality"] == "infrared").sum() == 11909
    assert split.train["pid"].nunique() == 395
    assert (len(split.query), split.query["pid"].nunique()) == (3803, 96)
    assert (len(split.gallery), split.gallery["pid"].nunique()) == (301, 96)
    assert split.all_records()["camid"].nunique() == 6
    indoor = data.load("sysu_mm01", root, mode="indoor")
    assert (len(indoor.query), len(indoor.gallery)) == (3803, 112)
