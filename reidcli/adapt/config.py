"""Hyper-parameters of ``reid adapt`` and the per-method defaults (docs/methods/dart3.md).

Every option of docs/methods/dart3.md is a field of :class:`AdaptConfig`; ``None`` means "the
method's default", declared by the method's own module in the registry
(:func:`method_defaults`) and resolved by :meth:`AdaptConfig.resolved`.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Sequence

from reidcli.errors import ParameterError, UsageError
from reidcli.naming import param

#: who the parameters below belong to, in error messages
OWNER = "adaptation"

#: most optimisation steps per batch (the loss history is a [batches, steps] array)
MAX_STEPS = 10_000


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
        cfg = dataclasses.replace(
            self, method=method, mode=mode,
            batch_size=defaults["batch_size"] if self.batch_size is None else self.batch_size,
            lr=defaults["lr"] if self.lr is None else self.lr,
            bn_mode=defaults["bn_mode"] if self.bn_mode is None else self.bn_mode)
        cfg._validate()
        return cfg

    def _validate(self) -> None:
        _choice("mode", self.mode, ("lite", "full"))
        _choice("optimizer", self.optimizer, ("adam", "sgd"))
        _choice("distance", self.distance, ("euclidean", "cosine"))
        _choice("emit", self.emit, ("pre", "post"))
        _choice("stats", self.stats, ("pooled", "separate"))
        _choice("tent_logits", self.tent_logits, ("classifier", "features"))
        _choice("precision", self.precision, ("fp32", "bf16"))
        if self.bn_mode is not None:
            _choice("bn_mode", self.bn_mode, ("batch", "running"))
        if isinstance(self.order, str):
            _choice("order", self.order, ("shuffle", "stored"))
        _positive("batch_size", self.batch_size)
        _positive("steps", self.steps)
        _positive("topk", self.topk)
        _positive("temp_k", self.temp_k)
        _positive("temp_gallery_sample", self.temp_gallery_sample)
        if int(self.seed) < 0:
            raise ParameterError(OWNER, "seed", self.seed, "must be ≥ 0",
                                 "give a non-negative integer seed")
        if self.std_ddof not in (0, 1):
            raise ParameterError(OWNER, "std_ddof", self.std_ddof, "must be 0 or 1",
                                 "0 = population std (the paper's formula), 1 = unbiased")
        if self.steps > MAX_STEPS:
            raise ParameterError(OWNER, "steps", self.steps, f"must be ≤ {MAX_STEPS}",
                                 "the paper uses 1 step per batch (docs/methods/dart3.md)")
        for name, value in (("tau", self.tau), ("eps", self.eps)):
            if not (math.isfinite(float(value)) and value > 0):
                raise ParameterError(OWNER, name, value, "must be a finite number > 0",
                                     "give a positive number")
        for name, value in (("lr", self.lr), ("temp_reg", self.temp_reg),
                            ("grounding", self.grounding)):
            if not (math.isfinite(float(value)) and value >= 0):
                raise ParameterError(OWNER, name, value, "must be a finite number ≥ 0",
                                     "give 0 or more" if name != "lr" else
                                     "give a small positive learning rate (dart3 1e-4)")
        if self.stats_max_per_camera is not None:
            _positive("stats_max_per_camera", self.stats_max_per_camera)
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
    methods = registry.methods("adapt")
    for info in methods:
        if name in info.extras.get("spellings", ()):
            name = info.name
    info = next((m for m in methods if m.name == name), None)
    if info is None:
        raise UsageError(f"adaptation method {method!r} is unknown",
                         f"use one of {', '.join(m.name for m in methods)}")
    if "alias_of" in info.extras:
        name, mode = info.extras["alias_of"]
    return name, mode


def _choice(name: str, value: str, allowed: Sequence[str]) -> None:
    if value not in allowed:
        raise ParameterError(OWNER, name, value, f"is not one of {', '.join(allowed)}",
                             f"use {param(name, allowed[0])}")


def _positive(name: str, value: int) -> None:
    if value is None or int(value) < 1:
        raise ParameterError(OWNER, name, value, "must be ≥ 1", "give a positive integer")


__all__ = ["AdaptConfig", "adapt_method", "canonical_method", "method_defaults", "method_names"]
