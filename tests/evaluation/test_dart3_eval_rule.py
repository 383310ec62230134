"""T14 (docs/methods/dart3.md): the evaluation rule on a hand-made example with known values."""
from __future__ import annotations

import numpy as np
import pytest

from reidcli.evaluation.arrays import evaluate_arrays
from reidcli.evaluation.engine import EvalOptions

#: gallery: g0 same pid+camera as q0 (removed), g3 a distractor (pid 0), g5 the only match
#: of q2 and in q2's camera (so q2 has no valid match and is skipped)
G_PIDS, G_CAMS = [1, 1, 2, 0, 2, 3], [0, 1, 1, 2, 0, 0]
Q_PIDS, Q_CAMS = [1, 2, 3], [0, 2, 0]
DIST = np.array([[0.1, 0.5, 0.2, 0.3, 0.4, 0.6],      # q0: match g1 at rank 4 → AP 1/4
                 [0.9, 0.8, 0.3, 0.1, 0.5, 0.7],      # q1: matches at ranks 2, 3 → AP 7/12
                 [0.5, 0.4, 0.3, 0.2, 0.6, 0.1]],     # q2: skipped
                dtype=np.float32)


def test_hand_made_example_known_ap_and_cmc():
    res = evaluate_arrays(Q_PIDS, Q_CAMS, G_PIDS, G_CAMS, distances=DIST,
                          options=EvalOptions(max_rank=5, per_camera=True))
    assert res.num_valid_queries == 2
    assert res.mAP == pytest.approx((1 / 4 + 7 / 12) / 2, abs=1e-12)
    np.testing.assert_allclose(res.cmc[:5], [0.0, 0.5, 0.5, 1.0, 1.0], atol=1e-12)
    cams = res.per_camera["cameras"]
    assert cams["0"]["mAP"] == pytest.approx(0.25) and cams["2"]["mAP"] == pytest.approx(7 / 12)
    assert res.per_camera["weighted_mean"]["mAP"] == pytest.approx(res.mAP, abs=1e-9)
    assert res.per_camera["weighted_mean"]["num_valid_queries"] == 2
