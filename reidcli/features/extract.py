"""Images → feature store, for hand-crafted descriptors (model extraction plugs in later).

Images are decoded in batches, described, and appended to a streaming :class:`StoreWriter`,
so memory stays bounded by the batch size whatever the dataset size.

Fitted descriptors (:class:`FittedHandcrafted`, e.g. ``bow``) are learned first from a
bounded random subset of the layout's training rows (trial 0's ``train_idx``), or loaded
from an earlier store (``codebook_from``); what they learned is written to
``/codebooks/<name>`` of the store and summarised in its provenance.
"""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Protocol, Sequence

import numpy as np
from PIL import Image

from reidcli.errors import InputFileError, ParameterError, UsageError
from reidcli.naming import param
from reidcli.params import check_seed
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


class FittedDescriptor(Protocol):
    """What a fitted descriptor's ``fit``/``load`` returns (e.g. :class:`BowCodebook`)."""

    dim: int

    def encode(self, images: np.ndarray) -> np.ndarray:
        """uint8 [n, H, W, 3] → float32 [n, dim]."""

    def save(self, h5: Any, name: str) -> None:
        """Write ``/codebooks/<name>`` into an open h5py file."""

    def provenance(self) -> dict[str, Any]:
        """What the store's provenance records about the fit."""

    def summary(self) -> str:
        """One line for the user (which tables and sizes were used)."""


@dataclasses.dataclass(frozen=True)
class FittedHandcrafted:
    """A descriptor learned from training images before it can describe any image.

    ``fit(batches, options)`` gets an iterator of uint8 [b, H, W, 3] training batches;
    ``load(path, options)`` reads what an earlier extraction stored (``codebook_from``).
    ``options`` are :func:`extract_handcrafted_store`'s ``bow_words``, ``color_names``,
    ``seed``.
    """

    name: str
    size: tuple[int, int]
    fit: Callable[[Iterator[np.ndarray], Mapping[str, Any]], FittedDescriptor]
    load: Callable[[str | os.PathLike, Mapping[str, Any]], FittedDescriptor]
    metric: str = "euclidean"
    normalized: bool = True
    description: str = ""


def _bow_fit(batches: Iterator[np.ndarray], options: Mapping[str, Any]) -> FittedDescriptor:
    from reidcli.features.bow import BowParams, fit_bow_from_batches, load_color_names
    words = int(options.get("bow_words", 350))
    # MA = 10 (the paper's) needs K ≥ 40; a smaller K takes K // 4 words per patch, since
    # with MA near K every word is in every image and every IDF is log(1) = 0
    params = BowParams(words=words, ma=max(1, min(BowParams.ma, words // 4)))
    table = load_color_names(options.get("color_names", "builtin"))
    return fit_bow_from_batches(batches, table, params, seed=int(options.get("seed", 0)))


def _bow_load(path: str | os.PathLike, options: Mapping[str, Any]) -> FittedDescriptor:
    from reidcli.features.bow import load_codebook, load_color_names
    codebook = load_codebook(path, "bow")
    chosen = options.get("color_names")
    if chosen is not None and load_color_names(chosen).sha256 != codebook.color_names.sha256:
        raise UsageError(f"{param('color_names', chosen)} differs from the color-name table "
                         f"of the codebook in {path}",
                         f"drop {param('color_names')}: the stored codebook carries its table")
    return codebook


#: name → descriptor learned from the training rows first
FITTED: dict[str, FittedHandcrafted] = {
    "bow": FittedHandcrafted(
        "bow", (128, 64), _bow_fit, _bow_load,
        description="Market-1501 BoW (Zheng et al. 2015): Colour Names on 4×4 patches, "
                    "350-word codebook, MA=10, Gaussian mask, 16 stripes, √tf·IDF, "
                    "negative evidence, L2 (5600-d); docs/methods/bow.md"),
}

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


def _fit_rows(layout: StoreLayout, max_images: int, seed: int) -> np.ndarray:
    """Rows a fitted descriptor learns from: trial 0's ``train_idx`` (rows whose ``split``
    is ``train`` without a protocol), at most ``max_images`` drawn with ``seed``; sorted."""
    if layout.trials and "train_idx" in layout.trials[0]:
        rows = np.unique(np.asarray(layout.trials[0]["train_idx"], dtype=np.int64))
    else:
        rows = np.flatnonzero(layout.records["split"].to_numpy() == "train")
    if len(rows) > max_images:
        rows = np.sort(np.random.default_rng(seed).choice(rows, max_images, replace=False))
    return rows


def fit_descriptors(layout: StoreLayout, names: Sequence[str], *, options: Mapping[str, Any],
                    codebook_from: str | os.PathLike | None = None, max_images: int = 4000,
                    batch_size: int = 256, progress: bool = True
                    ) -> dict[str, FittedDescriptor]:
    """Fit (or load from ``codebook_from``) each named fitted descriptor."""
    fitted: dict[str, FittedDescriptor] = {}
    for name in names:
        desc = FITTED[name]
        if codebook_from is not None:
            fitted[name] = desc.load(codebook_from, options)
            continue
        rows = _fit_rows(layout, max_images, int(options.get("seed", 0)))
        if len(rows) == 0:
            raise UsageError(f"{name}: the dataset has no training rows to learn from",
                             f"pass {param('codebook_from')} with a store extracted earlier")
        paths = layout.records["path"].to_numpy()[rows].tolist()

        def batches(paths=paths, size=desc.size, name=name) -> Iterator[np.ndarray]:
            starts = range(0, len(paths), batch_size)
            for start in track(starts, description=f"fitting {name} on training images",
                               unit="batches", enabled=progress):
                yield read_image_batch(paths[start:start + batch_size], size)

        fitted[name] = desc.fit(batches(), options)
    return fitted


def stored_summaries(path: str | os.PathLike) -> list[str]:
    """``"<name>: <summary>"`` of each fitted descriptor stored in ``/codebooks``."""
    from reidcli.store.codebooks import codebook_names

    names = codebook_names(path)
    return [f"{name}: {FITTED[name].load(path, {}).summary()}" for name in names
            if name in FITTED]


def extract_handcrafted_store(layout: StoreLayout, out: str | os.PathLike,
                              features: Sequence[str] = ("hsv-stripes",), *,
                              maps: Sequence[str] = (), maps_dtype: str = "float16",
                              batch_size: int = 256, force: bool = False,
                              progress: bool = True, command: list[str] | None = None,
                              inputs: Sequence[str | os.PathLike] = (),
                              bow_words: int = 350, color_names: str | None = None,
                              seed: int = 0, max_images: int = 4000,
                              codebook_from: str | os.PathLike | None = None) -> Path:
    """Describe every row of ``layout`` with the named hand-crafted features; write a store.

    The store holds ``/features/<name>`` [N, D] per descriptor, ``/convmaps/<name>``
    [N, C, H, W] per hand-crafted map (``maps``) and the layout's protocol. Fitted
    descriptors (``bow``) are first learned on at most ``max_images`` training rows
    (``seed``; ``bow_words`` words; ``color_names`` "builtin" (default) or a w2c file), or
    loaded from the store ``codebook_from``; they are stored in ``/codebooks/<name>``.
    """
    fitted_names = _check_extraction_request(layout, features, maps, max_images,
                                             codebook_from)
    seed = check_seed("extraction", seed)          # [0, 2³²), before any draw uses it
    options = {"bow_words": bow_words, "seed": seed,
               "color_names": color_names if codebook_from is not None
               else (color_names or "builtin")}
    fitted = fit_descriptors(layout, fitted_names, options=options,
                             codebook_from=codebook_from, max_images=max_images,
                             batch_size=batch_size, progress=progress)
    descs = [HANDCRAFTED[f] if f in HANDCRAFTED else FITTED[f] for f in features] + \
        [HANDCRAFTED_MAPS[m] for m in maps]
    paths = layout.records["path"].tolist()
    prov = _extraction_provenance(layout, features, maps, fitted, codebook_from, seed,
                                  command=command, inputs=inputs)
    with StoreWriter(out, layout.records, dataset=layout.dataset, provenance=prov,
                     force=force, attrs=_store_attrs(layout)) as writer:
        created: set[str] = set()
        starts = range(0, len(paths), batch_size)
        for start in track(starts, description="describing images", unit="batches",
                           enabled=progress):
            _describe_batch(writer, paths[start:start + batch_size], descs, fitted, created,
                            maps_dtype)
        for name, enc in fitted.items():
            enc.save(writer.h5, name)
        writer.write_protocol(layout.protocol, layout.trials, eval_rule=layout.eval_rule,
                              options=layout.options)
    return Path(out)


def _check_descriptor_names(features: Sequence[str], maps: Sequence[str]) -> None:
    """UsageError on an unknown feature or map name, or when both lists are empty."""
    known = {**HANDCRAFTED, **FITTED}
    unknown = [f for f in features if f not in known]
    if unknown:
        raise UsageError(f"unknown feature(s) {', '.join(unknown)}",
                         f"choose from {', '.join(sorted(known))}")
    unknown = [m for m in maps if m not in HANDCRAFTED_MAPS]
    if unknown:
        raise UsageError(f"unknown map(s) {', '.join(unknown)}",
                         f"choose from {', '.join(sorted(HANDCRAFTED_MAPS))}")
    if not features and not maps:
        raise UsageError("nothing to extract",
                         f"pass {param('features')} and/or {param('maps')}")


def _check_extraction_request(layout: StoreLayout, features: Sequence[str],
                              maps: Sequence[str], max_images: int,
                              codebook_from: str | os.PathLike | None) -> list[str]:
    """The fitted descriptors among ``features``, once the request is checked (names, a
    non-empty dataset, ``max_images`` ≥ 1, ``codebook_from`` only with a fitted feature)."""
    _check_descriptor_names(features, maps)
    if len(layout.records) == 0:
        raise UsageError("the dataset has no images",
                         f"check {param('root')} and the dataset options")
    if max_images < 1:
        raise ParameterError("extraction", "max_images", max_images, "must be ≥ 1",
                             "e.g. 4000")
    fitted_names = [f for f in features if f in FITTED]
    if codebook_from is not None and not fitted_names:
        raise UsageError(f"{param('codebook_from')} is only read by fitted features "
                         f"({', '.join(sorted(FITTED))})",
                         f"add one to {param('features')} or drop {param('codebook_from')}")
    return fitted_names


def _extraction_provenance(layout: StoreLayout, features: Sequence[str],
                           maps: Sequence[str], fitted: Mapping[str, FittedDescriptor],
                           codebook_from: str | os.PathLike | None, seed: int, *,
                           command: list[str] | None,
                           inputs: Sequence[str | os.PathLike]) -> dict:
    """The store's provenance: features, maps, protocol, and what was fitted (with the seed)."""
    extra = {"fitted": {name: {**enc.provenance(), "codebook_from": str(codebook_from)
                               if codebook_from is not None else None}
                        for name, enc in fitted.items()}} if fitted else {}
    return make_provenance(command=command, inputs=inputs, features=list(features),
                           maps=list(maps), protocol=layout.protocol,
                           seed=seed if fitted else None, **extra)


def _store_attrs(layout: StoreLayout) -> dict[str, str] | None:
    """Root attributes of the store: the training cameras, when the layout restricts them."""
    return {"train_cams": ",".join(map(str, layout.options["train_cams"]))} \
        if layout.options.get("train_cams") else None


def _describe_batch(writer: StoreWriter, batch: Sequence[str], descs: Sequence[Any],
                    fitted: Mapping[str, FittedDescriptor], created: set[str],
                    maps_dtype: str) -> None:
    """Describe the images ``batch`` with every descriptor and append the blocks (each image
    size decoded once)."""
    images_by_size: dict[tuple[int, int], np.ndarray] = {}
    for desc in descs:
        if desc.size not in images_by_size:
            images_by_size[desc.size] = read_image_batch(batch, desc.size)
        images = images_by_size[desc.size]
        compute = fitted[desc.name].encode if isinstance(desc, FittedHandcrafted) \
            else desc.compute
        block = np.asarray(compute(images), dtype=np.float32)
        _append_block(writer, desc, block, created, maps_dtype)


def _append_block(writer: StoreWriter, desc: Any, block: np.ndarray, created: set[str],
                  maps_dtype: str) -> None:
    """Append ``block`` (float32 [n, D] or [n, C, H, W] for maps) to ``desc``'s dataset,
    created on its first block (name added to ``created``)."""
    if isinstance(desc, HandcraftedMaps):
        if desc.name not in created:
            writer.add_convmap(desc.name, block.shape[1:], dtype=maps_dtype)
            created.add(desc.name)
        writer.append_convmap(desc.name, block)
        return
    if desc.name not in created:
        feature_attrs = {"codebook": f"/codebooks/{desc.name}"} \
            if isinstance(desc, FittedHandcrafted) else None
        writer.add_feature(desc.name, block.shape[1], metric=desc.metric,
                           normalized=desc.normalized, attrs=feature_attrs)
        created.add(desc.name)
    writer.append_feature(desc.name, block)
