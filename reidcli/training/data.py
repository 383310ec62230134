"""Training rows of a dataset and a dataset wrapper that makes augmentation reproducible."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pandas as pd
import torch

from reidcli.data.image_dataset import ImageRecordDataset
from reidcli.errors import ParameterError, UsageError
from reidcli.naming import param


#: loader options a dataset trains with unless ``--option`` sets them: MSMT17 trains on
#: list_train + list_val (32,621 images / 1,041 ids; docs/datasets.md)
TRAINING_OPTIONS: dict[str, dict[str, Any]] = {"msmt17": {"train_includes_val": True}}


def training_options(dataset: str, options: dict[str, Any] | None = None) -> dict[str, Any]:
    """The loader options for training on ``dataset``: :data:`TRAINING_OPTIONS` of the
    dataset, overridden by the user's ``options``."""
    from reidcli.data.registry import canonical_name

    return {**TRAINING_OPTIONS.get(canonical_name(dataset), {}), **dict(options or {})}


def training_records(dataset: str, root=None, options: dict[str, Any] | None = None, *,
                     train_cams: Sequence[int] | None = None, max_images: int | None = None,
                     subsample_seed: int = 0, split: str = "train") -> pd.DataFrame:
    """The training record table of ``dataset`` (trial ``trial`` of its protocol, a loader
    option, default 0).

    Rows with pid ≤ 0 (distractors, junk) are dropped; ``train_cams`` keeps only those
    0-based cameras (DART3's held-out camera protocols); ``max_images`` keeps a seeded random
    subset of that many images (``--max-images``, the DART3 upper-bound variant and quick
    CPU runs). ``split="all"`` trains on every split (Mixed-A style sources). The loader
    gets :func:`training_options` (MSMT17: train + val unless ``train_includes_val`` is given).
    """
    from reidcli.data.registry import canonical_name, load

    opts = training_options(dataset, options)
    trial = int(opts.pop("trial", 0))             # RegDB: one model per split (trial) k
    loaded = load(canonical_name(dataset), root, trial=trial, **opts)
    frame = loaded.all_records() if split == "all" else loaded.train
    if split not in ("train", "all"):
        raise ParameterError("training", "train_split", split, "is not train or all",
                             "use train or all")
    frame = frame[frame["pid"].to_numpy() > 0]
    if train_cams is not None:
        cams = sorted({int(c) for c in train_cams})
        frame = frame[frame["camid"].isin(cams)]
        if frame.empty:
            raise ParameterError("training", "train_cams", ",".join(map(str, cams)),
                                 "selects no training image", "check the 0-based camera "
                                 "indices (reid data check shows the cameras)")
    if max_images is not None and 0 < max_images < len(frame):
        rng = np.random.default_rng([int(subsample_seed), 5])
        keep = np.sort(rng.choice(len(frame), size=int(max_images), replace=False))
        frame = frame.iloc[keep]
    frame = frame.sort_values("path", kind="stable").reset_index(drop=True)
    if frame.empty:
        raise UsageError(f"dataset {dataset} has no training images",
                         f"check {param('root')} and the dataset options")
    return frame


class SeededAugmentDataset(torch.utils.data.Dataset):
    """Item ``epoch·n + i`` = ``base[i]`` transformed under the torch seed (seed, epoch, i).

    Use with :class:`reidcli.data.samplers.EpochTaggedSampler`. The global torch RNG of the
    calling process is left untouched (``fork_rng``), so model dropout keeps its own stream.
    """

    def __init__(self, base: ImageRecordDataset, seed: int):
        self.base, self.seed = base, int(seed)

    def __len__(self) -> int:
        return len(self.base)

    def __getitem__(self, key: int) -> dict:
        n = len(self.base)
        epoch, index = divmod(int(key), n)
        with torch.random.fork_rng(devices=[]):
            seq = np.random.SeedSequence([self.seed, epoch, index, 97])
            torch.manual_seed(int(seq.generate_state(1, dtype=np.uint64)[0] >> 1))
            return self.base[index]


__all__ = ["training_records", "training_options", "TRAINING_OPTIONS", "SeededAugmentDataset"]
