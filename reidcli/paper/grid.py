"""The ours-beside-the-paper table the DG-VAE and DMG-Net comparisons print: one row per
result of ours (mean ± std when several trials or stores were averaged), the paper's rows
under it."""
from __future__ import annotations

from typing import Sequence

from rich.table import Table


def cell(mean: float | None, std: float | None = None) -> str:
    """``"12.34"``, ``"12.34 ± 0.56"`` or ``"-"`` (a value the paper or we lack)."""
    if mean is None:
        return "-"
    return f"{mean:.2f}" if std is None else f"{mean:.2f} ± {std:.2f}"


def averaged_over(result: dict) -> str:
    """"10 stores" (an across-store aggregate) or "10 trials"."""
    if result.get("stores"):
        return f"{result['stores']} stores"
    return f"{result['trials']} trial{'s' if result['trials'] != 1 else ''}"


def result_grid(title: str, key_column: str, metrics: Sequence[tuple]) -> Table:
    """Columns label, ``key_column`` (method / variant), source, averaged over, then the
    display name (third item) of each metric of ``metrics``."""
    grid = Table(title=title)
    for col in ("label", key_column, "source", "averaged over", *(m[2] for m in metrics)):
        grid.add_column(col, justify="left" if col in ("label", key_column, "source")
                        else "right")
    return grid


def add_our_row(grid: Table, label: str, key: str | None, result: dict,
                metrics: Sequence[tuple]) -> None:
    """Our row: ``metrics`` items are (result key, result std key, …); a single run shows no
    std."""
    spread = result["trials"] > 1 or result["stores"] > 1
    grid.add_row(label, key or "-", "ours", averaged_over(result),
                 *(cell(result[k], result[s] if spread else None) for k, s, *_ in metrics))


__all__ = ["cell", "averaged_over", "result_grid", "add_our_row"]
