"""Fit a pooling method over a store's protocol trials into one fitted-model file
(``reid fit-pooling``; docs/methods/cdpcf.md).

Per trial, the training images are the trial's ``train_idx`` rows minus distractors (pid ≤ 0);
a store without protocol trials is fitted on its ``train`` rows and scored on its
``query``/``gallery`` rows. With ``train_ids_limit`` each trial is fitted ``repeats`` times on
random subsets of its training ids (Fig. 7), drawn by
:func:`reidcli.data.protocols.reduced_id_subset` over the trial's training pids with the seed
tuple ``[seed, 11, t, r, n]``.

A camera is the pair (domain, camid) (:mod:`reidcli.cameras`): the fitted file's ``camids`` and
``camera_domains`` list the union of the trials' training cameras in (domain, camid) order.
"""
from __future__ import annotations

import dataclasses
import time
import warnings
from pathlib import Path

import numpy as np

from reidcli import fitted
from reidcli.cameras import CameraTable, record_cameras
from reidcli.data.protocols import person_labels
from reidcli.errors import UsageError
from reidcli.metric.constraints import MAX_COUNT
from reidcli.params import Interval, check_param
from reidcli.pooling.cdpcf import PoolingConfig, fit_layer
from reidcli.pooling.projection import layer_index
from reidcli.progress import track
from reidcli.provenance import make_provenance

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


def fit_trial(store, rows: np.ndarray, layers: list[str], config: PoolingConfig,
              trial: int) -> dict:
    """Arrays of one trial: ``{layer: fit_layer(...)}`` on the given training rows, each
    grouped by its (domain, camid) camera."""
    records = store.records
    rows = np.sort(rows)
    pids = person_labels(records)[rows]
    codes, _ = record_cameras(records, rows)
    return {layer: fit_layer(store.convmaps, layer, layer_index(layer, layers), rows, pids,
                             codes, config, context=f"trial {trial}, layer {layer}")
            for layer in layers}


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


def fit_pooling_store(store_path: str | Path, out: str | Path, config: PoolingConfig, *,
                      layers: list[str] | None = None, trials: str | None = "all",
                      train_ids_limit: int | None = None, repeats: int = 5,
                      force: bool = False, progress: bool | None = None,
                      command: str | None = None,
                      with_average_images: bool = True) -> PoolingFitSummary:
    """Fit ``config.method`` on every chosen trial of a conv-map store; write ``out``.

    ``layers`` default to every conv-map layer of the store. With ``with_average_images``
    each trial also keeps the mean image of every camera's training images
    (``trial_<k>/average_images`` uint8 [C, 128, 64, 3], for the Fig. 5 plot). Returns a
    summary.
    """
    from reidcli.store.trials import parse_trials, store_trials
    from reidcli.io import check_output
    from reidcli.store import open_store

    check_output(Path(out), force, inputs=[store_path])
    if train_ids_limit is not None:
        # ≥ 2 ids for a cross-person statistic; each repeat is a whole fit (paper: 5)
        train_ids_limit = check_param("pooling", "train_ids", train_ids_limit, TRAIN_IDS)
        repeats = check_param("pooling", "repeats", repeats, REPEATS)
    started = time.perf_counter()
    with open_store(store_path) as st:
        layers = st.require_convmaps(layers)
        all_trials = store_trials(st)
        chosen = parse_trials(trials, len(all_trials))
        records = st.records
        pids_all = person_labels(records)
        cams_all, camera_table = record_cameras(records)
        fits: dict[int, dict] = {}
        sizes, cameras = [], set()
        for k in track(chosen, description=f"fit-pooling {config.method}", unit="trial",
                       enabled=progress):
            rows = all_trials[k][1]
            rows = rows[pids_all[rows] > 0]                       # distractors never train
            if len(rows) == 0:
                raise UsageError(f"trial {k} of store {store_path} has no training rows",
                                 "write train rows or a protocol with train_idx into the store")
            trial_cams, cam_index = np.unique(cams_all[rows], return_inverse=True)
            if config.camera_specific:
                warn_if_several_networks(camera_table.domains[trial_cams], k)
            cameras.update(trial_cams.tolist())
            sizes.append(int(len(rows)))
            if train_ids_limit is None:
                fits[k] = fit_trial(st, rows, layers, config, k)
            else:
                fits[k] = {f"{fitted.REPEAT_PREFIX}{r}": fit_trial(
                    st, reduced_id_rows(rows, pids_all[rows], train_ids_limit, k, r,
                                        config.seed), layers, config, k)
                    for r in range(repeats)}
            if with_average_images and train_ids_limit is None:
                images = average_images(records["path"].to_numpy()[rows].tolist(), cam_index,
                                        len(trial_cams), seed=config.seed)
                if images is not None:
                    fits[k]["average_images"] = images
                    fits[k]["average_image_camids"] = camera_table.cam_ids[trial_cams]
        trained = np.array(sorted(cameras), dtype=np.int64)
        trained_table = CameraTable(cam_ids=camera_table.cam_ids[trained],
                                    domains=camera_table.domains[trained])
        hyper = config.hyperparameters(layers, trained_table)
        hyper["map_sizes"] = {layer: "x".join(map(str, st.convmap_shape(layer)[1:]))
                              for layer in layers}                  # for the Fig. 4/5 plots
        hyper.update({"train_ids_limit": train_ids_limit,
                      "repeats": repeats if train_ids_limit is not None else 1,
                      "trials": chosen})
        provenance = make_provenance(command, seed=config.seed, inputs=[store_path],
                                     method=config.method)
    fitted.save(out, config.method, fits, hyperparameters=hyper, provenance=provenance,
                force=force, inputs=[store_path])
    return PoolingFitSummary(path=Path(out), method=config.method, trials=chosen,
                             layers=list(layers),
                             cameras=[trained_table.key(c)
                                      for c in range(trained_table.num_cameras)],
                             num_train_images=sizes,
                             seconds=round(time.perf_counter() - started, 3))


def fit_map_estimator_store(store_path: str | Path, out: str | Path, estimator, *,
                            layers: list[str] | None = None, trials: str | None = "all",
                            force: bool = False, progress: bool | None = None,
                            command: str | None = None) -> PoolingFitSummary:
    """Fit a copy of a conv-map ``estimator`` — a ``fit-pooling`` method that is not one of
    :class:`~reidcli.pooling.cdpcf.PoolingConfig`'s (e.g. a plugin's) — on every chosen
    trial: ``fit({layer: maps [n, C, H, W]}, pids [n], camids [n])`` on the trial's training
    rows (persons > 0); one fitted file (``trial_<k>`` per trial, its ``fitted_arrays()``;
    hyperparameters its ``saved_params()``) is written to ``out``."""
    from reidcli.io import check_output
    from reidcli.store import open_store
    from reidcli.store.trials import parse_trials, store_trials

    check_output(Path(out), force, inputs=[store_path])
    estimator._validated_params()                  # bad parameters fail before any work
    started = time.perf_counter()
    with open_store(store_path) as st:
        layers = st.require_convmaps(layers)
        all_trials = store_trials(st)
        chosen = parse_trials(trials, len(all_trials))
        pids_all = person_labels(st.records)
        cams_all, camera_table = record_cameras(st.records)
        fits, sizes, cameras = {}, [], set()
        for k in track(chosen, description=f"fit-pooling {estimator.method}", unit="trial",
                       enabled=progress):
            rows = all_trials[k][1]
            rows = np.sort(rows[pids_all[rows] > 0])              # distractors never train
            if len(rows) == 0:
                raise UsageError(f"trial {k} of store {store_path} has no training rows",
                                 "write train rows or a protocol with train_idx into the store")
            trial_estimator = type(estimator)(**estimator.get_params())
            maps = {layer: st.convmaps(layer, rows) for layer in layers}
            fits[k] = trial_estimator.fit(maps, pids_all[rows],
                                          cams_all[rows]).fitted_arrays()
            sizes.append(int(len(rows)))
            cameras.update(np.unique(cams_all[rows]).tolist())
        provenance = make_provenance(command, seed=estimator.get_params().get("seed"),
                                     inputs=[store_path], method=estimator.method)
    fitted.save(out, estimator.method, fits,
                hyperparameters={**estimator.saved_params(), "layers": list(layers),
                                 "trials": chosen},
                provenance=provenance, force=force, inputs=[store_path])
    return PoolingFitSummary(path=Path(out), method=estimator.method, trials=chosen,
                             layers=list(layers),
                             cameras=[camera_table.key(c) for c in sorted(cameras)],
                             num_train_images=sizes,
                             seconds=round(time.perf_counter() - started, 3))
