"""Join shards written with ``--shard i/n`` into one store (``reid store merge``)."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd

from reidcli.errors import StoreError, UsageError
from reidcli.naming import param
from reidcli.progress import track
from reidcli.provenance import make_provenance
from reidcli.store.reader import FeatureStore, open_store
from reidcli.store.records_io import records_digest
from reidcli.store.writer import StoreWriter

_BLOCK = 8192


def _shard_meta(store: FeatureStore) -> tuple[int, int, dict]:
    attrs = store.attrs
    if "shard_index" not in attrs:
        raise StoreError(f"{store.path} is not a shard (no shard_index attribute)",
                         f"merge only stores written as shards ({param('shard', 'i/n')})")
    source = json.loads(attrs.get("shard_source", "{}") or "{}")
    return int(attrs["shard_index"]), int(attrs["shard_count"]), source


def _layout(store: FeatureStore) -> dict:
    return {
        "dataset": store.dataset,
        "features": {n: store.feature_info(n) for n in store.feature_names},
        "convmaps": {l: (store.convmap_shape(l), str(store.h5["convmaps"][l].dtype))
                     for l in store.convmap_layers},
        "columns": list(store.records.columns),
    }


#: root attributes of a shard that describe the extraction, not the shard
_CARRIED_ROOT_ATTRS = ("default_feature", "source_checkpoint", "model_kind", "input_size",
                       "flip", "train_cams")


def _carried_attrs(store: FeatureStore) -> dict:
    return {k: store.h5.attrs[k] for k in _CARRIED_ROOT_ATTRS if k in store.h5.attrs}


#: provenance entries that describe the extraction (make_provenance extras of reid extract)
_CARRIED_PROVENANCE = ("features", "maps", "protocol", "model", "seed", "fitted")


def _text(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    if hasattr(value, "tolist"):
        return value.tolist()
    return value


def _extraction(store: FeatureStore) -> list[tuple[str, Any]]:
    """``(attribute, value)`` pairs that every shard of one extraction shares: the dataset
    and the record table the shards were cut from, the model (file digest, kind, spec) and the
    extraction settings (flip, input size, training cameras, features, maps and their
    attributes, protocol, seed)."""
    attrs = store.h5.attrs
    prov = store.provenance
    source = json.loads(_text(attrs.get("shard_source", "{}")) or "{}")
    inputs = [i for i in prov.get("inputs", []) if isinstance(i, dict)]
    checkpoint = _text(attrs.get("source_checkpoint"))
    digest = _checkpoint_digest(inputs, checkpoint)
    pairs: list[tuple[str, Any]] = [
        ("dataset", store.dataset),
        ("source record table (rows)", source.get("num_rows")),
        ("source record table (records_sha256)", source.get("records_sha256")),
        ("model file (sha256)" if digest else "model file", digest or checkpoint),
    ]
    pairs += [(key, _text(attrs[key]) if key in attrs else None)
              for key in _CARRIED_ROOT_ATTRS if key != "source_checkpoint"]
    pairs += [(f"provenance {key}", prov.get(key)) for key in _CARRIED_PROVENANCE]
    pairs += _dataset_attr_pairs(store, with_checkpoint=not digest)
    pairs.append(("input digests", [i.get("sha256") or i.get("listing_sha256")
                                    for i in inputs[1:]] if digest else None))
    return pairs


def _checkpoint_digest(inputs: Sequence[dict], checkpoint: str | None) -> str | None:
    """The sha256 the provenance ``inputs`` record for the model file ``checkpoint``."""
    return next((i.get("sha256") for i in inputs
                 if checkpoint is not None and i.get("path") == checkpoint), None)


def _dataset_attr_pairs(store: FeatureStore, with_checkpoint: bool) -> list[tuple[str, Any]]:
    """The extra attributes of every feature and conv-map layer (a layer's
    ``source_checkpoint`` only ``with_checkpoint``: when no digest stands for the model)."""
    pairs = [(f"/features/{n} attribute {k}", _text(v))
             for n in store.feature_names
             for k, v in sorted(_extra_attrs(store.h5["features"][n]).items())]
    pairs += [(f"/convmaps/{l} attribute {k}", _text(v))
              for l in store.convmap_layers
              for k, v in sorted(_extra_attrs(store.h5["convmaps"][l]).items())
              if k != "source_checkpoint" or with_checkpoint]
    return pairs


def _shown(value: Any) -> str:
    if isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef"
                                                           for c in value):
        return value[:12] + "…"                    # a sha256: its head tells them apart
    text = repr(value)
    return text if len(text) <= 60 else text[:59] + "…"


def check_same_extraction(stores: Sequence[FeatureStore]) -> None:
    """StoreError naming the first shard (and attribute) that differs from the first shard in
    dataset, source record table, model or extraction settings (:func:`_extraction`)."""
    reference = dict(_extraction(stores[0]))
    for store in stores[1:]:
        for key, value in _extraction(store):
            if key not in reference:
                raise StoreError(f"shard {store.path} has {key} {_shown(value)}, shard "
                                 f"{stores[0].path} has none",
                                 "merge shards of one extraction only (same model, settings "
                                 "and dataset)")
            if value != reference[key]:
                cut = " (another dataset, root or dataset options)" \
                    if key.startswith("source record table") else ""
                raise StoreError(f"shard {store.path} differs from shard {stores[0].path} in "
                                 f"{key}: {_shown(value)} vs {_shown(reference[key])}{cut}",
                                 "merge shards of one extraction only (same model, settings "
                                 "and dataset)")
        if len(dict(_extraction(store))) != len(reference):
            missing = sorted(set(reference) - set(dict(_extraction(store))))
            raise StoreError(f"shard {store.path} lacks {missing[0]} that shard "
                             f"{stores[0].path} has",
                             "merge shards of one extraction only (same model, settings "
                             "and dataset)")


def _extra_attrs(ds) -> dict:
    """Dataset attributes other than the ones StoreWriter sets itself."""
    return {k: v for k, v in ds.attrs.items() if k not in ("metric", "normalized")}


def merge_shards(out: str | os.PathLike, shards: Sequence[str | os.PathLike], *,
                 force: bool = False, command: list[str] | None = None,
                 provenance_extra: Mapping[str, Any] | None = None,
                 progress: bool | None = None) -> Path:
    """Concatenate shards 0..n-1 (given in any order) into ``out``.

    Checks that the shards come from one extraction (:func:`check_same_extraction`: same
    dataset and source record table, model and settings), that every shard of the same ``n``
    is present once, that they share features, conv-map layers and record columns, and (when
    recorded) that the joined record table has the row count and sha256 of the table the
    shards were cut from. The protocol of shard 0 is
    kept (shards of one extraction share it). ``provenance_extra`` entries are added to the
    merged store's provenance (e.g. the ranks of a distributed extraction); ``progress``
    False hides the progress line (None: :mod:`reidcli.progress`'s default).
    """
    if not shards:
        raise UsageError("no shards given", "pass the shard stores written by a sharded "
                         "extraction")
    stores = [open_store(p) for p in shards]
    try:
        metas = [_shard_meta(s) for s in stores]
        check_same_extraction(stores)
        order = _shard_order(metas)
        stores = [stores[k] for k in order]
        layout = _check_layouts(stores)
        records = pd.concat([s.records for s in stores], ignore_index=True)
        _check_source_table(records, metas[order[0]][2])
        prov = make_provenance(command=command, inputs=[s.path for s in stores],
                               merged_from=[s.provenance for s in stores],
                               **dict(provenance_extra or {}))
        _write_merged(out, stores, layout, records, prov, force=force, progress=progress)
        return Path(out)
    finally:
        for s in stores:
            s.close()


def _shard_order(metas: Sequence[tuple[int, int, dict]]) -> list[int]:
    """Positions of the shards sorted by shard index; StoreError unless they agree on the
    shard count n and hold each index 0..n-1 exactly once."""
    counts = {n for _, n, _ in metas}
    if len(counts) != 1:
        raise StoreError(f"shards disagree on the shard count ({sorted(counts)})",
                         "merge shards of one extraction only")
    n = counts.pop()
    order = sorted(range(len(metas)), key=lambda k: metas[k][0])
    indices = [metas[k][0] for k in order]
    if indices != list(range(n)):
        missing = sorted(set(range(n)) - set(indices))
        dup = sorted({i for i in indices if indices.count(i) > 1})
        raise StoreError(f"shards {'missing: ' + str(missing) if missing else ''}"
                         f"{' duplicated: ' + str(dup) if dup else ''} of {n}",
                         "pass each shard 0..n-1 exactly once")
    return order


def _check_layouts(stores: Sequence[FeatureStore]) -> dict:
    """The layout (:func:`_layout`) of the first shard; StoreError when another differs."""
    layout = _layout(stores[0])
    for s in stores[1:]:
        if _layout(s) != layout:
            raise StoreError(f"shard {s.path} has other features, conv maps or record "
                             f"columns than {stores[0].path}",
                             "merge shards written by the same command")
    return layout


def _check_source_table(records: pd.DataFrame, source: Mapping[str, Any]) -> None:
    """StoreError when the joined ``records`` lack the row count or sha256 recorded for the
    table the shards were cut from (``shard_source``)."""
    if source.get("num_rows") is not None and int(source["num_rows"]) != len(records):
        raise StoreError(f"merged shards hold {len(records)} rows, the source had "
                         f"{source['num_rows']}", "a shard is incomplete; re-run it")
    if source.get("records_sha256") and source["records_sha256"] != records_digest(records):
        raise StoreError("merged records differ from the source record table",
                         "shards come from different datasets or options")


def _write_merged(out: str | os.PathLike, stores: Sequence[FeatureStore], layout: dict,
                  records: pd.DataFrame, prov: dict, *, force: bool,
                  progress: bool | None) -> None:
    """Write the merged store: the datasets of the first shard, every shard's rows in order,
    and the first shard's protocol."""
    first = stores[0]
    with StoreWriter(out, records, dataset=layout["dataset"] or "", provenance=prov,
                     force=force, attrs=_carried_attrs(first),
                     inputs=[s.path for s in stores]) as w:
        _create_datasets(w, first, layout)
        for s in track(stores, description="merging shards", unit="shards",
                       enabled=progress):
            _append_shard(w, s, layout)
        proto = first.read_protocol()
        if proto is not None:
            w.write_protocol(proto.name, proto.trials, eval_rule=proto.eval_rule,
                             options=proto.attrs.get("options", {}))


def _create_datasets(w: StoreWriter, first: FeatureStore, layout: dict) -> None:
    """Create every feature [N, D] and conv-map layer [N, C, H, W] of ``layout`` in ``w``,
    with the first shard's extra attributes."""
    for name, info in layout["features"].items():
        w.add_feature(name, info["dim"], metric=info["metric"],
                      normalized=info["normalized"],
                      attrs=_extra_attrs(first.h5["features"][name]))
    for layer, (shape, dtype) in layout["convmaps"].items():
        w.add_convmap(layer, shape, dtype=dtype,
                      attrs=_extra_attrs(first.h5["convmaps"][layer]))


def _append_shard(w: StoreWriter, s: FeatureStore, layout: dict) -> None:
    """Append the rows of shard ``s`` to every feature and conv-map layer, block by block."""
    for name in layout["features"]:
        for start in range(0, s.num_rows, _BLOCK):
            w.append_feature(name, s.features(name, slice(start, start + _BLOCK)))
    for layer in layout["convmaps"]:
        for start in range(0, s.num_rows, _BLOCK // 8):
            w.append_convmap(layer, s.convmaps(layer, slice(start, start + _BLOCK // 8)))


__all__ = ["merge_shards"]
