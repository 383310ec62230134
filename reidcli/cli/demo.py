"""`reid demo` — synthetic data through every stage that exists."""
from __future__ import annotations

HELP = "Run the pipeline end to end on the synthetic dataset and print a results table."


def demo() -> None:
    pass
