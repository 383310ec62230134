"""Trial builders shared by the small single-shot loaders (docs/datasets.md;
docs/methods/cdpcf.md).

Every loader parses *all* images of its dataset into one record table, wraps it in a
:class:`Pool` and asks one of the builders below for its trials. All trials of a protocol are
built at once from the ``seed`` option and cached as JSON next to the data
(:func:`reidcli.data.splits.cached_trials`), so a reload gives exactly the same trials.

Random streams (``protocol_rng(seed, dataset, ...)``), chosen so that comparable protocols
share their draws:

* ``(dataset, "split", t)`` picks the test ids of trial/split ``t`` from the eligible ids — the
  same stream for every protocol of a dataset, so e.g. VIPeR ``half`` with ``probe_cam=a`` and
  ``b``, or CUHK01 ``single_shot`` and ``multi_shot``, test the same persons in trial ``t``
  whenever their eligible ids agree;
* ``(dataset, "images", t)`` picks the single probe/gallery images of the half/half protocols;
* ``(dataset, "warca", warca_draw, s, d)`` picks the images of WARCA draw ``d`` of split ``s``.

Nothing here is registered and nothing here imports the dataset registry: loaders import
these builders, and :mod:`reidcli.data.protocols` composes them (docs/architecture.md).
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from reidcli.data.records import DatasetSplit, normalize_frame
from reidcli.data.splits import (Trial, cached_trials, choose_ids, protocol_rng,
                                 relative_paths, split_from_trial)
from reidcli.errors import DatasetError
from reidcli.naming import param
from reidcli.params import MAX_COUNT as params_max_count
from reidcli.params import Options, check_param, count
from reidcli.params import check_seed as params_check_seed

#: seeded trials (half/half splits, WARCA splits, DG draws) of every protocol here
NUM_SPLITS = 10
#: WARCA probe/gallery draws (docs/datasets.md): the paper text's one probe image per id, the
#: rest gallery (default, WARCA paper Sect. 4.2), or Xiong et al.'s one gallery image per id
WARCA_DRAWS = ("probe_single", "gallery_single")
#: the WARCA paper's probe/gallery draws per split (Sect. 4.2: "repeated 10 times")
WARCA_DRAWS_PER_SPLIT = 10
#: same-camera gallery matches under the WARCA protocol: ``drop`` (E3, the two-view sets) or
#: ``keep`` (any other image of the person is a match — Xiong et al.'s protocol, which has no
#: camera labels; docs/datasets.md)
WARCA_SAME_CAMERA = ("drop", "keep")
#: most WARCA draws per split: every trial (splits × draws) is built and cached at once
MAX_DRAWS = 100
#: most persons a count option (test_ids, shared_ids, ...) may name
#: (:data:`reidcli.params.MAX_COUNT`)
MAX_COUNT = params_max_count


# -- option checks ----------------------------------------------------------------------------
def check_choice(dataset: str, option: str, value: Any, allowed: Sequence[str],
                 aliases: Mapping[str, str] | None = None) -> str:
    """``value`` as the option of ``allowed`` it names (any case, or an alias): shorthand of
    :func:`reidcli.params.check_param` with an :class:`~reidcli.params.Options` constraint
    (ParameterError naming the option and listing the options; its hint one as the user
    writes it)."""
    return check_param(dataset, option, value, Options(allowed, aliases),
                       todo=f"e.g. {param(option, allowed[0])}")


def check_int(dataset: str, option: str, value: Any, minimum: int = 1,
              maximum: int = MAX_COUNT) -> int:
    """``value`` as an int in [minimum, maximum], else a ParameterError naming the option (an
    :class:`~reidcli.params.Interval` constraint). The upper bound keeps a typo such as
    ``draws=100000000`` from building trials until memory runs out."""
    return check_param(dataset, option, value, count(minimum, maximum))


def check_seed(dataset: str, value: Any) -> int:
    """A seed option: an integer in [0, 2³²) (:data:`reidcli.params.SEED`)."""
    return params_check_seed(dataset, value)


# -- the pool of all images -------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Pool:
    """All images of a dataset folder, sorted by path, as parallel arrays."""

    dataset: str
    folder: Path
    records: pd.DataFrame
    #: paths relative to ``folder`` (POSIX), the keys of the cached trials
    rel: np.ndarray
    pids: np.ndarray
    cams: np.ndarray

    @classmethod
    def of(cls, dataset: str, folder: Path, records: pd.DataFrame) -> "Pool":
        records = normalize_frame(records.sort_values(
            "path", key=lambda s: s.map(lambda p: p.encode()), kind="stable"
        ).reset_index(drop=True))
        rel = np.asarray(relative_paths(records, folder), dtype=object)
        return cls(dataset, Path(folder), records, rel, records["pid"].to_numpy(np.int64),
                   records["camid"].to_numpy(np.int64))

    def ids_in_views(self, *views: int) -> np.ndarray:
        """Sorted ids (pid > 0) with at least one image in every view of ``views``."""
        sets = [set(self.pids[(self.cams == v) & (self.pids > 0)].tolist()) for v in views]
        return np.array(sorted(set.intersection(*sets)) if sets else [], dtype=np.int64)

    def ids_with_images(self, minimum: int = 2) -> np.ndarray:
        """Sorted ids (pid > 0) with at least ``minimum`` images."""
        persons, counts = np.unique(self.pids[self.pids > 0], return_counts=True)
        return persons[counts >= minimum].astype(np.int64)

    def cached(self, key: str, build: Callable[[], list[Trial]]) -> list[Trial]:
        """The trials cached under ``key`` (built by ``build`` on first use)."""
        return cached_trials(self.folder, key, build, fingerprint=self.rel.tolist())

    def split(self, trials: list[Trial], trial: int, *, protocol: str, options: dict,
              eval_kwargs: dict | None = None, eval_rule: str = "market") -> DatasetSplit:
        """The :class:`DatasetSplit` of trial ``trial`` (eval rule ``market`` = E3 on these
        small sets, or ``single_shot_any``: E3 keeping same-camera matches)."""
        return split_from_trial(self.dataset, self.records, trials, trial, self.folder,
                                protocol=protocol, options=options, eval_rule=eval_rule,
                                eval_kwargs=eval_kwargs)


def check_test_ids(pool: Pool, protocol: str, test_ids: int, eligible: np.ndarray,
                   what: str) -> None:
    """DatasetError when ``eligible`` holds fewer than ``test_ids`` persons (a tree smaller
    than the protocol's paper size, or a damaged copy)."""
    if test_ids > len(eligible):
        raise DatasetError(
            f"{pool.dataset}: protocol {protocol} asked {test_ids} test ids but {pool.folder} "
            f"has only {len(eligible)} {what}",
            f"check the copy (see `reid data info {pool.dataset}`) or pass "
            f"{param('test_ids', 'N')} with N ≤ {len(eligible)}")


# -- half/half two-view trials (C-DPCF, torchreid, DG tests) ----------------------------------
def two_view_trials(pool: Pool, *, test_ids: int, seed: int, eligible: np.ndarray,
                    probe_view: int = 0, gallery_view: int = 1, all_probe: bool = False,
                    all_gallery: bool = False, with_train: bool = True,
                    gallery_extra: np.ndarray | None = None,
                    num_trials: int = NUM_SPLITS) -> list[Trial]:
    """Half/half person splits over two views.

    Per trial ``t``: ``test_ids`` of ``eligible`` (ids seen by both views) are drawn with the
    ``(dataset, "split", t)`` stream; probe = one random ``probe_view`` image per test id (all
    of them with ``all_probe``), gallery = one random ``gallery_view`` image per test id (all
    with ``all_gallery``) plus the images flagged in ``gallery_extra`` (e.g. PRID2011's
    gallery-only persons); train = every image of the other eligible ids in the two views
    (none with ``with_train=False``). Images are drawn from the sorted candidates with the
    ``(dataset, "images", t)`` stream, probe before gallery, test ids in ascending order.
    """
    extra = [] if gallery_extra is None else pool.rel[gallery_extra].tolist()
    in_views = np.isin(pool.cams, [probe_view, gallery_view])
    trials = []
    for t in range(num_trials):
        test, train = choose_ids(eligible, test_ids, protocol_rng(seed, pool.dataset,
                                                                  "split", t))
        rng = protocol_rng(seed, pool.dataset, "images", t)
        probe, gallery = [], []
        for pid in test:
            for view, out, every in ((probe_view, probe, all_probe),
                                     (gallery_view, gallery, all_gallery)):
                candidates = np.flatnonzero((pool.pids == pid) & (pool.cams == view))
                if every:
                    out.extend(pool.rel[candidates].tolist())
                else:
                    out.append(pool.rel[candidates[rng.integers(len(candidates))]])
        chosen_train = pool.rel[np.isin(pool.pids, train) & in_views].tolist() \
            if with_train else []
        trials.append({"train": chosen_train, "query": sorted(probe),
                       "gallery": sorted(gallery + extra)})
    return trials


# -- WARCA (docs/datasets.md) --------------------------------------------------------------
def warca_trials(pool: Pool, *, test_ids: int, seed: int, draws: int, warca_draw: str,
                 eligible: np.ndarray, num_splits: int = NUM_SPLITS,
                 test_sets: list[np.ndarray] | None = None) -> list[Trial]:
    """WARCA's splits: ``num_splits`` × ``draws`` trials, trial ``t`` = split ``t // draws``,
    draw ``t % draws``.

    Split ``s`` tests ``test_sets[s]`` (a dataset's official test ids, e.g. CUHK03's
    ``testsets``) or, without them, ``test_ids`` (P) persons of ``eligible`` (ids with ≥ 2
    images) drawn with the ``(dataset, "split", s)`` stream; every other person (pid > 0)
    trains. Draw ``d`` (stream ``(dataset, "warca", warca_draw, s, d)``), per test id in
    ascending order: one random image of its sorted images is the single one — the probe with
    ``probe_single`` (the WARCA paper's text, default), the gallery image with
    ``gallery_single`` (Xiong et al.) — and its other images are the gallery (resp. probes).
    """
    trials = []
    for s in range(num_splits):
        if test_sets is not None:
            test = np.intersect1d(test_sets[s], eligible)
        else:
            test, _ = choose_ids(eligible, test_ids, protocol_rng(seed, pool.dataset,
                                                                  "split", s))
        train = pool.rel[(pool.pids > 0) & ~np.isin(pool.pids, test)].tolist()
        members = {int(pid): np.flatnonzero(pool.pids == pid) for pid in test}
        for d in range(draws):
            rng = protocol_rng(seed, pool.dataset, "warca", warca_draw, s, d)
            single, rest = [], []
            for pid in test:
                candidates = members[int(pid)]
                pick = candidates[rng.integers(len(candidates))]
                single.append(pool.rel[pick])
                rest.extend(pool.rel[candidates[candidates != pick]].tolist())
            probe, gallery = (rest, single) if warca_draw == "gallery_single" else \
                (single, rest)
            trials.append({"train": train, "query": sorted(probe), "gallery": sorted(gallery)})
    return trials


def load_warca(pool: Pool, trial: int, *, seed: int, test_ids: Any, draws: Any,
               warca_draw: Any, options: dict, same_camera: Any = "drop",
               test_sets: list[np.ndarray] | None = None,
               test_sets_name: str = "") -> DatasetSplit:
    """One trial of the WARCA protocol on ``pool`` (``eval_kwargs = {"split", "draw"}``);
    ``options`` (the loader's own) gain the checked ``test_ids``, ``draws``, ``warca_draw``,
    ``same_camera``. ``test_sets`` (one id array per split, ``test_sets_name`` naming their
    source in the cache key) replace the random choice of ``test_ids`` persons."""
    draws = check_int(pool.dataset, "draws", draws, maximum=MAX_DRAWS)
    warca_draw = check_choice(pool.dataset, "warca_draw", warca_draw, WARCA_DRAWS)
    same_camera = check_choice(pool.dataset, "same_camera", same_camera, WARCA_SAME_CAMERA)
    eligible = pool.ids_with_images(2)
    if test_sets is None:
        test_ids = check_int(pool.dataset, "test_ids", test_ids)
        check_test_ids(pool, "warca", test_ids, eligible, "persons with ≥ 2 images")
        num_splits, split_key = NUM_SPLITS, f"p{test_ids}"
    else:
        test_ids = int(np.mean([len(np.intersect1d(t, eligible)) for t in test_sets]))
        num_splits, split_key = len(test_sets), test_sets_name or "official"
    key = f"{pool.dataset}_warca_{warca_draw}_{split_key}_d{draws}_seed{seed}"
    trials = pool.cached(key, lambda: warca_trials(
        pool, test_ids=test_ids, seed=seed, draws=draws, warca_draw=warca_draw,
        eligible=eligible, num_splits=num_splits, test_sets=test_sets))
    options = {**options, "protocol": "warca", "seed": seed, "test_ids": test_ids,
               "draws": draws, "warca_draw": warca_draw, "same_camera": same_camera}
    return pool.split(trials, trial, protocol="warca", options=options,
                      eval_rule="single_shot_any" if same_camera == "keep" else "market",
                      eval_kwargs={"split": trial // draws, "draw": trial % draws})


# -- layout checks ----------------------------------------------------------------------------
def require_pairs(pool: Pool, views: dict[str, int]) -> None:
    """DatasetError unless every person has exactly one image in each of the two ``views``
    (folder name → camid), naming the offending file or the missing counterpart."""
    names = {c: v for v, c in views.items()}
    seen: dict[tuple[int, int], str] = {}
    for rel, pid, cam in zip(pool.rel, pool.pids, pool.cams):
        if (pid, cam) in seen:
            raise DatasetError(
                f"{pool.dataset}: {pool.folder / rel} and {pool.folder / seen[pid, cam]} "
                f"show the same person in {names[cam]}/",
                "each person has exactly one image per view; restore the original release")
        seen[pid, cam] = rel
    for (pid, cam), rel in seen.items():
        other = 1 - cam
        if (pid, other) not in seen:
            raise DatasetError(
                f"{pool.dataset}: {pool.folder / rel} has no counterpart in "
                f"{pool.folder / names[other]}/",
                "each person has one image in both views; restore the missing file")
