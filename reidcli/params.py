"""Declarative parameter constraints (the scikit-learn ``_parameter_constraints`` idea).

A method declares, per constructor parameter, a list of constraints; :func:`validate_params`
checks the values once (in ``fit``) and raises :class:`~reidcli.errors.ParameterError`, which
names the *parameter* (``solver='qr'``). The CLI maps the parameter to the flag the user typed
(``--xqda-solver 'qr'``); library code never names a flag.

Constraints: :class:`Interval` (int or real, bounds open or closed), :class:`Options` (a set of
strings), :data:`NONE` (``None`` allowed), :class:`FloatList` (comma-separated positive
numbers), :data:`BOOL`, :data:`TEXT` (any string) — a value passes when it satisfies any
constraint of its list. Shared constraints: :data:`SEED`, :data:`PRECISION`, :func:`count`.
Functions that are not estimators check a value with :func:`check_param` (the same error);
this is the project's one validation mechanism.
"""
from __future__ import annotations

import dataclasses
import math
import numbers
import sys
from typing import Any, Iterable, Mapping, Sequence

from reidcli.errors import ParameterError


class Constraint:
    """One allowed kind of value. ``accepts(value)``; ``convert(value)`` gives the canonical
    value (e.g. ``"1e-3"`` → 0.001) and is called only on accepted values; ``describe()`` is
    the phrase used in errors."""

    def accepts(self, value: Any) -> bool:  # pragma: no cover - interface
        raise NotImplementedError

    def convert(self, value: Any) -> Any:
        return value

    def describe(self) -> str:  # pragma: no cover - interface
        raise NotImplementedError

    #: the type a generated CLI option of this constraint parses to (``str`` when the
    #: constraint parses the text itself); :mod:`reidcli.cli.estimator_commands` reads it
    cli_type: type = str


def _numpy_types(*names: str) -> tuple[type, ...]:
    """The numpy types ``names`` (``"bool_"``, ``"ndarray"``) if numpy is loaded, else none: a
    value cannot be a numpy scalar or array unless numpy was imported, and this module does not
    import it, so that the CLI builds its commands without numpy."""
    numpy = sys.modules.get("numpy")
    return tuple(getattr(numpy, name) for name in names) if numpy is not None else ()


def _as_number(value: Any) -> float | None:
    if isinstance(value, (bool, *_numpy_types("bool_"))):
        return None
    if isinstance(value, numbers.Real):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


@dataclasses.dataclass(frozen=True)
class Interval(Constraint):
    """A finite number of ``kind`` (``int`` or ``float``) between ``low`` and ``high``
    (``None`` = unbounded); ``closed`` is ``"both"``, ``"left"``, ``"right"`` or
    ``"neither"``."""

    kind: type
    low: float | None = None
    high: float | None = None
    closed: str = "both"

    def accepts(self, value: Any) -> bool:
        number = _as_number(value)
        if number is None or not math.isfinite(number):
            return False
        if self.kind is int and number != int(number):
            return False
        if self.low is not None:
            if number < self.low or (number == self.low and self.closed in ("right", "neither")):
                return False
        if self.high is not None:
            if number > self.high or (number == self.high and self.closed in ("left", "neither")):
                return False
        return True

    def convert(self, value: Any) -> Any:
        number = _as_number(value)
        return int(number) if self.kind is int else float(number)

    def _bound(self, value: float) -> str:
        """``value`` as written in messages: integers in full (2³² − 1 is 4294967295, not
        4.29497e+09), other numbers with ``%g``."""
        if self.kind is int or float(value).is_integer():
            return str(int(value))
        return f"{value:g}"

    def describe(self) -> str:
        kind = "an integer" if self.kind is int else "a finite number"
        num = (lambda v: str(int(v))) if self.kind is int else (lambda v: f"{v:g}")  # exact ints
        left = "[" if self.closed in ("both", "left") else "("
        right = "]" if self.closed in ("both", "right") else ")"
        if self.low is None and self.high is None:
            return kind
        if self.high is None:
            return f"{kind} {'≥' if left == '[' else '>'} {num(self.low)}"
        if self.low is None:
            return f"{kind} {'≤' if right == ']' else '<'} {num(self.high)}"
        return f"{kind} in {left}{num(self.low)}, {num(self.high)}{right}"

    @property
    def cli_type(self) -> type:  # type: ignore[override]
        return int if self.kind is int else float


@dataclasses.dataclass(frozen=True)
class Options(Constraint):
    """One of the given strings (compared case-insensitively; ``aliases`` map other spellings
    onto an option). The canonical value is the option as declared: what is recorded."""

    values: tuple[str, ...]
    aliases: tuple[tuple[str, str], ...] = ()

    def __init__(self, values: Iterable[str], aliases: Mapping[str, str] | None = None):
        object.__setattr__(self, "values", tuple(values))
        object.__setattr__(self, "aliases", tuple((aliases or {}).items()))

    def _canonical(self, value: Any) -> str | None:
        key = str(value).strip().lower()
        key = {k.lower(): v.lower() for k, v in self.aliases}.get(key, key)
        return next((v for v in self.values if v.lower() == key), None)

    def accepts(self, value: Any) -> bool:
        return isinstance(value, str) and self._canonical(value) is not None

    def convert(self, value: Any) -> Any:
        """The declared spelling of the option ``value`` names (any case, or an alias)."""
        return self._canonical(value)

    def describe(self) -> str:
        return "one of " + ", ".join(self.values)


class _NoneConstraint(Constraint):
    def accepts(self, value: Any) -> bool:
        return value is None or (isinstance(value, str) and value.lower() == "none")

    def convert(self, value: Any) -> Any:
        return None

    def describe(self) -> str:
        return "none"


class _Bool(Constraint):
    cli_type = bool

    def accepts(self, value: Any) -> bool:
        return isinstance(value, (bool, *_numpy_types("bool_"))) or (
            isinstance(value, str) and value.lower() in ("true", "false", "1", "0", "yes", "no"))

    def convert(self, value: Any) -> Any:
        if isinstance(value, str):
            return value.lower() in ("true", "1", "yes")
        return bool(value)

    def describe(self) -> str:
        return "true or false"


class _Text(Constraint):
    def accepts(self, value: Any) -> bool:
        return isinstance(value, str)

    def describe(self) -> str:
        return "a string"


@dataclasses.dataclass(frozen=True)
class FloatList(Constraint):
    """A non-empty list of positive finite numbers (a list or ``"1e-3,1e-2"``) → list[float]."""

    def _items(self, value: Any) -> list | None:
        if isinstance(value, str):
            return [v for v in value.replace(";", ",").split(",") if v.strip()]
        if isinstance(value, numbers.Real) and not isinstance(value, bool):
            return [value]
        if isinstance(value, (list, tuple, *_numpy_types("ndarray"))):
            return list(value)
        return None

    def accepts(self, value: Any) -> bool:
        items = self._items(value)
        if not items:
            return False
        numbers_ = [_as_number(v) for v in items]
        return all(n is not None and math.isfinite(n) and n > 0 for n in numbers_)

    def convert(self, value: Any) -> Any:
        return [float(_as_number(v)) for v in self._items(value)]

    def describe(self) -> str:
        return "comma-separated numbers > 0"


#: ``None`` is allowed (also the string ``"none"``)
NONE = _NoneConstraint()
BOOL = _Bool()
TEXT = _Text()


def _check_one(owner: str, name: str, value: Any, constraints: Sequence[Constraint],
               todo: str | None = None, error: type[ParameterError] = ParameterError) -> Any:
    for constraint in constraints:
        if constraint.accepts(value):
            return constraint.convert(value)
    requirement = " or ".join(c.describe() for c in constraints)
    raise error(owner, name, value, f"must be {requirement}", todo)


def validate_params(owner: str, values: Mapping[str, Any],
                    constraints: Mapping[str, Sequence[Constraint]]) -> dict[str, Any]:
    """Check every value that has constraints; returns the values in canonical form.

    ParameterError (a one-line UsageError naming ``owner`` and the parameter) on the first
    value that satisfies none of its constraints. Values without constraints pass unchanged.
    """
    out = dict(values)
    for name, value in values.items():
        if name in constraints:
            out[name] = _check_one(owner, name, value, constraints[name])
    return out


def check_param(owner: str, name: str, value: Any, *constraints: Constraint,
                todo: str | None = None, error: type[ParameterError] = ParameterError) -> Any:
    """Validate one value (for parameters of functions rather than estimators); returns it in
    canonical form. ``todo`` is the error's hint; ``error`` a :class:`ParameterError` subclass
    of the stage (e.g. :class:`reidcli.evaluation.errors.EvaluationParameterError`)."""
    return _check_one(owner, name, value, constraints, todo, error)


#: a random seed: an integer in [0, 2³²) — what numpy's and torch's generators accept on every
#: platform; negative or larger seeds are refused rather than wrapped (docs/errors.md)
SEED = Interval(int, 0, 2**32 - 1)


#: a GEMM precision: float32, or bf16 (bfloat16 inputs, float32 accumulation); ``fp32`` and
#: ``bfloat16`` are accepted spellings, the canonical value (float32, bf16) is what is recorded
PRECISION = Options(("float32", "bf16"), aliases={"fp32": "float32", "bfloat16": "bf16"})
#: most items a count parameter (persons, draws, trials, …) may name: above every dataset, and
#: it keeps a typo such as ``draws=100000000`` from building trials until memory runs out
MAX_COUNT = 1_000_000


def count(minimum: int = 1, maximum: int = MAX_COUNT) -> Interval:
    """A count parameter: an integer in [minimum, maximum]."""
    return Interval(int, minimum, maximum)


def check_seed(owner: str, value: Any, name: str = "seed") -> int:
    """``value`` as a seed in [0, 2³²); ParameterError naming ``name`` otherwise."""
    return check_param(owner, name, value, SEED)


class OwnParameters:
    """Mixin of a stage's config: the method's own parameters, held in the dict ``params``
    beside the shared settings, read as attributes (``cfg.tau``, ``cfg.variant``)."""

    def __getattr__(self, name: str) -> Any:
        params = self.__dict__.get("params")
        if params is not None and name in params:
            return params[name]
        raise AttributeError(f"{type(self).__name__} of {self.__dict__.get('method')!r} has "
                             f"no setting {name!r}")
