"""Fit a pooling method over a store's protocol trials into one fitted-model file
(``reid fit-pooling``; docs/methods/cdpcf.md).

Per trial, the training images are the trial's ``train_idx`` rows minus distractors (pid ≤ 0);
a store without protocol trials is fitted on its ``train`` rows and scored on its
``query``/``gallery`` rows (the loop over the trials is
:func:`reidcli.estimator_fit.fit_trials`). With ``train_ids_limit`` each trial is fitted
``repeats`` times on random subsets of its training ids (Fig. 7), drawn by
:func:`reidcli.data.protocols.reduced_id_subset` over the trial's training pids with the seed
tuple ``[seed, 11, t, r, n]``.

A camera is the pair (domain, camid) (:mod:`reidcli.cameras`): the fitted file's ``camids`` and
``camera_domains`` list the union of the trials' training cameras in (domain, camid) order.
"""
from __future__ import annotations

import dataclasses
import warnings
from pathlib import Path

import numpy as np

from reidcli import fitted
from reidcli.cameras import record_camera_columns
from reidcli.data.protocols import person_labels
from reidcli.errors import UsageError
from reidcli.estimator import Estimator
from reidcli.estimator_fit import TrainingRows, TrialSource, fit_trials
from reidcli.metric.constraints import MAX_COUNT
from reidcli.params import Interval, check_param
from reidcli.pooling.cdpcf import PoolingEstimator
from reidcli.progress import track

#: C-DPCF's reduced-training-id sizes (paper §IV-G)
TRAIN_ID_LIMITS = (10, 30, 50, 100)
#: ``train_ids``: at least two persons (the cross-person statistics need them)
TRAIN_IDS = Interval(int, 2, MAX_COUNT)
#: ``repeats``: subsets per trial, each a whole fit (paper: 5); more than this is a typo
REPEATS = Interval(int, 1, 1000)


@dataclasses.dataclass
class PoolingFitSummary:
    """What a fit wrote: path, trials, layers, cameras (``"camid"``, or ``"domain/camid"``
    when the training rows span several domains) and seconds spent per trial."""

    path: Path
    method: str
    trials: list[int]
    layers: list[str]
    cameras: list[str]
    num_train_images: list[int]
    seconds: float


def reduced_id_rows(rows: np.ndarray, pids: np.ndarray, limit: int, trial: int, repeat: int,
                    seed: int) -> np.ndarray:
    """Rows [m] of ``limit`` training ids drawn without replacement from the pids [n] of
    ``rows`` [n] (docs/methods/cdpcf.md)."""
    from reidcli.data.protocols import reduced_id_subset
    return rows[reduced_id_subset(pids, limit, seed=seed, trial=trial, repeat=repeat,
                                  owner="pooling", parameter="train_ids",
                                  where=f" of trial {trial}")]


def warn_if_several_networks(camera_domains: np.ndarray, trial: int) -> None:
    """C-DPCF learns each camera's maps from cross-camera pairs of one camera network (Eq. 1–9);
    training cameras [C] of several domains share no identity, so only negative pairs join
    the networks and the joint eigenproblem can separate domains instead of persons
    (docs/methods/cdpcf.md, "Several domains")."""
    domains = sorted({str(d) for d in camera_domains})
    if len(domains) > 1:
        warnings.warn(f"C-DPCF trial {trial}: the training cameras belong to {len(domains)} "
                      f"domains ({', '.join(domains)}) that share no identity, so their "
                      "camera-specific maps are learned from negative pairs only across domains "
                      "— fit one domain (a store extracted with the loader option domains) "
                      "or use dpcf")


def average_images(paths: list[str], cam_index: np.ndarray, num_cameras: int,
                   size: tuple[int, int] = (128, 64), per_camera: int = 500,
                   seed: int = 0) -> np.ndarray | None:
    """Mean RGB image of each camera's training images (C-DPCF Fig. 5), uint8 [C, H, W, 3].

    At most ``per_camera`` images per camera (seeded choice); None when the images cannot be
    read (e.g. a store imported without image paths).
    """
    from reidcli.errors import InputFileError
    from reidcli.features.extract import read_image_batch

    rng = np.random.Generator(np.random.PCG64([seed, 5]))
    out = np.zeros((num_cameras, *size, 3))
    for c in track(range(num_cameras), description="average images", unit="cameras",
                   inner=True):
        idx = np.flatnonzero(cam_index == c)
        if len(idx) > per_camera:
            idx = np.sort(rng.choice(idx, per_camera, replace=False))
        try:
            for start in range(0, len(idx), 256):
                batch = read_image_batch([paths[i] for i in idx[start:start + 256]], size)
                out[c] += batch.sum(0)
        except InputFileError:
            return None
        out[c] /= max(len(idx), 1)
    return np.round(out).astype(np.uint8)


class ConvMapTrials(TrialSource):
    """Conv maps of each trial's training rows (sorted) for a map estimator (e.g. a plugin's):
    ``fit({layer: maps [n, C, H, W]}, pids [n], camids [n])`` on a fresh copy; the fitted file's
    hyperparameters are its ``saved_params()`` with ``layers`` and ``trials``."""

    description = "fit-pooling"

    def __init__(self, layers: list[str] | None = None):
        self.layers = layers

    def open(self, store) -> None:
        self.layers = store.require_convmaps(self.layers)

    def fit(self, store, estimator: Estimator, train: TrainingRows) -> dict:
        order = np.argsort(train.rows, kind="stable")
        rows = train.rows[order]
        maps = {layer: store.convmaps(layer, rows) for layer in self.layers}
        return estimator.clone().fit(maps, train.pids[order],
                                     train.cameras[order]).fitted_arrays()

    def hyperparameters(self, store, estimator, trials, cameras) -> dict:
        return {**estimator.saved_params(), "layers": list(self.layers), "trials": trials}


class PoolingTrials(ConvMapTrials):
    """C-DPCF and its baselines (:class:`~reidcli.pooling.cdpcf.PoolingEstimator`): each fit
    reads the maps chunk by chunk through the store (``fit(read, pids, camids, domains=...,
    rows=...)``); with ``train_ids_limit`` a trial holds ``repeats`` fits on reduced training
    ids (``repeat_<r>`` groups), else optionally each camera's mean training image."""

    def __init__(self, layers: list[str] | None = None, train_ids_limit: int | None = None,
                 repeats: int = 5, with_average_images: bool = True):
        super().__init__(layers)
        if train_ids_limit is not None:
            # ≥ 2 ids for a cross-person statistic; each repeat is a whole fit (paper: 5)
            train_ids_limit = check_param("pooling", "train_ids", train_ids_limit, TRAIN_IDS)
            repeats = check_param("pooling", "repeats", repeats, REPEATS)
        self.train_ids_limit, self.repeats = train_ids_limit, repeats
        self.with_average_images = with_average_images

    def open(self, store) -> None:
        super().open(store)
        self.records = store.records
        self.pids = person_labels(self.records)

    def _fit_rows(self, store, estimator: PoolingEstimator, rows: np.ndarray,
                  trial: int) -> dict:
        rows = np.sort(rows)
        domains, camids = record_camera_columns(self.records, rows)
        model = estimator.clone().set_params(layers=",".join(self.layers))
        return model.fit(store.convmaps, self.pids[rows], camids, domains=domains, rows=rows,
                         context=f"trial {trial}, ").fitted_arrays()

    def fit(self, store, estimator: PoolingEstimator, train: TrainingRows) -> dict:
        k, rows, seed = train.trial, train.rows, estimator.settings()["seed"]
        trial_cams, cam_index = np.unique(train.cameras, return_inverse=True)
        if estimator.camera_specific:
            warn_if_several_networks(train.table.domains[trial_cams], k)
        if self.train_ids_limit is not None:
            return {f"{fitted.REPEAT_PREFIX}{r}": self._fit_rows(
                store, estimator, reduced_id_rows(rows, train.pids, self.train_ids_limit, k, r,
                                                  seed), k)
                for r in range(self.repeats)}
        arrays = self._fit_rows(store, estimator, rows, k)
        if self.with_average_images:
            images = average_images(self.records["path"].to_numpy()[rows].tolist(), cam_index,
                                    len(trial_cams), seed=seed)
            if images is not None:
                arrays["average_images"] = images
                arrays["average_image_camids"] = train.table.cam_ids[trial_cams]
        return arrays

    def hyperparameters(self, store, estimator: PoolingEstimator, trials, cameras) -> dict:
        hyper = estimator.hyperparameters(self.layers, cameras)
        hyper["map_sizes"] = {layer: "x".join(map(str, store.convmap_shape(layer)[1:]))
                              for layer in self.layers}             # for the Fig. 4/5 plots
        hyper.update({"train_ids_limit": self.train_ids_limit,
                      "repeats": self.repeats if self.train_ids_limit is not None else 1,
                      "trials": trials})
        return hyper


def fit_pooling_store(store_path: str | Path, out: str | Path, estimator: Estimator, *,
                      layers: list[str] | None = None, trials: str | None = "all",
                      train_ids_limit: int | None = None, repeats: int = 5,
                      force: bool = False, progress: bool | None = None,
                      command: str | None = None,
                      with_average_images: bool = True) -> PoolingFitSummary:
    """Fit a ``fit-pooling`` estimator on every chosen trial of a conv-map store; write ``out``.

    ``layers`` default to the estimator's ``layers`` parameter, else every conv-map layer of
    the store. C-DPCF and its baselines (:class:`~reidcli.pooling.cdpcf.PoolingEstimator`) go
    through :class:`PoolingTrials`: with ``with_average_images`` each trial also keeps the mean
    image of every camera's training images (``trial_<k>/average_images`` uint8
    [C, 128, 64, 3], for the Fig. 5 plot); ``train_ids_limit`` fits ``repeats`` reduced-id
    subsets per trial. Any other map estimator (e.g. a plugin's) goes through
    :class:`ConvMapTrials`. Returns a summary.
    """
    if layers is None and hasattr(estimator, "layer_list"):
        layers = estimator.layer_list()
    if isinstance(estimator, PoolingEstimator):
        estimator.settings()                        # bad parameters fail before any work
        source: ConvMapTrials = PoolingTrials(layers, train_ids_limit, repeats,
                                              with_average_images)
    elif train_ids_limit is not None:
        raise UsageError(f"train_ids is not available for {estimator.method}",
                         "C-DPCF, DPCF and the AvgP baselines have it")
    else:
        source = ConvMapTrials(layers)
    done = fit_trials(store_path, out, estimator, source, trials=trials, force=force,
                      progress=progress, command=command)
    return PoolingFitSummary(path=done.path, method=done.method, trials=done.trials,
                             layers=list(source.layers),
                             cameras=[done.cameras.key(c)
                                      for c in range(done.cameras.num_cameras)],
                             num_train_images=done.num_train_images, seconds=done.seconds)
