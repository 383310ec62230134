"""A torch ``Dataset`` over a record table (datasets.md §1: PIL decode, ``convert("RGB")``)."""
from __future__ import annotations

from typing import Callable

import numpy as np
import pandas as pd
import torch
from PIL import Image, UnidentifiedImageError

from reidcli.data.records import encode_identities
from reidcli.errors import DatasetError


class ImageRecordDataset(torch.utils.data.Dataset):
    """Images of a record table with their labels.

    Item ``i`` is ``{"image": transform(PIL image) (tensor [3, H, W] for the presets),
    "pid", "camid", "modality" (0 visible, 1 infrared), "label" (training class 0..C−1
    over the sorted identity keys, when ``labels="encode"``; else −1), "index": i}``.
    ``classes`` lists the identity key of each label.
    """

    def __init__(self, records: pd.DataFrame, transform: Callable | None = None,
                 labels: str | None = None):
        self.records = records.reset_index(drop=True)
        self.paths = self.records["path"].tolist()
        self.pids = self.records["pid"].to_numpy(np.int64)
        self.camids = self.records["camid"].to_numpy(np.int64)
        self.modality = (self.records["modality"] == "infrared").to_numpy().astype(np.int64)
        self.transform = transform
        if labels == "encode":
            self.labels, self.classes = encode_identities(self.records)
        else:
            self.labels, self.classes = np.full(len(self.records), -1, np.int64), []

    def __len__(self) -> int:
        return len(self.paths)

    def load_image(self, index: int) -> Image.Image:
        path = self.paths[index]
        try:
            with Image.open(path) as img:
                return img.convert("RGB")
        except FileNotFoundError:
            raise DatasetError(f"image {path} does not exist",
                               "check the dataset copy (reid data check)") from None
        except (UnidentifiedImageError, OSError) as exc:
            raise DatasetError(f"image {path} cannot be decoded ({exc.__class__.__name__})",
                               "replace the damaged file") from None

    def __getitem__(self, index: int) -> dict:
        image = self.load_image(index)
        if self.transform is not None:
            image = self.transform(image)
        return {"image": image, "pid": int(self.pids[index]), "camid": int(self.camids[index]),
                "modality": int(self.modality[index]), "label": int(self.labels[index]),
                "index": int(index)}


def make_loader(dataset: torch.utils.data.Dataset, *, batch_size: int | None = None,
                batch_sampler=None, shuffle: bool = False, workers: int | None = None,
                device: str = "cpu", seed: int = 0) -> torch.utils.data.DataLoader:
    """A DataLoader with sensible workers (≤ 8, ≤ CPUs − 1), pinned memory on CUDA and
    persistent workers; ``batch_sampler`` (e.g. :class:`~reidcli.data.samplers.PKSampler`)
    replaces batch_size/shuffle."""
    import os

    if workers is None:
        workers = max(0, min(8, (os.cpu_count() or 1) - 1))
    generator = torch.Generator().manual_seed(seed)
    kwargs = dict(num_workers=workers, pin_memory=device.startswith("cuda"),
                  persistent_workers=workers > 0, generator=generator)
    if batch_sampler is not None:
        return torch.utils.data.DataLoader(dataset, batch_sampler=batch_sampler, **kwargs)
    return torch.utils.data.DataLoader(dataset, batch_size=batch_size or 64, shuffle=shuffle,
                                       **kwargs)
