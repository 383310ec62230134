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


#: draws of a further copy of an image before one that differs from its earlier copies in
#: the batch is given up (a transform without randomness, or with little: flip only)
FRESH_COPY_TRIES = 8


class SeededAugmentDataset(torch.utils.data.Dataset):
    """Item ``Draw(epoch, rank, step, copy, i)`` (:class:`reidcli.data.samplers.Draw`) =
    ``base[i]`` transformed under a torch seed from (seed, epoch, rank, step, copy, i).

    Every drawn copy of an image gets its own augmentation, the same on every run with this
    seed, with any number of loader workers or threads, and after ``--resume``. Copy ``c``
    ≥ 1 of an image is redrawn (attempt 1, 2, … of its seed, at most
    :data:`FRESH_COPY_TRIES`) while its image tensor equals that of an earlier copy in the
    batch, so a batch holds no two identical tensors unless the augmentation cannot make
    them differ (augmentation off, or too few random choices). A bare int key ``i`` is
    ``Draw(0, 0, 0, 0, i)``.

    Use with :class:`reidcli.data.samplers.EpochTaggedSampler`. The global torch RNG of the
    calling process is left untouched (``fork_rng``), so model dropout keeps its own stream.
    """

    def __init__(self, base: ImageRecordDataset, seed: int):
        self.base, self.seed = base, int(seed)
        self._batch: tuple = ()            # (epoch, rank, step) of the copies held below
        self._copies: dict[tuple[int, int], dict] = {}    # (index, copy) → item

    def __len__(self) -> int:
        return len(self.base)

    def _seeded(self, epoch: int, rank: int, step: int, copy: int, index: int,
                attempt: int) -> dict:
        with torch.random.fork_rng(devices=[]):
            seq = np.random.SeedSequence([self.seed, epoch, rank, step, copy, index, attempt,
                                          98])
            torch.manual_seed(int(seq.generate_state(1, dtype=np.uint64)[0] >> 1))
            return self.base[index]

    def _copy(self, epoch: int, rank: int, step: int, copy: int, index: int) -> dict:
        if self._batch != (epoch, rank, step):          # one batch's copies at a time
            self._batch, self._copies = (epoch, rank, step), {}
        key = (index, copy)
        if key not in self._copies:
            earlier = [self._copy(epoch, rank, step, c, index)["image"] for c in range(copy)]
            for attempt in range(FRESH_COPY_TRIES if copy else 1):
                item = self._seeded(epoch, rank, step, copy, index, attempt)
                image = item["image"]
                if not any(_same(image, e) for e in earlier):
                    break
            self._copies[key] = item
        return self._copies[key]

    def __getitem__(self, key) -> dict:
        if isinstance(key, (tuple, list)):
            epoch, rank, step, copy, index = (int(v) for v in key)
        else:
            epoch, rank, step, copy, index = 0, 0, 0, 0, int(key)
        return dict(self._copy(epoch, rank, step, copy, index))


def _same(a, b) -> bool:
    """Whether two augmented images are identical (tensors, or anything else by ==)."""
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.shape == b.shape and bool(torch.equal(a, b))
    try:
        return bool(a == b)             # e.g. PIL images (no transform) compare their pixels
    except (TypeError, ValueError):
        return False


__all__ = ["training_records", "training_options", "TRAINING_OPTIONS", "SeededAugmentDataset",
           "FRESH_COPY_TRIES"]
