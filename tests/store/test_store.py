"""Feature store: schema, streaming atomic writes, validated reads, import, merge."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import h5py
import numpy as np
import pandas as pd
import pytest

from reidcli.data.records import normalize_frame
from reidcli.errors import InputFileError, OutputExistsError, StoreError, UsageError
from reidcli.store import StoreWriter, open_store, parse_shard, shard_rows
from reidcli.store.importer import import_store
from reidcli.store.merge import merge_shards
from reidcli.store.summary import store_summary


def make_records(n: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    splits = np.array(["train", "query", "gallery"])[rng.integers(0, 3, n)]
    return normalize_frame(pd.DataFrame({
        "path": [f"img/{i:05d}.jpg" for i in range(n)],
        "pid": rng.integers(0, 20, n), "camid": rng.integers(0, 4, n), "split": splits,
        "dataset": "synthetic", "domain": np.where(np.arange(n) % 2, "synthetic/d0",
                                                     "synthetic/d1"),
        "frame": np.arange(n), "x_sequence": rng.integers(1, 3, n),
        "x_raw_name": [f"n{i}" for i in range(n)]}))


def test_round_trip_records_features_convmaps_protocol(tmp_path):
    rec = make_records(50)
    feats = np.random.default_rng(1).standard_normal((50, 7)).astype(np.float32)
    maps = np.random.default_rng(2).standard_normal((50, 3, 4, 2)).astype(np.float16)
    out = tmp_path / "s.h5"
    with StoreWriter(out, rec, dataset="synthetic", provenance={"command": "test", "seed": 3}) as w:
        w.add_feature("emb", 7, metric="cosine", normalized=False)
        for start in range(0, 50, 16):          # streamed in uneven blocks
            w.append_feature("emb", feats[start:start + 16])
        w.add_convmap("conv3", (3, 4, 2))
        w.append_convmap("conv3", maps[:20])
        w.append_convmap("conv3", maps[20:])
        w.write_protocol("half", [{"query_idx": [1, 2], "gallery_idx": [3, 4, 5],
                                   "train_idx": [0], "train_pids": [7], "test_pids": [1, 2]}],
                         eval_rule="market", options={"seed": 3})
        w.write_adapt("norm", {"mean": np.ones((4, 7))}, {"momentum": 0.1})
    assert not (tmp_path / "s.h5.partial").exists()
    with open_store(out) as st:
        pd.testing.assert_frame_equal(st.records, rec)
        assert st.dataset == "synthetic"
        assert np.array_equal(st.features("emb"), feats)
        assert np.array_equal(st.features("emb", [9, 3, 3, 0]), feats[[9, 3, 3, 0]])
        assert np.array_equal(st.features(None, np.arange(10, 40, 3)), feats[10:40:3])
        assert st.feature_info("emb") == {"dim": 7, "metric": "cosine", "normalized": False,
                                          "dtype": "float32"}
        assert st.convmap_layers == ["conv3"]
        assert np.array_equal(st.convmaps("conv3", [4, 1]), maps[[4, 1]])
        assert st.protocol.name == "half" and st.protocol.num_trials == 1
        assert st.protocol.attrs["options"] == {"seed": 3}
        assert list(st.protocol.trials[0]["gallery_idx"]) == [3, 4, 5]
        assert st.adapt_methods == ["norm"]
        assert st.adapt_arrays("norm")["mean"].shape == (4, 7)
        assert st.provenance["seed"] == 3
        blocks = list(st.iter_feature_blocks("emb", st.split_rows("query"), block_size=4))
        got = np.concatenate([b for _, b in blocks])
        assert np.array_equal(got, feats[rec["split"] == "query"])
        summary = store_summary(st)
        assert summary["splits"]["query"]["images"] == int((rec["split"] == "query").sum())
        assert summary["features"]["emb"]["shape"] == [50, 7]


def test_incomplete_write_leaves_nothing(tmp_path):
    out = tmp_path / "s.h5"
    with pytest.raises(StoreError, match="incomplete"):
        with StoreWriter(out, make_records(10)) as w:
            w.add_feature("emb", 3)
            w.append_feature("emb", np.zeros((4, 3)))
    assert not out.exists() and not (tmp_path / "s.h5.partial").exists()


def test_exception_mid_write_removes_partial(tmp_path):
    out = tmp_path / "s.h5"
    with pytest.raises(RuntimeError):
        with StoreWriter(out, make_records(10)) as w:
            w.add_feature("emb", 3)
            w.append_feature("emb", np.zeros((4, 3)))
            assert (tmp_path / "s.h5.partial").exists()
            raise RuntimeError("boom")
    assert not out.exists() and not (tmp_path / "s.h5.partial").exists()


def test_killed_writer_leaves_no_file_at_output(tmp_path):
    """SIGKILL in the middle of a streamed write: the output path never appears."""
    out = tmp_path / "killed.h5"
    script = textwrap.dedent(f"""
        import numpy as np, pandas as pd, sys, time
        from reidcli.data.records import normalize_frame
        from reidcli.store import StoreWriter
        rec = normalize_frame(pd.DataFrame({{"path": ["x"] * 100, "pid": range(100),
                                              "camid": [0] * 100, "split": ["gallery"] * 100}}))
        with StoreWriter({str(out)!r}, rec) as w:
            w.add_feature("emb", 4)
            w.append_feature("emb", np.zeros((50, 4)))
            print("half", flush=True)
            time.sleep(60)
            w.append_feature("emb", np.zeros((50, 4)))
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "half"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=120)
    assert not out.exists()
    # the leftover .partial is refused by readers: it never passes for a valid store
    partial = tmp_path / "killed.h5.partial"
    assert partial.exists()
    with pytest.raises(StoreError, match="not completely written|not an HDF5 file"):
        open_store(partial)


def test_refuses_overwrite_without_force(tmp_path):
    out = tmp_path / "s.h5"
    with StoreWriter(out, make_records(3)) as w:
        w.set_feature("emb", np.zeros((3, 2)))
    with pytest.raises(OutputExistsError, match=r"already exists — allow overwriting \(force\)"):
        StoreWriter(out, make_records(3))
    with StoreWriter(out, make_records(3), force=True) as w:
        w.set_feature("emb", np.ones((3, 2)))
    with open_store(out) as st:
        assert st.features("emb").sum() == 6


@pytest.mark.parametrize("attr,value,match", [
    ("format", "something.else", "not a reidcli feature store"),
    ("schema", 2, "schema 2"),
    ("schema", 0, "schema 0"),
])
def test_wrong_format_or_schema_refused(tmp_path, attr, value, match):
    out = tmp_path / "s.h5"
    with StoreWriter(out, make_records(3)) as w:
        w.set_feature("emb", np.zeros((3, 2)))
    with h5py.File(out, "r+") as f:
        f.attrs[attr] = value
    with pytest.raises(StoreError, match=match):
        open_store(out)


def test_missing_groups_give_clear_errors(tmp_path):
    out = tmp_path / "s.h5"
    with StoreWriter(out, make_records(3)) as w:
        w.set_feature("emb", np.zeros((3, 2)))
    with open_store(out) as st:
        with pytest.raises(StoreError, match="has no conv maps.*extraction with maps"):
            st.require_convmaps()
        with pytest.raises(StoreError, match=r"no feature 'other' \(has: emb\)"):
            st.features("other")
        assert st.protocol is None
    with pytest.raises(StoreError, match="does not exist"):
        open_store(tmp_path / "nope.h5")
    (tmp_path / "text.h5").write_text("hello")
    with pytest.raises(StoreError, match="not an HDF5 file"):
        open_store(tmp_path / "text.h5")


def test_protocol_indices_validated(tmp_path):
    with pytest.raises(StoreError, match="outside"):
        with StoreWriter(tmp_path / "s.h5", make_records(3)) as w:
            w.write_protocol("p", [{"query_idx": [5], "gallery_idx": [0]}])
    assert not (tmp_path / "s.h5").exists()


def test_parse_shard_and_rows():
    assert parse_shard("1/4") == (1, 4)
    for bad in ("4/4", "x", "1/0", "-1/3"):
        with pytest.raises(UsageError, match="parameter shard="):
            parse_shard(bad)
    parts = [shard_rows(10, (i, 3)) for i in range(3)]
    assert np.concatenate([np.arange(10)[p] for p in parts]).tolist() == list(range(10))


def _write_shards(tmp_path, rec, feats, maps, n):
    paths = []
    source = {"num_rows": len(rec), "records_sha256": None}
    from reidcli.store.records_io import records_digest
    source["records_sha256"] = records_digest(rec)
    for i in range(n):
        rows = shard_rows(len(rec), (i, n))
        p = tmp_path / f"shard{i}.h5"
        with StoreWriter(p, rec.iloc[rows].reset_index(drop=True), dataset="synthetic",
                         shard=(i, n), shard_source=source) as w:
            w.set_feature("emb", feats[rows], metric="cosine", normalized=True)
            w.add_convmap("conv4", maps.shape[1:])
            w.append_convmap("conv4", maps[rows])
            if i == 0:
                w.write_protocol("p", [{"query_idx": [len(rec) - 1], "gallery_idx": [0, 1]}])
        paths.append(p)
    return paths


def test_merge_shards_equals_single_store(tmp_path):
    rec = make_records(23)
    feats = np.random.default_rng(0).standard_normal((23, 5)).astype(np.float32)
    maps = np.random.default_rng(1).standard_normal((23, 2, 3, 3)).astype(np.float16)
    paths = _write_shards(tmp_path, rec, feats, maps, 3)
    with open_store(paths[1]) as st:
        assert st.shard == (1, 3)
    with open_store(paths[0]) as st, pytest.raises(StoreError, match="shard 0/3"):
        st.protocol
    out = merge_shards(tmp_path / "all.h5", list(reversed(paths)))
    with open_store(out) as st:
        pd.testing.assert_frame_equal(st.records, rec)
        assert np.array_equal(st.features("emb"), feats)
        assert np.array_equal(st.convmaps("conv4"), maps)
        assert st.feature_info("emb")["metric"] == "cosine"
        assert st.protocol.trials[0]["query_idx"].tolist() == [22]
        assert st.shard is None


def test_merge_rejects_missing_or_mixed_shards(tmp_path):
    rec = make_records(12)
    feats = np.zeros((12, 2), np.float32)
    maps = np.zeros((12, 1, 1, 1), np.float16)
    paths = _write_shards(tmp_path, rec, feats, maps, 3)
    with pytest.raises(StoreError, match=r"missing: \[1\]"):
        merge_shards(tmp_path / "m.h5", [paths[0], paths[2]])
    with pytest.raises(StoreError, match="duplicated"):
        merge_shards(tmp_path / "m.h5", [paths[0], paths[1], paths[1]])
    assert not (tmp_path / "m.h5").exists()
    single = tmp_path / "single.h5"
    with StoreWriter(single, rec) as w:
        w.set_feature("emb", feats)
    with pytest.raises(StoreError, match="not a shard"):
        merge_shards(tmp_path / "m.h5", [single])


# -- import ----------------------------------------------------------------------------------
def _labels(n, rng):
    return {"pid": rng.integers(0, 5, n), "camid": rng.integers(0, 3, n),
            "split": np.array(["query", "gallery"])[rng.integers(0, 2, n)]}


def test_import_npz_is_bit_exact(tmp_path):
    rng = np.random.default_rng(0)
    feats = rng.standard_normal((30, 6)).astype(np.float32)
    lab = _labels(30, rng)
    np.savez(tmp_path / "e.npz", features=feats, modality=np.array(["visible"] * 30), **lab)
    out = import_store(tmp_path / "s.h5", npz=tmp_path / "e.npz", metric="cosine")
    with open_store(out) as st:
        got = st.features("imported")
        assert got.dtype == np.float32 and got.tobytes() == feats.tobytes()
        assert st.records["pid"].tolist() == lab["pid"].tolist()
        assert st.records["camid"].tolist() == lab["camid"].tolist()
        assert st.records["split"].tolist() == lab["split"].tolist()
        assert st.dataset is None and st.feature_info("imported")["metric"] == "cosine"
        assert st.provenance["inputs"][0]["sha256"]


def test_import_npy_and_csv(tmp_path):
    rng = np.random.default_rng(1)
    feats = rng.standard_normal((12, 3)).astype(np.float32)
    feats /= np.linalg.norm(feats, axis=1, keepdims=True)
    np.save(tmp_path / "f.npy", feats)
    lab = _labels(12, rng)
    pd.DataFrame({**lab, "path": [f"a/{i}.jpg" for i in range(12)], "score": np.arange(12)}) \
        .to_csv(tmp_path / "labels.csv", index=False)
    out = import_store(tmp_path / "a.h5", features=tmp_path / "f.npy",
                       labels_csv=tmp_path / "labels.csv", dataset="market1501")
    with open_store(out) as st:
        assert np.array_equal(st.features(), feats)
        assert st.records["path"].tolist()[3] == "a/3.jpg"
        assert st.records["x_score"].tolist() == list(range(12))
        assert st.dataset == "market1501" and st.feature_info("imported")["normalized"]
    for key, arr in lab.items():
        np.save(tmp_path / f"{key}.npy", arr)
    out = import_store(tmp_path / "b.h5", features=tmp_path / "f.npy",
                       label_arrays={k: tmp_path / f"{k}.npy" for k in lab})
    with open_store(out) as st:
        assert st.records["split"].tolist() == lab["split"].tolist()


@pytest.mark.parametrize("mutate,match", [
    (lambda a: a.pop("camid"), "lacks the array"),
    (lambda a: a.__setitem__("split", np.array(["test"] * 8)), "split holds"),
    (lambda a: a.__setitem__("pid", np.arange(7)), r"shape \(7,\)"),
    (lambda a: a.__setitem__("features", np.full((8, 2), np.nan, np.float32)), "NaN or Inf"),
    (lambda a: a.__setitem__("features", np.zeros(8, np.float32)), "non-empty 2-D"),
    (lambda a: a.pop("features"), "no array 'features'"),
])
def test_import_bad_input_errors(tmp_path, mutate, match):
    rng = np.random.default_rng(0)
    arrays = {"features": rng.standard_normal((8, 2)).astype(np.float32), **_labels(8, rng)}
    mutate(arrays)
    np.savez(tmp_path / "e.npz", **arrays)
    with pytest.raises(InputFileError, match=match):
        import_store(tmp_path / "s.h5", npz=tmp_path / "e.npz")
    assert not (tmp_path / "s.h5").exists()


def test_import_needs_a_source(tmp_path):
    with pytest.raises(UsageError, match="no input given"):
        import_store(tmp_path / "s.h5")
    np.save(tmp_path / "f.npy", np.zeros((3, 2), np.float32))
    with pytest.raises(UsageError, match="needs labels"):
        import_store(tmp_path / "s.h5", features=tmp_path / "f.npy")


def test_record_columns_match_the_records_and_need_no_pandas(tmp_path):
    from reidcli.data.records import RECORD_COLUMNS
    from reidcli.store import schema
    from reidcli.store.records_io import records_digest

    assert schema.RECORD_COLUMNS == RECORD_COLUMNS
    rec = make_records(30)
    out = tmp_path / "s.h5"
    with StoreWriter(out, rec, dataset="synthetic") as w:
        w.add_feature("emb", 2)
        w.append_feature("emb", np.zeros((30, 2), np.float32))
    with h5py.File(out, "a") as h5:                 # a foreign store: no modality / domain
        del h5["records/modality"], h5["records/domain"]
        h5.attrs.pop("records_sha256")
    for path, frame in ((out, rec), (import_store(tmp_path / "i.h5", npz=_npz(tmp_path)),
                                     None)):
        with open_store(path) as st:
            cols = st.record_columns
            frame = st.records if frame is None else frame
            for col in ("path", "pid", "camid", "split", "dataset"):
                assert cols[col].tolist() == frame[col].tolist(), col
            assert cols["pid"].dtype == np.int64 and not cols["pid"].flags.writeable
            assert records_digest(cols) == records_digest(st.records)
        if path == out:                             # the reader's defaults = normalize_frame's
            assert cols["modality"].tolist() == ["visible"] * 30
            assert cols["domain"].tolist() == cols["dataset"].tolist()
            assert list(st.records.columns[:8]) == list(RECORD_COLUMNS)
    code = ("import sys; from reidcli.store import open_store; "
            f"st = open_store({str(out)!r}); st.record_columns; st.split_rows('query'); "
            "print('pandas' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert proc.stdout.strip() == "False", proc.stderr


def _npz(tmp_path):
    npz = tmp_path / "e.npz"
    np.savez(npz, features=np.ones((4, 2), np.float32), pid=np.array([1, 2, 1, 2]),
             camid=np.array([0, 0, 1, 1]), split=np.array(["query"] * 2 + ["gallery"] * 2))
    return npz
