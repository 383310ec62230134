"""Dataset inspection behind ``reid data list | info | check``."""
from __future__ import annotations

from typing import Any

from reidcli.data.datasets.market_folder import split_summary
from reidcli.data.records import DatasetSplit
from reidcli.data.registry import DatasetInfo, available, info, load


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


def split_table(split: DatasetSplit, expected: DatasetInfo | None = None
                ) -> list[dict[str, Any]]:
    """Per split: images / ids / cams, and the expected (images, ids) where documented."""
    rows = []
    for name in ("train", "val", "query", "gallery"):
        frame = getattr(split, name)
        if len(frame) == 0 and name == "val":
            continue
        row = {"split": name, **split_summary(frame)}
        exp = (expected.counts.get(name) if expected else None)
        row["expected"] = f"{exp[0]:,} / {exp[1]:,}" if exp else "—"
        row["matches"] = None if not exp else (row["images"], row["ids"]) == tuple(exp)
        rows.append(row)
    return rows


def check_dataset(dataset: str, /, root=None, trial: int = 0, **options: Any
                  ) -> tuple[DatasetSplit, list[dict[str, Any]]]:
    """Load (parse) a dataset and tabulate its splits; raises DatasetError on a broken layout."""
    split = load(dataset, root, trial=trial, **options)
    return split, split_table(split, info(dataset))
