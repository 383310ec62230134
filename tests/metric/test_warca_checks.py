"""WARCA's held-out check against the identity and the named χ² bandwidths."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from reidcli.metric import kernels
from reidcli.metric.warca import WARCA
from tests.metric.helpers import camera_offset_toy

FAST = dict(batch_size=64, max_draws=32, iterations=60, seed=0)


def _fit(x, pids, **kw):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = WARCA(**{**FAST, **kw}).fit(x, pids)
    return model, [str(w.message) for w in caught if "plain Euclidean" in str(w.message)]


def test_holdout_check_warns_when_the_metric_is_worse_than_the_identity():
    # identity-separable data: clusters far apart in every dimension; a 1-d map trained with a
    # vanishing step stays a random projection, which ranks worse than plain distances
    rng = np.random.default_rng(0)
    centres = 10 * rng.standard_normal((40, 20))
    pids = np.repeat(np.arange(40), 3)
    x = centres[pids] + 0.1 * rng.standard_normal((120, 20))
    model, lines = _fit(x, pids, dim=1, lr=1e-9, iterations=5, holdout_check=0.25)
    check = model.holdout_
    assert check["rank1_identity"] > check["rank1"] and len(check["val_ids"]) == 10
    assert len(lines) == 1 and "10 held-out training ids" in lines[0]
    assert "holdout_check" in model.fitted_arrays()
    off, lines = _fit(x, pids, dim=1, lr=1e-9, iterations=5, holdout_check=0.0)
    assert off.holdout_ is None and not lines and "holdout_check" not in off.fitted_arrays()


def test_holdout_check_is_quiet_when_warca_beats_the_identity():
    x, pids, _, _ = camera_offset_toy(seed=0, train_ids=60, test_ids=2)
    model, lines = _fit(x, pids, dim=6, lr=0.1, lam=1e-3, iterations=150, holdout_check=0.2)
    assert model.holdout_["rank1"] > model.holdout_["rank1_identity"] and not lines


def test_cv_reuses_its_validation_ids_for_the_check():
    x, pids, _, _ = camera_offset_toy(seed=1, train_ids=40, test_ids=2)
    model, _ = _fit(x, pids, dim=6, cv=True, cv_lams=[1e-3], cv_lrs=[0.1, 1e-6])
    np.testing.assert_array_equal(model.holdout_["val_ids"], model.cv_["val_ids"])
    assert model.holdout_["rank1"] == pytest.approx(model.cv_["rank1"].max())


def test_gamma_rules():
    rng = np.random.default_rng(0)
    x = rng.random((30, 12))
    assert kernels.resolve_kernel(x, "chi2rbf", "inv_dim").gamma == pytest.approx(1 / 12)
    auto = kernels.resolve_kernel(x, "chi2rbf", "auto").gamma
    assert auto == pytest.approx(1 / kernels.auto_gamma(x, "chi2rbf") ** -1)
    assert kernels.resolve_kernel(x, "linear", "inv_dim").gamma == 1.0
    with pytest.raises(Exception, match="inv_dim"):
        kernels.resolve_kernel(x, "chi2rbf", "median")
    model = WARCA(**{**FAST, "iterations": 3}, dim=2, kernel="chi2rbf", gamma="inv_dim",
                  holdout_check=0).fit(x, np.repeat(np.arange(10), 3))
    assert model.gamma_ == pytest.approx(1 / 12)
