"""Training records of several labelled source datasets for domain-generalisation training
(DMG-Net, Bai et al. CVPR 2021, "Person30K" §4-5; docs/datasets.md "DG training
compositions").

:func:`multi_source_records` loads the sources (dataset names and/or the compositions
``mixed_a`` / ``mixed_b`` of :mod:`reidcli.data.compositions`), keeps the persons (pid > 0) of
the chosen domains and derives three integer arrays over the N kept records:

* ``label`` [N] — training identity 0..N_id−1 over the *sorted* identity keys
  ``(dataset, domain, pid_scope, pid)`` (:func:`reidcli.data.records.identity_keys`; the domain
  keeps the synthetic generator's per-domain pids apart);
* ``cam`` [N] — global camera 0..C−1 over the sorted ``(domain, camid)`` pairs;
* ``dom`` [N] — domain 0..D−1 over the sorted ``domain`` strings;
* ``cam_group`` [N] — the camera pair of CUHK02-like domains, −1 elsewhere
  (:func:`camera_pair_groups`).

A source without camera labels (CUHK-SYSU, whose records carry ``x_no_camera_labels``, or any
source whose records all share one camid) gets two pseudo-cameras: each identity's images,
sorted by path, are shuffled with ``seed`` and assigned alternately to pseudo-camera 0 and 1
(this project's choice, docs/datasets.md). :func:`write_train_manifest` writes the arrays for
audit.
"""
from __future__ import annotations

import csv
import dataclasses
import zlib
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from reidcli.data.compositions import COMPOSITIONS, Source, compose_sources
from reidcli.data.datasets.cuhk_sysu import NO_CAMERA_COLUMN
from reidcli.data.records import encode_identities, identity_keys
from reidcli.data.registry import canonical_name
from reidcli.errors import InputFileError, ParameterError, ReidError, UsageError
from reidcli.io import atomic_output
from reidcli.naming import param
from reidcli.training.data import training_options

#: the loader column of a camera pair (CUHK02, CUHK03)
PAIR_COLUMN = "x_pair"
#: pseudo-cameras given to each identity of a source without camera labels
PSEUDO_CAMERAS = 2
#: columns of the training manifest, in order
MANIFEST_COLUMNS = ("path", "dataset", "domain", "pid", "camid", "label", "cam", "dom")
SOURCE_SPLITS = ("train", "all")


@dataclasses.dataclass
class SourceRecords:
    """The training rows of a multi-source run and the maps behind their integer columns.

    ``records`` [N rows]: the record table (``path, pid, camid, split, …, dataset, domain``,
    ``x_*`` extras) sorted by path, plus int64 columns ``label`` (0..N_id−1), ``cam``
    (0..C−1), ``dom`` (0..D−1) and the bool column ``pseudo_camera`` (True where ``camid`` is
    a pseudo-camera). ``label_keys[label]`` is the identity key ``(dataset, domain,
    pid_scope, pid)``; ``cam_keys[cam]`` the ``(domain, camid)`` pair; ``dom_names[dom]`` the
    domain string; ``pseudo_camera_sources`` the datasets that got pseudo-cameras;
    ``source_domains[dataset]`` every domain of a source dataset's loaded records, before
    ``domains`` chose among them (what :func:`check_target_domains` checks targets against;
    absent for a source loaded with its own ``domains`` option).
    """

    records: pd.DataFrame
    label_keys: list
    cam_keys: list[tuple[str, int]]
    dom_names: list[str]
    pseudo_camera_sources: list[str]
    source_domains: dict[str, list[str]] = dataclasses.field(default_factory=dict)

    @property
    def num_ids(self) -> int:
        return len(self.label_keys)

    @property
    def num_cams(self) -> int:
        return len(self.cam_keys)

    @property
    def num_domains(self) -> int:
        return len(self.dom_names)


def multi_source_records(sources: Sequence[str] | str, root=None, *,
                         source_options: dict[str, dict] | None = None,
                         source_split: str | None = "train",
                         domains: Sequence[str] | str | None = None,
                         seed: int = 0, max_images: int | None = None,
                         subsample_seed: int = 0) -> SourceRecords:
    """Training records of several source datasets with ``label``/``cam``/``dom`` columns.

    ``sources``: dataset names or aliases and/or composition names (``mixed_a``,
    ``mixed_b``), as a sequence or one comma-separated string; a dataset may appear once.
    ``source_options``: loader options per dataset name (alias accepted), merged over the
    composition's own options and the dataset's training defaults
    (:func:`reidcli.training.data.training_options`: MSMT17 trains on train + val).
    ``source_split``: ``"train"`` (the train split of every source) or ``"all"`` (every split,
    Mixed A); ``None`` keeps each composition source's own choice (``train`` for a plain
    dataset). ``domains``: keep only records of these domains (spellings in
    :func:`select_domains`). ``max_images``: a random subset (seeded by ``subsample_seed``) of
    that many images. ``seed`` shuffles the pseudo-camera assignment.

    Records with pid ≤ 0 never train. Raises :class:`UsageError` for an unknown name, option or
    domain and when nothing is left; a source whose data is missing raises its loader's own
    :class:`~reidcli.errors.DatasetError`.
    """
    if source_split is not None and source_split not in SOURCE_SPLITS:
        raise UsageError(f"{param('source_split', repr(source_split))} is unknown",
                         f"use {param('source_split', 'train')} or "
                         f"{param('source_split', 'all')}")
    if max_images is not None and (isinstance(max_images, bool) or int(max_images) < 1):
        raise ParameterError("training", "max_images", max_images, "is not a positive integer",
                             "give the number of training images to keep, or none")
    specs = source_specs(sources, source_options)
    composed = compose_sources(specs, root, source_split=source_split)
    frame = composed.train
    frame = frame[frame["pid"].to_numpy() > 0]
    # every domain of each source loaded whole (a loader option ``domains`` loads a subset)
    partial = {s.dataset for s in specs if dict(s.options).get("domains") is not None}
    source_domains = {str(name): sorted(set(map(str, group["domain"])))
                      for name, group in frame.groupby("dataset", sort=True)
                      if str(name) not in partial}
    if domains is not None:
        frame = frame[frame["domain"].isin(select_domains(domains, frame["domain"]))]
    if frame.empty:
        raise UsageError(f"the sources {', '.join(s.dataset for s in specs)} hold no training "
                         "image (pid > 0)" + ("" if domains is None else " in the chosen domains"),
                         f"check {param('root')}, {param('source_split')} and "
                         f"{param('domains')}")
    pseudo_sources = sources_without_cameras(frame)
    if max_images is not None and int(max_images) < len(frame):
        rng = np.random.default_rng([int(subsample_seed), 5])
        frame = frame.iloc[np.sort(rng.choice(len(frame), size=int(max_images), replace=False))]
    frame = frame.sort_values("path", kind="stable").reset_index(drop=True)
    frame["pseudo_camera"] = frame["dataset"].isin(pseudo_sources).to_numpy()
    if pseudo_sources:
        frame = assign_pseudo_cameras(frame, frame["pseudo_camera"].to_numpy(), seed)
    labels, classes = encode_identities(frame)
    cam_pairs = list(zip(frame["domain"].map(str), frame["camid"].astype(int)))
    cam_keys = sorted(set(cam_pairs))
    cam_index = {k: i for i, k in enumerate(cam_keys)}
    dom_names = sorted(set(frame["domain"].map(str)))
    dom_index = {d: i for i, d in enumerate(dom_names)}
    frame["label"] = labels
    frame["cam"] = np.fromiter((cam_index[k] for k in cam_pairs), np.int64, len(frame))
    frame["dom"] = frame["domain"].map(dom_index).astype(np.int64)
    frame["cam_group"] = camera_pair_groups(frame)
    return SourceRecords(records=frame, label_keys=[_plain_key(k) for k in classes],
                         cam_keys=[(str(d), int(c)) for d, c in cam_keys], dom_names=dom_names,
                         pseudo_camera_sources=pseudo_sources,
                         source_domains=source_domains)


def source_training_records(cfg, owner: str = "DMG-Net") -> pd.DataFrame:
    """The training rows of a run that trains on ``cfg.sources`` (BoT, DMG-Net), sorted by path:
    :func:`multi_source_records` with ``cfg``'s ``source_options``, ``train_split``,
    ``domains``, ``seed``, ``max_images`` and ``subsample_seed``, after refusing targets that
    are also sources (:func:`check_target_domains`, :func:`check_targets`). ``owner`` names the
    method in the error when no source is given."""
    if not cfg.sources:
        raise UsageError(f"{owner} needs source datasets",
                         f"name them with {param('sources')}, e.g. "
                         f"{param('sources', 'market1501,dukemtmc')} or mixed_a")
    loaded = multi_source_records(
        cfg.sources, cfg.root, source_options=cfg.source_options,
        source_split=cfg.train_split, domains=cfg.domains, seed=cfg.seed,
        max_images=cfg.max_images, subsample_seed=cfg.subsample_seed)
    check_target_domains(cfg.targets, loaded.source_domains)
    check_targets(loaded.records, cfg.targets)
    return loaded.records.sort_values("path", kind="stable").reset_index(drop=True)


def check_targets(records: pd.DataFrame, targets) -> None:
    """Refuse a target (``dataset`` or ``dataset/domain``) that is also a training source:
    domain generalisation never sees its target (DMG-Net paper §5)."""
    domains = set(records["domain"].astype(str))
    datasets = set(records["dataset"].astype(str))
    for target in targets or ():
        text = str(target)
        dataset, _, domain = text.partition("/")
        try:
            dataset = canonical_name(dataset)
        except ReidError:                              # an unknown dataset name
            raise ParameterError("training", "targets", text, "is not a dataset",
                                 "name datasets (reid data list), e.g. viper or "
                                 "synthetic/d3") from None
        if dataset not in datasets:
            continue
        if not domain or f"{dataset}/{domain}" in domains or domain in domains:
            raise UsageError(f"target {text} is also a training source (sources cover "
                             f"{', '.join(sorted(domains))})",
                             f"drop it from {param('sources')} or keep other domains with "
                             f"{param('domains')}")


def camera_pair_groups(frame: pd.DataFrame) -> np.ndarray:
    """Per row [N], int64: the camera pair (loader column ``x_pair``) of a domain whose every
    camera lies in exactly one pair of two or more cameras (CUHK02: P1..P5, each its own two
    cameras); −1 elsewhere (no ``x_pair``; CUHK03, whose two views are shared by its five
    pairs; pseudo-cameras). The DMG-Net camera split cuts such a domain pair by pair
    (docs/methods/dmgnet.md D33)."""
    out = np.full(len(frame), -1, np.int64)
    if PAIR_COLUMN not in frame or not len(frame):
        return out
    pairs = pd.to_numeric(frame[PAIR_COLUMN], errors="coerce")
    pseudo = frame["pseudo_camera"].to_numpy(bool) if "pseudo_camera" in frame else \
        np.zeros(len(frame), bool)
    for _, rows in frame.groupby("domain", sort=True):     # loop per domain
        idx = frame.index.get_indexer(rows.index)
        values = pairs.iloc[idx]
        if values.isna().any() or pseudo[idx].any():
            continue
        per_cam = values.groupby(rows["camid"].to_numpy()).nunique()
        cams_per_pair = rows["camid"].groupby(values.to_numpy()).nunique()
        if (per_cam == 1).all() and (cams_per_pair >= 2).all():
            out[idx] = values.to_numpy(np.int64)
    return out


def check_target_domains(targets: Sequence[str] | str | None,
                         source_domains: dict[str, list[str]]) -> None:
    """Refuse a target ``dataset/domain`` whose dataset is a training source but which names
    none of that dataset's domains (``synthetic/d9`` when the sources hold d0..d4): a
    :class:`ParameterError` on ``targets`` listing the known domains. Targets of datasets that
    are not sources are not loaded here, so they are not checked."""
    for text in _split_names(targets):
        dataset, _, domain = text.partition("/")
        if not domain:
            continue
        try:
            dataset = canonical_name(dataset)
        except UsageError:
            continue                      # the trainer's own check names unknown datasets
        known = source_domains.get(dataset)
        if not known:
            continue
        want = domain.casefold()
        if not any(want in (d.casefold(), d.rsplit("/", 1)[-1].casefold()) for d in known):
            raise ParameterError("training", "targets", text,
                                 f"names no domain of the source {dataset}",
                                 f"its domains are {', '.join(known)}")


def source_specs(sources: Sequence[str] | str,
                 source_options: dict[str, dict] | None = None) -> list[Source]:
    """The :class:`~reidcli.data.compositions.Source` list of ``sources`` (compositions
    expanded; plain datasets with split ``train``), each with its training options merged
    under ``source_options[dataset]``."""
    items = _split_names(sources)
    if not items:
        raise UsageError("no source dataset given", f"name at least one in {param('sources')}")
    expanded: list[Source] = []
    for item in items:
        key = item.lower().replace(" ", "_").replace("-", "_")
        if key in COMPOSITIONS:
            expanded += [dataclasses.replace(s, dataset=canonical_name(s.dataset))
                         for s in COMPOSITIONS[key]]
        else:
            expanded.append(Source(canonical_name(item), (), "train"))
    seen: set[str] = set()
    for spec in expanded:
        if spec.dataset in seen:
            raise UsageError(f"source dataset {spec.dataset} is named twice in "
                             f"{', '.join(items)}", "name every dataset once (mixed_a and "
                             "mixed_b already hold their datasets)")
        seen.add(spec.dataset)
    options = {canonical_name(name): dict(opts or {})
               for name, opts in (source_options or {}).items()}
    stray = sorted(set(options) - seen)
    if stray:
        raise UsageError(f"source options for {', '.join(stray)}, which is not a source",
                         f"the sources are {', '.join(sorted(seen))}")
    return [dataclasses.replace(
        s, options=tuple(training_options(s.dataset, {**dict(s.options),
                                                      **options.get(s.dataset, {})}).items()))
        for s in expanded]


def select_domains(domains: Sequence[str] | str, available: Sequence[str] | pd.Series
                   ) -> list[str]:
    """The domain strings of ``available`` that ``domains`` names.

    Accepted spellings (case-insensitive): the exact domain string (``synthetic/d3``,
    ``market1501``, a Person30K site); the last ``/``-part of one (``d3`` names every domain
    ending in ``/d3``, i.e. ``synthetic/d3``); a dataset name or alias whose registry name is
    a domain (``market`` → ``market1501``, ``cuhk-sysu`` → ``cuhksysu``). ``domains`` may be
    one comma-separated string. An unknown name is a UsageError listing the domains.
    """
    present = sorted(set(map(str, available)))
    chosen: list[str] = []
    for item in _split_names(domains):
        want = item.casefold()
        hits = [d for d in present
                if want in (d.casefold(), d.rsplit("/", 1)[-1].casefold())]
        if not hits:
            try:
                canon = canonical_name(item)
            except UsageError:
                canon = None
            hits = [d for d in present if d == canon]
        if not hits:
            raise UsageError(f"unknown domain {item!r} in {param('domains')}",
                             f"the sources' domains are {', '.join(present)}")
        chosen += [d for d in hits if d not in chosen]
    if not chosen:
        raise UsageError(f"{param('domains')} names no domain",
                         f"the sources' domains are {', '.join(present)}")
    return chosen


def sources_without_cameras(frame: pd.DataFrame) -> list[str]:
    """Datasets of ``frame`` that get pseudo-cameras: those with an ``x_no_camera_labels``
    record (CUHK-SYSU) and those whose records all share one camid (sorted names)."""
    flagged = frame[NO_CAMERA_COLUMN].eq(True) if NO_CAMERA_COLUMN in frame else \
        pd.Series(False, index=frame.index)
    out = []
    for dataset, rows in frame.groupby("dataset", sort=True):
        if flagged.loc[rows.index].any() or rows["camid"].nunique() == 1:
            out.append(str(dataset))
    return out


def assign_pseudo_cameras(frame: pd.DataFrame, mask: np.ndarray, seed: int) -> pd.DataFrame:
    """``frame`` with ``camid`` replaced where ``mask`` [N] is True: per identity key, the
    images in ``frame`` order are shuffled (seed ``(seed, crc32("dataset|domain|scope|pid"))``,
    so an identity's assignment depends on nothing else) and assigned alternately to
    pseudo-cameras 0, 1: each identity's images are split as evenly as possible (counts
    differ by ≤ 1)."""

    frame = frame.copy()
    camid = frame["camid"].to_numpy(dtype=np.int64).copy()
    rows = np.flatnonzero(mask)
    keys = identity_keys(frame.iloc[rows]).map(lambda k: "|".join(map(str, _plain_key(k))))
    for key, members in pd.Series(rows, index=keys.index).groupby(keys, sort=True):
        member_rows = members.to_numpy()
        rng = np.random.default_rng([int(seed), zlib.crc32(key.encode())])
        order = member_rows[rng.permutation(len(member_rows))]
        camid[order] = np.arange(len(order)) % PSEUDO_CAMERAS
    frame["camid"] = camid
    return frame


def write_train_manifest(path, source_records: SourceRecords, *, force: bool = True) -> Path:
    """Write the audit CSV of a multi-source run atomically: one row per training image with
    the columns :data:`MANIFEST_COLUMNS` (``camid`` = the pseudo-camera where one was
    assigned). Returns the path written."""
    frame = source_records.records.loc[:, list(MANIFEST_COLUMNS)]

    def verify(tmp: Path) -> None:
        with open(tmp, newline="") as f:
            header = next(csv.reader(f))
        if tuple(header) != MANIFEST_COLUMNS:
            raise ValueError(f"header {header} is not {list(MANIFEST_COLUMNS)}")

    with atomic_output(path, force=force, option="out", verify=verify) as tmp:
        frame.to_csv(tmp, index=False, lineterminator="\n")
    return Path(path)


def read_train_manifest(path) -> pd.DataFrame:
    """The table :func:`write_train_manifest` wrote ([N rows], :data:`MANIFEST_COLUMNS`);
    InputFileError when the file is missing or lacks a column."""
    path = Path(path)
    if not path.is_file():
        raise InputFileError(f"no training manifest {path}", "give the manifest of a run")
    frame = pd.read_csv(path, dtype={"path": str, "dataset": str, "domain": str},
                        keep_default_na=False)
    missing = [c for c in MANIFEST_COLUMNS if c not in frame.columns]
    if missing:
        raise InputFileError(f"training manifest {path} lacks the column(s) "
                             f"{', '.join(missing)}", "write it with write_train_manifest")
    for col in ("pid", "camid", "label", "cam", "dom"):
        frame[col] = frame[col].astype(np.int64)
    return frame


def _split_names(names: Sequence[str] | str | None) -> list[str]:
    if names is None:
        return []
    if isinstance(names, str):
        names = [names]
    return [part.strip() for item in names for part in str(item).split(",") if part.strip()]


def _plain_key(key: tuple) -> tuple:
    """An identity key with Python scalars (``(dataset, domain, pid_scope, pid)``)."""
    return tuple(int(x) if isinstance(x, (int, np.integer)) else str(x) for x in key)


__all__ = ["SourceRecords", "multi_source_records", "source_specs", "select_domains",
           "check_target_domains", "camera_pair_groups", "source_training_records",
           "check_targets",
           "sources_without_cameras", "assign_pseudo_cameras", "write_train_manifest",
           "read_train_manifest", "MANIFEST_COLUMNS", "PSEUDO_CAMERAS"]
