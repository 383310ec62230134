"""Fault cases of `reid store import` (issue 28): 0-based pids, atomic-write holes, numbers at
the edges, .mat files given to the numpy routes and other careless inputs. Each case is one
line (exit 2, ``error: … — …``) that leaves nothing behind, or a documented result."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import scipy.io

from reidcli.data.records import normalize_frame
from reidcli.errors import OutputError
from reidcli.store import StoreWriter, open_store
from reidcli.store.importer import import_store
from tests.faults.helpers import (assert_nothing_written, assert_one_line_error_in_process,
                                  files, reid_in_process)

N = 12
SPLITS = ["query"] * 4 + ["gallery"] * 8


def _labels(base=1):
    """pids numbered from ``base`` (0: as np.arange gives them), 0-based camids."""
    pids = np.array([0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3]) + base
    cams = np.array([0] * 4 + [1] * 8)
    return pids, cams


def _features(seed=0):
    pids, _ = _labels(0)
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((4, 6)) * 3
    return (centers[pids] + 0.1 * rng.standard_normal((N, 6))).astype(np.float32)


def _npz(tmp_path, name="e.npz", **over):
    pids, cams = _labels(0)                               # 0-based, as np.arange gives
    arrays = dict(features=_features(), pid=pids, camid=cams, split=np.array(SPLITS))
    arrays.update(over)
    np.savez(tmp_path / name, **arrays)
    return tmp_path / name


def _csv(tmp_path, name="labels.csv", **cols):
    pids, cams = _labels()
    frame = pd.DataFrame({"pid": pids.astype(object), "camid": cams, "split": SPLITS})
    for key, value in cols.items():
        frame[key] = value
    frame.to_csv(tmp_path / name, index=False)
    np.save(tmp_path / "f.npy", _features())
    return tmp_path / name


# -- "person 0 vanishes on import" -------------------------------------------------------------
def test_zero_based_pids_warn_and_info_counts_pid_0_as_distractors(capsys, tmp_path):
    # case: 0-based pids imported silently; store info counted pid 0 as an identity
    src = _npz(tmp_path)
    code, out, err = reid_in_process("store", "import", "--out", tmp_path / "s.h5", "--npz",
                                     src, capsys=capsys)
    assert code == 0, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("warning: "), err
    assert "pid 0" in lines[0] and "distractor" in lines[0] and "--pid-base 0" in lines[0]
    code, out, err = reid_in_process("store", "info", "--store", tmp_path / "s.h5", "--json",
                                     capsys=capsys)
    query = json.loads(out)["splits"]["query"]
    assert (query["ids"], query["distractors"], query["junk"]) == (3, 1, 0)


def test_pid_base_0_shifts_pids_and_is_recorded(capsys, tmp_path):
    # case: `--pid-base 0` makes person 0 person 1; every query is then scored
    src = _npz(tmp_path)
    code, _, err = reid_in_process("store", "import", "--out", tmp_path / "s.h5", "--npz", src,
                                   "--pid-base", "0", capsys=capsys)
    assert code == 0 and "warning" not in err, err
    with open_store(tmp_path / "s.h5") as st:
        assert st.records["pid"].tolist() == _labels(1)[0].tolist()
        assert st.provenance["pid_base"] == 0 and st.provenance["pid_shift"] == 1
    code, out, err = reid_in_process("eval", "--store", tmp_path / "s.h5", "--json",
                                     tmp_path / "r.json", capsys=capsys)
    assert code == 0, err
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["num_valid_queries"] == 4 and report["num_skipped_queries"] == 0


def test_pid_base_must_be_0_or_1(capsys, tmp_path):
    # case: an out-of-range --pid-base is one line naming the flag
    src = _npz(tmp_path)
    before = files(tmp_path)
    result = reid_in_process("store", "import", "--out", tmp_path / "s.h5", "--npz", src,
                             "--pid-base", "2", capsys=capsys)
    assert_one_line_error_in_process(result, "--pid-base", "0 or 1")
    assert_nothing_written(tmp_path, before)


# -- atomic writes -----------------------------------------------------------------------------
def test_csv_column_with_slash_is_refused_and_leaves_nothing(capsys, tmp_path):
    # case: an extra CSV column `a/b` exited 2 yet left a store every reader refuses
    labels = _csv(tmp_path, **{"a/b": range(N)})
    before = files(tmp_path)
    result = reid_in_process("store", "import", "--out", tmp_path / "s.h5", "--features",
                             tmp_path / "f.npy", "--labels", labels, capsys=capsys)
    assert_one_line_error_in_process(result, "labels.csv", "'a/b'")
    assert_nothing_written(tmp_path, before)


def test_writer_never_renames_a_store_the_reader_refuses(tmp_path):
    # case (safety net): a record column that HDF5 turns into a group fails the verify step
    rec = normalize_frame(pd.DataFrame({"path": ["a", "b"], "pid": [1, 2], "camid": [0, 1],
                                        "split": ["query", "gallery"], "x_a/b": [1, 2]}))
    with pytest.raises(OutputError, match="did not re-open"):
        with StoreWriter(tmp_path / "s.h5", rec) as w:
            w.set_feature("e", np.zeros((2, 3), np.float32))
    assert files(tmp_path) == set()


def test_force_interrupted_after_the_rename_keeps_the_new_store(tmp_path, monkeypatch):
    # case: `--force` interrupted (SIGINT) just after the new store replaced the user's left
    # nothing at the path
    import reidcli.io as io

    src = _npz(tmp_path)
    out = tmp_path / "s.h5"
    import_store(out, npz=src, pid_base=0)

    def interrupted(path):
        raise KeyboardInterrupt()

    monkeypatch.setattr(io, "fsync_dir", interrupted)
    with pytest.raises(KeyboardInterrupt):
        import_store(out, npz=src, pid_base=1, force=True)
    with open_store(out) as st:                       # the complete new store
        assert st.provenance["pid_base"] == 1
    assert files(tmp_path) == {"e.npz", "s.h5"}


# -- numbers at the edges ------------------------------------------------------------------------
@pytest.mark.parametrize("route, column, value, needle", [
    ("csv", "pid", "1e20", "outside the int64 range"),
    ("csv", "pid", str(2 ** 63 + 5), "outside the int64 range"),
    ("csv", "pid", "2.5", "not an integer"),
    ("csv", "pid", "", "is empty"),
    ("csv", "camid", "x", "not an integer"),
    ("csv", "frame", "abc", "not an integer"),
    ("npz", "pid", np.uint64(2 ** 63 + 5), "outside the int64 range"),
    ("npz", "pid", 1e20, "outside the int64 range"),
    ("npz", "pid", np.nan, "is empty"),
])
def test_label_numbers_at_the_edges_are_one_line(capsys, tmp_path, route, column, value,
                                                 needle):
    # case: pids of 1e20 / 2^63+5 wrapped to "pid below -1"; a frame `abc` became "no frame"
    if route == "csv":
        values = ["1"] * N if column == "frame" else list(_labels()[0 if column == "pid"
                                                                   else 1].astype(object))
        values[5] = value
        src = _csv(tmp_path, **{column: values})
        args = ("--features", tmp_path / "f.npy", "--labels", src)
    else:
        pids = _labels()[0].astype(type(value) if isinstance(value, np.generic) else float)
        pids[5] = value
        src = _npz(tmp_path, pid=pids)
        args = ("--npz", src)
    before = files(tmp_path)
    result = reid_in_process("store", "import", "--out", tmp_path / "s.h5", *args,
                             capsys=capsys)
    assert_one_line_error_in_process(result, src.name, f"column {column}", "row 5", needle)
    assert_nothing_written(tmp_path, before)


def test_frame_column_keeps_frames_and_empty_cells(tmp_path):
    # the frame column proper: integers kept, an empty cell is "no frame"
    frames = [str(i) for i in range(N)]
    frames[3] = ""
    src = _csv(tmp_path, frame=frames)
    out = import_store(tmp_path / "s.h5", features=tmp_path / "f.npy", labels_csv=src)
    with open_store(out) as st:
        got = st.records["frame"].tolist()
    assert got[2] == 2 and pd.isna(got[3]) and got[4] == 4


# -- wrong kinds of file and other careless inputs --------------------------------------------
def _mat(tmp_path):
    pids, cams = _labels()
    scipy.io.savemat(tmp_path / "e.mat", {"features": _features(), "pid": pids,
                                          "camid": cams, "split": np.array(SPLITS)})
    return tmp_path / "e.mat"


@pytest.mark.parametrize("case", ["mat-as-npz", "mat-as-features", "npz-as-features",
                                  "csv-as-npz", "empty-npz", "empty-csv", "npy-as-labels",
                                  "nan-features", "float32-overflow", "short-csv",
                                  "short-pid-array", "mat-var-without-mat", "npz-and-mat",
                                  "mat-not-mat", "folder-as-npz", "object-split-npy",
                                  "csv-and-label-arrays"])
def test_careless_inputs_are_one_line(capsys, tmp_path, case):
    # cases: a .mat given as --npz/--features was blamed on allow_pickle; an .npz given as
    # --features raised AttributeError; the rest: careless users' inputs
    src = _npz(tmp_path)
    labels = _csv(tmp_path)
    pids, _ = _labels()
    np.save(tmp_path / "pid.npy", pids[:-1])
    np.save(tmp_path / "cam.npy", _labels()[1])
    np.save(tmp_path / "split.npy", np.array(SPLITS))
    np.save(tmp_path / "split_obj.npy", np.array(SPLITS, dtype=object), allow_pickle=True)
    (tmp_path / "empty.npz").write_bytes(b"")
    (tmp_path / "empty.csv").write_text("")
    (tmp_path / "folder").mkdir()
    bad = _features()
    bad[7, 2] = np.nan
    np.save(tmp_path / "nan.npy", bad)
    np.save(tmp_path / "big.npy", np.full((N, 3), 1e300))
    feats = ("--features", tmp_path / "f.npy")
    pd.read_csv(labels).iloc[:-1].to_csv(tmp_path / "short.csv", index=False)
    args, needles = {
        "mat-as-npz": (("--npz", _mat(tmp_path)), ("MATLAB .mat", "--mat e.mat")),
        "mat-as-features": (("--features", _mat(tmp_path), "--labels", labels),
                            ("MATLAB .mat", "--mat e.mat")),
        "npz-as-features": (("--features", src, "--labels", labels), (".npz", "--npz e.npz")),
        "csv-as-npz": (("--npz", labels), ("text file", "--labels")),
        "empty-npz": (("--npz", tmp_path / "empty.npz"), ("empty (0 bytes)",)),
        "empty-csv": ((*feats, "--labels", tmp_path / "empty.csv"), ("empty (0 bytes)",)),
        "npy-as-labels": ((*feats, "--labels", tmp_path / "f.npy"), ("not a text CSV",)),
        "nan-features": (("--features", tmp_path / "nan.npy", "--labels", labels),
                         ("1 feature row(s) hold NaN", "row 7")),
        "float32-overflow": (("--features", tmp_path / "big.npy", "--labels", labels),
                             ("after the cast to float32",)),
        "short-csv": ((*feats, "--labels", tmp_path / "short.csv"),
                      ("11 rows but the features have 12",)),
        "short-pid-array": ((*feats, "--pid", tmp_path / "pid.npy", "--camid",
                             tmp_path / "cam.npy", "--split", tmp_path / "split.npy"),
                            ("pid has shape (11,)",)),
        "mat-var-without-mat": (("--npz", src, "--mat-var", "features=x"), ("--mat-var",)),
        "npz-and-mat": (("--npz", src, "--mat", _mat(tmp_path)), ("cannot be combined",)),
        "mat-not-mat": (("--mat", src), ("not a MATLAB .mat file",)),
        "folder-as-npz": (("--npz", tmp_path / "folder"), ("is a folder",)),
        "object-split-npy": ((*feats, "--pid", tmp_path / "pid.npy", "--camid",
                              tmp_path / "cam.npy", "--split", tmp_path / "split_obj.npy"),
                             ("object array", "dtype=str")),
        "csv-and-label-arrays": ((*feats, "--labels", labels, "--split",
                                  tmp_path / "split.npy"), ("cannot be combined",)),
    }[case]
    before = files(tmp_path)
    result = reid_in_process("store", "import", "--out", tmp_path / "s.h5", *args,
                             capsys=capsys)
    line = assert_one_line_error_in_process(result, *needles)
    assert "allow_pickle" not in line
    assert_nothing_written(tmp_path, before)


def test_csv_written_by_a_spreadsheet_reads(tmp_path):
    # careless input: a byte-order mark and a space after each comma ("pid, camid, split")
    pids, cams = _labels()
    text = "pid, camid, split, modality\n" + "".join(
        f"{p}, {c}, {s}, visible\n" for p, c, s in zip(pids, cams, SPLITS))
    (tmp_path / "excel.csv").write_bytes(b"\xef\xbb\xbf" + text.encode())
    np.save(tmp_path / "f.npy", _features())
    out = import_store(tmp_path / "s.h5", features=tmp_path / "f.npy",
                       labels_csv=tmp_path / "excel.csv")
    with open_store(out) as st:
        assert st.records["pid"].tolist() == pids.tolist()
        assert set(st.records["modality"]) == {"visible"}
