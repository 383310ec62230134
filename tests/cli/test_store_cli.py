"""`reid store import | info | merge` from the command line."""
from __future__ import annotations

import json

import numpy as np
import pytest

from reidcli.store import open_store
from tests.cli.helpers import run_cli


def _npz(tmp_path, n=20, seed=0):
    rng = np.random.default_rng(seed)
    feats = rng.standard_normal((n, 5)).astype(np.float32)
    np.savez(tmp_path / "e.npz", features=feats, pid=rng.integers(0, 4, n),
             camid=rng.integers(0, 2, n), split=np.array(["query", "gallery"] * (n // 2)))
    return feats


def test_import_then_info_round_trip(capsys, tmp_path):
    feats = _npz(tmp_path)
    code, out, err = run_cli(capsys, "store", "import", "--out", tmp_path / "s.h5", "--npz",
                             tmp_path / "e.npz", "--name", "emb")
    assert code == 0, err
    assert "20 rows" in out
    with open_store(tmp_path / "s.h5") as st:
        assert st.features("emb").tobytes() == feats.tobytes()
        assert st.provenance["command"].startswith("reid store import")
    code, out, _ = run_cli(capsys, "store", "info", "--store", tmp_path / "s.h5")
    assert code == 0 and "emb" in out and "query" in out and "20×5" in out
    code, out, _ = run_cli(capsys, "store", "info", "--store", tmp_path / "s.h5", "--json")
    summary = json.loads(out)
    assert summary["splits"]["query"]["images"] == 10
    assert summary["features"]["emb"]["shape"] == [20, 5]


def test_import_refuses_existing_output(capsys, tmp_path):
    _npz(tmp_path)
    assert run_cli(capsys, "store", "import", "--out", tmp_path / "s.h5", "--npz", tmp_path / "e.npz")[0] == 0
    code, _, err = run_cli(capsys, "store", "import", "--out", tmp_path / "s.h5", "--npz",
                           tmp_path / "e.npz")
    assert code == 2 and err.startswith("error: --out ") and "--force" in err
    code, _, err = run_cli(capsys, "store", "import", "--out", tmp_path / "s.h5", "--npz",
                           tmp_path / "e.npz", "--force")
    assert code == 0


def test_import_errors_name_the_flags_the_library_names_the_parameters(capsys, tmp_path):
    from reidcli.errors import UsageError
    from reidcli.store.importer import import_store

    np.save(tmp_path / "f.npy", np.zeros((3, 2), np.float32))
    code, _, err = run_cli(capsys, "store", "import", "--out", tmp_path / "s.h5", "--features",
                           tmp_path / "f.npy")
    assert code == 2 and "--features needs labels — add --labels labels.csv or" in err
    code, _, err = run_cli(capsys, "store", "import", "--out", tmp_path / "s.h5", "--features",
                           tmp_path / "f.npy", "--distance", "manhattan")
    assert code == 2 and err.startswith("error: --distance 'manhattan' is not one of")
    with pytest.raises(UsageError, match="features needs labels — add labels_csv=labels.csv"):
        import_store(tmp_path / "s.h5", features=tmp_path / "f.npy")
    with pytest.raises(UsageError, match="store import parameter metric='manhattan'"):
        import_store(tmp_path / "s.h5", features=tmp_path / "f.npy", metric="manhattan")


def test_info_refuses_non_store(capsys, tmp_path):
    _npz(tmp_path)
    code, _, err = run_cli(capsys, "store", "info", "--store", tmp_path / "e.npz")
    assert code == 2 and "not an HDF5 file" in err and len(err.strip().splitlines()) == 1


def test_merge_command_joins_shards(capsys, tmp_path):
    import pandas as pd

    from reidcli.data.records import normalize_frame
    from reidcli.store import StoreWriter, shard_rows
    from reidcli.store.records_io import records_digest

    rec = normalize_frame(pd.DataFrame({"path": [f"{i}.jpg" for i in range(9)],
                                        "pid": range(9), "camid": [0] * 9,
                                        "split": ["gallery"] * 9}))
    feats = np.arange(18, dtype=np.float32).reshape(9, 2)
    source = {"num_rows": 9, "records_sha256": records_digest(rec)}
    paths = []
    for i in range(2):
        rows = shard_rows(9, (i, 2))
        paths.append(tmp_path / f"s{i}.h5")
        with StoreWriter(paths[-1], rec.iloc[rows].reset_index(drop=True), shard=(i, 2),
                         shard_source=source) as w:
            w.set_feature("emb", feats[rows])
    code, out, err = run_cli(capsys, "store", "merge", "--out", tmp_path / "m.h5", *paths)
    assert code == 0, err
    assert "9 rows from 2 shards" in out
    with open_store(tmp_path / "m.h5") as st:
        assert np.array_equal(st.features("emb"), feats)
    code, _, err = run_cli(capsys, "store", "merge", "--out", tmp_path / "m2.h5", paths[0])
    assert code == 2 and "missing: [1]" in err
