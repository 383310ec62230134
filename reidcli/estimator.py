"""The one base of every method fitted on stored vectors or maps (docs/methods.md).

scikit-learn's estimator contract:

* constructor parameters are explicit keyword arguments, stored as given; nothing is computed
  or checked in ``__init__`` (an unknown keyword is a one-line error listing the real ones);
* ``get_params`` / ``set_params`` come from the ``__init__`` signature;
* each class declares ``_parameter_constraints`` (:mod:`reidcli.params`); ``fit`` calls
  :meth:`Estimator._validated_params` once, so errors name the parameter;
* ``fit(X [N, D], pids [N], camids [N] | None) -> self``; fitted attributes end in ``_``;
  using a model before ``fit`` raises :class:`~reidcli.errors.NotFittedError`;
* :meth:`Estimator.fitted_arrays` gives the arrays of one fitted trial and the class method
  :meth:`Estimator.model_from_arrays` turns such arrays back into a
  :class:`~reidcli.fitted.FittedModel` — the single save/load pair, used by
  :meth:`Estimator.save`, :func:`reidcli.fitted.save` and :func:`reidcli.fitted.load`.

A registered estimator (:func:`reidcli.registry.register`) also carries ``method`` (its
registry name).
"""
from __future__ import annotations

import functools
import inspect
import os
from pathlib import Path
from typing import Any, ClassVar, Mapping, Sequence

import numpy as np

from reidcli.errors import NotFittedError, UsageError
from reidcli.params import Constraint, validate_params


class Estimator:
    """Base class: parameters, validation, fitted-state checks and one save/load pair."""

    #: per parameter, the constraints a value must satisfy (any one of them)
    _parameter_constraints: ClassVar[dict[str, Sequence[Constraint]]] = {}
    #: one-line help per parameter (``reid methods``, the generated ``--help``)
    _parameter_help: ClassVar[dict[str, str]] = {}
    #: registry name (set by :func:`reidcli.registry.register`)
    method: ClassVar[str] = ""
    #: what ``reid eval`` hands the fitted model: a store feature or the store's conv maps
    reads: ClassVar[str] = "features"
    #: parameters under which a fit on a ~100-row toy problem takes well under a second (the
    #: common estimator check, tests/test_estimator.py); the defaults when empty
    _quick_params: ClassVar[dict[str, Any]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "__init__" in cls.__dict__:
            cls.__init__ = _reject_unknown_keywords(cls.__init__, cls.__name__)

    # -- parameters ------------------------------------------------------------------------
    @classmethod
    def _param_names(cls) -> list[str]:
        return [name for name, p in inspect.signature(cls.__init__).parameters.items()
                if name != "self" and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]

    @classmethod
    def default_params(cls) -> dict[str, Any]:
        """The constructor defaults (= the method's documented defaults)."""
        sig = inspect.signature(cls.__init__)
        return {name: sig.parameters[name].default for name in cls._param_names()}

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params: Any) -> "Estimator":
        valid = self._param_names()
        for key, value in params.items():
            if key not in valid:
                raise UsageError(f"{type(self).__name__} has no parameter {key!r}",
                                 f"its parameters: {', '.join(sorted(valid))}")
            setattr(self, key, value)
        return self

    def clone(self) -> "Estimator":
        """A new, unfitted estimator with the same parameters."""
        return type(self)(**self.get_params())

    def _validated_params(self) -> dict[str, Any]:
        """The parameters checked against ``_parameter_constraints``, in canonical form
        (ParameterError naming the first bad one)."""
        return validate_params(self.method or type(self).__name__, self.get_params(),
                               self._parameter_constraints)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"

    # -- fitting -----------------------------------------------------------------------------
    def fit(self, X, pids, camids=None) -> "Estimator":  # pragma: no cover - interface
        """Learn from X [N, D] (or conv maps), pids [N], camids [N]; returns self."""
        raise NotImplementedError

    def _check_fitted(self, attribute: str) -> None:
        if getattr(self, attribute, None) is None:
            raise NotFittedError(f"this {type(self).__name__} is not fitted yet",
                                 "call fit(X, pids, camids) first")

    # -- the save/load pair ------------------------------------------------------------------
    def fitted_arrays(self) -> dict[str, Any]:  # pragma: no cover - interface
        """The arrays of one fitted trial (nested dicts become HDF5 groups)."""
        raise NotImplementedError

    @classmethod
    def model_from_arrays(cls, arrays: Mapping[str, Any],
                          hyperparameters: Mapping[str, Any]):  # pragma: no cover - interface
        """The :class:`~reidcli.fitted.FittedModel` of one trial's stored arrays."""
        raise NotImplementedError

    def fitted_model(self):
        """This estimator's fitted state as the :class:`~reidcli.fitted.FittedModel` that
        ``reid eval`` would load from its saved file."""
        return type(self).model_from_arrays(self.fitted_arrays(), self.saved_params())

    def saved_params(self) -> dict[str, Any]:
        """Hyperparameters recorded in a fitted file (JSON-safe)."""
        return {k: (v.tolist() if isinstance(v, np.ndarray) else v)
                for k, v in self.get_params().items()}

    def save(self, path: str | os.PathLike, *, force: bool = False,
             provenance: Mapping[str, Any] | None = None, feature: str | None = None) -> Path:
        """Write this fit as a one-trial fitted-model file (atomically)."""
        from reidcli import fitted
        return fitted.save(path, self.method, [self.fitted_arrays()],
                           hyperparameters=self.saved_params(), provenance=provenance,
                           feature=feature, force=force)

    @classmethod
    def load(cls, path: str | os.PathLike, trial: int | None = None):
        """The :class:`~reidcli.fitted.FittedModel` of ``trial`` (default: the first) of a
        fitted file written by this method."""
        from reidcli import fitted
        from reidcli.errors import FittedModelError
        loaded = fitted.load(path)
        if cls.method and loaded.method != cls.method:
            raise FittedModelError(f"fitted model {path} holds method {loaded.method!r}, not "
                                   f"{cls.method!r}", f"load it with {loaded.method}'s class or "
                                   "reidcli.fitted.load")
        return loaded.for_trial(loaded.trial_ids[0] if trial is None else trial)


def _reject_unknown_keywords(init, owner: str):
    """Wrap ``__init__`` so a keyword it does not take is a one-line UsageError naming the
    parameters it does take (instead of Python's TypeError)."""
    sig = inspect.signature(init)
    names = [n for n in sig.parameters if n != "self"]
    open_ended = any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values())

    @functools.wraps(init)
    def wrapped(self, *args, **kwargs):
        if not open_ended:
            unknown = sorted(set(kwargs) - set(names))
            if unknown:
                raise UsageError(f"{owner} has no parameter {unknown[0]!r}",
                                 f"its parameters: {', '.join(names)}")
        init(self, *args, **kwargs)

    return wrapped


def store_params(instance: Any, local_vars: Mapping[str, Any]) -> None:
    """Store every constructor argument on ``instance`` as given (``store_params(self,
    locals())`` at the end of an ``__init__``)."""
    for name in type(instance)._param_names():
        setattr(instance, name, local_vars[name])
