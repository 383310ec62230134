"""User errors of the evaluation stage (printed by the CLI as one line, exit 2)."""
from __future__ import annotations

from reidcli.errors import ReidError


class EvaluationError(ReidError):
    """The evaluation input cannot give a meaningful number.

    Empty query sets, no query with a match, NaN/Inf features or distances, mismatched
    dimensions: each is reported instead of a silently wrong score.
    """
