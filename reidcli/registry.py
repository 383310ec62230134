"""The method registry: every method declares itself here (docs/methods.md).

A method module registers on import:

* an estimator fitted on stored vectors or maps, with :func:`register` as a class decorator —
  name, stage (``train`` for ``reid train``, ``fit-pooling``), paper and one-line summary;
  its parameters, defaults and constraints come from the class
  (:class:`reidcli.estimator.Estimator`);
* a model that is only loaded from fitted files (:func:`register_loader`);
* a method run by its stage's own code — adaptation (``reid adapt <name>`` is generated
  from its ``parameters``: :mod:`reidcli.adapt.config`), network training — with
  :func:`register_info` (name, stage, paper, parameters, defaults), so ``reid methods``
  lists it.

The registry drives :func:`reidcli.fitted.load`, the generated ``reid train`` /
``reid fit-pooling`` subcommands and their ``--help``, and ``reid methods``. Methods are found
by importing every module of the stage packages (:data:`STAGE_PACKAGES`), the modules named in
the environment variable ``REIDCLI_PLUGINS`` (comma-separated) and the ``reidcli.methods``
entry points of installed packages — so a new method is one module and nothing else is edited.
A module that fails to import raises :class:`~reidcli.errors.MethodRegistryError` naming it.
"""
from __future__ import annotations

import copy
import dataclasses
import importlib
import os
import pkgutil
import sys
from typing import Any, Callable, Iterable, Mapping, Sequence

from reidcli.errors import MethodRegistryError, UsageError
from reidcli.params import Constraint, validate_params

#: stages and the packages whose modules declare their methods
STAGE_PACKAGES: dict[str, tuple[str, ...]] = {
    "train": ("reidcli.metric",),
    "fit-pooling": ("reidcli.pooling",),
    "fitted": (),
    "adapt": ("reidcli.adapt",),
    "train-net": ("reidcli.training",),
}
#: stages whose methods are fitted estimators with generated CLI commands
ESTIMATOR_STAGES = ("train", "fit-pooling")
PLUGIN_VARIABLE = "REIDCLI_PLUGINS"
ENTRY_POINT_GROUP = "reidcli.methods"


@dataclasses.dataclass(frozen=True)
class Parameter:
    """One parameter of a method: name, default, constraints and help (the CLI names its flag:
    :mod:`reidcli.cli.flags`)."""

    name: str
    default: Any
    constraints: tuple[Constraint, ...] = ()
    help: str = ""
    #: shown by ``--help`` as its own option (else set through ``--param name=value``)
    cli: bool = True


@dataclasses.dataclass(frozen=True)
class MethodInfo:
    """What the registry knows of one method."""

    name: str
    stage: str
    paper: str
    summary: str
    module: str
    parameters: tuple[Parameter, ...] = ()
    #: the Estimator subclass (estimator stages)
    estimator: type | None = None
    #: ``load_trial(arrays, hyperparameters) -> FittedModel`` (methods with fitted files)
    load_trial: Callable[[Mapping[str, Any], Mapping[str, Any]], Any] | None = None
    #: what its fitted model reads at evaluation: ``features`` or ``convmaps``
    reads: str = "features"
    #: stage-specific declarations (a trainer class and size presets, an adapter factory, …)
    extras: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def defaults(self) -> dict[str, Any]:
        """A fresh copy of the defaults (callers may change it)."""
        return copy.deepcopy({p.name: p.default for p in self.parameters})

    def resolve_params(self, given: Mapping[str, Any]) -> dict[str, Any]:
        """Defaults updated with ``given``, validated: UsageError for a name the method does
        not have (listing those it has), ParameterError for a bad value."""
        names = {p.name for p in self.parameters}
        unknown = sorted(set(given) - names)
        if unknown:
            raise UsageError(f"{self.name} has no parameter {unknown[0]!r}",
                             f"its parameters: {', '.join(sorted(names)) or 'none'}")
        values = {**self.defaults(), **dict(given)}
        return validate_params(self.name, values,
                               {p.name: p.constraints for p in self.parameters if p.constraints})

    def make_estimator(self, given: Mapping[str, Any] | None = None):
        """An estimator of this method with ``given`` parameters (validated)."""
        if self.estimator is None:
            raise UsageError(f"{self.name} is not an estimator fitted on a store",
                             f"it belongs to the {self.stage} stage")
        return self.estimator(**self.resolve_params(given or {}))


_METHODS: dict[str, MethodInfo] = {}
_DISCOVERED: set[str] = set()


def _add(info: MethodInfo) -> None:
    old = _METHODS.get(info.name)
    if old is not None and old.module != info.module:
        raise MethodRegistryError(f"method {info.name!r} is registered by both {old.module} "
                                  f"and {info.module}", "rename one of them")
    _METHODS[info.name] = info


def _parameters_of(cls: type, hidden: Iterable[str]) -> tuple[Parameter, ...]:
    defaults = cls.default_params()
    constraints = getattr(cls, "_parameter_constraints", {})
    helps = getattr(cls, "_parameter_help", {})
    hidden = set(hidden)
    unknown = hidden - set(defaults)
    if unknown:
        raise MethodRegistryError(f"{cls.__module__}.{cls.__name__} hides unknown "
                                  f"parameters {sorted(unknown)}", "fix the registration")
    return tuple(Parameter(name, default, tuple(constraints.get(name, ())), helps.get(name, ""),
                           name not in hidden)
                 for name, default in defaults.items())


def register(name: str, *, stage: str, paper: str, summary: str,
             hidden: Sequence[str] = ()):
    """Class decorator: register an :class:`~reidcli.estimator.Estimator` subclass as method
    ``name`` of ``stage`` (``train`` or ``fit-pooling``); ``hidden`` parameters are not shown
    as options of their own (``reid`` sets them with ``--param``)."""
    if stage not in ESTIMATOR_STAGES:
        raise MethodRegistryError(f"register({name!r}): stage {stage!r} is not one of "
                                  f"{', '.join(ESTIMATOR_STAGES)}", "use register_info")

    def decorate(cls: type) -> type:
        cls.method = name
        _add(MethodInfo(name=name, stage=stage, paper=paper, summary=summary,
                        module=cls.__module__, parameters=_parameters_of(cls, hidden),
                        estimator=cls, load_trial=cls.model_from_arrays,
                        reads=getattr(cls, "reads", "features")))
        return cls

    return decorate


def register_loader(name: str, load_trial: Callable, *, paper: str, summary: str,
                    reads: str = "features", module: str | None = None) -> None:
    """Register a fitted-file method that has no estimator here (e.g. a projection written
    by another tool): ``load_trial(arrays, hyperparameters) -> FittedModel``."""
    module = module or getattr(load_trial, "__module__", "?")
    _add(MethodInfo(name=name, stage="fitted", paper=paper, summary=summary, module=module,
                    load_trial=load_trial, reads=reads))


def register_info(name: str, *, stage: str, paper: str, summary: str,
                  defaults: Mapping[str, Any] | None = None, module: str | None = None,
                  extras: Mapping[str, Any] | None = None,
                  parameters: Sequence[Parameter] = ()) -> None:
    """Register a method run by its stage's own code (adaptation, network training): its
    ``parameters`` (name, default, constraints, help: the method's own settings, from which
    e.g. ``reid adapt <name>`` is generated), ``defaults`` (plain values, e.g. the method's
    defaults of settings its stage declares for every method) — both listed by
    ``reid methods`` — and ``extras``: what the stage needs to run it (e.g.
    ``{"trainer": cls, "presets": {...}}``)."""
    if module is None:                   # the registering module (cheap: no source lookup)
        module = sys._getframe(1).f_globals.get("__name__", "?")
    params = tuple(parameters) + tuple(Parameter(k, v) for k, v in (defaults or {}).items())
    names = [p.name for p in params]
    if len(set(names)) != len(names):
        raise MethodRegistryError(f"method {name!r} declares a parameter twice ({names})",
                                  "fix the registration")
    _add(MethodInfo(name=name, stage=stage, paper=paper, summary=summary, module=module,
                    parameters=params, extras=dict(extras or {})))


# -- discovery ---------------------------------------------------------------------------------
def _import(module: str) -> None:
    try:
        importlib.import_module(module)
    except Exception as exc:   # any failure of a method module is reported as its own
        raise MethodRegistryError(f"method module {module} failed to import "
                                  f"({type(exc).__name__}: {exc})",
                                  "fix or remove that module (--debug shows the traceback)"
                                  ) from exc


def _plugin_modules() -> list[str]:
    names = [m.strip() for m in os.environ.get(PLUGIN_VARIABLE, "").split(",") if m.strip()]
    try:
        from importlib.metadata import entry_points
        names += [ep.value.split(":")[0] for ep in entry_points(group=ENTRY_POINT_GROUP)]
    except Exception:                      # no metadata backend: plugins by variable only
        pass
    return names


def discover(stages: Iterable[str] | None = None) -> None:
    """Import the modules that declare the methods of ``stages`` (default: all) and the
    plugins. Idempotent."""
    stages = list(STAGE_PACKAGES) if stages is None else list(stages)
    for stage in stages:
        for package in STAGE_PACKAGES.get(stage, ()):
            if package in _DISCOVERED:
                continue
            pkg = importlib.import_module(package)
            for module in sorted(m.name for m in pkgutil.iter_modules(pkg.__path__)):
                _import(f"{package}.{module}")
            _DISCOVERED.add(package)
    load_plugins()


def load_plugins() -> None:
    """Import the plugin modules (``REIDCLI_PLUGINS``, ``reidcli.methods`` entry points)
    not imported yet. Whatever a plugin registers — methods, or datasets with
    :func:`reidcli.data.registry.register` — is then known to every command; the dataset
    registry calls this before it resolves a name (docs/cli.md, "Plugins")."""
    for module in _plugin_modules():
        if module not in _DISCOVERED:
            _DISCOVERED.add(module)          # first: a plugin may use the registries itself
            try:
                _import(module)
            except BaseException:
                _DISCOVERED.discard(module)
                raise


def methods(stage: str | None = None) -> list[MethodInfo]:
    """Registered methods (of ``stage``), sorted by stage then name."""
    discover(None if stage is None else [stage])
    found = [m for m in _METHODS.values() if stage is None or m.stage == stage]
    order = list(STAGE_PACKAGES)
    return sorted(found, key=lambda m: (order.index(m.stage) if m.stage in order else 99,
                                        m.name))


def get(name: str, stage: str | None = None) -> MethodInfo:
    """The method ``name``; UsageError naming the known ones when it is not registered."""
    if name not in _METHODS:
        discover(None if stage is None else [stage])
    info = _METHODS.get(name)
    if info is None or (stage is not None and info.stage != stage):
        known = ", ".join(m.name for m in methods(stage)) or "none"
        raise UsageError(f"unknown method {name!r}" + (f" for {stage}" if stage else ""),
                         f"registered: {known}")
    return info


def lookup(name: str, stages: Sequence[str]) -> MethodInfo | None:
    """The method ``name`` if one of ``stages`` registers it, else None."""
    if name not in _METHODS:
        discover(stages)
    info = _METHODS.get(name)
    return info if info is not None and info.stage in stages else None
