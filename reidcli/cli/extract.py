"""`reid extract` — images → feature store (filled in by the training/extraction release)."""
from __future__ import annotations

import typer

from reidcli.cli._stub import PASS_THROUGH, not_yet

HELP = "Extract embeddings and conv maps from images into a feature store."
CONTEXT = PASS_THROUGH


def extract(ctx: typer.Context) -> None:
    not_yet("extract")
