"""T12: the adapted store — layout, row order, and `reid eval` on it (docs/methods/dart3.md)."""
from __future__ import annotations

import json

import h5py
import numpy as np
import pytest

from reidcli.adapt import AdaptConfig, adapt_features, adapt_store
from reidcli.adapt.inputs import read_inputs
from reidcli.adapt.loop import cut_batches
from reidcli.evaluation.arrays import evaluate_arrays
from reidcli.store import open_store
from tests.cli.helpers import run_cli


def test_t12_layout_row_order_and_eval_reproduces_in_process(biased_stores, tmp_path, capsys):
    store = biased_stores[0]
    cfg = AdaptConfig("dart3", lr=1e-2, steps=2, batch_size=16)
    result = adapt_store(store, tmp_path / "a.h5", cfg, progress=False)
    inputs = read_inputs(store)
    in_process = adapt_features(inputs, cfg)
    with open_store(tmp_path / "a.h5") as st, open_store(store) as src:
        q_rows, g_rows = src.split_rows("query"), src.split_rows("gallery")
        np.testing.assert_array_equal(st.features("emb", q_rows), in_process.queries)
        np.testing.assert_array_equal(st.features("emb", g_rows), in_process.gallery)
        assert st.records.equals(src.records)                    # full copy, same rows
        group = st.h5["adapt"]["dart3"]
        n_cams, d, nq = 4, src.feature_info("emb")["dim"], len(q_rows)
        n_batches = int(np.ceil(nq / 16))
        for key in ("M_q", "S_q", "M_q_init", "S_q_init", "M_g", "S_g"):
            assert group[key].shape == (n_cams, d), key
        assert group["cam_ids"][()].tolist() == [0, 1, 2, 3]
        assert group["order"].shape == (nq,) and sorted(group["order"][()]) == list(range(nq))
        assert group["batch_id"].shape == (nq,) and group["loss"].shape == (n_batches, 2)
        np.testing.assert_array_equal(group["query_rows"][()], q_rows)   # input order
        attrs = dict(group.attrs)
        assert attrs["method"] == "dart3" and attrs["mode"] == "lite"
        assert json.loads(attrs["params_json"])["lr"] == 0.01
        assert attrs["per_query_seconds"] == pytest.approx(attrs["adapt_seconds"] / nq)
        assert st.protocol.trials[0]["query_idx"].tolist() == q_rows.tolist()
        assert json.loads(st.attrs["provenance"])["inputs"][0]["sha256"]
    e_labels = read_inputs(store).records
    ref = evaluate_arrays(e_labels["pid"].to_numpy()[q_rows], e_labels["camid"].to_numpy()[q_rows],
                          e_labels["pid"].to_numpy()[g_rows], e_labels["camid"].to_numpy()[g_rows],
                          query_features=in_process.queries, gallery_features=in_process.gallery)
    report = tmp_path / "r.json"
    code, _, err = run_cli(capsys, "eval", "--store", tmp_path / "a.h5", "--feat-norm", "none",
                           "--json", report, "--quiet")
    assert code == 0, err
    got = json.loads(report.read_text())
    assert got["mAP"] == pytest.approx(ref.mAP, abs=1e-9)
    assert got["cmc"][0] == pytest.approx(ref.cmc[0], abs=1e-9)
    assert result.num_queries == nq


def test_query_cams_restrict_the_protocol_queries_and_keep_other_rows(biased_stores, tmp_path):
    store = biased_stores[1]
    adapt_store(store, tmp_path / "n.h5", AdaptConfig("norm", query_cams=[1, 2]),
                progress=False)
    with open_store(tmp_path / "n.h5") as st, open_store(store) as src:
        q_rows = src.split_rows("query")
        cams = src.records["camid"].to_numpy()[q_rows]
        kept = q_rows[np.isin(cams, [1, 2])]
        assert st.protocol.trials[0]["query_idx"].tolist() == kept.tolist()
        other = q_rows[~np.isin(cams, [1, 2])]
        np.testing.assert_array_equal(st.features("emb", other), src.features("emb", other))
        assert st.h5["adapt"]["norm"]["query_rows"][()].tolist() == kept.tolist()


def test_adapted_store_is_written_atomically_and_not_overwritten(biased_stores, tmp_path,
                                                                 monkeypatch):
    from reidcli.errors import OutputExistsError
    import reidcli.store.adapted as output

    out = tmp_path / "x.h5"
    adapt_store(biased_stores[0], out, AdaptConfig("none"), progress=False)
    with pytest.raises(OutputExistsError):
        adapt_store(biased_stores[0], out, AdaptConfig("none"), progress=False)

    def boom(*a, **k):
        raise KeyboardInterrupt
    monkeypatch.setattr(output, "_write_protocol", boom)
    with pytest.raises(KeyboardInterrupt):
        adapt_store(biased_stores[0], tmp_path / "y.h5", AdaptConfig("none"), progress=False)
    assert not (tmp_path / "y.h5").exists() and not (tmp_path / "y.h5.partial").exists()


def test_readapting_an_adapted_store_replaces_its_group(biased_stores, tmp_path):
    adapt_store(biased_stores[0], tmp_path / "a.h5", AdaptConfig("norm"), progress=False)
    adapt_store(tmp_path / "a.h5", tmp_path / "b.h5", AdaptConfig("dart3"), progress=False)
    adapt_store(tmp_path / "b.h5", tmp_path / "c.h5", AdaptConfig("norm"), progress=False)
    with h5py.File(tmp_path / "c.h5") as f:
        assert sorted(f["adapt"]) == ["dart3", "norm"]


def test_cut_batches_merges_a_trailing_single_row():
    seq = np.arange(9)
    assert [len(b) for b in cut_batches(seq, 4, merge_single=True)] == [4, 5]
    assert [len(b) for b in cut_batches(seq, 4, merge_single=False)] == [4, 4, 1]
    assert [b.tolist() for b in cut_batches(seq, 4, True)][1] == [4, 5, 6, 7, 8]
    assert [len(b) for b in cut_batches(np.arange(1), 4, True)] == [1]


def test_cameras_are_keyed_by_domain_and_camid(tmp_path):
    import pandas as pd

    from reidcli.provenance import make_provenance
    from reidcli.store.importer import build_import_records
    from reidcli.store.writer import StoreWriter

    rng = np.random.default_rng(0)
    n = 40
    domain = np.where(np.arange(n) < 20, "site/a", "site/b")
    labels = pd.DataFrame({"pid": np.arange(n) % 10 + 1, "camid": np.arange(n) % 2,
                           "split": ["query" if i % 4 == 0 else "gallery" for i in range(n)],
                           "domain": domain})
    shift = np.where(domain == "site/a", 0.0, 5.0)[:, None]          # same camid, other site
    feats = (rng.normal(size=(n, 6)) + shift).astype(np.float32)
    records = build_import_records(labels, "two_sites", "test")
    with StoreWriter(tmp_path / "s.h5", records, provenance=make_provenance(command=["t"])) as w:
        w.set_feature("emb", feats)
    adapt_store(tmp_path / "s.h5", tmp_path / "n.h5", AdaptConfig("norm"), progress=False)
    with h5py.File(tmp_path / "n.h5") as f:
        group = f["adapt"]["norm"]
        assert group["cam_ids"][()].tolist() == [0, 1, 0, 1]
        assert [d.decode() for d in group["cam_domains"][()]] == ["site/a"] * 2 + ["site/b"] * 2
        np.testing.assert_allclose(group["M_g"][()][2:].mean(), 5.0, atol=0.5)
        adapted = f["features"]["emb"][()]
    for site in ("site/a", "site/b"):           # pooled query+gallery rows of each camera: z-scores
        for cam in (0, 1):
            rows = (domain == site) & (labels["camid"].to_numpy() == cam)
            np.testing.assert_allclose(adapted[rows].mean(0), 0.0, atol=1e-5)
            np.testing.assert_allclose(adapted[rows].std(0), 1.0, atol=1e-4)
