"""The one fit over a store's trials (reidcli/estimator_fit.py) as ``reid train`` uses it."""
from __future__ import annotations

import h5py
import numpy as np
import pandas as pd

from reidcli import fitted
from reidcli.data.records import normalize_frame
from reidcli.estimator_fit import TrialSource, fit_trials
from reidcli.metric.fit import fit_feature_metric_store
from reidcli.metric.pca import PCA
from reidcli.store.writer import StoreWriter


def _store(path):
    """12 train rows (row 0 a distractor, pid 0) of 6 persons in 2 cameras, 4 test rows;
    trials 0 and 2 train on the same rows, trial 1 on the first half."""
    pids = [0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 7, 7, 8, 8]
    cams = [0, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 0, 1, 0, 1]
    splits = ["train"] * 12 + ["query", "gallery"] * 2
    records = normalize_frame(pd.DataFrame({
        "path": [f"img/{i:03d}.jpg" for i in range(16)], "pid": pids, "camid": cams,
        "split": splits, "dataset": "synthetic"}))
    feats = np.random.default_rng(0).standard_normal((16, 5)).astype(np.float32)
    whole, half = list(range(12)), list(range(7))
    with StoreWriter(path, records, dataset="synthetic", provenance={"command": "test"}) as w:
        w.set_feature("emb", feats)
        w.write_protocol("known", [{"train_idx": t, "query_idx": [12, 14],
                                    "gallery_idx": [13, 15]} for t in (whole, half, whole)],
                         eval_rule="market")
    return path


class _Counting(TrialSource):
    def __init__(self, share):
        self.share_identical_rows, self.seen = share, []

    def fit(self, store, estimator, train):
        self.seen.append((train.trial, train.rows.tolist(), train.pids.tolist()))
        return {"rows": np.sort(train.rows)}


def test_one_fit_per_distinct_training_rows_without_distractors(tmp_path):
    store = _store(tmp_path / "s.h5")
    for share, fits in ((True, [0, 1]), (False, [0, 1, 2])):
        source = _Counting(share)
        done = fit_trials(store, tmp_path / f"{share}.h5", PCA(dim=2), source, progress=False)
        assert [t for t, _, _ in source.seen] == fits
        assert source.seen[0][1] == list(range(1, 12)) and 0 not in source.seen[0][2]
        assert done.trials == [0, 1, 2] and done.num_train_images == [11, 6, 11]
        assert [done.cameras.key(c) for c in range(done.cameras.num_cameras)] == ["0", "1"]
    with h5py.File(tmp_path / "True.h5") as h5:      # the shared fit is written once
        assert h5["trial_2"].id == h5["trial_0"].id


def test_feature_metric_fit_records_its_parameters_and_feature(tmp_path):
    store = _store(tmp_path / "s.h5")
    summary = fit_feature_metric_store(store, tmp_path / "m.h5", PCA(dim=2), trials="0,1",
                                       progress=False)
    assert summary.feature == "emb" and summary.trials == [0, 1]
    loaded = fitted.load(tmp_path / "m.h5")
    assert loaded.method == "pca" and loaded.trial_ids == [0, 1]
    assert loaded.hyperparameters["dim"] == 2 and loaded.hyperparameters["trials"] == [0, 1]
