"""`reid eval` — CMC/mAP/mINP tables (filled in by the evaluation release)."""
from __future__ import annotations

import typer

from reidcli.cli._stub import PASS_THROUGH, not_yet

HELP = "Evaluate a store (optionally through a fitted model): CMC, mAP, mINP."
CONTEXT = PASS_THROUGH


def evaluate(ctx: typer.Context) -> None:
    not_yet("eval")
