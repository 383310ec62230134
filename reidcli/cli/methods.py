"""`reid methods` — every registered method with its stage, paper and default parameters."""
from __future__ import annotations

import json
from typing import Optional

import typer

HELP = "List every registered method: stage, paper and default parameters."


def methods(
    stage: Optional[str] = typer.Option(None, "--stage", help="Only this stage (train, "
                                        "fit-pooling, adapt, train-net, fitted)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
) -> None:
    """List the method registry."""
    from rich.console import Console
    from rich.table import Table

    from reidcli import registry
    from reidcli.cli.flags import parameter_flag

    found = registry.methods(stage)
    if as_json:
        typer.echo(json.dumps([{"name": m.name, "stage": m.stage, "paper": m.paper,
                                "summary": m.summary, "module": m.module,
                                "parameters": {p.name: p.default for p in m.parameters},
                                "flags": {p.name: parameter_flag(m.name, p.name)
                                          for p in m.parameters if p.cli}}
                               for m in found], indent=2, default=str))
        return
    table = Table(title=f"{len(found)} registered methods", show_lines=False)
    for column in ("method", "stage", "paper", "defaults"):
        table.add_column(column, overflow="fold")
    for m in found:
        defaults = ", ".join(f"{p.name}={p.default!r}" for p in m.parameters)
        table.add_row(m.name, m.stage, m.paper, defaults or "—")
    Console(width=max(100, Console().width)).print(table)
