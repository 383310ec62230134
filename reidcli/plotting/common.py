"""Shared plotting helpers: the Agg backend, output formats, atomic saving, titles and the
names of what made a store (network, feature, adaptation) read from its provenance."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Sequence

from reidcli.errors import UsageError
from reidcli.io import atomic_output
from reidcli.naming import param

FORMATS = ("png", "pdf", "svg")
#: resolution of a saved PNG (print quality); PDF and SVG are written as vectors (text and
#: lines stay sharp at any size; only images such as rank-list thumbnails are raster)
PNG_DPI = 300


def pyplot():
    """matplotlib.pyplot on the Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def check_figure_path(out: str | os.PathLike, option: str = "out") -> Path:
    """The output path, whose suffix must name a format matplotlib writes (``option``: the
    name of the parameter that gave it, for the error message)."""
    path = Path(out)
    fmt = path.suffix.lower().lstrip(".")
    if path.is_dir():
        example = path / f"figure.{fmt if fmt in FORMATS else 'png'}"
        raise UsageError(f"{param(option, path)} is a folder",
                         f"give a file in it, e.g. {param(option, example)}")
    if fmt not in FORMATS:
        raise UsageError(f"{param(option, path)}: unknown figure format {path.suffix or '(none)'}",
                         f"end the file name with .{', .'.join(FORMATS)}")
    return path


def save_figure(fig, out: str | os.PathLike, *, force: bool = False,
                metadata: dict[str, Any] | None = None, option: str = "out",
                inputs: Sequence[str | os.PathLike] = (), dpi: int = PNG_DPI) -> Path:
    """Write ``fig`` atomically (temp file + rename) in the format of ``out``'s suffix, a PNG
    at ``dpi`` dots per inch; the output may not be one of ``inputs`` (the stores/reports
    plotted)."""
    path = check_figure_path(out, option)
    fmt = path.suffix.lower().lstrip(".")
    meta = {"Software": "reidcli"}
    if fmt == "png" and metadata:
        meta.update({k: str(v) for k, v in metadata.items()})
    with atomic_output(path, force=force, option=param(option), inputs=inputs) as tmp:
        fig.savefig(tmp, format=fmt, dpi=dpi, bbox_inches="tight",
                    metadata=meta if fmt == "png" else None)
    pyplot().close(fig)
    return path


def finish_figure(fig, out: str | os.PathLike | None, *, force: bool = False,
                  metadata: dict[str, Any] | None = None,
                  inputs: Sequence[str | os.PathLike] = ()) -> Path | None:
    """Save ``fig`` to ``out`` (see :func:`save_figure`) or, without ``out``, release it from
    pyplot's figure manager (the Figure object stays usable). Returns the written path."""
    if out is not None:
        return save_figure(fig, out, force=force, metadata=metadata, inputs=inputs)
    pyplot().close(fig)
    return None


def short_command(provenance: dict | None, width: int = 90) -> str:
    """The command that made an input, shortened (kept for callers; figures no longer
    print it)."""
    cmd = (provenance or {}).get("command") or ""
    return cmd if len(cmd) <= width else cmd[:width - 1] + "…"


def store_name(path: str | os.PathLike, dataset: str | None = None) -> str:
    """How a figure names a store: its dataset name and file stem, ``market1501 (bot_tiny)``,
    or the stem alone when the store names no dataset or the stem already says it."""
    stem = Path(path).stem
    if not dataset or str(dataset) == stem:
        return stem
    return f"{dataset} ({stem})"


#: how the papers write the networks (``kind`` of the model spec in a store's provenance)
NETWORK_NAMES = {"bot": "BoT", "pcb": "PCB"}


def vectors_label(provenance: dict | None, feature: str | None) -> str | None:
    """What made a store's vectors: network + backbone + ``feature`` (the network's spec is
    the provenance's ``model``), else ``feature``, else the conv maps the store holds; None
    when neither says. An adapted store's input store (``source_provenance``) counts too."""
    prov = provenance if isinstance(provenance, dict) else {}
    source = prov.get("source_provenance")
    source = source if isinstance(source, dict) else {}
    maps = prov.get("maps") or source.get("maps") or []
    what = feature or (",".join(map(str, maps)) if isinstance(maps, list) else None)
    network = prov.get("model") or source.get("model")
    if isinstance(network, dict) and network.get("kind"):
        kind = str(network["kind"])
        name = NETWORK_NAMES.get(kind, kind) + ("+RPP" if kind == "pcb" and network.get("rpp")
                                                else "")
        what = " ".join(str(p) for p in (name, network.get("backbone"), what) if p)
    return what or None


def adapt_label(provenance: dict | None) -> str | None:
    """The test-time adaptation that made a store (its provenance's ``adapt`` entry, the
    parameters of ``reid adapt``): ``camera Norm``, ``DART3 LITE``, ``TENT`` …; None when
    the store was not adapted."""
    adapt = (provenance if isinstance(provenance, dict) else {}).get("adapt")
    if not isinstance(adapt, dict) or not adapt.get("method"):
        return None
    if adapt.get("label"):                   # recorded by reid adapt from the registration
        return str(adapt["label"])
    from reidcli.adapt.config import method_label   # older stores: ask the registration
    return method_label(str(adapt["method"]), adapt)


__all__ = ["pyplot", "save_figure", "store_name", "PNG_DPI", "finish_figure",
           "check_figure_path", "short_command",
           "vectors_label", "adapt_label", "NETWORK_NAMES", "FORMATS"]
