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
                     name: str | None = None) -> DatasetSplit:
    """Two-view half/half person split (C-DPCF targets, cdpcf.md §5; datasets.md §5.16).

    Eligible persons (pid > 0) have images in both ``probe_cam`` and ``gallery_cam``. Per
    trial, ``n_test_ids`` (default: half) of them are test persons: probe = one random
    ``probe_cam`` image each, gallery = one random ``gallery_cam`` image each plus every
    pid-0 distractor image of ``gallery_cam``; train = all images (both views) of the other
    eligible persons. ``domain`` restricts the records to one domain first.
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
    distractors = rel[(pids == 0) & (cams == gallery_cam)].tolist()

    def build() -> list[Trial]:
        trials = []
        for t in range(num_trials):
            rng = protocol_rng(seed, "single_shot_half", domain or "", t)
            test_ids, train_ids = choose_ids(eligible, n_test, rng)
            probe, gallery = [], []
            for pid in test_ids:          # one random image per view (sorted candidates)
                for cam, out in ((probe_cam, probe), (gallery_cam, gallery)):
                    options = np.flatnonzero((pids == pid) & (cams == cam))
                    out.append(rel[options[rng.integers(len(options))]])
            train = rel[np.isin(pids, train_ids) & two_views].tolist()
            trials.append({"train": train, "query": sorted(probe),
                           "gallery": sorted(gallery + distractors)})
        return trials

    key = (f"single_shot_half_{(domain or 'all').replace('/', '-')}_p{probe_cam}g{gallery_cam}"
           f"_n{n_test}_t{num_trials}_seed{seed}")
    trials = cached_trials(dataset_root, key, build, fingerprint=sorted(rel.tolist()))
    options = {"protocol": "single_shot_half", "n_test_ids": n_test, "probe_cam": probe_cam,
               "gallery_cam": gallery_cam, "domain": domain, "seed": seed}
    return split_from_trial(name or str(records["dataset"].iloc[0]), records, trials, trial,
                            dataset_root, protocol="single_shot_half", options=options)


#: protocol name → builder ``fn(records, *, trial, seed, dataset_root, **options)``
PROTOCOLS = {"single_shot_half": single_shot_half}


def apply_protocol(records: pd.DataFrame, protocol: str, *, trial: int, seed: int,
                   dataset_root: Path, **options: Any) -> DatasetSplit:
    """Apply a named protocol to every record of a dataset; UsageError for unknown names."""
    if protocol not in PROTOCOLS:
        raise UsageError(f"unknown protocol {protocol!r}",
                         f"available: standard, {', '.join(sorted(PROTOCOLS))}")
    return PROTOCOLS[protocol](records, trial=trial, seed=seed, dataset_root=Path(dataset_root),
                               **options)
