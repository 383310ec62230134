"""What the WARCA recipes print about the protocol they ran (reidcli.paper.warca_protocol)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from reidcli.data.records import normalize_frame
from reidcli.errors import UsageError
from reidcli.metric.warca import WARCA
from reidcli.paper import warca_protocol
from reidcli.store import StoreWriter
from tests.metric.helpers import camera_offset_toy


def _store(path, dataset, options, num_trials, feature="hist-lbp", eval_rule="market"):
    n = 8
    records = normalize_frame(pd.DataFrame({
        "path": [f"img/{i}.jpg" for i in range(n)], "pid": np.repeat([1, 2, 3, 4], 2),
        "camid": np.tile([0, 1], 4), "split": "gallery", "dataset": dataset}))
    with StoreWriter(path, records, dataset=dataset, provenance={"command": "t"}) as w:
        w.set_feature(feature, np.zeros((n, 3), np.float32))
        w.write_protocol("warca", [{"query_idx": [0], "gallery_idx": [1]}] * num_trials,
                         eval_rule=eval_rule, options=options)
    return path


def test_the_papers_protocol_is_named_as_such(tmp_path, capsys):
    store = _store(tmp_path / "v.h5", "viper", {"protocol": "warca", "test_ids": 316,
                                                "draws": 10, "warca_draw": "probe_single",
                                                "same_camera": "drop"}, 100)
    line, departures = warca_protocol.describe_store(store, dim=100)
    assert departures == []
    assert line.startswith("WARCA Table 2 protocol on VIPeR: 10 splits × 10 draws, P = 316 "
                           "test ids, one probe per test id")
    assert warca_protocol.main(["header", str(store), "--dim", "100"]) == 0
    assert "this is the paper's protocol" in capsys.readouterr().out


def test_departures_are_listed(tmp_path):
    store = _store(tmp_path / "c.h5", "cuhk03", {"protocol": "warca", "test_ids": 100,
                                                 "draws": 1, "warca_draw": "gallery_single",
                                                 "subset": "detected"}, 10, feature="lomo")
    line, departures = warca_protocol.describe_store(store, dim=64)
    text = "; ".join(departures)
    for part in ("1 draws per split (paper: 10)", "warca_draw=gallery_single",
                 "subset detected (paper: labeled)", "features lomo (paper: hist-lbp)",
                 "D' = 64 (paper: 40)"):
        assert part in text
    assert "same-camera matches dropped" in line
    keep = _store(tmp_path / "k.h5", "caviar4reid", {"protocol": "warca", "test_ids": 36,
                                                     "draws": 10, "warca_draw": "probe_single",
                                                     "same_camera": "keep"}, 100,
                  eval_rule="single_shot_any")
    line, departures = warca_protocol.describe_store(keep, dim=40)
    assert departures == [] and "same-camera matches kept" in line


def test_cv_selection_is_read_back(tmp_path, capsys):
    from reidcli import fitted

    x, pids, _, _ = camera_offset_toy(seed=0, train_ids=30, test_ids=2)
    model = WARCA(dim=4, iterations=20, batch_size=32, max_draws=16, cv=True,
                  cv_lams=[1e-3], cv_lrs=[0.1, 1e-6]).fit(x, pids)
    path = fitted.save(tmp_path / "cv.h5", "warca", {0: model.fitted_arrays()})
    sel = warca_protocol.selected(path)
    assert sel["lam"] == model.hyper_["lam"] and sel["lr"] == model.hyper_["lr"]
    assert warca_protocol.main(["cv", str(path), "--values"]) == 0
    assert capsys.readouterr().out.split() == [f"{sel['lam']:g}", f"{sel['lr']:g}"]
    warca_protocol.main(["cv", str(path)])
    assert "cross-validated once on split 1's training ids" in capsys.readouterr().out
    warca_protocol.main(["cv", str(path), "--with-values"])
    sentence, values = capsys.readouterr().out.splitlines()
    assert "cross-validated once" in sentence and values.split() == [f"{sel['lam']:g}",
                                                                     f"{sel['lr']:g}"]
    plain = WARCA(dim=4, iterations=5, batch_size=32, max_draws=16,
                  holdout_check=0).fit(x, pids)
    fitted.save(tmp_path / "plain.h5", "warca", {0: plain.fitted_arrays()})
    with pytest.raises(UsageError, match="without cross-validation"):
        warca_protocol.selected(tmp_path / "plain.h5")
