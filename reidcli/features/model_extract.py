"""``reid extract --model``: a trained PCB/BoT → store of embeddings and pooled conv maps.

One forward pass per batch (eval mode, the model's test transform) gives both the
embeddings (``pcb_g``, ``pcb_h`` — ``rpp_g``, ``rpp_h`` from an RPP model, docs/methods/pcb.md — |
``bnneck``, ``pool5``; raw, part-major; docs/methods/pcb.md) and
the conv maps of the requested taps, average-pooled to ``map_size`` (docs/methods/pcb.md:
``adaptive_avg_pool2d`` to 24×8 at 384×128 input — 4×4 on conv2_x, 2×2 on conv3_x, none on
conv4_x/conv5_x). ``flip`` averages each embedding with that of the mirrored image (maps are
taken from the unflipped image). Rows stream into the store batch by batch.
"""
from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from reidcli.data.image_dataset import ImageRecordDataset, make_loader
from reidcli.device import (amp_dtype, autocast as autocast_context, resolve_device,
                            use_channels_last)
from reidcli.errors import ParameterError, UsageError
from reidcli.features.layout import StoreLayout
from reidcli.models.backbones import TAP_MODULES, TAPS
from reidcli.models.checkpoint import (DEFAULT_FEATURES, FEATURE_ALIASES, FEATURES, LoadedModel,
                                       feature_dims, feature_metric, load_model, model_features)
from reidcli.models.training_identities import (TrainingIdentities, overlap_record,
                                                training_identities, trial_overlaps)
from reidcli.naming import param
from reidcli.progress import track
from reidcli.provenance import make_provenance
from reidcli.store.records_io import records_digest
from reidcli.store.writer import StoreWriter, shard_rows

#: conv-map extraction above this many bytes needs ``--allow-large`` (docs/methods/pcb.md)
LARGE_MAPS_BYTES = 16 * 2**30
#: ... and so does conv-map extraction for more images than this (MSMT17-scale, docs/methods/pcb.md)
LARGE_MAPS_IMAGES = 20_000


def parse_feature_names(names: Sequence[str], kind: str) -> list[str]:
    """User names (``pcb-g``, ``pcb_g`` …) → store names valid for the model family ``kind``
    (``pcb``, ``rpp``, ``bot`` or ``dgvae``; :func:`reidcli.models.checkpoint.feature_family`)."""
    if not names:
        return list(DEFAULT_FEATURES[kind])
    out = []
    for name in names:
        canon = FEATURE_ALIASES.get(name.lower(), name.lower())
        if canon not in FEATURES[kind]:
            raise ParameterError("extraction", "features", name,
                                 f"is not a feature of a {kind} model, which gives "
                                 f"{', '.join(FEATURES[kind])}", "pick from those")
        if canon not in out:
            out.append(canon)
    return out


def parse_map_names(names: Sequence[str]) -> list[str]:
    """``conv2_x,…`` (also ``conv2``/``layer1``) → tap names in network order."""
    by_module = {v: k for k, v in TAP_MODULES.items()}
    out = []
    for name in names:
        key = name.lower()
        canon = key if key in TAPS else f"{key}_x" if f"{key}_x" in TAPS else by_module.get(key)
        if canon is None:
            raise ParameterError("extraction", "maps", name, "is not a network stage",
                                 f"use {', '.join(TAPS)}")
        if canon not in out:
            out.append(canon)
    return sorted(out, key=TAPS.index)


def maps_bytes(num_rows: int, channels: Sequence[int], map_size: tuple[int, int],
               dtype: str) -> int:
    """Bytes of the conv maps of ``num_rows`` images."""
    return int(num_rows) * int(sum(channels)) * map_size[0] * map_size[1] * \
        np.dtype(dtype).itemsize


def check_maps_size(num_images: int, channels: Sequence[int], map_size: tuple[int, int],
                    dtype: str) -> None:
    """Refuse conv maps for a dataset of ``num_images`` images (the whole dataset, not a
    shard, so sharding cannot bypass it) above :data:`LARGE_MAPS_IMAGES` images or
    :data:`LARGE_MAPS_BYTES` bytes; ``allow_large`` skips this check."""
    size = maps_bytes(num_images, channels, map_size, dtype)
    maps, allow = param("maps"), param("allow_large", True)
    if num_images > LARGE_MAPS_IMAGES:
        raise UsageError(f"{maps} for {num_images} images is MSMT17-scale (more than "
                         f"{LARGE_MAPS_IMAGES}; {size / 2**30:.1f} GiB of conv maps)",
                         f"pass {allow}, or drop {maps}")
    if size > LARGE_MAPS_BYTES:
        raise UsageError(f"{maps} would write {size / 2**30:.1f} GiB of conv maps for "
                         f"{num_images} images (limit {LARGE_MAPS_BYTES / 2**30:.0f} GiB)",
                         f"pass {allow}, fewer {maps}, or {param('maps_dtype', 'float16')}")


def _size_text(text: tuple[int, int]) -> str:
    return f"{text[0]}x{text[1]}"


@torch.no_grad()
def embed_batch(model: LoadedModel, images: torch.Tensor, maps: Sequence[str],
                map_size: tuple[int, int], flip: bool, autocast: torch.dtype | None,
                channels_last: bool, modality: torch.Tensor | None = None,
                features: Sequence[str] | None = None
                ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Features {name: [B, d]} and pooled maps {tap: [B, C, h, w]} of one batch.

    ``modality`` [B] (0 visible, 1 infrared) routes a DG-VAE's rows through its visible or
    infrared trunk (DG-VAE paper §3.1)."""
    device = model.device
    images = images.to(device, non_blocking=True)
    if channels_last:
        images = images.contiguous(memory_format=torch.channels_last)
    with autocast_context(device, autocast):
        out = model.forward(images, maps, modality=modality, features=features)
        feats = model_features(model.kind, out)
        if flip:
            flipped = model_features(model.kind, model.forward(
                torch.flip(images, dims=[3]), modality=modality, features=features))
            feats = {k: (v.float() + flipped[k].float()) / 2 for k, v in feats.items()}
        pooled = {tap: F.adaptive_avg_pool2d(out.taps[tap].float(), map_size) for tap in maps}
    return ({k: v.float().cpu().numpy() for k, v in feats.items()},
            {k: v.cpu().numpy() for k, v in pooled.items()})


def _trial_list(trials) -> str:
    return ",".join(str(t) for t in trials)


def _overlap_text(overlaps: Mapping[int, set], layout: StoreLayout) -> str:
    """``regdb trial 8 (8 of its 12 test identities) tests`` / ``regdb trials 1 (…), 3 (…)
    test``: the trials with an overlap, for a sentence that goes on "on identities …"."""
    from reidcli.models.training_identities import row_identities, test_rows, trial_numbers

    sizes = {n: len(row_identities(layout.records, test_rows(t)))
             for n, t in zip(trial_numbers(layout), layout.trials)}
    bad = [k for k in sorted(overlaps) if overlaps[k]]
    parts = [f"{k} ({len(overlaps[k])} of {'its ' if i == 0 else ''}{sizes.get(k, '?')}"
             f"{' test identities' if i == 0 else ''})" for i, k in enumerate(bad[:6])]
    many = len(bad) > 1
    return (f"{layout.dataset} trial{'s' if many else ''} {', '.join(parts)}"
            f"{f' and {len(bad) - 6} more' if len(bad) > 6 else ''} test{'' if many else 's'}")


def check_training_overlap(layout: StoreLayout, training: TrainingIdentities | None,
                           allow_overlap: bool = False) -> dict[int, set]:
    """Dataset trial → its test identities that the model trained on (empty without a
    record). An overlap raises :class:`UsageError` naming the trials and counts, unless
    ``allow_overlap``, which warns instead: such scores measure memorisation."""
    if training is None:
        return {}
    overlaps = trial_overlaps(layout, training)
    if not any(overlaps.values()):
        return overlaps
    own = training.trial if training.dataset == layout.dataset else None
    what = (f"{_overlap_text(overlaps, layout)} on identities the model {training.model} "
            f"was trained on" + ("" if own is None else f" (its training trial is {own})"))
    if not allow_overlap:
        clean = [k for k in sorted(overlaps) if not overlaps[k]]
        pick = (f"extract the model's trial ({param('trials', own)})" if own is not None
                else f"extract {param('trials', _trial_list(clean))} only" if clean
                else "extract a protocol whose test identities the model has not seen")
        raise UsageError(what, f"{pick}, or pass {param('allow_overlap', True)} to score "
                         "them anyway (the store records the overlap)")
    warnings.warn(f"{what}: their scores measure memorisation, not re-identification "
                  "(allowed; the store records the overlap)", stacklevel=2)
    return overlaps


def default_model_layout(make_layout: Callable[[str | None], StoreLayout],
                         training: TrainingIdentities | None
                         ) -> tuple[StoreLayout, str | None]:
    """The layout of a model extraction whose trials were not chosen: every trial, unless
    some test on the model's training identities; then the model's own trial (when trained
    on one trial of this dataset), else the trials that do not. ``make_layout(trials)``
    builds a layout (None: all trials). Returns the layout and a note saying what was
    picked (None when every trial was kept); when no trial is clean, every trial is
    returned for :func:`check_training_overlap` to refuse."""
    layout = make_layout(None)
    if training is None:
        return layout, None
    overlaps = trial_overlaps(layout, training)
    if not any(overlaps.values()):
        return layout, None
    clean = [k for k in sorted(overlaps) if not overlaps[k]]
    if not clean:
        return layout, None
    text = _overlap_text(overlaps, layout)
    if training.dataset == layout.dataset and training.trial in clean:
        picked = [training.trial]
        why = f"the model was trained on trial {training.trial} of {layout.dataset}"
    else:
        picked = clean
        why = f"the model was trained on identities of {layout.dataset}"
    note = (f"{why}: extracting trial{'s' if len(picked) > 1 else ''} "
            f"{_trial_list(picked)} only ({text} on its training identities; choose "
            f"with {param('trials')})")
    return make_layout(_trial_list(picked)), note


def model_layout(make_layout: Callable[[str | None], StoreLayout],
                 training: TrainingIdentities | None, trials: str | None = None,
                 loader_options: Mapping[str, Any] | None = None
                 ) -> tuple[StoreLayout, str | None]:
    """The layout of ``reid extract --model``: the trials chosen (``trials``, or a ``trial``
    loader option), else :func:`default_model_layout`; with its note (None: none)."""
    if trials is not None or "trial" in (loader_options or {}):
        return make_layout(trials), None
    return default_model_layout(make_layout, training)


def extract_model_store(layout: StoreLayout, out: str | os.PathLike,
                        model_path: str | os.PathLike | LoadedModel, *,
                        features: Sequence[str] = (),
                        maps: Sequence[str] = (), map_size: tuple[int, int] = (24, 8),
                        maps_dtype: str = "float16", flip: bool = False, batch_size: int = 64,
                        shard: tuple[int, int] | None = None, device: str = "auto",
                        amp: str = "off", allow_large: bool = False, workers: int | None = None,
                        force: bool = False, progress: bool = True,
                        command: list[str] | None = None,
                        inputs: Sequence[str | os.PathLike] = (),
                        provenance_extra: Mapping[str, Any] | None = None,
                        allow_overlap: bool = False) -> Path:
    """Run the model of ``model_path`` over the rows of ``layout`` (or shard ``i/n`` of them)
    and write ``/features/<name>`` [N, d], ``/convmaps/<tap>`` [N, C, h, w] and the protocol.
    The provenance hashes the model file and ``inputs`` (e.g. the image folder), plus the
    entries of ``provenance_extra`` (e.g. the rank of a distributed extraction,
    :mod:`reidcli.features.distributed`). ``model_path`` may be a :class:`LoadedModel`
    (moved to ``device``). A trial whose test identities the model trained on is refused
    unless ``allow_overlap`` (:func:`check_training_overlap`); the provenance's
    ``training_identities`` records the model's training identities and the overlap
    (:func:`reidcli.models.training_identities.overlap_record`).
    """
    dev = resolve_device(device, owner="extraction")
    if isinstance(model_path, LoadedModel):
        model = model_path
        model.module.to(dev)
        model.device = dev
    else:
        model = load_model(model_path, dev)
    training = training_identities(model.meta, str(model.path))
    overlaps = check_training_overlap(layout, training, allow_overlap)
    names = parse_feature_names(features, model.family)
    taps = parse_map_names(maps)
    if taps and model.kind == "dgvae":
        raise UsageError(f"a DG-VAE model has no conv-map taps ({', '.join(taps)} asked)",
                         f"drop {param('maps')}")
    if len(layout.records) == 0:
        raise UsageError("the dataset has no images",
                         f"check {param('root')} and the dataset options")
    rows = shard_rows(len(layout.records), shard) if shard else slice(0, len(layout.records))
    records = layout.records.iloc[rows].reset_index(drop=True)
    channels = [model.module.backbone.tap_channels[t] for t in taps]
    if taps and not allow_large:
        check_maps_size(len(layout.records), channels, map_size, maps_dtype)
    dims = feature_dims(model.spec)
    autocast = amp_dtype(amp, dev, owner="extraction")
    # channels_last on every device: 1.4-1.8x on CPU too (benchmarks/extract_speed.py)
    channels_last = use_channels_last("on", dev)
    model.module.to(memory_format=torch.channels_last)
    dataset = ImageRecordDataset(records, model.transform, return_index=False)
    loader = make_loader(dataset, batch_size=batch_size, workers=workers, device=dev)
    input_size = _size_text(model.input_size)
    extra = dict(provenance_extra or {})
    if training is not None:
        extra["training_identities"] = overlap_record(training, overlaps, allow_overlap)
    prov = make_provenance(command=command, inputs=[model.path, *inputs], features=names,
                           maps=taps, protocol=layout.protocol, model=model.spec.as_dict(),
                           **extra)
    attrs = {"default_feature": names[0], "source_checkpoint": str(model.path),
             "model_kind": model.kind, "input_size": input_size, "flip": bool(flip)}
    if layout.options.get("train_cams"):
        attrs["train_cams"] = ",".join(map(str, layout.options["train_cams"]))
    source = {"num_rows": len(layout.records),
              "records_sha256": records_digest(layout.records)} if shard else None
    with StoreWriter(out, records, dataset=layout.dataset, provenance=prov, force=force,
                     shard=shard, shard_source=source, attrs=attrs) as writer:
        for name in names:
            dim, parts = dims[name]
            writer.add_feature(name, dim, metric=feature_metric(model.spec, name), attrs={
                "n_parts": parts, "part_dim": dim // parts,
                "feat_norm": "parts" if parts > 1 else "global", "flip": bool(flip)})
        # the trunk's own module of each tap (OSNet's are conv2.1 … conv5, not layer1 … layer4)
        tap_modules = getattr(getattr(model.module, "backbone", None), "tap_modules", TAP_MODULES)
        for tap, c in zip(taps, channels):
            writer.add_convmap(tap, (c, *map_size), dtype=maps_dtype, attrs={
                "layer": tap_modules[tap], "pooled_size": _size_text(map_size),
                "input_size": input_size, "pooling": "avg",
                "source_checkpoint": str(model.path)})
        for batch in track(loader, total=len(loader), description="extracting",
                           unit="batches", enabled=progress):
            feats, pooled = embed_batch(model, batch["image"], taps, map_size, flip, autocast,
                                        channels_last, modality=batch["modality"],
                                        features=names)
            for name in names:
                writer.append_feature(name, feats[name])
            for tap in taps:
                writer.append_convmap(tap, pooled[tap])
        writer.write_protocol(layout.protocol, layout.trials, eval_rule=layout.eval_rule,
                              options=layout.options)
    return Path(out)


__all__ = ["extract_model_store", "embed_batch", "check_training_overlap",
           "default_model_layout", "model_layout", "parse_feature_names", "parse_map_names",
           "maps_bytes", "check_maps_size", "LARGE_MAPS_BYTES", "LARGE_MAPS_IMAGES"]
