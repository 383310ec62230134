"""DG training compositions: one training set from several datasets (docs/datasets.md).
Loads its sources through :mod:`reidcli.data.registry`, so it lives apart
from :mod:`reidcli.data.protocols` (which the registry imports)."""
from __future__ import annotations

import dataclasses
from typing import Any, Iterable

import pandas as pd

from reidcli.data.records import DatasetSplit, empty_frame, normalize_frame
from reidcli.data.registry import canonical_name, load
from reidcli.errors import UsageError
from reidcli.naming import param


# -- DG training compositions (docs/datasets.md) ------------------------------
@dataclasses.dataclass(frozen=True)
class Source:
    """One source of a composition: a dataset, its loader options (``((key, value), ...)``)
    and which of its images train (``"all"`` = every split, ``"train"`` = the train split)."""

    dataset: str
    options: tuple = ()
    split: str = "all"


#: Mixed A (DIMN): every image (pid > 0) of every split of CUHK02 (all_train), CUHK03
#: (detected), Market-1501, DukeMTMC-reID and the CUHK-SYSU crops (docs/datasets.md)
MIXED_A = (Source("cuhk02", (("protocol", "all_train"),)), Source("cuhk03"),
           Source("market1501"), Source("dukemtmc"), Source("cuhksysu"))
#: Mixed B (SNR): the train splits of MSMT17, CUHK03 (767/700 protocol, detected),
#: Market-1501 and DukeMTMC-reID (docs/datasets.md)
MIXED_B = (Source("msmt17", split="train"), Source("cuhk03", split="train"),
           Source("market1501", split="train"), Source("dukemtmc", split="train"))
COMPOSITIONS = {"mixed_a": MIXED_A, "mixed_b": MIXED_B}


def _as_source(spec: Any) -> Source:
    if isinstance(spec, Source):
        return spec
    if isinstance(spec, str):
        return Source(spec)
    dataset, *rest = spec
    options = rest[0] if rest else {}
    split = rest[1] if len(rest) > 1 else "all"
    return Source(dataset, tuple(dict(options or {}).items()), split)


def compose_sources(specs: str | Iterable[Any], root=None, *, source_split: str | None = None,
                    ) -> DatasetSplit:
    """One training set from several datasets (docs/datasets.md).

    ``specs`` is a composition name (``"mixed_a"``, ``"mixed_b"``) or a list of
    :class:`Source` / ``"dataset"`` / ``(dataset, options[, split])``. Each source is loaded
    with :func:`reidcli.data.load` (trial 0) and contributes the persons (pid > 0) of every
    split (``split="all"``, Mixed A) or of its train split (``"train"``, Mixed B);
    ``source_split`` overrides every source's choice. All rows get ``split="train"``;
    identities stay distinct because the identity key holds the ``dataset`` column (and
    MSMT17's pid scope). Query/gallery are empty (targets are loaded separately).

    Every source must be present: a dataset missing from the data root raises its loader's
    own :class:`~reidcli.errors.DatasetError` (naming the dataset and the folders tried) —
    a composition is never silently trained without one of its sources.
    """
    if isinstance(specs, str):
        key = specs.lower().replace(" ", "_").replace("-", "_")
        if key not in COMPOSITIONS:
            raise UsageError(f"unknown composition {specs!r}",
                             f"use one of {', '.join(COMPOSITIONS)} or a list of datasets")
        specs = COMPOSITIONS[key]
    if source_split not in (None, "all", "train"):
        raise UsageError(f"{param('source_split', repr(source_split))} is unknown",
                         f"use {param('source_split', 'all')} or {param('source_split', 'train')}")
    parts, names = [], []
    for source in map(_as_source, specs):
        which = source_split or source.split
        if which not in ("all", "train"):
            raise UsageError(f"source {source.dataset}: split={which!r} is unknown",
                             "use all or train")
        split = load(source.dataset, root, **dict(source.options))
        frame = split.all_records() if which == "all" else split.train
        frame = frame[frame["pid"] > 0].copy()
        frame["split"] = "train"
        parts.append(frame)
        names.append(canonical_name(source.dataset))
    if not parts:
        raise UsageError("the composition has no source dataset", "name at least one dataset")
    frames = [p for p in parts if len(p)]
    train = normalize_frame(pd.concat(frames, ignore_index=True)) if frames else empty_frame()
    return DatasetSplit(name="+".join(names), train=train, query=empty_frame(),
                        gallery=empty_frame(), protocol="composition",
                        options={"sources": names, "source_split": source_split})
