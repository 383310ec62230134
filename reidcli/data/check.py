"""Dataset inspection behind ``reid data list | info | check``."""
from __future__ import annotations

from typing import Any

from reidcli.data.datasets.market_folder import split_summary
from reidcli.data.records import DatasetSplit
from reidcli.data.registry import DatasetInfo, available, info, load
from reidcli.errors import DatasetError


def registry_rows() -> list[dict[str, Any]]:
    """One row per registered dataset: name, aliases, expected counts, protocol, licence."""
    rows = []
    for name in available():
        i = info(name)
        counts = "; ".join(f"{split} {c[0]:,}/{c[1]:,}" for split, c in i.counts.items())
        rows.append({"name": name, "aliases": ", ".join(i.aliases), "counts": counts or "—",
                     "cams": i.cameras or "—",
                     "protocol": i.protocol, "license": i.license})
    return rows


def expected_counts(expected: DatasetInfo, options: dict[str, Any]) -> dict[str, Any]:
    """Documented ``(images, ids)`` per split for the loader ``options`` the user gave
    (defaults for the rest): the default counts, replaced by every matching
    ``count_variants`` pair; ``{}`` (nothing expected) when an option of ``count_options``
    differs from its default and no pair names it (docs/datasets.md)."""
    values = {**expected.options, **options}
    changed = {k for k in expected.count_options
               if k in options and expected.options.get(k) != options[k]}
    counts = dict(expected.counts)
    covered: set[str] = set()
    for match, override in expected.count_variants:
        if all(values.get(k) == v for k, v in match.items()):
            counts.update(override)
            covered |= set(match)
    return {} if changed - covered else counts


def split_table(split: DatasetSplit, expected: DatasetInfo | None = None,
                options: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Per split: images / ids / cams, and the expected (images, ids) where documented for
    ``options`` (:func:`expected_counts`)."""
    counts = expected_counts(expected, dict(options or {})) if expected else {}
    rows = []
    for name in ("train", "val", "query", "gallery"):
        frame = getattr(split, name)
        if len(frame) == 0 and name == "val":
            continue
        row = {"split": name, **split_summary(frame)}
        exp = counts.get(name)
        row["expected"] = f"{exp[0]:,} / {exp[1]:,}" if exp else "—"
        row["matches"] = None if not exp else (row["images"], row["ids"]) == tuple(exp)
        rows.append(row)
    return rows


def open_images(split: DatasetSplit, progress: bool = False) -> int:
    """Decode every image of ``split`` (each path once); returns how many. The first file
    that is empty or cannot be decoded is a one-line :class:`DatasetError` naming it."""
    from reidcli.data.image_dataset import ImageReadError, load_rgb
    from reidcli.progress import track

    paths = sorted(set(split.all_records()["path"]))
    for path in track(paths, description="opening images", enabled=progress):
        try:
            load_rgb(path)
        except ImageReadError as exc:
            raise DatasetError(f"{split.name}: {exc.what}", "replace it from the dataset "
                               "release, then check again") from None
    return len(paths)


def check_dataset(dataset: str, /, root=None, trial: int = 0, **options: Any
                  ) -> tuple[DatasetSplit, list[dict[str, Any]]]:
    """Load (parse) a dataset and tabulate its splits; raises DatasetError on a broken layout."""
    split = load(dataset, root, trial=trial, **options)
    return split, split_table(split, info(dataset), options)
