"""The one fit of an estimator over a store's protocol trials (``reid train``,
``reid fit-pooling``; docs/methods.md).

Per trial, the training rows are the trial's ``train_idx`` rows minus distractors (pid ≤ 0); a
store without protocol trials is fitted on its ``train`` rows. :func:`fit_trials` checks the
output path and the estimator's parameters before any work, hands each trial's
:class:`TrainingRows` to the stage's :class:`TrialSource` (which reads what the estimator needs
and calls its ``fit``), and writes one fitted-model file with a ``trial_<k>`` group per trial
(:func:`reidcli.fitted.save`) whose provenance records the command, the seed and the store.
"""
from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

import numpy as np

from reidcli import fitted
from reidcli.cameras import CameraTable, record_cameras
from reidcli.data.protocols import person_labels
from reidcli.errors import UsageError
from reidcli.estimator import Estimator
from reidcli.progress import track
from reidcli.provenance import make_provenance


@dataclasses.dataclass
class TrainingRows:
    """One trial's training rows: ``rows`` [n] (persons > 0, in the trial's order), their
    ``pids`` [n] and camera codes ``cameras`` [n] (:func:`reidcli.cameras.record_cameras` of
    the whole store; ``table`` lists those cameras)."""

    trial: int
    rows: np.ndarray
    pids: np.ndarray
    cameras: np.ndarray
    table: CameraTable


class TrialSource:
    """What one stage adds to :func:`fit_trials`: the inputs its estimators read and what its
    fitted file records beyond the estimator's parameters."""

    #: progress label ("train", "fit-pooling")
    description: str = "fit"
    #: the store feature the fitted file is tied to (None: conv maps)
    feature: str | None = None
    #: trials with the very same training rows share one fit (written once, hard-linked)
    share_identical_rows: bool = False

    def open(self, store) -> None:
        """Check that ``store`` holds what the estimator reads (before any fit)."""

    def fit(self, store, estimator: Estimator, train: TrainingRows) -> dict[str, Any]:
        """The arrays of one trial (fits fresh copies of ``estimator``)."""
        raise NotImplementedError

    def hyperparameters(self, store, estimator: Estimator, trials: list[int],
                        cameras: CameraTable) -> dict[str, Any]:
        """The fitted file's hyperparameters; ``cameras`` are the trials' training cameras."""
        return dict(estimator.saved_params())


@dataclasses.dataclass
class TrialFitSummary:
    """What :func:`fit_trials` wrote: the file, the fitted trials, their training-image counts,
    their training cameras (union, in code order) and the seconds spent."""

    path: Path
    method: str
    trials: list[int]
    num_train_images: list[int]
    cameras: CameraTable
    seconds: float


def fit_trials(store_path: str | Path, out: str | Path, estimator: Estimator,
               source: TrialSource, *, trials: str | None = "all", force: bool = False,
               progress: bool | None = None, command: str | None = None) -> TrialFitSummary:
    """Fit ``estimator`` (copies of it) on every chosen trial of the store at ``store_path``
    through ``source`` and write one fitted file to ``out`` (atomically)."""
    from reidcli.io import check_output
    from reidcli.store import open_store
    from reidcli.store.trials import parse_trials, store_trials

    check_output(Path(out), force, inputs=[store_path])
    params = estimator._validated_params()         # bad parameters fail before any work
    started = time.perf_counter()
    with open_store(store_path) as st:
        source.open(st)
        all_trials = store_trials(st)
        chosen = parse_trials(trials, len(all_trials))
        pids = person_labels(st.records)
        cams, table = record_cameras(st.records)   # a camera is (domain, camid): docs/formats.md
        fits: dict[int, Any] = {}
        sizes: list[int] = []
        cameras: set[int] = set()
        by_rows: dict[bytes, Any] = {}
        for k in track(chosen, description=f"{source.description} {estimator.method}",
                       unit="trial", enabled=progress):
            rows = all_trials[k][1]
            rows = rows[pids[rows] > 0]                            # distractors never train
            if len(rows) == 0:
                raise UsageError(f"trial {k} of store {store_path} has no training rows",
                                 "write train rows or a protocol with train_idx into the store")
            sizes.append(int(len(rows)))
            cameras.update(np.unique(cams[rows]).tolist())
            key = np.sort(rows).astype(np.int64).tobytes() if source.share_identical_rows \
                else None
            if key is not None and key in by_rows:
                fits[k] = by_rows[key]                 # the saved file links the groups
                continue
            fits[k] = source.fit(st, estimator, TrainingRows(k, rows, pids[rows], cams[rows],
                                                             table))
            if key is not None:
                by_rows[key] = fits[k]
        trained = np.array(sorted(cameras), dtype=np.int64)
        trained_table = CameraTable(cam_ids=table.cam_ids[trained],
                                    domains=table.domains[trained])
        hyper = source.hyperparameters(st, estimator, chosen, trained_table)
        provenance = make_provenance(command, seed=params.get("seed"), inputs=[store_path],
                                     method=estimator.method)
    fitted.save(out, estimator.method, fits, hyperparameters=hyper, provenance=provenance,
                feature=source.feature, force=force, inputs=[store_path])
    return TrialFitSummary(Path(out), estimator.method, chosen, sizes, trained_table,
                           round(time.perf_counter() - started, 3))
