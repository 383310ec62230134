"""Fault cases of feature stores and `reid store import`: every damaged, foreign or malformed
input is one clear line (docs/formats.md is the contract the reader checks)."""
from __future__ import annotations

import json

import h5py
import numpy as np
import pandas as pd
import pytest

from reidcli.data.records import normalize_frame
from reidcli.store.writer import StoreWriter
from tests.cli.helpers import run_cli
from tests.faults.helpers import assert_nothing_written, assert_one_line_error, files, reid

N = 24


def _problem(seed=0, n=N, dim=6):
    rng = np.random.default_rng(seed)
    pids = np.concatenate([np.arange(1, 7), np.arange(1, 7), rng.integers(1, 7, n - 12)])
    cams = np.concatenate([np.zeros(6, int), np.ones(6, int), rng.integers(0, 3, n - 12)])
    splits = np.array(["query"] * 6 + ["gallery"] * (n - 6))
    centers = rng.standard_normal((8, dim))
    feats = (centers[pids] + 0.3 * rng.standard_normal((n, dim))).astype(np.float32)
    return pids, cams, splits, feats


def write_valid_store(path, protocol=True, seed=0):
    """A small valid store written by reidcli (records digest, protocol of one trial)."""
    pids, cams, splits, feats = _problem(seed)
    rec = normalize_frame(pd.DataFrame({"path": [f"img/{i:03d}.jpg" for i in range(N)],
                                        "pid": pids, "camid": cams, "split": splits,
                                        "dataset": "synthetic"}))
    with StoreWriter(path, rec, dataset="") as w:
        w.set_feature("emb", feats)
        if protocol:
            w.write_protocol("p", [{"query_idx": np.arange(6), "gallery_idx": np.arange(6, N),
                                    "train_idx": np.arange(6, N)}])
    return path


def write_foreign_store(path, **overrides):
    """A store written with plain h5py exactly as docs/formats.md says — no reidcli code,
    no private ``kind`` attributes, no digest, int32 pids and fixed-length byte strings."""
    pids, cams, splits, feats = _problem(1)
    with h5py.File(path, "w") as h5:
        h5.attrs["format"] = "reidcli.store"
        h5.attrs["schema"] = 1
        rec = h5.create_group("records")
        rec.create_dataset("path", data=np.array([f"x{i}.jpg" for i in range(N)], dtype=object),
                           dtype=h5py.string_dtype("utf-8"))
        rec.create_dataset("pid", data=pids.astype(np.int32))
        rec.create_dataset("camid", data=cams.astype(np.int64))
        rec.create_dataset("split", data=np.array([s.encode() for s in splits]))   # |S7
        rec.create_dataset("x_quality", data=np.linspace(0, 1, N))
        rec.create_dataset("x_flag", data=np.arange(N) % 2 == 0)
        h5.create_group("features").create_dataset("emb", data=feats.astype(np.float64))
        for key, value in overrides.items():
            h5.attrs[key] = value
    return path


def _flip_byte_of(path, dataset, index=0):
    with h5py.File(path, "r") as h5:
        ds = h5[dataset]
        offset = ds.id.get_offset() + index * ds.dtype.itemsize
    with open(path, "r+b") as fh:
        fh.seek(offset)
        byte = fh.read(1)
        fh.seek(offset)
        fh.write(bytes([byte[0] ^ 0x01]))


# -- defect 1: foreign stores --------------------------------------------------------------------
def test_foreign_store_without_kind_attrs_is_read_by_info_and_eval(tmp_path):
    store = write_foreign_store(tmp_path / "foreign.h5")
    proc = reid("store", "info", "--store", store, "--json")
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["splits"]["query"]["images"] == 6
    assert summary["features"]["emb"]["dim"] == 6
    proc = reid("eval", "--store", store, "--json", tmp_path / "r.json", "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert json.loads((tmp_path / "r.json").read_text())["protocol"] == "market"


def test_foreign_store_columns_keep_their_kinds(tmp_path):
    from reidcli.store import open_store

    with open_store(write_foreign_store(tmp_path / "f.h5")) as st:
        rec = st.records
    assert rec["split"].iloc[0] == "query" and rec["pid"].dtype == np.int64
    assert rec["x_flag"].dtype == bool and rec["x_quality"].dtype == np.float64


# -- defect 2: records digest --------------------------------------------------------------------
def test_flipped_byte_in_records_pid_is_a_digest_mismatch(tmp_path):
    store = write_valid_store(tmp_path / "s.h5")
    _flip_byte_of(store, "records/pid", 3)
    proc = reid("store", "info", "--store", store)
    assert_one_line_error(proc, str(store), "records digest mismatch — the file is damaged")


def test_flipped_byte_in_records_camid_fails_eval_in_process(capsys, tmp_path):
    store = write_valid_store(tmp_path / "s.h5")
    _flip_byte_of(store, "records/camid", 7)
    code, _, err = run_cli(capsys, "eval", "--store", store)
    assert code == 2 and "records digest mismatch" in err and err.count("\n") == 1


# -- defect 3: protocol index arrays -------------------------------------------------------------
def _replace_trial_array(path, name, value):
    with h5py.File(path, "r+") as h5:
        trial = h5["protocol/trial_0"]
        if name in trial:
            del trial[name]
        if value is not None:
            trial.create_dataset(name, data=value)


@pytest.mark.parametrize("name,value,needle", [
    ("query_idx", np.array([0, 1, N]), f"row index {N} outside 0..{N - 1}"),
    ("gallery_idx", np.array([-1, 7, 8]), "row index -1 outside"),
    ("query_idx", np.array([0.0, 1.0]), "expected integer row indices"),
    ("gallery_idx", np.array([[6, 7]]), "expected 1-D row indices"),
    ("query_idx", None, "has no query_idx"),
    ("gallery_idx", None, "has no gallery_idx"),
    ("train_idx", np.array([6, 99]), "row index 99 outside"),
])
def test_bad_protocol_index_arrays_are_one_line(capsys, tmp_path, name, value, needle):
    store = write_valid_store(tmp_path / "s.h5")
    _replace_trial_array(store, name, value)
    for argv in (("store", "info", "--store", store), ("eval", "--store", store)):
        code, _, err = run_cli(capsys, *argv)
        assert code == 2 and err.count("\n") == 1 and err.startswith("error: "), err
        assert "trial_0" in err and name in err and needle in err, err


def test_missing_train_idx_fails_training_with_one_line(capsys, tmp_path):
    store = write_valid_store(tmp_path / "s.h5")
    _replace_trial_array(store, "train_idx", None)
    code, _, _ = run_cli(capsys, "store", "info", "--store", store)
    assert code == 0                                    # scoring does not need it
    before = files(tmp_path)
    code, _, err = run_cli(capsys, "train", "xqda", "--store", store, "--out", tmp_path / "m.h5")
    assert code == 2 and err.count("\n") == 1, err
    assert "trial_0 has no train_idx" in err and str(store) in err
    assert_nothing_written(tmp_path, before)


# -- defect 4: features, damaged and locked files -----------------------------------------------
def _replace_feature(path, value):
    with h5py.File(path, "r+") as h5:
        del h5["features/emb"]
        h5["features"].create_dataset("emb", data=value)


@pytest.mark.parametrize("value,needle", [
    (np.zeros((N, 0), np.float32), "width 0"),
    (np.zeros((N - 1, 4), np.float32), f"has {N - 1} rows, expected {N}"),
    (np.zeros((N, 4), np.int32), "expected floats"),
    (np.zeros(N, np.float32), "expected [N, D]"),
    (np.zeros((N, 2, 2), np.float32), "expected [N, D]"),
])
def test_malformed_features_are_one_line(capsys, tmp_path, value, needle):
    store = write_valid_store(tmp_path / "s.h5")
    _replace_feature(store, value)
    for argv in (("store", "info", "--store", store), ("eval", "--store", store)):
        code, _, err = run_cli(capsys, *argv)
        assert code == 2 and err.count("\n") == 1, err
        assert "/features/emb" in err and needle in err, err


def test_truncated_store_is_damaged(tmp_path):
    store = write_valid_store(tmp_path / "s.h5")
    data = store.read_bytes()
    store.write_bytes(data[:len(data) // 2])
    assert_one_line_error(reid("store", "info", "--store", store), str(store),
                          "is damaged or not an HDF5 file")


@pytest.mark.parametrize("where", ["superblock", "root-header", "records-header"])
def test_overwritten_metadata_is_one_line(capsys, tmp_path, where):
    store = write_valid_store(tmp_path / "s.h5")
    with h5py.File(store, "r") as h5:
        objects = {"root-header": h5["/"], "records-header": h5["records"]}
        offset = 8 if where == "superblock" else h5py.h5o.get_info(objects[where].id).addr
    with open(store, "r+b") as fh:
        fh.seek(offset)
        fh.write(b"\xa5" * 48)
    code, _, err = run_cli(capsys, "store", "info", "--store", store)
    assert code == 2 and err.count("\n") == 1 and err.startswith("error: "), err
    assert str(store) in err


def test_plain_text_file_is_not_an_hdf5_file(capsys, tmp_path):
    (tmp_path / "t.h5").write_text("hello")
    code, _, err = run_cli(capsys, "store", "info", "--store", tmp_path / "t.h5")
    assert code == 2 and "is damaged or not an HDF5 file" in err


def test_store_locked_by_a_writer_is_in_use(tmp_path):
    store = write_valid_store(tmp_path / "s.h5")
    with h5py.File(store, "r+"):                      # holds HDF5's write lock
        proc = reid("store", "info", "--store", store, env={"HDF5_USE_FILE_LOCKING": "TRUE"})
    line = assert_one_line_error(proc, str(store), "in use by another process")
    assert "not an HDF5 file" not in line


# -- defect 5: reid store import -----------------------------------------------------------------
def _npz(tmp_path, cams=None, name="e.npz"):
    pids, c, splits, feats = _problem(2)
    np.savez(tmp_path / name, features=feats, pid=pids, camid=c if cams is None else cams,
             split=splits)
    return tmp_path / name


def test_truncated_npz_is_one_line(tmp_path):
    src = _npz(tmp_path)
    data = src.read_bytes()
    src.write_bytes(data[:len(data) * 2 // 3])
    before = files(tmp_path)
    proc = reid("store", "import", "--out", tmp_path / "s.h5", "--npz", src)
    assert_one_line_error(proc, "--npz", "is not a readable .npz file")
    assert_nothing_written(tmp_path, before)


@pytest.mark.parametrize("cut", [10, 200, -30])
def test_npz_cut_anywhere_is_one_line(capsys, tmp_path, cut):
    src = _npz(tmp_path)
    data = src.read_bytes()
    src.write_bytes(data[:cut])
    code, _, err = run_cli(capsys, "store", "import", "--out", tmp_path / "s.h5", "--npz", src)
    assert code == 2 and err.count("\n") == 1 and "--npz" in err, err
    assert not (tmp_path / "s.h5").exists()


@pytest.mark.parametrize("name", ["", "a/b", ".hidden", "/abs"])
def test_bad_feature_names_are_refused(capsys, tmp_path, name):
    src = _npz(tmp_path)
    before = files(tmp_path)
    code, _, err = run_cli(capsys, "store", "import", "--out", tmp_path / "s.h5", "--npz", src,
                           "--name", name)
    assert code == 2 and err.count("\n") == 1 and err.startswith("error: --name "), err
    assert_nothing_written(tmp_path, before)


def test_name_with_slash_subprocess(tmp_path):
    src = _npz(tmp_path)
    before = files(tmp_path)
    proc = reid("store", "import", "--out", tmp_path / "s.h5", "--npz", src, "--name", "a/b")
    assert_one_line_error(proc, "--name", "a/b")
    assert_nothing_written(tmp_path, before)


def test_one_based_camids_are_refused_or_shifted(capsys, tmp_path):
    from reidcli.store import open_store

    _, cams, _, _ = _problem(2)
    src = _npz(tmp_path, cams + 1)
    before = files(tmp_path)
    code, _, err = run_cli(capsys, "store", "import", "--out", tmp_path / "s.h5", "--npz", src)
    assert code == 2 and err.count("\n") == 1 and "1-based" in err and "--camid-base 1" in err
    assert_nothing_written(tmp_path, before)
    code, _, err = run_cli(capsys, "store", "import", "--out", tmp_path / "s.h5", "--npz", src,
                           "--camid-base", "1")
    assert code == 0, err
    with open_store(tmp_path / "s.h5") as st:
        assert st.records["camid"].tolist() == cams.tolist()
    code, _, err = run_cli(capsys, "store", "import", "--out", tmp_path / "k.h5", "--npz", src,
                           "--camid-base", "0")
    assert code == 0, err
    zero = _npz(tmp_path, cams, name="z.npz")
    code, _, err = run_cli(capsys, "store", "import", "--out", tmp_path / "z.h5", "--npz", zero,
                           "--camid-base", "1")
    assert code == 2 and "camid 0" in err and not (tmp_path / "z.h5").exists()
