"""A torch ``Dataset`` over a record table, and a DataLoader helper.

Images are decoded with ``PIL.Image.open(path).convert("RGB")`` for every dataset
(docs/datasets.md: single-channel SYSU IR / RegDB thermal images become 3 equal channels).
"""
from __future__ import annotations

import os
from typing import Callable, Sequence

import numpy as np
import pandas as pd
import torch
from PIL import Image

from reidcli.data.image_files import ImageReadError, load_rgb  # noqa: F401 (re-exported)
from reidcli.data.records import encode_identities
from reidcli.errors import UsageError


class ImageRecordDataset(torch.utils.data.Dataset):
    """The images of a record table (docs/datasets.md) with their labels.

    Item ``i`` (row ``i`` of ``records`` after ``reset_index``) is a dict:

    ``image``     ``transform(PIL RGB image)`` (a float tensor [3, H, W] with the presets of
                  :mod:`reidcli.data.transforms`; the PIL image itself when ``transform`` is None)
    ``pid``       native pid (int), ``camid`` 0-based camera (int)
    ``label``     training class 0..C−1 when ``labels="encode"`` (the record table's
                  :func:`~reidcli.data.records.encode_identities`, i.e. sorted identity keys;
                  ``classes[label]`` is the key), the given value when ``labels`` is an array
                  of one int per row, else −1
    ``modality``  0 visible, 1 infrared
    ``index``     ``i`` (only when ``return_index``)

    The default ``collate`` of torch batches it (ints become int64 tensors). Rows with
    pid ≤ 0 (distractors/junk) are not training samples: drop them before ``"encode"``.
    """

    def __init__(self, records: pd.DataFrame, transform: Callable | None = None,
                 labels: str | Sequence[int] | np.ndarray | None = None,
                 return_index: bool = True):
        missing = [c for c in ("path", "pid", "camid") if c not in records.columns]
        if missing:
            raise UsageError(f"the record table lacks column(s) {', '.join(missing)}",
                             "pass a table from reidcli.data.load(...)")
        self.records = records.reset_index(drop=True)
        n = len(self.records)
        # fixed-width bytes, not a list of str: DataLoader workers touching a list of Python
        # objects copy it page by page (refcounts); a numpy buffer stays shared
        self._paths = np.array([os.fsencode(p) for p in self.records["path"]], dtype=bytes) \
            if n else np.empty(0, dtype="S1")
        self.pids = self.records["pid"].to_numpy(np.int64)
        self.camids = self.records["camid"].to_numpy(np.int64)
        modality = self.records["modality"] if "modality" in self.records else \
            pd.Series(["visible"] * n)
        self.modality = (modality.to_numpy() == "infrared").astype(np.int64)
        self.transform = transform
        self.return_index = bool(return_index)
        self.classes: list = []
        if isinstance(labels, str):
            if labels != "encode":
                raise UsageError(f"labels={labels!r} is not understood",
                                 'use labels="encode", an array of labels, or None')
            self.labels, self.classes = encode_identities(self.records)
        elif labels is None:
            self.labels = np.full(n, -1, np.int64)
        else:
            self.labels = np.asarray(labels).astype(np.int64).reshape(-1)
            if len(self.labels) != n:
                raise UsageError(f"{len(self.labels)} labels for {n} records",
                                 "give one label per row of the record table")

    @property
    def num_classes(self) -> int:
        """Number of training classes (0 when labels were not encoded)."""
        if self.classes:
            return len(self.classes)
        return int(self.labels.max()) + 1 if len(self.labels) and self.labels.max() >= 0 else 0

    def path(self, index: int) -> str:
        return os.fsdecode(self._paths[index])

    def __len__(self) -> int:
        return len(self._paths)

    def load_image(self, index: int) -> Image.Image:
        """The RGB PIL image of row ``index`` (no transform)."""
        return load_rgb(self.path(index))

    def __getitem__(self, index: int) -> dict:
        index = int(index)
        image = self.load_image(index)
        if self.transform is not None:
            image = self.transform(image)
        item = {"image": image, "pid": int(self.pids[index]), "camid": int(self.camids[index]),
                "label": int(self.labels[index]), "modality": int(self.modality[index])}
        if self.return_index:
            item["index"] = index
        return item


def default_workers(device: str | torch.device = "cpu") -> int:
    """Loader workers: on CUDA up to 8 (CPUs − 1), so decoding keeps the GPU fed; on CPU at
    most 4 and half the CPUs, leaving the rest to the model's own threads."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cpus = os.cpu_count() or 1
    if str(device).startswith("cuda"):
        return max(0, min(8, cpus - 1))
    return max(0, min(4, cpus // 2))


def make_loader(dataset: torch.utils.data.Dataset, *, batch_size: int = 64,
                batch_sampler=None, shuffle: bool = False, drop_last: bool = False,
                workers: int | None = None, device: str | torch.device = "cpu",
                seed: int = 0, prefetch_factor: int | None = None
                ) -> torch.utils.data.DataLoader:
    """A DataLoader for ``dataset``.

    ``batch_sampler`` (e.g. :class:`~reidcli.data.samplers.PKSampler`) replaces
    ``batch_size``/``shuffle``/``drop_last``; PCB's uniform batches are ``shuffle=True,
    drop_last=True``; extraction is the default (in order, keep the last batch).
    ``workers`` defaults to :func:`default_workers`; memory is pinned only when ``device``
    is CUDA and CUDA is available; workers persist across epochs (their decode state and
    RNG stream carry on, so call ``batch_sampler.set_epoch`` as usual). The loader's
    generator is seeded with ``seed``: shuffling and the per-worker torch seeds (hence the
    random augmentations) are reproducible; with ``workers=0`` the augmentations follow
    torch's global seed.
    """
    workers = default_workers(device) if workers is None else int(workers)
    if workers < 0:
        raise UsageError(f"workers={workers} is negative", "give 0 or more loader workers")
    pin = str(device).startswith("cuda") and torch.cuda.is_available()
    kwargs: dict = dict(num_workers=workers, pin_memory=pin,
                        generator=torch.Generator().manual_seed(int(seed)))
    if workers > 0:
        kwargs.update(persistent_workers=True, prefetch_factor=prefetch_factor or 2)
    if batch_sampler is not None:
        return torch.utils.data.DataLoader(dataset, batch_sampler=batch_sampler, **kwargs)
    return torch.utils.data.DataLoader(dataset, batch_size=batch_size, shuffle=shuffle,
                                       drop_last=drop_last, **kwargs)
