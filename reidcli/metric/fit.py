"""Fit a metric on a stored feature over a store's protocol trials (``reid train <metric>``).

Per trial, training rows are the trial's ``train_idx`` minus distractors (pid ≤ 0); a store
without protocol trials is fitted on its ``train`` rows. Trials with identical training rows
(the draws of one split) are fitted once and share their arrays. The result is one fitted-model file
with a ``trial_<k>`` group per fitted trial, scored by ``reid eval --model``. The loop over the
trials is :func:`reidcli.estimator_fit.fit_trials`.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from reidcli.estimator import Estimator
from reidcli.estimator_fit import TrainingRows, TrialSource, fit_trials


@dataclasses.dataclass
class MetricFitSummary:
    path: Path
    method: str
    feature: str
    trials: list[int]
    num_train_images: list[int]
    seconds: float


class FeatureTrials(TrialSource):
    """A stored feature's training rows, sorted, for :meth:`Estimator.fit` (X [n, D])."""

    description = "train"
    # trials with the same training rows (e.g. the draws of one WARCA split) share one fit;
    # the saved file links their groups to the first one's (reidcli.fitted.save)
    share_identical_rows = True

    def __init__(self, feature: str | None):
        self.feature = feature

    def open(self, store) -> None:
        self.feature = store.require_feature(self.feature)

    def fit(self, store, estimator: Estimator, train: TrainingRows) -> dict:
        order = np.argsort(train.rows, kind="stable")
        return estimator.clone().fit(store.features(self.feature, train.rows[order]),
                                     train.pids[order], train.cameras[order]).fitted_arrays()

    def hyperparameters(self, store, estimator, trials, cameras) -> dict:
        return {**estimator.saved_params(), "trials": trials}


def fit_feature_metric_store(store_path: str | Path, out: str | Path, estimator: Estimator,
                             *, feature: str | None = None, trials: str | None = "all",
                             force: bool = False, progress: bool | None = None,
                             command: str | None = None) -> MetricFitSummary:
    """Fit a copy of ``estimator`` on every chosen trial's training rows of ``feature``;
    write one fitted file (``trial_<k>`` per trial) to ``out``."""
    source = FeatureTrials(feature)
    done = fit_trials(store_path, out, estimator, source, trials=trials, force=force,
                      progress=progress, command=command)
    return MetricFitSummary(done.path, done.method, source.feature, done.trials,
                            done.num_train_images, done.seconds)
