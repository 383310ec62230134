"""Seeded trial splits and their JSON cache (docs/datasets.md).

Every protocol that draws persons or images at random builds *all* its trials at once from
an explicit seed, stores them as JSON with paths **relative to the dataset folder** (so the
folder can move) and reuses the file afterwards: a reload gives exactly the same trials.

A trial is a mapping ``{"train": [relpath, ...], "query": [...], "gallery": [...]}`` (optionally
``"val"``); :func:`assign_trial` turns it back into record tables.
"""
from __future__ import annotations

import hashlib
import json
import os
import zlib
from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np
import pandas as pd

from reidcli.data.records import DatasetSplit, empty_frame, normalize_frame
from reidcli.errors import DatasetError, ParameterError

#: version of the cache format; bump when a protocol's drawing procedure changes
CACHE_VERSION = 1

Trial = dict[str, list[str]]


def check_trial(name: str, trial, num_trials: int, what: str = "") -> int:
    """``trial`` as an int in 0..num_trials−1; a :class:`ParameterError` naming ``trial``
    (a usage error, exit 2) otherwise. ``what`` describes the protocol in the message."""
    try:
        number = int(trial) if not isinstance(trial, bool) and float(trial) == int(trial) \
            else None
    except (TypeError, ValueError, OverflowError):
        number = None
    if number is None or not 0 <= number < num_trials:
        span = "the one trial (0)" if num_trials == 1 else f"the trials 0..{num_trials - 1}"
        raise ParameterError(name, "trial", trial,
                             f"is outside {span} of the {what or 'protocol'}",
                             "pass a trial index in that range")
    return number


def valid_trials(trials) -> bool:
    """Whether ``trials`` (a cache file's ``trials`` entry) is a non-empty list of mappings
    from split names to lists of relative paths."""
    return isinstance(trials, list) and bool(trials) and all(
        isinstance(t, dict) and t and all(isinstance(k, str) and isinstance(v, list)
                                          and all(isinstance(p, str) for p in v)
                                          for k, v in t.items())
        for t in trials)


def protocol_rng(seed: int, *key: object) -> np.random.Generator:
    """``Generator(PCG64)`` seeded from ``seed`` and a key (e.g. dataset, protocol, trial).

    The key is hashed with CRC32 so the stream does not depend on Python's hash seed.
    """
    words = [int(seed) & 0xFFFFFFFF] + [zlib.crc32(str(k).encode()) for k in key]
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(words)))


def choose_ids(ids: Iterable[int], n_choose: int, rng: np.random.Generator) -> tuple[
        np.ndarray, np.ndarray]:
    """Pick ``n_choose`` of the (sorted, unique) ``ids`` at random.

    Returns ``(chosen, rest)``, both sorted int64 arrays.
    """
    pool = np.unique(np.asarray(list(ids), dtype=np.int64))
    if not 0 <= n_choose <= len(pool):
        raise DatasetError(f"cannot choose {n_choose} ids out of {len(pool)}",
                           "check the dataset copy or the protocol option")
    pick = np.zeros(len(pool), dtype=bool)
    pick[rng.permutation(len(pool))[:n_choose]] = True
    return pool[pick], pool[~pick]


def cache_dir(dataset_dir: Path) -> Path:
    """Where the trial files of a dataset folder live.

    ``<dataset_dir>/reidcli_splits`` when the folder is writable, else
    ``$REIDCLI_CACHE/splits/<hash of the folder path>`` (default cache ``~/.cache/reidcli``).
    """
    dataset_dir = Path(dataset_dir)
    local = dataset_dir / "reidcli_splits"
    if local.is_dir() and os.access(local, os.W_OK):
        return local
    if not local.exists() and os.access(dataset_dir, os.W_OK):
        return local
    base = Path(os.environ.get("REIDCLI_CACHE", Path.home() / ".cache" / "reidcli"))
    digest = hashlib.sha1(str(dataset_dir.resolve()).encode()).hexdigest()[:16]
    return base / "splits" / digest


def cached_trials(dataset_dir: Path, key: str, build: Callable[[], list[Trial]],
                  *, fingerprint: Sequence[str] = ()) -> list[Trial]:
    """Load the trials cached under ``key`` or build, save and return them.

    ``fingerprint`` (e.g. the sorted relative paths the trials were drawn from) is hashed into
    the file; a cache built from a different file list is rebuilt rather than trusted.
    """
    dataset_dir = Path(dataset_dir)
    digest = hashlib.sha1("\n".join(fingerprint).encode()).hexdigest()
    path = cache_dir(dataset_dir) / f"{key}.json"
    if path.is_file():
        try:
            payload = json.loads(path.read_bytes())
            if isinstance(payload, dict) and payload.get("version") == CACHE_VERSION \
                    and payload.get("files") == digest and valid_trials(payload.get("trials")):
                return payload["trials"]
        except (OSError, ValueError, RecursionError):
            pass  # unreadable or damaged cache ([], null, binary): rebuild below
    trials = build()
    payload = {"version": CACHE_VERSION, "key": key, "files": digest, "trials": trials}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".json.partial")
        tmp.write_text(json.dumps(payload))
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only location only costs a rebuild next time
    return trials


def relative_paths(frame: pd.DataFrame, dataset_dir: Path) -> list[str]:
    """Record paths of ``frame`` relative to ``dataset_dir`` (POSIX separators)."""
    base = Path(dataset_dir)
    return [Path(p).relative_to(base).as_posix() for p in frame["path"]]


def assign_trial(records: pd.DataFrame, trial: Trial, dataset_dir: Path) -> dict[
        str, pd.DataFrame]:
    """Record tables per split for one cached trial.

    ``records`` holds every image of the dataset (any ``split`` value); rows are selected by
    relative path and keep the order of ``records`` (sorted paths). A path listed in the trial
    but absent from ``records`` raises :class:`DatasetError` (the cache no longer matches).
    """
    rel = pd.Series(relative_paths(records, dataset_dir), index=records.index)
    out: dict[str, pd.DataFrame] = {}
    for split, paths in trial.items():
        wanted = set(paths)
        mask = rel.isin(wanted)
        if int(mask.sum()) != len(wanted):
            missing = sorted(wanted - set(rel[mask]))[:1]
            raise DatasetError(f"trial file lists {missing[0]!r}, which is not in {dataset_dir}",
                               "delete the reidcli_splits cache folder to rebuild the trials")
        part = records[mask].copy()
        part["split"] = split
        out[split] = normalize_frame(part.reset_index(drop=True))
    return out


def split_from_trial(name: str, records: pd.DataFrame, trials: list[Trial], trial: int,
                     dataset_dir: Path, *, protocol: str, options: dict,
                     eval_rule: str = "market", eval_kwargs: dict | None = None) -> DatasetSplit:
    """The :class:`DatasetSplit` of trial ``trial`` of cached ``trials``."""
    trial = check_trial(name, trial, len(trials), f"protocol {protocol!r}")
    parts = assign_trial(records, trials[trial], dataset_dir)
    return DatasetSplit(
        name=name, train=parts.get("train", empty_frame()), val=parts.get("val", empty_frame()),
        query=parts.get("query", empty_frame()), gallery=parts.get("gallery", empty_frame()),
        eval_rule=eval_rule, eval_kwargs=dict(eval_kwargs or {}), trial=trial,
        num_trials=len(trials), protocol=protocol, options=dict(options))
