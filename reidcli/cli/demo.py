"""`reid demo` — the synthetic dataset through every stage that exists (thin CLI)."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

HELP = "Run the pipeline end to end on the synthetic dataset and print a results table."


def demo(
    preset: str = typer.Option("default", "--preset", help="Synthetic preset: tiny (seconds) "
                               "or default (about a minute)."),
    root: Optional[Path] = typer.Option(None, "--root", help="Data root for the synthetic "
                                        "dataset (default $REIDCLI_DATA or ./data)."),
    out: Path = typer.Option(Path("reid-demo"), "--out", help="Folder for the demo's stores "
                             "and results (its previous demo outputs are replaced)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the synthetic data."),
) -> None:
    """Synthesise data, describe it, store it, evaluate it; print what ran and the scores."""
    from rich.console import Console
    from rich.table import Table

    from reidcli.demo import run_demo

    result = run_demo(root=root, workdir=out, preset=preset, seed=seed)
    console = Console()
    steps = Table(title="reid demo — stages run")
    for col in ("stage", "equivalent command / output", "seconds", "notes"):
        steps.add_column(col, overflow="fold")
    for s in result.steps:
        steps.add_row(s.stage, s.command if s.output in s.command else
                      f"{s.command} → {s.output}", f"{s.seconds:.1f}", s.summary)
    console.print(steps)
    table = Table(title=f"synthetic '{preset}' — test split, Market-1501 rule (E1)")
    cols = ("method", "rank-1", "rank-5", "rank-10", "mAP", "mINP", "queries")
    for col in cols:
        table.add_column(col, justify="left" if col == "method" else "right")
    for row in result.results:
        table.add_row(row["method"], *(f"{100 * row[c]:.1f}" for c in cols[1:-1]),
                      str(row["queries"]))
    console.print(table)
