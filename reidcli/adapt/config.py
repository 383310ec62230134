"""Hyper-parameters of ``reid adapt`` and the per-method defaults (docs/methods/dart3.md).

Every option of docs/methods/dart3.md is a field of :class:`AdaptConfig`; ``None`` means "the
method's default", declared by the method's own module in the registry
(:func:`method_defaults`) and resolved by :meth:`AdaptConfig.resolved`.
"""
from __future__ import annotations

import dataclasses
import re
from typing import Any, Sequence

from reidcli.errors import ParameterError, UsageError
from reidcli.naming import param
from reidcli.params import BOOL, NONE, SEED, Constraint, Interval, Options, check_param

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


def _count(low: int, high: int = MAX_COUNT) -> Interval:
    return Interval(int, low, high)


#: every field's allowed values (:mod:`reidcli.params` constraints, docs/methods/dart3.md);
#: :meth:`AdaptConfig.resolved` checks each value against them and converts it (``"3"`` → 3,
#: ``"yes"`` → True). ``method`` (the registry), ``order`` (also an explicit permutation)
#: and ``query_cams`` (:func:`reidcli.cameras.parse_cameras`) are checked on their own.
CONSTRAINTS: dict[str, tuple[Constraint, ...]] = {
    "mode": (Options(("lite", "full")),),
    "feature": (NONE, _Text()),
    "trial": (_count(0),),
    "batch_size": (_count(1),),
    "steps": (_count(1, MAX_STEPS),),
    "lr": (Interval(float, 0.0),),
    "optimizer": (Options(("adam", "sgd")),),
    "tau": (Interval(float, *TAU_RANGE),),
    "topk": (_count(1),),
    "distance": (Options(("euclidean", "cosine")),),
    "external": (BOOL,),
    "episodic": (BOOL,),
    "split_by_query_camera": (BOOL,),
    "emit": (Options(("pre", "post")),),
    "seed": (SEED,),
    "stats": (Options(("pooled", "separate")),),
    "std_ddof": (Interval(int, 0, 1),),
    "eps": (Interval(float, 0.0, 1.0, closed="right"),),
    "stats_max_per_camera": (NONE, _count(1)),
    "grounding": (_count(0),),
    "grounding_split": (_Text(),),
    "bn_mode": (NONE, Options(("batch", "running"))),
    "tent_logits": (Options(("classifier", "features")),),
    "temp_k": (_count(1),),
    "temp_gallery_sample": (_count(1),),
    "temp_reg": (Interval(float, 0.0),),
    "precision": (Options(("fp32", "bf16")),),
    "device": (_Device(),),
    "workers": (NONE, _count(0, 1024)),
}

#: what to do, per field, when its value is refused
HINTS = {
    "seed": "give an integer seed in [0, 2³²)",
    "std_ddof": "0 = population std (the paper's formula), 1 = unbiased",
    "steps": "the paper uses 1 step per batch (docs/methods/dart3.md)",
    "lr": "give a small positive learning rate (dart3 1e-4, tent/temp 3.5e-4)",
    "tau": "the paper uses 100 with Euclidean distances (docs/methods/dart3.md)",
    "eps": "the floor of the scales; the default is 1e-6",
    "external": "give true or false (also yes/no, 1/0)",
    "episodic": "give true or false (also yes/no, 1/0)",
    "split_by_query_camera": "give true or false (also yes/no, 1/0)",
    "workers": "give 0 (load in this process) or a few loader workers",
}


def adapt_method(name: str):
    """The registry entry of adaptation method ``name`` (its module declares defaults and how
    it runs: ``closed_form`` or ``build``, ``needs_model``, ``alias_of``, ``spellings``)."""
    from reidcli import registry
    return registry.get(name, "adapt")


def method_names() -> list[str]:
    """The adaptation methods (aliases such as ``dart3-lite`` excluded)."""
    from reidcli import registry
    return [m.name for m in registry.methods("adapt") if "alias_of" not in m.extras]


def method_defaults(name: str) -> dict[str, Any]:
    """Default batch size, optimiser lr and BN mode of ``name`` (docs/methods/dart3.md)."""
    return adapt_method(name).defaults()


@dataclasses.dataclass
class AdaptConfig:
    """What to adapt and how (CLI option in brackets; defaults = docs/methods/dart3.md).

    ``order`` is ``"shuffle"`` (seeded permutation), ``"stored"`` (store order) or, from the
    library API, an explicit sequence of positions into the selected queries.
    """

    method: str = "dart3"
    mode: str = "lite"                         # --mode lite|full (dart3)
    feature: str | None = None                 # --feature
    trial: int = 0                             # --trial (stores with several trials)
    query_cams: list[int] | None = None        # --query-cams
    batch_size: int | None = None              # --batch-size (method default)
    steps: int = 1                             # --steps T
    lr: float | None = None                    # --lr (method default)
    optimizer: str = "adam"                    # --optimizer adam|sgd
    tau: float = 100.0                         # --tau
    topk: int = 3                              # --topk
    distance: str = "euclidean"                # --distance euclidean|cosine
    external: bool = True                      # --no-external sets False (Tab 4 ablation)
    episodic: bool = False                     # --episodic
    split_by_query_camera: bool = False        # --split-by-query-camera
    emit: str = "pre"                          # --emit pre|post
    order: Any = "shuffle"                     # --order shuffle|stored
    seed: int = 0                              # --seed
    stats: str = "pooled"                      # --stats pooled|separate
    std_ddof: int = 0                          # --std-ddof 0|1
    eps: float = 1e-6                          # --eps
    stats_max_per_camera: int | None = None    # --stats-max-per-camera
    grounding: int = 0                         # --grounding N
    grounding_split: str = "auto"              # --grounding-split
    bn_mode: str | None = None                 # --bn-mode batch|running (method default)
    tent_logits: str = "classifier"            # --tent-logits classifier|features
    temp_k: int = 50                           # --temp-k
    temp_gallery_sample: int = 30000           # --temp-gallery-sample
    temp_reg: float = 1e-4                     # --temp-reg
    precision: str = "fp32"                    # --precision fp32|bf16 (DART3's gallery GEMMs)
    device: str = "auto"                       # --device auto|cpu|cuda
    workers: int | None = None                 # --workers (image loading)

    # -- derived ------------------------------------------------------------------------
    @property
    def uses_model(self) -> bool:
        """True when the method re-runs the backbone (needs a model and the images)."""
        return self.mode in adapt_method(self.method).extras.get("needs_model", ())

    @property
    def optimises(self) -> bool:
        return "build" in adapt_method(self.method).extras

    def resolved(self) -> "AdaptConfig":
        """A copy with the method defaults filled in and every value validated."""
        method, mode = canonical_method(self.method, self.mode)
        defaults = method_defaults(method)
        unset = lambda v: v is None or (isinstance(v, str) and v.strip().lower() == "none")
        cfg = dataclasses.replace(
            self, method=method, mode=mode,
            batch_size=defaults["batch_size"] if unset(self.batch_size) else self.batch_size,
            lr=defaults["lr"] if unset(self.lr) else self.lr,
            bn_mode=defaults["bn_mode"] if unset(self.bn_mode) else self.bn_mode)
        cfg = dataclasses.replace(cfg, **cfg._checked_values())
        cfg._validate()
        return cfg

    def _checked_values(self) -> dict[str, Any]:
        """Every field checked against :data:`CONSTRAINTS` and converted (a ParameterError
        naming the first field refused); ``order`` and ``query_cams`` likewise."""
        from reidcli.cameras import parse_cameras

        out: dict[str, Any] = {}
        for name, constraints in CONSTRAINTS.items():
            value = getattr(self, name)
            try:
                out[name] = check_param(OWNER, name, value, *constraints)
            except ParameterError as refused:
                options = [c.values for c in constraints if isinstance(c, Options)]
                if options:
                    _choice(name, value, options[0])
                raise ParameterError(OWNER, name, value, refused.requirement,
                                     HINTS.get(name, f"see {param(name)} in docs/methods/"
                                                     "dart3.md")) from None
        if isinstance(self.order, str) or self.order is None:
            _choice("order", self.order, ("shuffle", "stored"))
        out["query_cams"] = parse_cameras(self.query_cams, "query_cams", owner=OWNER)
        return out

    def _validate(self) -> None:
        """The checks between fields (each field's own range: :meth:`_checked_values`)."""
        for name in ("lr", "temp_reg"):
            if getattr(self, name) > MAX_FLOAT:
                raise ParameterError(OWNER, name, getattr(self, name), f"must be ≤ {MAX_FLOAT:g}",
                                     HINTS.get(name, "give a small weight (default 1e-4)"))
        if self.method == "dart3" and not self.external and self.mode == "lite":
            raise UsageError(f"{param('external', False)} with {param('mode', 'lite')} leaves "
                             "nothing to learn",
                             f"use {param('mode', 'full')} (BN γ/β only, the Tab 4 ablation)")
        if self.uses_model and self.bn_mode == "batch" and self.batch_size < 2:
            raise ParameterError(OWNER, "batch_size", self.batch_size,
                                 f"with {self.method} "
                                 f"({self.mode if self.method == 'dart3' else 'model'} mode): "
                                 "batch-statistics BN needs at least 2 rows per batch",
                                 f"use {param('batch_size', 2)} or more, "
                                 f"{param('bn_mode', 'running')}, or dart3 "
                                 f"{param('mode', 'lite')} (works with batches of one)")

    def as_params(self) -> dict[str, Any]:
        """Every hyper-parameter, JSON-ready (``/adapt/<method>`` attr ``params_json``)."""
        out = dataclasses.asdict(self)
        if not isinstance(self.order, str):
            out["order"] = "explicit"
        return out


def canonical_method(method: str, mode: str = "lite") -> tuple[str, str]:
    """``dart3-lite`` → ``("dart3", "lite")``; unknown names are a one-line UsageError."""
    from reidcli import registry

    name = method.lower()
    if name in ("none", "norm"):      # closed form (reidcli/adapt/norm.py): no discovery of
        import reidcli.adapt.norm  # noqa: F401   the torch methods, so no torch import
        return name, mode
    methods = registry.methods("adapt")
    for info in methods:
        if name in info.extras.get("spellings", ()):
            name = info.name
    info = next((m for m in methods if m.name == name), None)
    if info is None:
        raise UsageError(f"adaptation method {method!r} is unknown",
                         f"use one of {', '.join(m.name for m in methods)}")
    if "alias_of" in info.extras:
        name, alias_mode = info.extras["alias_of"]
        if str(mode).lower() != alias_mode:         # e.g. dart3-lite with mode=full
            raise ParameterError(OWNER, "mode", mode,
                                 f"contradicts {info.name} (= {name} {param('mode', alias_mode)})",
                                 f"drop {param('mode')} (or adapt with {name} and it)")
        mode = alias_mode
    return name, mode


def _choice(name: str, value: Any, allowed: Sequence[str]) -> None:
    if value not in allowed:
        raise ParameterError(OWNER, name, value, f"is not one of {', '.join(allowed)}",
                             f"use {param(name, allowed[0])}")


__all__ = ["AdaptConfig", "adapt_method", "canonical_method", "method_defaults", "method_names"]
