"""Feature rows mapped from the file cache: what reidcli writes maps (copy-on-write, the file
never changes), every other layout is read as before, with the same values."""
from __future__ import annotations

import h5py
import numpy as np
import pytest

from reidcli.store import StoreWriter, open_store
from reidcli.store.reader import mapped_rows
from tests.store.test_store import make_records


def write_store(path, n=300, dim=24, seed=0):
    feats = np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)
    with StoreWriter(path, make_records(n, seed)) as w:
        w.set_feature("emb", feats)
    return feats


def test_reidcli_stores_map_their_rows_and_never_change(tmp_path):
    path = tmp_path / "s.h5"
    feats = write_store(path)
    before = path.read_bytes()
    with open_store(path) as st:
        ds = st.h5["features/emb"]
        assert ds.chunks is None                            # written contiguously
        for rows in (None, slice(10, 250), slice(299, 300)):
            got = st.features("emb", rows)
            assert mapped_rows(st.path, ds, rows) is not None
            assert isinstance(got.base, np.memmap)
            np.testing.assert_array_equal(got, feats[rows if rows is not None else slice(None)])
        got = st.features("emb", slice(5, 50))
        got *= 2.0                                          # the caller's copy only
        np.testing.assert_array_equal(st.features("emb", slice(5, 50)), feats[5:50])
        picked = st.features("emb", np.array([7, 3, 3]))    # an index: read, not mapped
        assert mapped_rows(st.path, ds, np.array([7, 3, 3])) is None
        np.testing.assert_array_equal(picked, feats[[7, 3, 3]])
    assert path.read_bytes() == before


@pytest.mark.parametrize("layout", ["chunked", "big-endian", "userblock", "unwritten",
                                    "float64"])
def test_other_layouts_are_read_not_mapped(tmp_path, layout):
    path = tmp_path / "f.h5"
    values = np.random.default_rng(1).normal(size=(40, 8))
    kwargs = {"userblock_size": 512} if layout == "userblock" else {}
    with h5py.File(path, "w", **kwargs) as f:
        dtype = {"big-endian": ">f4", "float64": "<f8"}.get(layout, "<f4")
        ds = f.create_dataset("x", shape=values.shape, dtype=dtype,
                              chunks=(16, 8) if layout == "chunked" else None)
        if layout != "unwritten":
            ds[...] = values
    with h5py.File(path, "r") as f:
        assert mapped_rows(path, f["x"], slice(0, 40)) is None
        assert mapped_rows(path, f["x"], None) is None


def test_a_map_that_disagrees_with_hdf5_is_not_used(tmp_path, monkeypatch):
    """The two-row check: a wrong offset (here: forced) falls back to HDF5's read."""
    path = tmp_path / "s.h5"
    feats = write_store(path)
    with open_store(path) as st:
        ds = st.h5["features/emb"]
        offset = ds.id.get_offset()

        class Shifted:                       # the dataset with an offset one row off
            def __getattr__(self, name):
                return getattr(ds, name)

            def __getitem__(self, key):
                return ds[key]

            class id:                        # noqa: N801 - mimics h5py's attribute
                @staticmethod
                def get_offset():
                    return offset + 4 * ds.shape[1]

        assert mapped_rows(st.path, Shifted(), slice(0, 100)) is None
        np.testing.assert_array_equal(st.features("emb", slice(0, 100)), feats[:100])
