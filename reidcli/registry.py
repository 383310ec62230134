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
``reid fit-pooling`` subcommands and their ``--help``, and ``reid methods``. It is one
:class:`Registry` (:data:`METHODS`, the stages are its groups; the datasets are another,
:mod:`reidcli.data.registry`): a method is looked up in the index of its stage package (the
``METHODS`` dict of e.g. :mod:`reidcli.metric`, ``name → "module:attr"``), so loading a fitted
file or starting a trainer imports the one module that declares it; a name not in an index,
and a listing, import the modules named in the environment variable ``REIDCLI_PLUGINS``
(comma-separated) and the ``reidcli.methods`` entry points of installed packages, then every
module of the stage packages (:data:`STAGE_PACKAGES`) — so a new method is one module (and,
for a built-in one, its line in the package index; ``tests/test_registry.py`` checks them).
A module that fails to import raises :class:`~reidcli.errors.MethodRegistryError` naming it.
"""
from __future__ import annotations

import copy
import dataclasses
import importlib
import os
import pkgutil
import sys
from typing import Any, Callable, Generic, Iterable, Mapping, Sequence, TypeVar

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
E = TypeVar("E")


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


def _add(info: MethodInfo) -> None:
    METHODS.add(info.name, info, group=info.stage, module=info.module)


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


#: stage → the settings every method of the stage shares (name → Parameter), declared by the
#: stage (:func:`declare_settings`): a method's ``defaults`` of them carry their constraints
_SETTINGS: dict[str, dict[str, Parameter]] = {}


def declare_settings(stage: str, parameters: Sequence[Parameter]) -> None:
    """Declare the settings every method of ``stage`` shares (e.g. adaptation's batch size and
    learning rate, :data:`reidcli.adapt.config.SETTINGS`); call before its methods register."""
    _SETTINGS[stage] = {p.name: p for p in parameters}


def register_info(name: str, *, stage: str, paper: str, summary: str,
                  defaults: Mapping[str, Any] | None = None, module: str | None = None,
                  extras: Mapping[str, Any] | None = None,
                  parameters: Sequence[Parameter] = ()) -> None:
    """Register a method run by its stage's own code (adaptation, network training): its
    ``parameters`` (name, default, constraints, help: the method's own settings, from which
    e.g. ``reid adapt <name>`` is generated), ``defaults`` (plain values, e.g. the method's
    defaults of settings its stage declares for every method) — both listed by
    ``reid methods``; a default of a setting the stage declared (:func:`declare_settings`)
    carries that setting's constraints and help — and ``extras``: what the stage needs to
    run it (e.g.
    ``{"trainer": cls, "presets": {...}}``)."""
    if module is None:                   # the registering module (cheap: no source lookup)
        module = sys._getframe(1).f_globals.get("__name__", "?")
    shared = _SETTINGS.get(stage, {})
    params = tuple(parameters) + tuple(
        dataclasses.replace(shared[k], default=v) if k in shared else Parameter(k, v)
        for k, v in (defaults or {}).items())
    names = [p.name for p in params]
    if len(set(names)) != len(names):
        raise MethodRegistryError(f"method {name!r} declares a parameter twice ({names})",
                                  "fix the registration")
    _add(MethodInfo(name=name, stage=stage, paper=paper, summary=summary, module=module,
                    parameters=params, extras=dict(extras or {})))


# -- the registry class ------------------------------------------------------------------------
class Registry(Generic[E]):
    """Named entries of one kind (``"method"``, ``"dataset"``), declared by the modules that
    define them and found lazily.

    ``groups`` maps each group (a method's stage; the datasets have one) to the packages whose
    modules declare its entries. Each such package may hold an index, the attribute
    ``index_attr`` of its ``__init__``: ``{lookup key: "module:attr"}`` for its built-in
    entries (every name and alias); ``builtin`` adds index entries of a group that has no
    package. A lookup (:meth:`find`) imports the one indexed module of a known name; only an
    unknown name (or a listing, :meth:`entries_of`) imports the plugins (:func:`load_plugins`)
    and then every module of the groups' packages (:meth:`discover`). ``fold_case``: names and
    aliases are looked up lower-cased. A name declared by two modules is a
    :class:`~reidcli.errors.MethodRegistryError`.
    """

    def __init__(self, kind: str, groups: Mapping[str, Sequence[str]], *, index_attr: str,
                 builtin: Mapping[str, Mapping[str, str]] | None = None,
                 fold_case: bool = False) -> None:
        self.kind = kind
        self.groups: dict[str, tuple[str, ...]] = {g: tuple(p) for g, p in groups.items()}
        self.index_attr = index_attr
        self.fold_case = fold_case
        self._builtin = {g: dict(i) for g, i in (builtin or {}).items()}
        #: name → entry (tests and stage code may read it; :meth:`add` writes it)
        self.entries: dict[str, E] = {}
        #: lookup key (name or alias, lower-cased with ``fold_case``) → name
        self.aliases: dict[str, str] = {}
        self._group: dict[str, str] = {}
        self._module: dict[str, str] = {}
        self._discovered: set[str] = set()

    def key(self, name: str) -> str:
        """The lookup key of a name or alias."""
        return name.strip().lower() if self.fold_case else name

    def _groups(self, groups: Iterable[str] | None) -> list[str]:
        return list(self.groups) if groups is None else list(groups)

    def add(self, name: str, entry: E, *, group: str, module: str,
            aliases: Sequence[str] = ()) -> None:
        """Declare ``entry`` as ``name`` (and ``aliases``) of ``group``, defined in ``module``.
        Declaring it again from the same module (a re-import) replaces it."""
        old = self._module.get(name)
        if old is not None and old != module and name in self.entries:
            raise MethodRegistryError(f"{self.kind} {name!r} is registered by both {old} "
                                      f"and {module}", "rename one of them")
        self.entries[name] = entry
        self._group[name] = group
        self._module[name] = module
        for key in (name, *aliases):
            self.aliases[self.key(key)] = name

    def group_of(self, name: str) -> str | None:
        """The group (stage) ``name`` was declared in."""
        return self._group.get(name)

    def index(self, groups: Iterable[str] | None = None) -> dict[str, str]:
        """``{lookup key: "module:attr"}`` of the built-in entries of ``groups``."""
        out: dict[str, str] = {}
        for group in self._groups(groups):
            out.update(self._builtin.get(group, {}))
            for package in self.groups.get(group, ()):
                out.update(getattr(importlib.import_module(package), self.index_attr, {}))
        return out

    def _known(self, key: str, groups: Sequence[str] | None) -> E | None:
        name = self.aliases.get(key, key)
        entry = self.entries.get(name)
        if entry is None or (groups is not None and self._group.get(name) not in groups):
            return None
        return entry

    def find(self, name: str, groups: Iterable[str] | None = None) -> E | None:
        """The entry named ``name`` (a name or alias) in ``groups`` (default: all), or None:
        its indexed module is imported; an unknown name imports the plugins, then every
        module of ``groups``."""
        wanted = None if groups is None else list(groups)
        key = self.key(name)
        found = self._known(key, wanted)
        if found is None:
            target = self.index(wanted).get(key)
            if target is not None:
                _import(target.partition(":")[0], self.kind)
                found = self._known(key, wanted)
        if found is None:
            load_plugins()
            found = self._known(key, wanted)
        if found is None:
            self.discover(wanted)
            found = self._known(key, wanted)
        return found

    def discover(self, groups: Iterable[str] | None = None) -> None:
        """Import every module of the packages of ``groups`` (default: all), then the
        plugins. Idempotent."""
        for group in self._groups(groups):
            for package in self.groups.get(group, ()):
                if package in self._discovered:
                    continue
                pkg = importlib.import_module(package)
                for module in sorted(m.name for m in pkgutil.iter_modules(pkg.__path__)):
                    _import(f"{package}.{module}", self.kind)
                self._discovered.add(package)
            for target in self._builtin.get(group, {}).values():
                _import(target.partition(":")[0], self.kind)
        load_plugins()

    def entries_of(self, groups: Iterable[str] | None = None) -> dict[str, E]:
        """``{name: entry}`` of every entry of ``groups`` (all discovered), sorted by name."""
        wanted = self._groups(groups)
        self.discover(wanted)
        return {n: self.entries[n] for n in sorted(self.entries)
                if self._group.get(n) in wanted}

    def names(self, groups: Iterable[str] | None = None) -> list[str]:
        """Sorted names of ``groups`` (all discovered)."""
        return list(self.entries_of(groups))


# -- discovery ---------------------------------------------------------------------------------
def _import(module: str, kind: str = "method") -> None:
    try:
        importlib.import_module(module)
    except Exception as exc:   # any failure of a method module is reported as its own
        raise MethodRegistryError(f"{kind} module {module} failed to import "
                                  f"({type(exc).__name__}: {exc})",
                                  "fix or remove that module (--debug shows the traceback)"
                                  ) from exc


_ENTRY_POINTS: list[list[str]] = []


def _plugin_modules() -> list[str]:
    names = [m.strip() for m in os.environ.get(PLUGIN_VARIABLE, "").split(",") if m.strip()]
    if not _ENTRY_POINTS:                  # installed packages do not change while we run
        try:
            from importlib.metadata import entry_points
            _ENTRY_POINTS.append([ep.value.split(":")[0]
                                  for ep in entry_points(group=ENTRY_POINT_GROUP)])
        except Exception:                  # no metadata backend: plugins by variable only
            _ENTRY_POINTS.append([])
    return names + _ENTRY_POINTS[0]


#: plugin modules imported (or being imported)
_DISCOVERED: set[str] = set()


def load_plugins() -> None:
    """Import the plugin modules (``REIDCLI_PLUGINS``, ``reidcli.methods`` entry points)
    not imported yet. Whatever a plugin registers — methods of any stage, or datasets with
    :func:`reidcli.data.registry.register` — is then known to every command: every
    :class:`Registry` calls this before it gives up on a name or lists its entries
    (docs/cli.md, "Plugins")."""
    for module in _plugin_modules():
        if module not in _DISCOVERED:
            _DISCOVERED.add(module)          # first: a plugin may use the registries itself
            try:
                _import(module)
            except BaseException:
                _DISCOVERED.discard(module)
                raise


METHODS = Registry("method", STAGE_PACKAGES, index_attr="METHODS",
                   builtin={"fitted": {"linear-projection":
                                       "reidcli.fitted:LinearProjection"}})
#: name → MethodInfo of the methods registered so far (the registry's own table)
_METHODS = METHODS.entries


def discover(stages: Iterable[str] | None = None) -> None:
    """Import the modules that declare the methods of ``stages`` (default: all) and the
    plugins. Idempotent."""
    METHODS.discover(stages)


def methods(stage: str | None = None) -> list[MethodInfo]:
    """Registered methods (of ``stage``), sorted by stage then name."""
    found = list(METHODS.entries_of(None if stage is None else [stage]).values())
    if stage is None:          # methods of stages not declared here (plugins' own stages)
        found += [m for m in METHODS.entries.values() if m.stage not in METHODS.groups]
    order = list(STAGE_PACKAGES)
    return sorted(found, key=lambda m: (order.index(m.stage) if m.stage in order else 99,
                                        m.name))


def get(name: str, stage: str | None = None) -> MethodInfo:
    """The method ``name``; UsageError naming the known ones when it is not registered."""
    info = METHODS.find(name, None if stage is None else [stage])
    if info is None:
        known = ", ".join(m.name for m in methods(stage)) or "none"
        raise UsageError(f"unknown method {name!r}" + (f" for {stage}" if stage else ""),
                         f"registered: {known}")
    return info


def lookup(name: str, stages: Sequence[str]) -> MethodInfo | None:
    """The method ``name`` if one of ``stages`` registers it, else None."""
    return METHODS.find(name, stages)
