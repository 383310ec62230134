"""Seeded protocols built on loaded records (datasets.md §5.16; ARCHITECTURE.md).

:func:`apply_protocol` is what loaders call for a protocol other than their standard split
(the synthetic loader does for ``protocol=...``). Every draw is seeded and all trials are built
at once and cached as JSON with paths relative to the dataset folder
(:mod:`reidcli.data.splits`), so a reload gives the same trials.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from reidcli.data.records import DatasetSplit, normalize_frame
from reidcli.data.splits import (Trial, cached_trials, choose_ids, protocol_rng,
                                 relative_paths, split_from_trial)
from reidcli.errors import DatasetError, UsageError


def _select_domain(records: pd.DataFrame, domain: str | None) -> pd.DataFrame:
    if domain is None:
        return records
    chosen = records[records["domain"] == domain]
    if chosen.empty:
        have = ", ".join(sorted(records["domain"].unique()))
        raise UsageError(f"no records of domain {domain!r} (have: {have})",
                         "pass one of those domains")
    return chosen


def single_shot_half(records: pd.DataFrame, *, trial: int, seed: int, dataset_root: Path,
                     n_test_ids: int | None = None, probe_cam: int = 0, gallery_cam: int = 1,
                     domain: str | None = None, num_trials: int = 10,
                     name: str | None = None, with_train: bool = True,
                     unpaired_in_gallery: bool = False, all_probe_images: bool = False,
                     all_gallery_images: bool = False,
                     protocol: str = "single_shot_half") -> DatasetSplit:
    """Two-view half/half person split (C-DPCF targets, cdpcf.md §5; datasets.md §5.16).

    Eligible persons (pid > 0) have images in both ``probe_cam`` and ``gallery_cam``. Per
    trial, ``n_test_ids`` (default: half) of them are test persons: probe = one random
    ``probe_cam`` image each, gallery = one random ``gallery_cam`` image each plus every
    pid-0 distractor image of ``gallery_cam``; train = all images (both views) of the other
    eligible persons. ``domain`` restricts the records to one domain first.

    Variants used by the loaders: ``with_train=False`` (domain-generalisation test only, e.g.
    PRID2011 ``dg``), ``unpaired_in_gallery`` (gallery-camera images of persons never seen by
    the probe camera join every gallery, PRID2011's 549 extra persons),
    ``all_probe_images``/``all_gallery_images`` (multi-shot: every image of the view).
    """
    records = normalize_frame(_select_domain(records, domain).sort_values(
        "path", kind="stable").reset_index(drop=True))
    rel = np.asarray(relative_paths(records, dataset_root), dtype=object)
    pids = records["pid"].to_numpy(np.int64)
    cams = records["camid"].to_numpy(np.int64)
    in_probe = set(pids[(cams == probe_cam) & (pids > 0)])
    in_gallery = set(pids[(cams == gallery_cam) & (pids > 0)])
    eligible = np.array(sorted(in_probe & in_gallery), dtype=np.int64)
    n_test = len(eligible) // 2 if n_test_ids is None else int(n_test_ids)
    if len(eligible) < 2 or not 1 <= n_test < len(eligible):
        raise DatasetError(f"single_shot_half needs persons seen by cameras {probe_cam} and "
                           f"{gallery_cam}; found {len(eligible)} (asked {n_test} test ids)",
                           "check the dataset, its domain and the n_test_ids option")
    two_views = np.isin(cams, [probe_cam, gallery_cam])
    extra = (pids == 0) & (cams == gallery_cam)
    if unpaired_in_gallery:
        extra |= (cams == gallery_cam) & (pids > 0) & ~np.isin(pids, eligible)
    distractors = rel[extra].tolist()

    def build() -> list[Trial]:
        trials = []
        for t in range(num_trials):
            rng = protocol_rng(seed, "single_shot_half", domain or "", t)
            test_ids, train_ids = choose_ids(eligible, n_test, rng)
            probe, gallery = [], []
            for pid in test_ids:          # one random image per view (sorted candidates)
                for cam, out, every in ((probe_cam, probe, all_probe_images),
                                        (gallery_cam, gallery, all_gallery_images)):
                    options = np.flatnonzero((pids == pid) & (cams == cam))
                    if every:
                        out.extend(rel[options].tolist())
                    else:
                        out.append(rel[options[rng.integers(len(options))]])
            train = rel[np.isin(pids, train_ids) & two_views].tolist() if with_train else []
            trials.append({"train": train, "query": sorted(probe),
                           "gallery": sorted(gallery + distractors)})
        return trials

    key = (f"{protocol}_{(domain or 'all').replace('/', '-')}_p{probe_cam}g{gallery_cam}"
           f"_n{n_test}_t{num_trials}_seed{seed}")
    trials = cached_trials(dataset_root, key, build, fingerprint=sorted(rel.tolist()))
    options = {"protocol": protocol, "n_test_ids": n_test, "probe_cam": probe_cam,
               "gallery_cam": gallery_cam, "domain": domain, "seed": seed}
    return split_from_trial(name or str(records["dataset"].iloc[0]), records, trials, trial,
                            dataset_root, protocol=protocol, options=options)


def warca_protocol(records: pd.DataFrame, *, trial: int, seed: int, dataset_root: Path,
                   test_ids: int, draws: int = 1, warca_draw: str = "gallery_single",
                   num_splits: int = 10, name: str | None = None,
                   protocol: str = "warca") -> DatasetSplit:
    """WARCA's protocol (warca.md §5, A8/A9): ``test_ids`` random test persons (only persons
    with ≥ 2 images), every other person trains; within each split ``draws`` random
    probe/gallery draws. ``gallery_single`` ([8], default): one random gallery image per test
    person, the others are probes; ``probe_single``: one random probe, the others gallery.
    Trial t = split t // draws, draw t % draws (``eval_kwargs`` names both).
    """
    if warca_draw not in ("gallery_single", "probe_single"):
        raise UsageError(f"warca_draw={warca_draw!r} is unknown",
                         "use warca_draw=gallery_single or warca_draw=probe_single")
    if draws < 1:
        raise UsageError(f"draws={draws} must be ≥ 1", "pass draws=1 or draws=10")
    records = normalize_frame(records.sort_values("path", kind="stable").reset_index(drop=True))
    rel = np.asarray(relative_paths(records, dataset_root), dtype=object)
    pids = records["pid"].to_numpy(np.int64)
    ids, counts = np.unique(pids[pids > 0], return_counts=True)
    eligible = ids[counts >= 2]
    if not 1 <= test_ids <= len(eligible):
        raise DatasetError(f"the WARCA protocol asks {test_ids} test ids but only "
                           f"{len(eligible)} persons have ≥ 2 images",
                           "check the dataset copy or pass test_ids=<smaller>")

    def build() -> list[Trial]:
        trials = []
        for split_index in range(num_splits):
            rng = protocol_rng(seed, protocol, "split", split_index)
            test, _ = choose_ids(eligible, test_ids, rng)
            train = rel[(pids > 0) & ~np.isin(pids, test)].tolist()
            for d in range(draws):
                rng_d = protocol_rng(seed, protocol, warca_draw, split_index, d)
                probe, gallery = [], []
                for pid in test:
                    options = np.flatnonzero(pids == pid)
                    single = options[rng_d.integers(len(options))]
                    rest = [i for i in options if i != single]
                    one, many = (gallery, probe) if warca_draw == "gallery_single" else \
                        (probe, gallery)
                    one.append(rel[single])
                    many.extend(rel[rest].tolist())
                trials.append({"train": train, "query": sorted(probe),
                               "gallery": sorted(gallery)})
        return trials

    key = f"{protocol}_{warca_draw}_p{test_ids}_s{num_splits}_d{draws}_seed{seed}"
    trials = cached_trials(dataset_root, key, build, fingerprint=sorted(rel.tolist()))
    split = split_from_trial(name or str(records["dataset"].iloc[0]), records, trials, trial,
                             dataset_root, protocol=protocol,
                             options={"protocol": protocol, "test_ids": test_ids,
                                      "draws": draws, "warca_draw": warca_draw, "seed": seed})
    split.eval_kwargs = {"split": trial // draws, "draw": trial % draws}
    return split


def random_pairs(records: pd.DataFrame, *, trial: int, seed: int, dataset_root: Path,
                 test_ids: int, num_trials: int = 10, name: str | None = None,
                 protocol: str = "dg") -> DatasetSplit:
    """DG test protocol of iLIDS (datasets.md §5.13): two random images per person fixed
    once (probe candidate, gallery candidate); per trial ``test_ids`` random persons give one
    probe and one gallery image each. No training images."""
    records = normalize_frame(records.sort_values("path", kind="stable").reset_index(drop=True))
    rel = np.asarray(relative_paths(records, dataset_root), dtype=object)
    pids = records["pid"].to_numpy(np.int64)
    ids, counts = np.unique(pids[pids > 0], return_counts=True)
    eligible = ids[counts >= 2]
    if not 1 <= test_ids <= len(eligible):
        raise DatasetError(f"the {protocol} protocol asks {test_ids} test ids but only "
                           f"{len(eligible)} persons have ≥ 2 images",
                           "check the dataset copy or pass test_ids=<smaller>")

    def build() -> list[Trial]:
        rng = protocol_rng(seed, protocol, "pairs")
        pair = {}
        for pid in eligible:
            options = np.flatnonzero(pids == pid)
            pair[pid] = rng.choice(options, size=2, replace=False)
        trials = []
        for t in range(num_trials):
            chosen, _ = choose_ids(eligible, test_ids, protocol_rng(seed, protocol, t))
            trials.append({"train": [], "query": sorted(rel[pair[p][0]] for p in chosen),
                           "gallery": sorted(rel[pair[p][1]] for p in chosen)})
        return trials

    key = f"{protocol}_pairs_p{test_ids}_t{num_trials}_seed{seed}"
    trials = cached_trials(dataset_root, key, build, fingerprint=sorted(rel.tolist()))
    return split_from_trial(name or str(records["dataset"].iloc[0]), records, trials, trial,
                            dataset_root, protocol=protocol,
                            options={"protocol": protocol, "test_ids": test_ids, "seed": seed})


#: protocol name → builder ``fn(records, *, trial, seed, dataset_root, **options)``
PROTOCOLS = {"single_shot_half": single_shot_half, "warca": warca_protocol}


def apply_protocol(records: pd.DataFrame, protocol: str, *, trial: int, seed: int,
                   dataset_root: Path, **options: Any) -> DatasetSplit:
    """Apply a named protocol to every record of a dataset; UsageError for unknown names."""
    if protocol not in PROTOCOLS:
        raise UsageError(f"unknown protocol {protocol!r}",
                         f"available: standard, {', '.join(sorted(PROTOCOLS))}")
    return PROTOCOLS[protocol](records, trial=trial, seed=seed, dataset_root=Path(dataset_root),
                               **options)


# -- protocols derived from any loaded split (no randomness, nothing to cache) -------------
def parse_cameras(value: Any, option: str = "train_cams") -> list[int]:
    """``"0,1,2"`` / ``[0, 1, 2]`` / ``3`` → sorted 0-based camera ids."""
    if isinstance(value, str):
        items = [v for v in value.replace(" ", "").split(",") if v]
    elif isinstance(value, (list, tuple, np.ndarray)):
        items = list(value)
    else:
        items = [value]
    try:
        cams = sorted({int(v) for v in items})
    except (TypeError, ValueError):
        raise UsageError(f"{option}={value!r} is not a list of camera ids",
                         f"write e.g. {option}=0,1,2,3,4 (0-based)") from None
    if not cams or cams[0] < 0:
        raise UsageError(f"{option}={value!r} needs 0-based camera ids", f"e.g. {option}=0,1,2")
    return cams


def _subset(frame: pd.DataFrame, mask) -> pd.DataFrame:
    return normalize_frame(frame[np.asarray(mask)].reset_index(drop=True))


def camera_holdout(split: DatasetSplit, *, train_cams: Any = None,
                   num_train_cams: int | None = None) -> DatasetSplit:
    """DART3's "new camera" protocol (dart3.md §6; datasets.md §5.16).

    Train on the train-split images of ``train_cams``; queries are the test queries of every
    other camera, the gallery is the test gallery of the other cameras. Without
    ``train_cams``, the lowest ``num_train_cams`` camera ids train (toolkit assumption: the
    paper does not say which). ``options["train_cams"]`` tells ``reid eval --protocol
    camera-split`` which cameras are unseen.
    """
    cams = sorted(set(split.train["camid"]) | set(split.query["camid"]) |
                  set(split.gallery["camid"]))
    if train_cams is None:
        if num_train_cams is None:
            raise UsageError("camera_holdout needs train_cams or num_train_cams",
                             "pass e.g. train_cams=0,1,2,3,4")
        train_cams = cams[:int(num_train_cams)]
    chosen = parse_cameras(train_cams)
    unknown = sorted(set(chosen) - set(cams))
    unseen = [c for c in cams if c not in chosen]
    if unknown or not unseen:
        raise UsageError(f"train_cams {chosen} must be a proper subset of the dataset's cameras "
                         f"{cams}", "leave at least one camera unseen")
    out = DatasetSplit(
        name=split.name, train=_subset(split.train, split.train["camid"].isin(chosen)),
        query=_subset(split.query, split.query["camid"].isin(unseen)),
        gallery=_subset(split.gallery, split.gallery["camid"].isin(unseen)),
        val=split.val, eval_rule=split.eval_rule, eval_kwargs=dict(split.eval_kwargs),
        trial=split.trial, num_trials=split.num_trials, protocol="camera_holdout",
        options={**split.options, "protocol": "camera_holdout", "train_cams": chosen,
                 "unseen_cams": unseen})
    if len(out.train) == 0 or len(out.query) == 0:
        raise DatasetError(f"camera_holdout with train_cams {chosen} leaves "
                           f"{len(out.train)} training images and {len(out.query)} queries",
                           "choose other cameras")
    return out


def domain_holdout(split: DatasetSplit, *, target_domain: str) -> DatasetSplit:
    """DMG-Net's leave-one-domain-out protocol (dmgnet.md §5): train on the train images of
    every other domain, test on the target domain's query and gallery."""
    domains = sorted(set(split.all_records()["domain"]))
    if target_domain not in domains:
        raise UsageError(f"target_domain={target_domain!r} is not one of {', '.join(domains)}",
                         "pass one of those domains")
    return DatasetSplit(
        name=split.name, train=_subset(split.train, split.train["domain"] != target_domain),
        query=_subset(split.query, split.query["domain"] == target_domain),
        gallery=_subset(split.gallery, split.gallery["domain"] == target_domain),
        eval_rule=split.eval_rule, trial=split.trial, num_trials=split.num_trials,
        protocol="domain_holdout",
        options={**split.options, "protocol": "domain_holdout",
                 "target_domain": target_domain})


#: generic protocols the registry applies to any dataset after loading it
DERIVED = {"camera_holdout": camera_holdout, "domain_holdout": domain_holdout}
#: their own options (popped before the dataset's loader sees the rest)
DERIVED_OPTIONS = {"camera_holdout": ("train_cams", "num_train_cams"),
                   "domain_holdout": ("target_domain",)}

#: DG training compositions (datasets.md §5.15, dmgnet.md §5): (dataset, loader options)
MIXED_A = (("cuhk02", {"protocol": "all_train"}), ("cuhk03", {}), ("market1501", {}),
           ("dukemtmc", {}))
MIXED_B = (("msmt17", {}), ("cuhk03", {}), ("market1501", {}), ("dukemtmc", {}))
COMPOSITIONS = {"mixed_a": MIXED_A, "mixed_b": MIXED_B}


def compose_sources(sources, root=None, *, all_images: bool = True) -> DatasetSplit:
    """One training set from several datasets (DG "Mixed A/B"): ``sources`` is a
    composition name or ``[(dataset, options), ...]``. With ``all_images`` every image of every
    split trains (Mixed A); otherwise only the train splits (Mixed B uses CUHK03's 767 train
    ids). Identities stay distinct through the ``dataset`` column of the identity key.
    CUHK-SYSU (part of DIMN's Mixed A) is not in the registry and is left out.
    """
    from reidcli.data.registry import load

    if isinstance(sources, str):
        if sources not in COMPOSITIONS:
            raise UsageError(f"unknown composition {sources!r}",
                             f"use one of {', '.join(COMPOSITIONS)}")
        sources = COMPOSITIONS[sources]
    parts = []
    for name, options in sources:
        split = load(name, root, **options)
        frame = split.all_records() if all_images else split.train
        frame = frame[frame["pid"] > 0].copy()
        frame["split"] = "train"
        parts.append(frame)
    train = normalize_frame(pd.concat(parts, ignore_index=True))
    names = [n for n, _ in sources]
    return DatasetSplit(name="+".join(names), train=train, query=train.iloc[:0],
                        gallery=train.iloc[:0], protocol="composition",
                        options={"sources": names, "all_images": all_images})
