"""Seeded and derived protocols built on loaded records (docs/datasets.md).

Two kinds of procedure live here:

* **Seeded protocols on all images of a dataset** — :func:`single_shot_half` (C-DPCF,
  docs/methods/cdpcf.md), :func:`warca_protocol` (docs/datasets.md), :func:`random_pairs` (iLIDS
  ``dg``). They draw every trial at once from an explicit seed and cache the trials as JSON with
  paths relative to the dataset folder (:func:`reidcli.data.splits.cached_trials`), so a reload
  gives exactly the same trials. The half/half and WARCA trials are drawn by the builders the
  small-set loaders use (:mod:`reidcli.data.trials`), so e.g. VIPeR's own
  ``warca`` trials equal :func:`warca_protocol` on VIPeR's records with ``name="viper"``.
* **Derived protocols on a loaded split** (no randomness of their own, nothing to cache) —
  :func:`camera_holdout` (DART3's new camera, docs/methods/dart3.md), :func:`domain_holdout` (DMG-Net,
  docs/datasets.md), :func:`limit_train_ids` (C-DPCF's reduced training ids, docs/methods/cdpcf.md).
  :func:`reidcli.data.load` applies them to *any* dataset (``protocol="camera_holdout"``,
  ``train_ids_limit=10``, ...), see :data:`DERIVED`.

:func:`apply_protocol` dispatches by name; loaders call it for protocols other than their own
standard split (the synthetic loader does for ``protocol=...``). The DG training
compositions Mixed A / Mixed B (docs/datasets.md) are in :mod:`reidcli.data.compositions`.

Identities are compared through their global key ``(dataset, domain, pid_scope, pid)``
(docs/datasets.md), never the bare pid, so records of several synthetic domains or both MSMT17
pid scopes never merge persons.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from reidcli.cameras import parse_cameras
from reidcli.data.datasets.common import MAX_NUMBER
from reidcli.data.trials import (MAX_DRAWS, WARCA_DRAWS, WARCA_DRAWS_PER_SPLIT, WARCA_SAME_CAMERA,
                                 Pool, check_choice, check_int, two_view_trials, warca_trials)
from reidcli.data.records import DatasetSplit, normalize_frame
from reidcli.data.splits import (Trial, cached_trials, check_trial, choose_ids, protocol_rng,
                                 relative_paths, split_from_trial)
from reidcli.errors import DatasetError, ParameterError, UsageError

#: most seeded trials (or splits, or repeats) a protocol option may ask for: every trial is
#: drawn and cached at once, so ``num_trials=100000000`` would exhaust memory
MAX_TRIALS = 100
#: C-DPCF's reduced-training-id sizes (docs/methods/cdpcf.md, Fig. 7); other positive sizes are accepted
PAPER_TRAIN_IDS_LIMITS = (10, 30, 50, 100)
#: cameras trained on by default in camera_holdout: the paper's usual count (MSMT17 5/10,
#: Duke 5/3, Market 5/1; synthetic ``dart3`` 5/3), taken as the lowest camera ids
DEFAULT_NUM_TRAIN_CAMS = 5
#: DART3's training-camera subsets (0-based camids, docs/methods/dart3.md: MSMT17 5-cam
#: = file cameras 2-6, supported by the paper's 8,245-image count; the others are toolkit choices); pass one as
#: ``train_cams=DART3_TRAIN_CAMS["msmt17_5"]``
DART3_TRAIN_CAMS = {"msmt17_5": (1, 2, 3, 4, 5), "msmt17_10": tuple(range(1, 11)),
                    "dukemtmc_5": (0, 1, 2, 3, 4), "market1501_5": (0, 1, 2, 3, 4),
                    "synthetic_dart3": (0, 1, 2, 3, 4)}


# -- helpers ---------------------------------------------------------------------------------
def person_labels(records: pd.DataFrame) -> np.ndarray:
    """Training label per row: 1 + :func:`identity_codes` (``0`` for distractors and junk), so
    that a bare pid repeated in two domains (synthetic domains, MSMT17 splits) is two people.
    int64 [N]; for one dataset, domain and pid scope the labels keep the pids' order."""
    return identity_codes(records) + 1


def identity_codes(records: pd.DataFrame) -> np.ndarray:
    """int64 code per row of the global identity key ``(dataset, domain, pid_scope, pid)``,
    numbered in sorted key order; ``-1`` for distractors and junk (pid ≤ 0).

    For a single dataset, domain and pid scope the codes are in pid order, so draws over
    codes equal draws over pids."""
    codes = np.full(len(records), -1, dtype=np.int64)
    person = records["pid"].to_numpy(np.int64) > 0
    if not person.any():
        return codes
    scope = records["x_pid_scope"].fillna("all").astype(str) if "x_pid_scope" in records \
        else pd.Series("all", index=records.index)
    keys = pd.DataFrame({"dataset": records["dataset"].astype(str).to_numpy(),
                         "domain": records["domain"].astype(str).to_numpy(),
                         "scope": scope.to_numpy(),
                         "pid": records["pid"].to_numpy(np.int64)})[person]
    codes[person] = keys.groupby(["dataset", "domain", "scope", "pid"], sort=True).ngroup() \
        .to_numpy(np.int64)
    return codes


def _select_domain(records: pd.DataFrame, domain: str | None) -> pd.DataFrame:
    if domain is None:
        return records
    chosen = records[records["domain"] == domain]
    if chosen.empty:
        have = ", ".join(sorted(records["domain"].unique()))
        raise UsageError(f"no records of domain {domain!r} (have: {have})",
                         "pass one of those domains")
    return chosen


def _prepare(records: pd.DataFrame, dataset_root: Path, domain: str | None = None
             ) -> tuple[pd.DataFrame, np.ndarray]:
    """Records of ``domain`` sorted by path, and their paths relative to ``dataset_root``."""
    records = normalize_frame(_select_domain(records, domain).sort_values(
        "path", kind="stable").reset_index(drop=True))
    return records, np.asarray(relative_paths(records, dataset_root), dtype=object)


def _pool(records: pd.DataFrame, dataset_root: Path, domain: str | None,
          name: str | None) -> Pool:
    """The :class:`~reidcli.data.trials.Pool` of ``domain``'s records whose
    ``pids`` are identity numbers (code + 1 for persons, the native 0/-1 otherwise), so the
    shared trial builders never merge persons of different domains or pid scopes."""
    records = _select_domain(records, domain)
    pool = Pool.of(_dataset_name(records, name), Path(dataset_root), records)
    codes = identity_codes(pool.records)
    return dataclasses.replace(pool, pids=np.where(codes >= 0, codes + 1, pool.pids))


def _dataset_name(records: pd.DataFrame, name: str | None) -> str:
    if name:
        return name
    return str(records["dataset"].iloc[0]) if len(records) else "dataset"


def _subset(frame: pd.DataFrame, mask) -> pd.DataFrame:
    return normalize_frame(frame[np.asarray(mask, dtype=bool)].reset_index(drop=True))


def _as_split(split_or_records: DatasetSplit | pd.DataFrame, trial: int,
              name: str | None) -> DatasetSplit:
    """A loaded split, or one built from a record table's ``split`` column (one trial)."""
    if isinstance(split_or_records, DatasetSplit):
        return split_or_records
    check_trial(name or "dataset", trial, 1, "record table")
    records = normalize_frame(split_or_records.sort_values("path", kind="stable"))
    parts = {s: _subset(records, records["split"] == s)
             for s in ("train", "val", "query", "gallery")}
    return DatasetSplit(name=_dataset_name(records, name), train=parts["train"],
                        val=parts["val"], query=parts["query"], gallery=parts["gallery"])


def _check_trial(trial: int, num_trials: int, what: str) -> None:
    check_trial(what, trial, num_trials)


# -- C-DPCF: single-shot half/half, reduced training ids ------------------------------------
def single_shot_half(records: pd.DataFrame, *, trial: int, seed: int, dataset_root: Path,
                     n_test_ids: int | None = None, probe_cam: int = 0, gallery_cam: int = 1,
                     train_ids_limit: int | None = None, repeats: int = 5,
                     domain: str | None = None, num_trials: int = 10,
                     name: str | None = None, with_train: bool = True,
                     unpaired_in_gallery: bool = False, all_probe_images: bool = False,
                     all_gallery_images: bool = False,
                     protocol: str = "single_shot_half") -> DatasetSplit:
    """Two-view half/half person split (docs/methods/cdpcf.md; docs/datasets.md: C-DPCF, and the
    small-data synthetic presets, e.g. ``cdpcf``'s target domain ``synthetic/d1``).

    Eligible persons (pid > 0) have images in both ``probe_cam`` and ``gallery_cam``. Per
    trial (``num_trials`` seeded splits), ``n_test_ids`` (default: half, rounded down) of them
    are test persons: probe = one random ``probe_cam`` image each, gallery = one random
    ``gallery_cam`` image each plus every pid-0 distractor image of ``gallery_cam``; train =
    all images (both views) of the other eligible persons. ``domain`` restricts the records
    to one domain first.

    ``train_ids_limit`` = n (C-DPCF's reduced-training-id experiment, n ∈ {10, 30, 50, 100} in
    the paper): each split is used ``repeats`` times, each with n random training persons
    (:func:`limit_train_ids`); then there are ``num_trials · repeats`` trials, trial t =
    split t // repeats, subset t % repeats, and ``eval_kwargs = {"split", "repeat"}``.

    Variants used by the loaders: ``with_train=False`` (domain-generalisation test only, e.g.
    PRID2011 ``dg``), ``unpaired_in_gallery`` (gallery-camera images of persons never seen by
    the probe camera join every gallery, PRID2011's 549 extra persons),
    ``all_probe_images``/``all_gallery_images`` (multi-shot: every image of the view).
    """
    owner = name or protocol
    num_trials = check_int(owner, "num_trials", num_trials, maximum=MAX_TRIALS)
    probe_cam = check_int(owner, "probe_cam", probe_cam, minimum=0, maximum=MAX_NUMBER)
    gallery_cam = check_int(owner, "gallery_cam", gallery_cam, minimum=0, maximum=MAX_NUMBER)
    if n_test_ids is not None:
        n_test_ids = check_int(owner, "n_test_ids", n_test_ids)
    if train_ids_limit is not None:
        repeats = check_train_ids_limit(train_ids_limit, repeats)
        _check_trial(trial, num_trials * repeats,
                     f"{name or protocol} with train_ids_limit={train_ids_limit}")
        base = single_shot_half(
            records, trial=trial // repeats, seed=seed, dataset_root=dataset_root,
            n_test_ids=n_test_ids, probe_cam=probe_cam, gallery_cam=gallery_cam,
            domain=domain, num_trials=num_trials, name=name, with_train=with_train,
            unpaired_in_gallery=unpaired_in_gallery, all_probe_images=all_probe_images,
            all_gallery_images=all_gallery_images, protocol=protocol)
        return limit_train_ids(base, train_ids_limit=train_ids_limit, repeats=repeats,
                               repeat=trial % repeats, seed=seed)
    pool = _pool(records, dataset_root, domain, name)
    eligible = pool.ids_in_views(probe_cam, gallery_cam)
    n_test = len(eligible) // 2 if n_test_ids is None else int(n_test_ids)
    if len(eligible) < 2 or not 1 <= n_test < len(eligible):
        raise DatasetError(f"single_shot_half needs persons seen by cameras {probe_cam} and "
                           f"{gallery_cam}; found {len(eligible)} (asked {n_test} test ids)",
                           "check the dataset, its domain and the n_test_ids option")
    native = pool.records["pid"].to_numpy(np.int64)
    extra = (native == 0) & (pool.cams == gallery_cam)
    if unpaired_in_gallery:
        extra |= (pool.cams == gallery_cam) & (pool.pids > 0) & ~np.isin(pool.pids, eligible)
    key = (f"{protocol}_{(domain or 'all').replace('/', '-')}_p{probe_cam}g{gallery_cam}"
           f"_n{n_test}_t{num_trials}_seed{seed}")
    trials = pool.cached(key, lambda: two_view_trials(
        pool, test_ids=n_test, seed=seed, eligible=eligible, probe_view=probe_cam,
        gallery_view=gallery_cam, all_probe=all_probe_images, all_gallery=all_gallery_images,
        with_train=with_train, gallery_extra=extra, num_trials=num_trials))
    options = {"protocol": protocol, "n_test_ids": n_test, "probe_cam": probe_cam,
               "gallery_cam": gallery_cam, "domain": domain, "seed": seed}
    return pool.split(trials, trial, protocol=protocol, options=options)


def check_train_ids_limit(train_ids_limit: Any, repeats: Any) -> int:
    """``repeats`` as an int after checking that ``train_ids_limit`` is an integer ≥ 1 and
    ``repeats`` one in [1, :data:`MAX_TRIALS`] (ParameterError otherwise)."""
    check_int("reduced training ids", "train_ids_limit", train_ids_limit)
    return check_int("reduced training ids", "repeats", repeats, maximum=MAX_TRIALS)


def reduced_id_subset(ids: np.ndarray, limit: int, *, seed: int, trial: int, repeat: int,
                      owner: str = "reduced training ids", parameter: str = "train_ids_limit",
                      where: str = "") -> np.ndarray:
    """C-DPCF's reduced training ids (docs/methods/cdpcf.md): which rows belong to ``limit`` drawn
    persons. bool [n].

    ``ids`` [n] is an integer identity per training row; rows with a negative id (junk,
    distractors) are never drawn. The distinct non-negative ids, sorted ascending, form the
    pool; ``limit`` of them are drawn without replacement by
    ``Generator(PCG64(SeedSequence([seed, 11, trial, repeat, limit]))).choice(pool, limit,
    replace=False)``, and the mask marks every row of a drawn id. Which *positions* of the
    sorted pool are drawn depends only on (seed, trial, repeat, limit) and the pool size, so
    two callers draw the same persons when their ids sort the persons the same way.

    :class:`~reidcli.errors.ParameterError` (``owner``/``parameter``, ``where`` appended to
    the message) when ``limit`` exceeds the pool.
    """
    ids = np.asarray(ids, dtype=np.int64)
    pool = np.unique(ids[ids >= 0])
    limit = int(limit)
    if limit > len(pool):
        raise ParameterError(owner, parameter, limit,
                             f"exceeds the {len(pool)} training ids{where}",
                             f"use at most {len(pool)}")
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(
        [int(seed), 11, int(trial), int(repeat), limit])))
    chosen = rng.choice(pool, size=limit, replace=False)
    return np.isin(ids, chosen) & (ids >= 0)


def limit_train_ids(split: DatasetSplit, *, train_ids_limit: int, repeats: int = 5,
                    repeat: int = 0, seed: int | None = None) -> DatasetSplit:
    """C-DPCF's reduced training ids (docs/methods/cdpcf.md, Fig. 7).

    Subset ``repeat`` (0 ≤ repeat < repeats) of the loaded trial ``split``: the training
    images of n = ``train_ids_limit`` of its training persons, drawn by
    :func:`reduced_id_subset` over their :func:`identity_codes` with trial t =
    ``split.trial``; query/gallery unchanged. The result is trial ``t · repeats + repeat`` of
    ``num_trials · repeats``; ``eval_kwargs`` gains ``split`` (= t unless the split already
    names one) and ``repeat``. ``seed`` defaults to the split's ``seed`` option (else 0).
    """
    repeats = check_train_ids_limit(train_ids_limit, repeats)
    limit = int(train_ids_limit)
    if not 0 <= repeat < repeats:
        raise ParameterError("reduced training ids", "repeat", repeat,
                             f"is outside 0..{repeats - 1}", "pass a valid repeat")
    if seed is None:
        seed = split.options.get("seed")
    train = split.train
    keep = reduced_id_subset(identity_codes(train), limit, seed=int(seed or 0),
                             trial=int(split.trial), repeat=int(repeat),
                             where=f" of {split.name} trial {split.trial}")
    return DatasetSplit(
        name=split.name, train=_subset(train, keep), query=split.query,
        gallery=split.gallery, val=split.val, eval_rule=split.eval_rule,
        eval_kwargs={"split": int(split.trial), **split.eval_kwargs, "repeat": int(repeat)},
        trial=int(split.trial) * repeats + int(repeat),
        num_trials=int(split.num_trials) * repeats, protocol=split.protocol,
        options={**split.options, "train_ids_limit": limit, "repeats": repeats})


# -- WARCA ------------------------------------------------------------------------------------
def warca_protocol(records: pd.DataFrame, *, trial: int, seed: int, dataset_root: Path,
                   test_ids: int | None = None, draws: int = WARCA_DRAWS_PER_SPLIT,
                   warca_draw: str = "probe_single", same_camera: str = "drop",
                   num_splits: int = 10, domain: str | None = None, name: str | None = None,
                   protocol: str = "warca") -> DatasetSplit:
    """WARCA's protocol (docs/datasets.md; WARCA paper Sect. 4.2).

    ``test_ids`` (P; default half of the eligible persons) random test persons per split —
    only persons with ≥ 2 images are ever test persons — and every other person (pid > 0)
    trains. Within each of the ``num_splits`` splits, ``draws`` (10) random probe/gallery
    draws: ``probe_single`` (the paper's text, default): one random probe per test person,
    its other images are the gallery; ``gallery_single`` (Xiong et al.): one random gallery
    image, the others probes. Trial t = split t // draws, draw t % draws; ``eval_kwargs =
    {"split", "draw"}`` (the report averages the draws of a split, then gives mean ± std over
    splits). ``same_camera=keep`` scores with any other image of the person as a match (no
    same-camera removal). ``domain`` restricts the records first.
    """
    pool = _pool(records, dataset_root, domain, name)
    warca_draw = check_choice(pool.dataset, "warca_draw", warca_draw, WARCA_DRAWS)
    same_camera = check_choice(pool.dataset, "same_camera", same_camera, WARCA_SAME_CAMERA)
    draws = check_int(pool.dataset, "draws", draws, maximum=MAX_DRAWS)
    num_splits = check_int(pool.dataset, "num_splits", num_splits, maximum=MAX_TRIALS)
    eligible = pool.ids_with_images(2)
    if test_ids is None:
        test_ids = len(eligible) // 2
    test_ids = check_int(pool.dataset, "test_ids", test_ids)
    if not 1 <= test_ids <= len(eligible):
        raise DatasetError(f"the WARCA protocol asks {test_ids} test ids but only "
                           f"{len(eligible)} persons have ≥ 2 images",
                           "check the dataset copy or pass test_ids=<smaller>")
    dom_key = f"_{domain.replace('/', '-')}" if domain else ""
    key = f"{protocol}{dom_key}_{warca_draw}_p{test_ids}_s{num_splits}_d{draws}_seed{seed}"
    trials = pool.cached(key, lambda: warca_trials(
        pool, test_ids=test_ids, seed=seed, draws=draws, warca_draw=warca_draw,
        eligible=eligible, num_splits=num_splits))
    return pool.split(trials, trial, protocol=protocol,
                      options={"protocol": protocol, "test_ids": test_ids, "draws": draws,
                               "warca_draw": warca_draw, "same_camera": same_camera,
                               "domain": domain, "seed": seed},
                      eval_kwargs={"split": trial // draws, "draw": trial % draws},
                      eval_rule="single_shot_any" if same_camera == "keep" else "market")


def random_pairs(records: pd.DataFrame, *, trial: int, seed: int, dataset_root: Path,
                 test_ids: int, num_trials: int = 10, name: str | None = None,
                 protocol: str = "dg") -> DatasetSplit:
    """DG test protocol of iLIDS (docs/datasets.md): two random images per
    person fixed once (probe candidate, gallery candidate); per trial ``test_ids`` random
    persons give one probe and one gallery image each. No training images."""
    test_ids = check_int(name or protocol, "test_ids", test_ids)
    num_trials = check_int(name or protocol, "num_trials", num_trials, maximum=MAX_TRIALS)
    records, rel = _prepare(records, dataset_root)
    ids = identity_codes(records)
    persons, counts = np.unique(ids[ids >= 0], return_counts=True)
    eligible = persons[counts >= 2]
    if not 1 <= test_ids <= len(eligible):
        raise DatasetError(f"the {protocol} protocol asks {test_ids} test ids but only "
                           f"{len(eligible)} persons have ≥ 2 images",
                           "check the dataset copy or pass test_ids=<smaller>")

    def build() -> list[Trial]:
        rng = protocol_rng(seed, protocol, "pairs")
        pair = {}
        for pid in eligible:
            options = np.flatnonzero(ids == pid)
            pair[pid] = rng.choice(options, size=2, replace=False)
        trials = []
        for t in range(num_trials):
            chosen, _ = choose_ids(eligible, test_ids, protocol_rng(seed, protocol, t))
            trials.append({"train": [], "query": sorted(rel[pair[p][0]] for p in chosen),
                           "gallery": sorted(rel[pair[p][1]] for p in chosen)})
        return trials

    key = f"{protocol}_pairs_p{test_ids}_t{num_trials}_seed{seed}"
    trials = cached_trials(dataset_root, key, build, fingerprint=sorted(rel.tolist()))
    return split_from_trial(_dataset_name(records, name), records, trials, trial,
                            dataset_root, protocol=protocol,
                            options={"protocol": protocol, "test_ids": test_ids, "seed": seed})


# -- DART3: new camera ------------------------------------------------------------------------
def _has_cross_camera_match(query: pd.DataFrame, gallery: pd.DataFrame) -> bool:
    """Whether some query has a gallery image of its identity from another camera (E1)."""
    if query.empty or gallery.empty:
        return False
    both = pd.concat([query, gallery], ignore_index=True)
    codes = identity_codes(both)
    cams = both["camid"].to_numpy(np.int64)
    nq = len(query)
    g = pd.DataFrame({"id": codes[nq:], "cam": cams[nq:]})
    g = g[g["id"] >= 0].drop_duplicates()
    cams_of = g.groupby("id")["cam"].agg(set)
    for code, cam in zip(codes[:nq], cams[:nq]):
        if code >= 0 and code in cams_of.index and cams_of[code] - {cam}:
            return True
    return False


def camera_holdout(split_or_records: DatasetSplit | pd.DataFrame, *, train_cams: Any = None,
                   num_train_cams: int | None = None, gallery_cams: str = "unseen",
                   trial: int = 0, seed: int | None = None, dataset_root: Path | None = None,
                   name: str | None = None) -> DatasetSplit:
    """DART3's "new camera in an existing network" protocol (docs/methods/dart3.md; docs/datasets.md).

    Train = the train-split images of ``train_cams`` (0-based camids; ``"0,1,2"``, ``"0-4"`` or
    a list); query = the test queries of every other ("unseen") camera; gallery = the test
    gallery images of the unseen cameras (``gallery_cams="unseen"``, docs/datasets.md) or of
    all cameras (``gallery_cams="all"``, docs/methods/dart3.md — needed when a single
    camera is unseen, e.g. Market 5/1, where an unseen-only gallery holds no cross-camera
    match). Without ``train_cams`` the lowest ``num_train_cams`` (default
    :data:`DEFAULT_NUM_TRAIN_CAMS` = 5) camera ids train — a toolkit assumption, the paper
    does not say which cameras; :data:`DART3_TRAIN_CAMS` holds the subsets docs/methods/dart3.md argues for.
    Camera ids are ``camid`` values (with several domains, the same camid in each domain).

    ``split_or_records`` is a loaded split or a record table whose ``split`` column is used
    (then ``trial`` must be 0; ``seed``/``dataset_root`` are accepted for
    :func:`apply_protocol` and unused). ``options`` gain ``train_cams`` and ``unseen_cams``
    (``reid extract`` writes ``train_cams`` into the store); ``eval_kwargs`` =
    ``{"eval_protocol": "camera-split", "train_cams", "query_cams", "per_camera": True}``,
    i.e. what ``reid eval --protocol camera-split --train-cams … --per-camera`` needs for the
    per-unseen-camera mean weighted by valid query count (docs/methods/dart3.md).
    """
    split = _as_split(split_or_records, trial, name)
    if gallery_cams not in ("unseen", "all"):
        raise UsageError(f"gallery_cams={gallery_cams!r} is unknown",
                         "use gallery_cams=unseen or gallery_cams=all")
    cams = sorted({int(c) for frame in (split.train, split.query, split.gallery)
                   for c in frame["camid"]})
    chosen = parse_cameras(train_cams, "train_cams", owner="camera_holdout protocol")
    if chosen is None:
        count = DEFAULT_NUM_TRAIN_CAMS if num_train_cams is None else int(num_train_cams)
        chosen = cams[:count]
    unknown = sorted(set(chosen) - set(cams))
    unseen = [c for c in cams if c not in chosen]
    if unknown or not unseen:
        raise UsageError(f"train_cams {chosen} must be a proper subset of the dataset's cameras "
                         f"{cams}", "leave at least one camera unseen (pass train_cams=...)")
    query = _subset(split.query, split.query["camid"].isin(unseen))
    gallery = split.gallery if gallery_cams == "all" else \
        _subset(split.gallery, split.gallery["camid"].isin(unseen))
    train = _subset(split.train, split.train["camid"].isin(chosen))
    if len(train) == 0 or len(query) == 0:
        raise DatasetError(f"camera_holdout with train_cams {chosen} leaves "
                           f"{len(train)} training images and {len(query)} queries",
                           "choose other cameras")
    if not _has_cross_camera_match(query, gallery):
        raise DatasetError(f"camera_holdout with train_cams {chosen}: no query of the unseen "
                           f"cameras {unseen} has a match from another camera in the "
                           f"{gallery_cams} gallery", "pass gallery_cams=all (docs/methods/dart3.md)")
    query_cams = sorted({int(c) for c in query["camid"]})
    return DatasetSplit(
        name=split.name, train=train, query=query, gallery=gallery, val=split.val,
        eval_rule=split.eval_rule,
        eval_kwargs={**split.eval_kwargs, "eval_protocol": "camera-split",
                     "train_cams": chosen, "query_cams": query_cams, "per_camera": True},
        trial=split.trial, num_trials=split.num_trials, protocol="camera_holdout",
        options={**split.options, "protocol": "camera_holdout", "base_protocol":
                 split.protocol, "train_cams": chosen, "unseen_cams": unseen,
                 "gallery_cams": gallery_cams})


# -- DMG-Net: leave one domain out ------------------------------------------------------------
def _resolve_domain(value: str, domains: Sequence[str], option: str) -> str:
    """A domain name, or its unique suffix after ``/`` (``d3`` → ``synthetic/d3``)."""
    value = str(value)
    if value in domains:
        return value
    matches = [d for d in domains if d.rsplit("/", 1)[-1] == value]
    if len(matches) == 1:
        return matches[0]
    raise UsageError(f"{option}={value!r} is not one of {', '.join(domains)}",
                     "pass one of those domains")


def domain_holdout(split_or_records: DatasetSplit | pd.DataFrame, *, target_domain: str,
                   train_domains: Any = None, trial: int = 0, seed: int | None = None,
                   dataset_root: Path | None = None, name: str | None = None) -> DatasetSplit:
    """DMG-Net's leave-one-domain-out protocol (docs/datasets.md; synthetic ``dg`` preset,
    docs/datasets.md): train on the train-split images of every other domain (or of
    ``train_domains``, a list or comma string), test on the target domain's query and gallery
    (E1). ``target_domain`` may be given by its suffix (``d3`` for ``synthetic/d3``).

    ``split_or_records``: a loaded split, or a record table whose ``split`` column is used
    (then ``trial`` must be 0; ``seed``/``dataset_root`` are unused).
    """
    split = _as_split(split_or_records, trial, name)
    domains = sorted(set(split.all_records()["domain"]))
    target = _resolve_domain(target_domain, domains, "target_domain")
    if train_domains is None:
        sources = [d for d in domains if d != target]
    else:
        items = train_domains.split(",") if isinstance(train_domains, str) else train_domains
        sources = sorted({_resolve_domain(d.strip() if isinstance(d, str) else d, domains,
                                          "train_domains") for d in items})
        if target in sources:
            raise UsageError(f"train_domains includes the target domain {target}",
                             "leave the target domain out of train_domains")
    train = _subset(split.train, split.train["domain"].isin(sources))
    query = _subset(split.query, split.query["domain"] == target)
    gallery = _subset(split.gallery, split.gallery["domain"] == target)
    if len(train) == 0 or len(query) == 0 or len(gallery) == 0:
        raise DatasetError(f"domain_holdout({target}) leaves {len(train)} training images, "
                           f"{len(query)} queries and {len(gallery)} gallery images",
                           "check the domains of the dataset")
    return DatasetSplit(
        name=split.name, train=train, query=query, gallery=gallery, eval_rule=split.eval_rule,
        eval_kwargs=dict(split.eval_kwargs), trial=split.trial, num_trials=split.num_trials,
        protocol="domain_holdout",
        options={**split.options, "protocol": "domain_holdout", "base_protocol":
                 split.protocol, "target_domain": target, "train_domains": sources})


# -- dispatch ---------------------------------------------------------------------------------
#: protocol name → builder ``fn(records, *, trial, seed, dataset_root, **options)`` on every
#: record of a dataset (the ``split`` column is read by the camera/domain hold-outs only)
PROTOCOLS = {"single_shot_half": single_shot_half, "warca": warca_protocol,
             "random_pairs": random_pairs, "camera_holdout": camera_holdout,
             "domain_holdout": domain_holdout}


def apply_protocol(records: pd.DataFrame, protocol: str, *, trial: int, seed: int,
                   dataset_root: Path, **options: Any) -> DatasetSplit:
    """Apply the protocol named ``protocol`` (a key of :data:`PROTOCOLS`) to every record of
    a dataset (docs/datasets.md); :class:`UsageError` listing the valid names otherwise.
    Seeded protocols cache their trials as JSON under ``dataset_root``."""
    if protocol not in PROTOCOLS:
        raise UsageError(f"unknown protocol {protocol!r}",
                         f"available: standard, {', '.join(sorted(PROTOCOLS))}")
    return PROTOCOLS[protocol](records, trial=trial, seed=seed, dataset_root=Path(dataset_root),
                               **options)


#: generic protocols :func:`reidcli.data.load` applies to any dataset after loading it (unless
#: the dataset's loader lists the name in ``DatasetInfo.protocols``)
DERIVED = {"camera_holdout": camera_holdout, "domain_holdout": domain_holdout}
#: their own options (popped before the dataset's loader sees the rest)
DERIVED_OPTIONS = {"camera_holdout": ("train_cams", "num_train_cams", "gallery_cams"),
                   "domain_holdout": ("target_domain", "train_domains")}
