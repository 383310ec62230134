"""Per-camera metrics and same-camera removal group rows by (domain, camid) cameras."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from reidcli.evaluation.distances import MatrixDistances
from reidcli.evaluation.engine import EvalOptions, evaluate_trial
from reidcli.evaluation.protocols import TrialLabels, get_protocol, identity_codes


def _two_domain_records() -> pd.DataFrame:
    """Persons 1–3 in each of domains a, b; every query is camid 0, every gallery camid 1."""
    pids = np.tile(np.repeat([1, 2, 3], 2), 2)
    return pd.DataFrame({"pid": pids, "camid": np.tile([0, 1], 6),
                         "domain": np.repeat(["a", "b"], 6), "dataset": "toy",
                         "split": np.tile(["query", "gallery"], 6)})


def test_per_camera_rows_are_domain_cameras_with_a_weighted_mean_of_the_union():
    records = _two_domain_records()
    q_rows, g_rows = np.arange(0, 12, 2), np.arange(1, 12, 2)
    labels = TrialLabels.from_records(records, identity_codes(records), q_rows, g_rows)
    assert labels.cameras.num_cameras == 4
    rng = np.random.default_rng(0)
    dist = rng.random((6, 6))
    res = evaluate_trial(MatrixDistances(dist), labels, get_protocol("market"),
                         EvalOptions(max_rank=5, per_camera=True))
    cams = res.per_camera["cameras"]
    assert list(cams) == ["a/0", "b/0"]
    assert [c["num_valid_queries"] for c in cams.values()] == [3, 3]
    assert res.per_camera["weighted_mean"]["mAP"] == pytest.approx(
        np.mean([cams["a/0"]["mAP"], cams["b/0"]["mAP"]]))
    assert res.per_camera["weighted_mean"]["mAP"] == pytest.approx(res.mAP)


def test_one_domain_keeps_camid_keys():
    records = _two_domain_records().assign(domain="a").iloc[:6]
    labels = TrialLabels.from_records(records, identity_codes(records), np.array([0, 2, 4]),
                                      np.array([1, 3, 5]))
    res = evaluate_trial(MatrixDistances(1.0 - np.eye(3)), labels, get_protocol("market"),
                         EvalOptions(max_rank=3, per_camera=True))
    assert list(res.per_camera["cameras"]) == ["0"] and res.mAP == 1.0
