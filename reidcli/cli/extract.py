"""`reid extract` — images → feature store (thin CLI over :mod:`reidcli.features.extract`).

This release extracts hand-crafted descriptors (``--features``) and hand-crafted spatial
maps (``--maps``); CNN embeddings and conv maps (``--model``) come with the training release.
"""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

HELP = "Extract embeddings and conv maps from images into a feature store."
CONTEXT: dict = {}


def _names(values: Optional[List[str]]) -> list[str]:
    return [v.strip() for item in values or [] for v in item.split(",") if v.strip()]


def extract(
    dataset: str = typer.Option(..., "--dataset", help="Dataset name or alias (reid data "
                                "list)."),
    out: Path = typer.Option(..., "--out", help="Feature store to write (.h5)."),
    root: Optional[Path] = typer.Option(None, "--root", help="Data root (default "
                                        "$REIDCLI_DATA or ./data)."),
    features: Optional[List[str]] = typer.Option(None, "--features", help="Hand-crafted "
                                                 "descriptors: hsv-stripes, hist-lbp "
                                                 "(2580-d), lomo (26960-d)."),
    maps: Optional[List[str]] = typer.Option(None, "--maps", help="Spatial maps to store as "
                                             "/convmaps, e.g. color-grid."),
    maps_dtype: str = typer.Option("float16", "--maps-dtype", help="float16 | float32."),
    model: Optional[Path] = typer.Option(None, "--model", help="Trained network (RUN_DIR or "
                                         "checkpoint) — not in this release."),
    option: Optional[List[str]] = typer.Option(None, "--option", help="Dataset loader option "
                                               "key=value (repeatable), e.g. protocol=..."),
    trials: str = typer.Option("all", "--trials", help="Protocol trials to lay out: all or "
                               "e.g. 0,3."),
    batch_size: int = typer.Option(256, "--batch-size", help="Images per batch."),
    force: bool = typer.Option(False, "--force", help="Overwrite --out."),
) -> None:
    """Describe every image of a dataset's protocol trials and write a feature store."""
    from reidcli.cli.context import invoked_command
    from reidcli.cli.data import parse_key_values
    from reidcli.errors import NotImplementedYetError, UsageError
    from reidcli.features.extract import extract_handcrafted_store
    from reidcli.features.layout import dataset_layout
    from reidcli.io import check_output
    from reidcli.progress import ENABLED

    if model is not None:
        raise NotImplementedYetError("`reid extract --model` (CNN embeddings and conv maps) is "
                                     "not implemented yet in this release",
                                     "use --features/--maps for hand-crafted ones")
    if maps_dtype not in ("float16", "float32"):
        raise UsageError(f"--maps-dtype {maps_dtype!r} is not float16 or float32",
                         "pass --maps-dtype float16")
    if batch_size < 1:
        raise UsageError(f"--batch-size {batch_size} must be ≥ 1", "e.g. --batch-size 256")
    names, map_names = _names(features), _names(maps)
    if not names and not map_names:
        names = ["hsv-stripes"]
    check_output(out, force, "--out")
    layout = dataset_layout(dataset, root, trials=trials, progress=ENABLED,
                            **parse_key_values(option, "--option"))
    path = extract_handcrafted_store(layout, out, names, maps=map_names, maps_dtype=maps_dtype,
                                     batch_size=batch_size, force=force, progress=ENABLED,
                                     command=invoked_command())
    typer.echo(f"wrote {path}: {len(layout.records)} images, {len(layout.trials)} trial(s)"
               + (f", features {', '.join(names)}" if names else "")
               + (f", maps {', '.join(map_names)}" if map_names else ""), err=True)
