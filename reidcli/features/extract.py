"""Images → feature store, for hand-crafted descriptors (model extraction plugs in later).

Images are decoded in batches, described, and appended to a streaming :class:`StoreWriter`,
so memory stays bounded by the batch size whatever the dataset size.
"""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
from PIL import Image

from reidcli.errors import InputFileError, UsageError
from reidcli.naming import param
from reidcli.features.layout import StoreLayout
from reidcli.progress import track
from reidcli.provenance import make_provenance
from reidcli.store import StoreWriter


@dataclasses.dataclass(frozen=True)
class HandcraftedFeature:
    """A descriptor computed from RGB images resized to ``size`` = (H, W)."""

    name: str
    size: tuple[int, int]
    compute: Callable[[np.ndarray], np.ndarray]     # uint8 [n, H, W, 3] → float32 [n, D]
    metric: str = "euclidean"
    normalized: bool = False
    description: str = ""


def _hsv_stripes(images: np.ndarray) -> np.ndarray:
    from reidcli.features.color_histograms import hsv_stripe_histograms
    return hsv_stripe_histograms(images, stripes=6, bins=8)


def _hist_lbp(images: np.ndarray) -> np.ndarray:
    from reidcli.features.handcrafted import hist_lbp
    return hist_lbp(images)


def _lomo(images: np.ndarray) -> np.ndarray:
    from reidcli.features.handcrafted import lomo
    return lomo(images)


#: name → descriptor
HANDCRAFTED: dict[str, HandcraftedFeature] = {
    "hsv-stripes": HandcraftedFeature(
        "hsv-stripes", (128, 64), _hsv_stripes, normalized=True,
        description="6 horizontal stripes × 8-bin H, S, V histograms, L2-normalised (144-d)"),
    "hist-lbp": HandcraftedFeature(
        "hist-lbp", (128, 48), _hist_lbp,
        description="HistLBP: 6 stripes × (8 colour channels × 16 bins + uniform LBP 59 + 243), "
                    "L1 per histogram (2580-d)"),
    "lomo": HandcraftedFeature(
        "lomo", (128, 48), _lomo,
        description="LOMO (Liao et al. 2015): Retinex HSV 8³ + SILTP R=3,5 local maximal "
                    "occurrence, 3 scales, log + L2 per group (26960-d)"),
}


@dataclasses.dataclass(frozen=True)
class HandcraftedMaps:
    """Spatial maps [n, C, H, W] computed from RGB images resized to ``size`` = (H, W)."""

    name: str
    size: tuple[int, int]
    compute: Callable[[np.ndarray], np.ndarray]     # uint8 [n, H, W, 3] → float32 [n, C, h, w]
    description: str = ""


def _color_grid(images: np.ndarray) -> np.ndarray:
    from reidcli.features.color_maps import color_grid_maps
    return color_grid_maps(images)


#: name → hand-crafted conv-map stand-in (``reid extract --maps``)
HANDCRAFTED_MAPS: dict[str, HandcraftedMaps] = {
    "color-grid": HandcraftedMaps(
        "color-grid", (96, 32), _color_grid,
        description="16 colour/gradient channels on a 24×8 grid of 4×4-pixel cells"),
}


def read_image_batch(paths: Sequence[str], size: tuple[int, int]) -> np.ndarray:
    """Decode images as RGB and resize to ``size`` = (H, W): uint8 [n, H, W, 3]."""
    h, w = size
    out = np.empty((len(paths), h, w, 3), dtype=np.uint8)
    for i, path in enumerate(paths):
        try:
            with Image.open(path) as img:
                img = img.convert("RGB")
                if img.size != (w, h):
                    img = img.resize((w, h), Image.BILINEAR)
                out[i] = np.asarray(img)
        except (FileNotFoundError, OSError) as exc:
            raise InputFileError(f"cannot read image {path} ({exc.__class__.__name__})",
                                 "check the dataset copy; `reid data check` validates it") \
                from None
    return out


def extract_handcrafted_store(layout: StoreLayout, out: str | os.PathLike,
                              features: Sequence[str] = ("hsv-stripes",), *,
                              maps: Sequence[str] = (), maps_dtype: str = "float16",
                              batch_size: int = 256, force: bool = False,
                              progress: bool = True, command: list[str] | None = None,
                              inputs: Sequence[str | os.PathLike] = ()) -> Path:
    """Describe every row of ``layout`` with the named hand-crafted features; write a store.

    The store holds ``/features/<name>`` [N, D] per descriptor, ``/convmaps/<name>``
    [N, C, H, W] per hand-crafted map (``maps``) and the layout's protocol.
    """
    unknown = [f for f in features if f not in HANDCRAFTED]
    if unknown:
        raise UsageError(f"unknown feature(s) {', '.join(unknown)}",
                         f"choose from {', '.join(sorted(HANDCRAFTED))}")
    unknown = [m for m in maps if m not in HANDCRAFTED_MAPS]
    if unknown:
        raise UsageError(f"unknown map(s) {', '.join(unknown)}",
                         f"choose from {', '.join(sorted(HANDCRAFTED_MAPS))}")
    if not features and not maps:
        raise UsageError("nothing to extract",
                         f"pass {param('features')} and/or {param('maps')}")
    if len(layout.records) == 0:
        raise UsageError("the dataset has no images",
                         f"check {param('root')} and the dataset options")
    descs = [HANDCRAFTED[f] for f in features] + [HANDCRAFTED_MAPS[m] for m in maps]
    paths = layout.records["path"].tolist()
    prov = make_provenance(command=command, inputs=inputs, features=list(features),
                           maps=list(maps), protocol=layout.protocol)
    attrs = {"train_cams": ",".join(map(str, layout.options["train_cams"]))} \
        if layout.options.get("train_cams") else None
    with StoreWriter(out, layout.records, dataset=layout.dataset, provenance=prov,
                     force=force, attrs=attrs) as writer:
        created: set[str] = set()
        starts = range(0, len(paths), batch_size)
        for start in track(starts, description="describing images", unit="batches",
                           enabled=progress):
            batch = paths[start:start + batch_size]
            images_by_size: dict[tuple[int, int], np.ndarray] = {}
            for desc in descs:
                if desc.size not in images_by_size:
                    images_by_size[desc.size] = read_image_batch(batch, desc.size)
                block = np.asarray(desc.compute(images_by_size[desc.size]), dtype=np.float32)
                if isinstance(desc, HandcraftedMaps):
                    if desc.name not in created:
                        writer.add_convmap(desc.name, block.shape[1:], dtype=maps_dtype)
                        created.add(desc.name)
                    writer.append_convmap(desc.name, block)
                    continue
                if desc.name not in created:
                    writer.add_feature(desc.name, block.shape[1], metric=desc.metric,
                                       normalized=desc.normalized)
                    created.add(desc.name)
                writer.append_feature(desc.name, block)
        writer.write_protocol(layout.protocol, layout.trials, eval_rule=layout.eval_rule,
                              options=layout.options)
    return Path(out)
