"""`reid store import --mat`: MATLAB v5 (scipy.io.savemat) and v7.3 (HDF5 laid out as MATLAB
writes it: tests/store/matlab.py) give the same store as the .npz route."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.io

from reidcli.errors import InputFileError, ParameterError
from reidcli.store import open_store
from reidcli.store.importer import import_store
from reidcli.store.matfile import parse_mat_names, read_mat, sniff
from tests.store.matlab import Cell, Char, write_mat73

N, D = 8, 5
SPLITS = ["query"] * 3 + ["gallery"] * 5


def _arrays(seed=0):
    rng = np.random.default_rng(seed)
    feats = rng.standard_normal((N, D)).astype(np.float32)
    pid = np.array([1, 2, 3, 1, 2, 3, 4, 4], dtype=np.float64)     # MATLAB's default: double
    cam = np.array([0, 0, 1, 1, 1, 0, 0, 1], dtype=np.float64)
    return feats, pid, cam


def _expected(path):
    with open_store(path) as st:
        return st.features("imported"), st.records[["pid", "camid", "split"]].copy()


@pytest.mark.parametrize("kind", ["v5", "v5-cell", "v73", "v73-cell"])
def test_mat_import_matches_the_npz_route(tmp_path, kind):
    feats, pid, cam = _arrays()
    np.savez(tmp_path / "e.npz", features=feats, pid=pid.astype(int), camid=cam.astype(int),
             split=np.array(SPLITS))
    ref = import_store(tmp_path / "ref.h5", npz=tmp_path / "e.npz")
    mat = tmp_path / "e.mat"
    if kind.startswith("v5"):
        split = np.array(SPLITS, dtype=object) if kind.endswith("cell") else np.array(SPLITS)
        scipy.io.savemat(mat, {"features": feats, "pid": pid, "camid": cam, "split": split})
        assert sniff(mat) == "mat5"
    else:
        split = Cell(SPLITS) if kind.endswith("cell") else Char(SPLITS)
        write_mat73(mat, {"features": feats, "pid": pid, "camid": cam, "split": split})
        assert sniff(mat) == "mat73"
    out = import_store(tmp_path / "m.h5", mat=mat)
    want_feats, want_rec = _expected(ref)
    got_feats, got_rec = _expected(out)
    assert np.array_equal(got_feats, want_feats)          # float32 in → bit-exact, rows kept
    assert got_rec.equals(want_rec)


def test_v73_arrays_are_transposed_back_and_names_are_mapped(tmp_path):
    feats, pid, cam = _arrays(1)
    mat = tmp_path / "named.mat"
    write_mat73(mat, {"galFea": feats.astype(np.float64), "labels": pid.reshape(-1, 1),
                      "cams": cam, "split": Cell(SPLITS)})
    arrays = read_mat(mat, {"features": "galFea", "pid": "labels", "camid": "cams"})
    assert arrays["features"].shape == (N, D)
    assert np.array_equal(arrays["features"], feats.astype(np.float64))
    assert arrays["pid"].shape == (N, 1) and arrays["camid"].shape == (1, N)
    out = import_store(tmp_path / "s.h5", mat=mat,
                       mat_names=parse_mat_names(["features=galFea", "pid=labels",
                                                  "camid=cams"]))
    with open_store(out) as st:
        assert st.records["pid"].tolist() == pid.astype(int).tolist()
        assert st.provenance["imported_from"].endswith("named.mat")


def test_mat_features_stored_one_column_per_image_are_read_as_rows(tmp_path):
    feats, pid, cam = _arrays(2)
    mat = tmp_path / "cols.mat"
    scipy.io.savemat(mat, {"features": feats.T, "pid": pid, "camid": cam,
                           "split": np.array(SPLITS, dtype=object)})
    with pytest.warns(UserWarning, match="one column per label"):
        out = import_store(tmp_path / "s.h5", mat=mat)
    with open_store(out) as st:
        assert np.array_equal(st.features("imported"), feats)
        assert st.provenance["features_transposed"] is True


@pytest.mark.parametrize("items, needle", [(["features"], "KEY=VAR"),
                                           (["feat=x"], "names no array")])
def test_bad_mat_var_items(items, needle):
    with pytest.raises(ParameterError, match=needle):
        parse_mat_names(items)


def test_mat_without_the_features_variable_names_the_option(tmp_path):
    _, pid, cam = _arrays()
    mat = tmp_path / "nofeat.mat"
    scipy.io.savemat(mat, {"X": np.zeros((N, 2)), "pid": pid, "camid": cam,
                           "split": np.array(SPLITS)})
    with pytest.raises(InputFileError, match="no variable 'features'") as info:
        import_store(tmp_path / "s.h5", mat=mat)
    assert "mat_var=features=NAME" in info.value.todo


@pytest.mark.parametrize("case, needle", [("v5-cut", "not a readable .mat file"),
                                          ("v73-cut", "not a readable v7.3 .mat file"),
                                          ("struct", "variable 'split' is a struct"),
                                          ("no-pid", "no variable(s) 'labels' (for pid)")])
def test_damaged_or_unsupported_mat_is_one_error(tmp_path, case, needle):
    feats, pid, cam = _arrays()
    mat = tmp_path / "e.mat"
    names = None
    if case.startswith("v5") or case == "struct":
        split = {"a": 1} if case == "struct" else np.array(SPLITS)
        scipy.io.savemat(mat, {"features": feats, "pid": pid, "camid": cam, "split": split})
    else:
        write_mat73(mat, {"features": feats, "pid": pid, "camid": cam, "split": Cell(SPLITS)})
        names = {"pid": "labels"} if case == "no-pid" else None
    if case.endswith("cut"):
        data = mat.read_bytes()
        mat.write_bytes(data[:len(data) // 2])
    with pytest.raises(InputFileError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        import_store(tmp_path / "s.h5", mat=mat, mat_names=names)
    assert not (tmp_path / "s.h5").exists()
