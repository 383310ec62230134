"""`reid demo` — the synthetic datasets through every stage that exists (thin CLI).

stdout: each stage's command line (preceded by a ``#`` comment, followed by its time),
then the results table (one block of rows per data set, named in its ``data`` column), notes
(one per data set, then what the numbers show) and the list of files written — plain lines,
readable in a log (``reid demo > log.txt``); the commands' own messages and progress go to
stderr.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

HELP = "Run the pipeline end to end on synthetic datasets and print a results table."

#: width of the results table when stdout is not a terminal (no wrapping in a log)
LOG_WIDTH = 200


def demo(
    preset: str = typer.Option("default", "--preset", help="Synthetic preset of the main "
                               "rows: tiny (seconds) or default (under a minute on 2 CPU "
                               "cores); the C-DPCF rows use the cdpcf preset's two-camera "
                               "domain either way."),
    root: Optional[Path] = typer.Option(None, "--root", help="Data root for the synthetic "
                                        "datasets (default $REIDCLI_DATA or ./data)."),
    out: Path = typer.Option(Path("reid-demo"), "--out", help="Folder for the demo's stores "
                             "and results (its previous demo outputs are replaced)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the synthetic data."),
) -> None:
    """Run every stage as the printed `reid` command (paste them to redo it); print the
    scores and where the outputs went."""
    from rich.console import Console
    from rich.table import Table

    from reidcli.cli.context import set_flag_names
    from reidcli.demo import run_demo
    from reidcli.progress import ENABLED

    set_flag_names({"workdir": "--out"})

    echo = lambda line: typer.echo(line)
    echo(f"# reid demo: synthetic presets '{preset}' and 'cdpcf' (seed {seed}); each command "
         "below ran as printed — paste them in this order into a shell to redo the demo")
    result = run_demo(root=root, workdir=out, preset=preset, seed=seed, progress=ENABLED,
                      echo=echo)
    total = sum(s.seconds for s in result.steps)
    echo(f"# {len(result.steps)} commands, {total:.1f} s")
    console = Console()
    if not console.is_terminal:
        console = Console(width=LOG_WIDTH)
    table = Table(title="reid demo — test scores, % (data: see the notes below)")
    cols = ("method", "data", "rank-1", "rank-5", "rank-10", "mAP", "mINP", "queries")
    for col in cols:
        table.add_column(col, justify="left" if col in ("method", "data") else "right",
                         no_wrap=True)
    for i, row in enumerate(result.results):
        if i and row["data"] != result.results[i - 1]["data"]:
            table.add_section()                     # one block of rows per data set
        table.add_row(row["method"], row["data"], *(f"{100 * row[c]:.1f}" for c in cols[2:-1]),
                      str(row["queries"]))
    console.print(table)
    width = max(len(row["method"]) for row in result.results)
    echo("rows:")
    shown = set()
    for row in result.results:                   # a method on two data sets: said once
        if row["method"] not in shown:
            echo(f"  {row['method']:<{width}}  {row['shows']}")
        shown.add(row["method"])
    for note in result.notes:
        echo(f"note: {note}")
    echo("outputs:")
    for path, what in result.outputs:
        echo(f"  {path} — {what}")
