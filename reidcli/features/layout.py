"""From a loaded dataset to the rows and protocol trials of a feature store.

A dataset protocol may have several trials (VIPeR's 10 half/half splits, SYSU's 10 gallery
samplings, ...). A store holds every image once — rows are the union of all trials' images,
sorted by path — and ``/protocol/trial_<k>`` lists, per trial, the row indices of its
train, query and gallery images. The ``split`` column of a row is its role in the first trial
that uses it.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import numpy as np
import pandas as pd

from reidcli.data.records import DatasetSplit, normalize_frame
from reidcli.data.registry import canonical_name, load
from reidcli.errors import ParameterError, UsageError
from reidcli.naming import param
from reidcli.progress import track
from reidcli.store.trials import parse_trials


@dataclasses.dataclass
class StoreLayout:
    """Rows and protocol of a store built from a dataset.

    ``records`` has N rows; each trial dict holds int64 arrays ``train_idx``, ``query_idx``,
    ``gallery_idx`` (row indices) and ``train_pids``, ``test_pids``.
    """

    dataset: str
    records: pd.DataFrame
    protocol: str
    eval_rule: str
    options: dict[str, Any]
    trials: list[dict[str, np.ndarray]]

    def image_folder(self) -> str | None:
        """The deepest folder holding every record's image (the store's input, hashed into its
        provenance as a listing); None without image paths."""
        paths = [str(p) for p in self.records["path"] if isinstance(p, str) and p] \
            if "path" in self.records else []
        if not paths:
            return None
        import os
        return os.path.commonpath([os.path.dirname(os.path.abspath(p)) for p in paths])


def layout_from_splits(dataset: str, splits: Sequence[DatasetSplit]) -> StoreLayout:
    """Union the images of several trials into store rows and per-trial index arrays."""
    if not splits:
        raise ValueError("no trials")
    frames = []
    for split in splits:
        frame = split.all_records()
        frames.append(frame)
    union = pd.concat(frames, ignore_index=True)
    # each path once; the first trial that uses it decides the split column
    union = union.drop_duplicates(subset="path", keep="first")
    order = np.argsort(union["path"].map(lambda p: p.encode()).to_numpy(), kind="stable")
    records = normalize_frame(union.iloc[order].reset_index(drop=True))
    row_of = pd.Series(np.arange(len(records)), index=records["path"].to_numpy())
    trials = []
    for split in splits:
        trial = {}
        for role, part in (("train", split.train), ("query", split.query),
                           ("gallery", split.gallery)):
            trial[f"{role}_idx"] = row_of.loc[part["path"].to_numpy()].to_numpy(np.int64) \
                if len(part) else np.zeros(0, np.int64)
        trial["train_pids"] = np.unique(split.train["pid"].to_numpy(np.int64))
        test = pd.concat([split.query["pid"], split.gallery["pid"]])
        trial["test_pids"] = np.unique(test.to_numpy(np.int64))
        trials.append(trial)
    first = splits[0]
    return StoreLayout(dataset=dataset, records=records, protocol=first.protocol,
                       eval_rule=first.eval_rule,
                       options={**first.options, **first.eval_kwargs,
                                "num_trials": len(splits)},
                       trials=trials)


def dataset_layout(dataset: str, /, root=None, trials: str | None = "all",
                   progress: bool = True, **options: Any) -> StoreLayout:
    """Load every (chosen) trial of a dataset protocol and lay them out as store rows.

    A loader option ``trial=k`` (RegDB's split k, as training takes it) picks trial ``k``
    like ``trials="k"``."""
    canon = canonical_name(dataset)
    if "trial" in options:
        trial = options.pop("trial")
        if trials not in (None, "all") and str(trials).strip() != str(trial):
            raise UsageError(f"{param('trial', trial)} and {param('trials', trials)} name "
                             "different trials", "give one of them")
        if isinstance(trial, bool) or not str(trial).strip().lstrip("-").isdigit():
            raise ParameterError("trial selection", "trial", trial, "is not an integer",
                                 f"give e.g. {param('trial', 0)}")
        trials = str(int(trial))
    first = load(canon, root, trial=0, **options)
    chosen = parse_trials(trials, max(int(first.num_trials), 1))
    splits = [first if t == 0 else None for t in chosen]
    todo = [(i, t) for i, t in enumerate(chosen) if splits[i] is None]
    for i, t in track(todo, description="loading protocol trials", enabled=progress and
                      len(todo) > 1):
        splits[i] = load(canon, root, trial=t, **options)
    layout = layout_from_splits(canon, splits)
    layout.options["trials"] = chosen
    return layout
