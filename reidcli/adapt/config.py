"""Settings of ``reid adapt``: one declaration of the settings every adaptation method shares,
and each method's own parameters, declared by its module (docs/methods/dart3.md;
docs/architecture.md, "Adding an adaptation method").

* :data:`SETTINGS` — the shared settings (feature, trial, seed, device, batch size, learning
  rate …), each a :class:`~reidcli.registry.Parameter` with its constraints and help, in the
  groups of :data:`GROUPS` (``every`` method, the camera ``stats``, the optimisation
  ``loop``, the ``model`` re-run);
* a method registers with :func:`reidcli.registry.register_info` (stage ``adapt``) its own
  ``parameters`` (Parameters with constraints and help), its ``defaults`` of shared settings
  (``batch_size``, ``lr``, ``bn_mode`` …) and ``extras`` (:data:`EXTRAS`).

:class:`AdaptConfig` is the shared settings (fields) plus ``params``, the method's own
parameters (also readable as attributes: ``cfg.tau``); :meth:`AdaptConfig.resolved` fills
the method's defaults and validates every value.
"""
from __future__ import annotations

import dataclasses
import re
from typing import Any, Mapping, Sequence

from reidcli.errors import ParameterError, UsageError
from reidcli.naming import param
from reidcli.params import (BOOL, NONE, SEED, Constraint, Interval, Options, OwnParameters,
                            check_param)
from reidcli.registry import Parameter, declare_settings

#: who the parameters below belong to, in error messages
OWNER = "adaptation"

#: most optimisation steps per batch (the loss history is a [batches, steps] array)
MAX_STEPS = 10_000
#: largest count (batch size, k, rows …) passed on to torch/numpy as a 32-bit index
MAX_COUNT = 2**31 - 1
#: the range of τ: 1/τ and D/τ must stay finite in float32 (the losses run in float32)
TAU_RANGE = (1e-6, 1e6)
#: the largest learning rate / regularisation weight (torch takes them as float32)
MAX_FLOAT = 1e30

#: what a method's registration ``extras`` may hold (docs/architecture.md)
EXTRAS = {
    "closed_form": "closed_form(queries [N, d], codes [N], stats, cfg) -> adapted [N, d]",
    "normalizes_gallery": "closed form: score against G̃ (else the stored gallery)",
    "build": "build(cfg, inputs, stats, runner, gallery_normalized, device) -> (Adapter, "
             "gallery [Ng, d]): an online method run by reidcli.adapt.loop",
    "needs_model": "True, or {parameter: values}: re-runs the backbone (then --model)",
    "settings": "further groups of SETTINGS it reads (e.g. ('stats',))",
    "check": "check(cfg): checks between values (UsageError), after each value's own",
    "hints": "{parameter: what to do} when a value is refused",
    "alias_of": "(method, {parameter: value}): another name of a method with fixed values",
    "hidden": "parameters set only through --param (no option of their own)",
    "spellings": "other names the method is found under",
    "label": "how plots and tables name it: a string or label(settings) -> str",
}


class _Text(Constraint):
    """A non-empty string (a feature name, a store split)."""

    def accepts(self, value: Any) -> bool:
        return isinstance(value, str) and bool(value.strip())

    def describe(self) -> str:
        return "a non-empty name"


class _Device(Constraint):
    """``auto``, ``cpu``, ``cuda`` or ``cuda:N`` (checked against the machine when used)."""

    def accepts(self, value: Any) -> bool:
        return isinstance(value, str) and re.fullmatch(r"auto|cpu|cuda(:\d+)?",
                                                       value.lower()) is not None

    def convert(self, value: Any) -> Any:
        return value.lower()

    def describe(self) -> str:
        return "auto, cpu, cuda or cuda:N"


def count(low: int, high: int = MAX_COUNT) -> Interval:
    """An integer in [low, high] (a count passed on to torch/numpy)."""
    return Interval(int, low, high)


#: a non-empty name (for methods' own parameters too)
NAME = _Text()


def _s(name: str, default: Any, help: str, *constraints: Constraint) -> Parameter:
    return Parameter(name, default, tuple(constraints), help)


#: the settings every adaptation method shares (``None``: the method's default, declared in
#: its registration's ``defaults``). ``order`` (also an explicit permutation from the
#: library) and ``query_cams`` (:func:`reidcli.cameras.parse_cameras`) are checked on their
#: own.
SETTINGS: tuple[Parameter, ...] = (
    _s("feature", None, "Store feature (default: the store's default feature).", NONE, NAME),
    _s("trial", 0, "Protocol trial to adapt.", count(0)),
    _s("query_cams", None, "Adapt only queries of these 0-based camids (in every domain; "
       "default: all)."),
    _s("batch_size", None, "Queries per batch.", count(1)),
    _s("steps", 1, "Optimisation steps per batch T.", count(1, MAX_STEPS)),
    _s("lr", None, "Learning rate.", Interval(float, 0.0)),
    _s("optimizer", "adam", "adam | sgd.", Options(("adam", "sgd"))),
    _s("episodic", False, "Reset the state before every batch.", BOOL),
    _s("split_by_query_camera", False, "One independent stream per query camera (setting A).",
       BOOL),
    _s("emit", "pre", "pre (Alg 2: before the batch's update) | post.",
       Options(("pre", "post"))),
    _s("order", "shuffle", "shuffle (seeded) | stored."),
    _s("seed", 0, "Seed of the order, subsamples, grounding.", SEED),
    _s("stats", "pooled", "pooled (Alg 1) | separate.", Options(("pooled", "separate"))),
    _s("std_ddof", 0, "0 population std | 1 unbiased.", Interval(int, 0, 1)),
    _s("eps", 1e-6, "Floor of the scales ε.", Interval(float, 0.0, 1.0, closed="right")),
    _s("stats_max_per_camera", None, "At most N rows per camera for the statistics "
       "(default: all).", NONE, count(1)),
    _s("grounding", 0, "Grounding rows per batch (seen-camera / source samples).", count(0)),
    _s("grounding_split", "auto", "Store split of the grounding pool (auto: grounding, else "
       "train).", NAME),
    _s("bn_mode", None, "batch | running.", NONE, Options(("batch", "running"))),
    _s("device", "auto", "auto | cpu | cuda.", _Device()),
    _s("workers", None, "Image loader workers (default: automatic).", NONE, count(0, 1024)),
)
SETTING_NAMES = tuple(p.name for p in SETTINGS)
declare_settings("adapt", SETTINGS)        # methods' defaults of them carry their constraints

#: which methods read which settings: ``every`` method; the camera ``stats``; the ``loop``
#: of an online method (``build``); the ``model`` of a method that re-runs the backbone
GROUPS: dict[str, tuple[str, ...]] = {
    "every": ("feature", "trial", "query_cams"),
    "stats": ("stats", "std_ddof", "eps", "stats_max_per_camera", "seed"),
    "loop": ("batch_size", "steps", "lr", "optimizer", "episodic", "split_by_query_camera",
             "emit", "order", "seed", "grounding", "grounding_split", "device"),
    "model": ("bn_mode", "workers"),
}

#: what to do, per shared setting, when its value is refused
HINTS = {
    "seed": "give an integer seed in [0, 2³²)",
    "std_ddof": "0 = population std (the paper's formula), 1 = unbiased",
    "steps": "the paper uses 1 step per batch (docs/methods/dart3.md)",
    "lr": "give a small positive learning rate (`reid methods --stage adapt` lists each "
          "method's)",
    "eps": "the floor of the scales; the default is 1e-6",
    "episodic": "give true or false (also yes/no, 1/0)",
    "split_by_query_camera": "give true or false (also yes/no, 1/0)",
    "workers": "give 0 (load in this process) or a few loader workers",
}


# -- the methods -------------------------------------------------------------------------------
def adapt_method(name: str):
    """The registry entry of adaptation method ``name`` (its module declares its parameters,
    defaults and how it runs: :data:`EXTRAS`)."""
    from reidcli import registry
    return registry.get(name, "adapt")


def method_names() -> list[str]:
    """The adaptation methods (aliases such as ``dart3-lite`` excluded)."""
    from reidcli import registry
    return [m.name for m in registry.methods("adapt") if "alias_of" not in m.extras]


def method_defaults(name: str) -> dict[str, Any]:
    """Every default of method ``name``: its own parameters' and its defaults of the shared
    settings (batch size, lr, BN mode …; docs/methods/dart3.md)."""
    return adapt_method(name).defaults()


def own_parameters(info) -> tuple[Parameter, ...]:
    """The parameters a method declares for itself (not its defaults of shared settings);
    an alias has its target's."""
    if "alias_of" in info.extras:
        info = adapt_method(info.extras["alias_of"][0])
    return tuple(p for p in info.parameters if p.name not in SETTING_NAMES)


def setting_defaults(info) -> dict[str, Any]:
    """The method's defaults of shared settings (``batch_size``, ``lr``, ``bn_mode`` …)."""
    return {p.name: p.default for p in info.parameters if p.name in SETTING_NAMES}


def merged_extras(info) -> dict[str, Any]:
    """``info.extras``, an alias's over its target's."""
    if "alias_of" in info.extras:
        return {**adapt_method(info.extras["alias_of"][0]).extras, **info.extras}
    return dict(info.extras)


def fixed_values(info) -> dict[str, Any]:
    """The parameters an alias fixes (``dart3-lite``: ``{"mode": "lite"}``)."""
    alias = info.extras.get("alias_of")
    return dict(alias[1]) if alias else {}


def needs_model(extras: Mapping[str, Any], values: Mapping[str, Any] | None) -> bool:
    """Whether a method re-runs the backbone with ``values`` of its parameters (with
    ``values=None``: whether it may, for some value)."""
    need = extras.get("needs_model", False)
    if isinstance(need, Mapping):
        if values is None:
            return bool(need)
        return any(values.get(k) in tuple(v) for k, v in need.items())
    return bool(need)


def setting_groups(info) -> tuple[str, ...]:
    """The groups of :data:`SETTINGS` method ``info`` reads."""
    extras = merged_extras(info)
    fixed = fixed_values(info)
    groups = ["every", *extras.get("settings", ())]
    if "build" in extras:
        groups.append("loop")
    need = extras.get("needs_model")
    if isinstance(need, Mapping) and fixed and all(k in fixed for k in need):
        uses = needs_model(extras, fixed)           # an alias fixing the deciding values
    else:
        uses = needs_model(extras, None)
    if uses:
        groups.append("model")
    return tuple(dict.fromkeys(groups))


def read_settings(info) -> tuple[str, ...]:
    """The shared settings method ``info`` reads, in :data:`SETTINGS` order."""
    names = {n for g in setting_groups(info) for n in GROUPS.get(g, ())}
    return tuple(n for n in SETTING_NAMES if n in names)


def defaults_of(parameters: Sequence[Parameter]) -> dict[str, Any]:
    return {p.name: p.default for p in parameters}


def method_label(name: str, settings: Mapping[str, Any] | None = None) -> str:
    """How plots name adaptation method ``name`` run with ``settings`` (its registration's
    ``label``; the name when it declares none or is not registered)."""
    from reidcli import registry

    lowered = str(name).lower()
    found = registry.lookup(lowered, ["adapt"])
    if found is None:
        found = next((m for m in registry.methods("adapt")
                      if lowered in m.extras.get("spellings", ())), None)
    return label_of(found, settings) if found is not None else str(name)


def label_of(info, settings: Mapping[str, Any] | None = None) -> str:
    """The ``label`` method ``info`` declares (called with ``settings`` when it is a
    function), else its name."""
    label = info.extras.get("label")
    if callable(label):
        return str(label(dict(settings or {})))
    return str(label) if label else info.name


# -- the configuration -------------------------------------------------------------------------
class _ConfigMethods(OwnParameters):
    """Behaviour of :class:`AdaptConfig` (its fields come from :data:`SETTINGS`)."""

    def __init__(self, method: str = "dart3", *, params: Mapping[str, Any] | None = None,
                 **settings: Any):
        self.method = method
        for p in SETTINGS:
            setattr(self, p.name, p.default)
        own = dict(params or {})
        for name, value in settings.items():
            if name in SETTING_NAMES:
                setattr(self, name, value)
            else:
                own[name] = value          # the method's own parameter (checked by resolved)
        self.params = own


    @property
    def uses_model(self) -> bool:
        """True when the method re-runs the backbone (needs a model and the images)."""
        return needs_model(merged_extras(adapt_method(self.method)), self.params)

    def resolved(self) -> "AdaptConfig":
        """A copy with the method's defaults filled in and every value validated."""
        info = adapt_method(canonical_method(self.method))
        target = adapt_method(info.extras["alias_of"][0]) if "alias_of" in info.extras \
            else info
        declared = own_parameters(info)
        names = {p.name for p in declared}
        unknown = sorted(set(self.params) - names)
        if unknown:                     # a ParameterError: the CLI names the flag it came by
            raise ParameterError(OWNER, unknown[0], self.params[unknown[0]],
                                 f"is not a setting of {info.name}",
                                 f"its settings: {', '.join(sorted(names))} and those of "
                                 f"every method ({', '.join(SETTING_NAMES)})")
        own = {**defaults_of(declared), **_fixed(info, self.params)}
        defaults = setting_defaults(target)
        unset = lambda v: v is None or (isinstance(v, str) and v.strip().lower() == "none")
        values = {n: defaults[n] if unset(getattr(self, n)) and n in defaults
                  else getattr(self, n) for n in SETTING_NAMES}
        read = set(read_settings(info))
        hints = {**HINTS, **merged_extras(info).get("hints", {})}
        checked: dict[str, Any] = {}
        for p in SETTINGS:
            if p.constraints and (values[p.name] is not None or p.name in read):
                checked[p.name] = _check(p, values[p.name], hints)
        if isinstance(values["order"], str) or values["order"] is None:
            _choice("order", values["order"], ("shuffle", "stored"))
        from reidcli.cameras import parse_cameras
        checked["query_cams"] = parse_cameras(values["query_cams"], "query_cams", owner=OWNER)
        for p in declared:
            own[p.name] = _check(p, own[p.name], hints) if p.constraints else own[p.name]
        cfg = AdaptConfig(target.name, params=own, **{**values, **checked})
        cfg._validate(merged_extras(info))
        return cfg

    def _validate(self, extras: Mapping[str, Any]) -> None:
        """The checks between values (each value's own range: :meth:`resolved`)."""
        if self.lr is not None and self.lr > MAX_FLOAT:
            raise ParameterError(OWNER, "lr", self.lr, f"must be ≤ {MAX_FLOAT:g}",
                                 HINTS["lr"])
        if "build" in extras:
            for name in ("batch_size", "lr"):
                if getattr(self, name) is None:
                    raise ParameterError(OWNER, name, None, f"has no default for {self.method}",
                                         f"give {param(name)}")
        if "check" in extras:
            extras["check"](self)
        if self.uses_model and self.bn_mode == "batch" and self.batch_size < 2:
            mode = f"{self.params['mode']} mode" if "mode" in self.params else "model mode"
            raise ParameterError(OWNER, "batch_size", self.batch_size,
                                 f"with {self.method} ({mode}): batch-statistics BN needs at "
                                 "least 2 rows per batch",
                                 f"use {param('batch_size', 2)} or more, "
                                 f"{param('bn_mode', 'running')}, or a method that works on "
                                 "the stored embeddings (e.g. dart3-lite)")

    def as_params(self) -> dict[str, Any]:
        """Every setting and the method's own parameters, JSON-ready (``/adapt/<method>``
        attr ``params_json``, the output store's provenance)."""
        out = {"method": self.method, **{n: getattr(self, n) for n in SETTING_NAMES},
               **self.params}
        if not isinstance(self.order, str):
            out["order"] = "explicit"
        return out


AdaptConfig = dataclasses.make_dataclass(
    "AdaptConfig",
    [("method", str, dataclasses.field(default="dart3")),
     *[(p.name, Any, dataclasses.field(default=p.default)) for p in SETTINGS],
     ("params", dict, dataclasses.field(default_factory=dict))],
    bases=(_ConfigMethods,), init=False)
AdaptConfig.__module__ = __name__
AdaptConfig.__doc__ = """What to adapt and how: ``method``, the shared :data:`SETTINGS`
(fields) and ``params``, the method's own parameters (keyword arguments that are not shared
settings go there: ``AdaptConfig("temp", temp_k=5)``). ``order`` is ``"shuffle"`` (seeded
permutation), ``"stored"`` (store order) or, from the library API, an explicit sequence of
positions into the selected queries."""


def _fixed(info, given: Mapping[str, Any]) -> dict[str, Any]:
    """``given`` with an alias's fixed values; a contradicting value is a ParameterError."""
    out = dict(given)
    for name, value in fixed_values(info).items():
        if name in out and str(out[name]).lower() != str(value):
            target = info.extras["alias_of"][0]
            raise ParameterError(OWNER, name, out[name],
                                 f"contradicts {info.name} (= {target} {param(name, value)})",
                                 f"drop {param(name)} (or adapt with {target} and it)")
        out[name] = value
    return out


def _check(p: Parameter, value: Any, hints: Mapping[str, str]) -> Any:
    """``value`` checked against ``p``'s constraints and converted (``"3"`` → 3)."""
    try:
        return check_param(OWNER, p.name, value, *p.constraints)
    except ParameterError as refused:
        options = [c.values for c in p.constraints if isinstance(c, Options)]
        if options and not (value is None and NONE in p.constraints):
            _choice(p.name, value, options[0])
        raise ParameterError(OWNER, p.name, value, refused.requirement,
                             hints.get(p.name, f"see {param(p.name)} in `reid adapt --help`")
                             ) from None


def canonical_method(method: str) -> str:
    """The registered name of adaptation method ``method`` (``no-adapt`` → ``none``);
    unknown names are a one-line UsageError."""
    from reidcli import registry

    name = str(method).lower()
    if name in NUMPY_ONLY:            # closed form (reidcli/adapt/norm.py): no discovery of
        import reidcli.adapt.norm  # noqa: F401   the torch methods, so no torch import
        return name
    methods = registry.methods("adapt")
    for info in methods:
        if name in info.extras.get("spellings", ()):
            return info.name
    if not any(m.name == name for m in methods):
        raise UsageError(f"adaptation method {method!r} is unknown",
                         f"use one of {', '.join(m.name for m in methods)}")
    return name


#: methods whose module imports no torch (reidcli/adapt/norm.py): found without importing
#: the others, so that a z-score costs no torch import
NUMPY_ONLY = ("norm", "none")


def _choice(name: str, value: Any, allowed: Sequence[str]) -> None:
    if value not in allowed:
        raise ParameterError(OWNER, name, value, f"is not one of {', '.join(allowed)}",
                             f"use {param(name, allowed[0])}")


__all__ = ["AdaptConfig", "SETTINGS", "GROUPS", "adapt_method", "canonical_method",
           "label_of", "method_defaults", "method_label", "method_names", "own_parameters",
           "read_settings"]
