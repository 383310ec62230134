"""Fault cases of the dataset loaders (issue 28): SYSU-MM01's counts, draws and gallery size,
damaged dataset trees and trial caches, numbers at the edges in file names, out-of-range
trials and options, DMG-Net targets, and `reid data synth` outputs that cannot be written.

Each test (or parametrized case) names the reported case in a comment. Tiny fake trees only
(tests/data/fake_trees), built once per module and copied where a test damages them."""
from __future__ import annotations

import errno
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import reidcli.data as data
from reidcli.data.check import expected_counts
from reidcli.data.image_files import ImageReadError, load_rgb
from reidcli.errors import DatasetError, OutputError, ParameterError, UsageError
from reidcli.evaluation.arrays import evaluate_arrays
from reidcli.evaluation.report import trial_dict
from reidcli.training.sources import check_target_domains, multi_source_records
from tests.data.fake_trees import regdb as regdb_tree
from tests.data.fake_trees import sysu_mm01 as sysu_tree
from tests.data.fake_trees import warca_sets
from tests.faults.helpers import assert_one_line_error_in_process, reid_in_process


@pytest.fixture(scope="module")
def clean_trees(tmp_path_factory) -> Path:
    """A data root with fake SYSU-MM01 and RegDB trees; copy before damaging."""
    root = tmp_path_factory.mktemp("dataset_faults")
    sysu_tree.build(root)
    regdb_tree.build(root)
    return root


@pytest.fixture
def trees(clean_trees, tmp_path) -> Path:
    """A private copy of :func:`clean_trees` (no trial caches yet)."""
    root = tmp_path / "data"
    shutil.copytree(clean_trees, root, ignore=shutil.ignore_patterns("reidcli_splits"))
    return root


# -- SYSU-MM01 ------------------------------------------------------------------------------
@pytest.mark.parametrize("options, gallery", [
    ({}, (301, 96)),
    ({"mode": "indoor"}, (112, 56)),             # case: mode=indoor flagged the right 112/56
    ({"shots": 10}, (3010, 96)),                 # case: shots=10 compared with single-shot
    ({"mode": "indoor", "shots": 10}, (1120, 56)),
    ({"seed": 3, "draws": "seeded"}, (301, 96)),  # the draws never change the counts
])
def test_sysu_check_expects_the_counts_of_mode_and_shots(options, gallery):
    counts = expected_counts(data.info("sysu"), options)
    assert counts["gallery"] == gallery and counts["query"] == (3803, 96)


def test_sysu_check_prints_indoor_counts_and_unknown_for_undocumented(capsys, trees):
    # case: `reid data check sysu_mm01 --option mode=indoor` compared with all-search counts
    code, out, err = reid_in_process("data", "check", "sysu", "--root", trees,
                                     "--option", "mode=indoor", capsys=capsys)
    assert code == 0, err
    assert "112 / 56" in out and "301 / 96" not in out
    assert expected_counts(data.info("sysu"), {"shots": 5}) == {}     # not documented
    assert expected_counts(data.info("sysu"), {"train_includes_val": False})["train"] is None


def test_sysu_default_draws_are_official_when_the_permutation_file_is_present(capsys, trees):
    # case: the default gallery draws were reidcli's seeded ones even with the official file
    folder = trees / "SYSU-MM01"
    assert data.load("sysu", trees).protocol == "all_search_1shot_seeded"     # no file
    sysu_tree.write_rand_perm(folder / "exp" / "rand_perm_cam.mat",
                              sysu_tree.random_permutations())
    split = data.load("sysu", trees)
    assert split.protocol == "all_search_1shot_official"
    assert split.options["draws"] == "official" and "perm_sha1" in split.options
    code, out, err = reid_in_process("data", "check", "sysu", "--root", trees, capsys=capsys)
    assert code == 0 and "all_search_1shot_official" in " ".join(out.split()), err
    with pytest.raises(UsageError, match="perm_file is given"):     # nor with perm_file
        data.load("sysu", trees, seed=2, perm_file=folder / "exp" / "rand_perm_cam.mat")
    # a seed asks for the seeded draws: say so rather than silently ignore it
    assert_one_line_error_in_process(
        reid_in_process("data", "check", "sysu", "--root", trees, "--option", "seed=4",
                        capsys=capsys), "seeded", "official")


def test_sysu_report_gallery_size_counts_images_and_ids_apart():
    # case: the SYSU JSON `gallery_size` counted identities, not images
    result = evaluate_arrays([1], [5], [2, 2, 3, 1], [0, 0, 0, 0], protocol="sysu",
                             distances=np.array([[0.1, 0.2, 0.3, 0.4]], np.float32))
    row = trial_dict(result)
    assert row["gallery_size"] == 4 and row["gallery_ids"] == 3


# -- damaged trees and caches ---------------------------------------------------------------
@pytest.mark.parametrize("dataset, rel, content, needle", [
    # case: binary exp/*.txt
    ("sysu", "SYSU-MM01/exp/test_id.txt", bytes(range(128, 256)), "not UTF-8 text"),
    # case: binary RegDB idx file
    ("regdb", "RegDB/idx/train_visible_1.txt", b"\xff\xfe\x00junk" * 20, "not UTF-8 text"),
    # wrong encoding (UTF-16 with BOM)
    ("regdb", "RegDB/idx/test_thermal_1.txt", "Thermal/3/x.bmp 0\n".encode("utf-16"),
     "not UTF-8 text"),
    # empty split file
    ("regdb", "RegDB/idx/test_visible_1.txt", b"", "lists no image"),
    # number at the edge in an id file
    ("sysu", "SYSU-MM01/exp/test_id.txt", b"4,5,6,99999999999999999999999\n",
     "not an integer in [1, 9999]"),
    # a folder where the file should be
    ("sysu", "SYSU-MM01/exp/val_id.txt", None, "missing file"),
], ids=["sysu-binary", "regdb-binary", "regdb-utf16", "regdb-empty", "sysu-huge-id",
        "sysu-folder"])
def test_damaged_list_files_are_one_line_errors(capsys, trees, dataset, rel, content, needle):
    path = trees / rel
    path.unlink()
    if content is None:
        path.mkdir()
    else:
        path.write_bytes(content)
    with pytest.raises(DatasetError, match="^" + dataset[:4]) as info:
        data.load(dataset, trees)
    assert needle in info.value.message and str(path) in info.value.message
    assert_one_line_error_in_process(
        reid_in_process("data", "check", dataset, "--root", trees, capsys=capsys),
        needle, code=1)


@pytest.mark.parametrize("content", [b"[]", b"null", b'{"version": 1, "trials": null}',
                                     bytes(range(256)), b'"x"'],
                         ids=["list", "null", "null-trials", "binary", "string"])
def test_damaged_trial_caches_are_rebuilt(trees, content):
    # case: split caches holding [] or null gave tracebacks
    clean = data.load("sysu", trees, trial=3).gallery["path"].tolist()
    caches = list((trees / "SYSU-MM01" / "reidcli_splits").glob("*.json"))
    assert caches
    for cache in caches:
        cache.write_bytes(content)
    assert data.load("sysu", trees, trial=3).gallery["path"].tolist() == clean
    payload = json.loads(caches[0].read_text())          # rewritten whole
    assert isinstance(payload["trials"], list) and len(payload["trials"]) == 10


def test_cache_listing_a_missing_image_says_to_rebuild(trees):
    data.load("sysu", trees)
    cache = next((trees / "SYSU-MM01" / "reidcli_splits").glob("*.json"))
    payload = json.loads(cache.read_text())
    payload["trials"][0]["gallery"].append("cam1/0004/9999.jpg")
    cache.write_text(json.dumps(payload))
    with pytest.raises(DatasetError, match="reidcli_splits"):
        data.load("sysu", trees)


def test_empty_image_error_names_it_and_check_can_open_images(capsys, trees):
    # case: a 0-byte image's error pointed to `reid data check`, which never opens images
    image = trees / "SYSU-MM01" / "cam3" / "0004" / "0041.jpg"     # a query of every trial
    image.write_bytes(b"")
    with pytest.raises(ImageReadError) as info:
        load_rgb(image)
    assert f"{image} is empty (0 bytes)" in info.value.message
    assert "--open-images" in info.value.message
    code, out, err = reid_in_process("data", "check", "sysu", "--root", trees, capsys=capsys)
    assert code == 0, err                                # parsing alone never opens images
    assert_one_line_error_in_process(
        reid_in_process("data", "check", "sysu", "--root", trees, "--open-images",
                        capsys=capsys), str(image), "empty (0 bytes)", code=1)


@pytest.mark.parametrize("dataset, trial", [("sysu", 10), ("regdb", 10), ("regdb", -1)])
def test_out_of_range_trial_exits_2(capsys, trees, dataset, trial):
    # case: an out-of-range --trial exited 1, not 2
    assert_one_line_error_in_process(
        reid_in_process("data", "check", dataset, "--root", trees, "--trial", trial,
                        capsys=capsys), f"--trial {trial}", "trials 0..9")


def test_single_split_datasets_refuse_other_trials(tiny_synthetic_root):
    with pytest.raises(ParameterError, match="trial=2 is outside the one trial"):
        data.load("synthetic", tiny_synthetic_root, name="tiny", trial=2)


def test_trial_loader_option_that_is_not_an_integer(trees):
    from reidcli.features.layout import dataset_layout

    # `--option trial=abc` of extract/train gave a ValueError traceback
    with pytest.raises(ParameterError, match="trial='abc' is not an integer"):
        dataset_layout("regdb", trees, trial="abc", progress=False)


# -- numbers at the edges --------------------------------------------------------------------
@pytest.mark.parametrize("name", ["9223372036854775813.jpg",     # 2**63 + 5
                                  "99999999999999999999.jpg"])   # 1e20
def test_sysu_image_number_beyond_int64_is_refused(trees, name):
    # case: pids/numbers of 1e20 or 2^63+5 in file names
    folder = trees / "SYSU-MM01" / "cam1" / "0004"
    shutil.copy(folder / "0041.jpg", folder / name)
    with pytest.raises(DatasetError, match="not an integer in") as info:
        data.load("sysu", trees)
    assert name in info.value.message


@pytest.mark.parametrize("pid", ["9223372036854775813", "100000000000000000000"])
def test_pid_beyond_int64_in_a_file_name_is_refused(tmp_path, pid):
    # case: pids of 1e20 or 2^63+5 in file names (3DPeS: <pid>_<n>.bmp)
    folder = warca_sets.build_3dpes(tmp_path)
    image = next(p for p in folder.rglob("*.bmp"))
    shutil.copy(image, image.with_name(f"{pid}_1.bmp"))
    with pytest.raises(DatasetError, match=f"{pid}_1.bmp gives pid {pid}"):
        data.load("3dpes", tmp_path, test_ids=3)


# -- options ----------------------------------------------------------------------------------
@pytest.mark.parametrize("dataset, options, needle", [
    # case: draws=100000000 built 10**9 trials until memory ran out
    ("synthetic", {"protocol": "warca", "draws": 100000000}, "draws=100000000 must be"),
    ("synthetic", {"protocol": "single_shot_half", "num_trials": 100000000},
     "num_trials=100000000 must be"),
    ("synthetic", {"train_ids_limit": 2, "repeats": 10**9}, "repeats=1000000000 must be"),
    # loader option checks through reidcli.params
    ("synthetic", {"protocol": "warca", "warca_draw": "both"}, "warca_draw='both' must be one of"),
    ("synthetic", {"protocol": "warca", "draws": 2.5}, "draws=2.5 must be an integer"),
    ("sysu", {"shots": 0}, "shots=0 must be an integer in [1, 1000]"),
    ("sysu", {"seed": -1}, "seed=-1 must be an integer"),
    ("sysu", {"seed": 2**32, "draws": "seeded"}, "seed=4294967296 must be an integer"),
    ("sysu", {"mode": "outdoor"}, "mode='outdoor' must be one of all, indoor"),
    ("regdb", {"direction": "x"}, "direction='x' must be one of"),
])
def test_out_of_range_loader_options_are_refused(trees, tiny_synthetic_root, dataset, options,
                                                 needle):
    root = tiny_synthetic_root if dataset == "synthetic" else trees
    extra = {"name": "tiny"} if dataset == "synthetic" else {}
    with pytest.raises(ParameterError) as info:
        data.load(dataset, root, **extra, **options)
    assert needle in info.value.message


def test_dmgnet_target_naming_no_domain_of_its_source_is_refused(tiny_synthetic_root):
    # case: `--targets synthetic/d9` (no such domain) was accepted
    loaded = multi_source_records(["synthetic"], tiny_synthetic_root,
                                  source_options={"synthetic": {"name": "tiny"}})
    assert loaded.source_domains == {"synthetic": ["synthetic/d0"]}
    with pytest.raises(ParameterError, match="targets='synthetic/d9' names no domain") as info:
        check_target_domains(["synthetic/d9"], loaded.source_domains)
    assert "synthetic/d0" in info.value.message
    check_target_domains(["synthetic/d0", "viper", "viper/x"], loaded.source_domains)
    # a source loaded with its own domains option may hold other domains: not checked
    check_target_domains(["synthetic/d9"], {})


# -- `reid data synth` outputs ---------------------------------------------------------------
def test_synth_out_that_cannot_be_written(capsys, tmp_path, monkeypatch):
    # case: --out an existing file, a path under a file, a read-only place, a full disk
    afile = tmp_path / "afile"
    afile.write_text("mine\n")
    for out in (afile, afile / "sub"):
        assert_one_line_error_in_process(
            reid_in_process("data", "synth", "--preset", "tiny", "--out", out, capsys=capsys),
            "a file is in its path", "--out")
    assert afile.read_text() == "mine\n"
    assert_one_line_error_in_process(       # /proc refuses new folders (like a read-only mount)
        reid_in_process("data", "synth", "--preset", "tiny", "--out", "/proc/reidcli-nope",
                        capsys=capsys), "cannot create the folder /proc/reidcli-nope")

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    import reidcli.data.synthetic as synthetic
    monkeypatch.setattr(synthetic, "_render_all", full)
    assert_one_line_error_in_process(
        reid_in_process("data", "synth", "--preset", "tiny", "--out", tmp_path / "d",
                        capsys=capsys), "disk full")
    assert not list((tmp_path / "d" / "synthetic").iterdir())      # no partial folder left
    with pytest.raises(OutputError, match="disk full"):
        synthetic.generate(tmp_path / "e", "tiny", progress=False)


# -- more damaged trees ----------------------------------------------------------------------
def test_damaged_synthetic_meta_is_one_line_error(tmp_path, tiny_synthetic_root):
    root = tmp_path / "root"
    shutil.copytree(tiny_synthetic_root, root)
    meta = root / "synthetic" / "tiny" / "meta.json"
    payload = json.loads(meta.read_text())
    payload["domains"] = "x"
    meta.write_text(json.dumps(payload))
    with pytest.raises(DatasetError, match="meta.json is damaged"):
        data.load("synthetic", root, name="tiny", generate=False)
    for content in (bytes(range(256)), b"[]", b"{not json"):
        # an unreadable meta.json would silently make every camera visible
        meta.write_bytes(content)
        with pytest.raises(DatasetError, match="meta.json is not a readable JSON object"):
            data.load("synthetic", root, name="tiny", generate=False)
    meta.unlink()                                # no meta: the folders alone load
    assert len(data.load("synthetic", root, name="tiny", generate=False).query)
    images = root / "synthetic" / "tiny" / "images.csv"
    for content in (bytes(range(256)), b"relpath,domain,pid,camid,split\n"):
        images.write_bytes(content)
        with pytest.raises(DatasetError, match="images.csv"):
            data.load("synthetic", root, name="tiny", generate=False)


def test_synth_onto_an_existing_dataset_with_damaged_images_csv(capsys, tmp_path,
                                                                tiny_synthetic_root):
    shutil.copytree(tiny_synthetic_root, tmp_path / "root")
    (tmp_path / "root" / "synthetic" / "tiny" / "images.csv").write_bytes(bytes(range(256)))
    assert_one_line_error_in_process(
        reid_in_process("data", "synth", "--preset", "tiny", "--out", tmp_path / "root",
                        capsys=capsys), "images.csv is damaged", "--force", code=2)


def test_empty_msmt17_list_and_cuhk03_config_are_one_line_errors(tmp_path):
    from tests.data.fake_trees import cuhk03 as cuhk03_tree
    from tests.data.fake_trees import msmt17 as msmt17_tree

    folder = msmt17_tree.build(tmp_path / "m")
    listing = next(folder.rglob("list_query.txt"))
    listing.write_bytes(b"")
    with pytest.raises(DatasetError, match="list_query.txt lists no image"):
        data.load("msmt17", tmp_path / "m")
    folder = cuhk03_tree.build(tmp_path / "c")
    config = next(folder.rglob("cuhk03_new_protocol_config_detected.mat"))
    config.write_bytes(b"[]\n")
    with pytest.raises(DatasetError, match="cannot read .* as a MATLAB"):
        data.load("cuhk03", tmp_path / "c")
    with pytest.raises(UsageError, match="trial=1 is outside the one trial"):
        data.load("cuhk03", tmp_path / "c", trial=1)
