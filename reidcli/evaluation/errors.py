"""User errors of the evaluation stage (printed by the CLI as one line, exit 2)."""
from __future__ import annotations

from reidcli.errors import ParameterError, ReidError
from reidcli.params import check_param


class EvaluationError(ReidError):
    """The evaluation input cannot give a meaningful number.

    Empty query sets, no query with a match, NaN/Inf features or distances, mismatched
    dimensions: each is reported instead of a silently wrong score.
    """


class EvaluationParameterError(ParameterError, EvaluationError):
    """An evaluation parameter has a value outside its constraints.

    Worded in library terms (``evaluation parameter max_rank=0 must be …``); the CLI rewrites
    it with the flag that set the parameter. Both a ParameterError and an EvaluationError."""


def check_eval_param(owner: str, name: str, value, *constraints, todo: str | None = None):
    """:func:`reidcli.params.check_param` raising :class:`EvaluationParameterError` (with
    ``todo`` as its hint); returns the value in canonical form."""
    try:
        return check_param(owner, name, value, *constraints)
    except ParameterError as exc:
        raise EvaluationParameterError(exc.owner, exc.parameter, exc.value, exc.requirement,
                                       todo or exc.todo) from None
