"""User errors of the evaluation stage (printed by the CLI as one line, exit 2)."""
from __future__ import annotations

from reidcli.errors import ParameterError, ReidError


class EvaluationError(ReidError):
    """The evaluation input cannot give a meaningful number.

    Empty query sets, no query with a match, NaN/Inf features or distances, mismatched
    dimensions: each is reported instead of a silently wrong score.
    """


class EvaluationParameterError(ParameterError, EvaluationError):
    """An evaluation parameter has a value outside its constraints.

    Worded in library terms (``evaluation parameter max_rank=0 must be …``); the CLI rewrites
    it with the flag that set the parameter. Both a ParameterError and an EvaluationError;
    raised by :func:`reidcli.params.check_param` with ``error=EvaluationParameterError``."""
