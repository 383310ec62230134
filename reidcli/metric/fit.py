"""Fit a metric on a stored feature over a store's protocol trials (``reid train <metric>``).

Per trial, training rows are the trial's ``train_idx`` minus distractors (pid ≤ 0); a store
without protocol trials is fitted on its ``train`` rows. Trials with identical training rows
(the draws of one split) are fitted once and share their arrays. The result is one fitted-model file
with a ``trial_<k>`` group per fitted trial, scored by ``reid eval --model``.
"""
from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import numpy as np

from reidcli import fitted
from reidcli.errors import UsageError
from reidcli.estimator import Estimator
from reidcli.progress import track
from reidcli.provenance import make_provenance


@dataclasses.dataclass
class MetricFitSummary:
    path: Path
    method: str
    feature: str
    trials: list[int]
    num_train_images: list[int]
    seconds: float


def fit_feature_metric_store(store_path: str | Path, out: str | Path, estimator: Estimator,
                             *, feature: str | None = None, trials: str | None = "all",
                             force: bool = False, progress: bool | None = None,
                             command: str | None = None) -> MetricFitSummary:
    """Fit a copy of ``estimator`` on every chosen trial's training rows of ``feature``;
    write one fitted file (``trial_<k>`` per trial) to ``out``."""
    from reidcli.cameras import record_cameras
    from reidcli.data.protocols import person_labels
    from reidcli.store.trials import parse_trials
    from reidcli.io import check_output
    from reidcli.store.trials import store_trials
    from reidcli.store import open_store

    method = estimator.method
    check_output(Path(out), force, inputs=[store_path])
    estimator._validated_params()                  # bad parameters fail before any work
    started = time.perf_counter()
    with open_store(store_path) as st:
        name = st.require_feature(feature)
        all_trials = store_trials(st)
        chosen = parse_trials(trials, len(all_trials))
        records = st.records
        pids = person_labels(records)
        camids, _ = record_cameras(records)     # a camera is (domain, camid): docs/formats.md
        fits, sizes, params = {}, [], estimator.saved_params()
        # trials with the same training rows (e.g. the draws of one WARCA split) share one fit;
        # the saved file links their groups to the first one's (reidcli.fitted.save)
        by_rows: dict[bytes, dict] = {}
        for k in track(chosen, description=f"train {method}", unit="trial", enabled=progress):
            rows = all_trials[k][1]
            rows = np.sort(rows[pids[rows] > 0])
            if len(rows) == 0:
                raise UsageError(f"trial {k} of store {store_path} has no training rows",
                                 "write train rows or a protocol with train_idx into the store")
            sizes.append(int(len(rows)))
            key = np.ascontiguousarray(rows, dtype=np.int64).tobytes()
            if key not in by_rows:
                trial_estimator = type(estimator)(**estimator.get_params())
                by_rows[key] = trial_estimator.fit(st.features(name, rows), pids[rows],
                                                   camids[rows]).fitted_arrays()
            fits[k] = by_rows[key]
        provenance = make_provenance(command, seed=params.get("seed"), inputs=[store_path],
                                     method=method)
    fitted.save(out, method, fits, hyperparameters={**params, "trials": chosen},
                provenance=provenance, feature=name, force=force, inputs=[store_path])
    return MetricFitSummary(Path(out), method, name, chosen, sizes,
                            round(time.perf_counter() - started, 3))
