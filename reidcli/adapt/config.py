"""Hyper-parameters of ``reid adapt`` and the per-method defaults (dart3.md §4.5, §5, §10).

Every option of dart3.md §10 is a field of :class:`AdaptConfig`; ``None`` means "the
method's default" (:data:`METHOD_DEFAULTS`), resolved by :meth:`AdaptConfig.resolved`.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Sequence

from reidcli.errors import UsageError

#: methods of ``reid adapt``; ``dart3-lite`` is an alias of ``dart3 --mode lite``
METHODS = ("none", "norm", "tent", "temp", "dart3")
ALIASES = {"dart3-lite": ("dart3", "lite"), "dart3_lite": ("dart3", "lite"),
           "no-adapt": ("none", None)}
#: methods that re-run the backbone on the query images
MODEL_METHODS = ("tent", "temp")

#: dart3.md §4.5: default batch size, optimiser lr and BN mode of each method
METHOD_DEFAULTS: dict[str, dict[str, Any]] = {
    "none": dict(batch_size=64, lr=0.0, bn_mode=None),
    "norm": dict(batch_size=64, lr=0.0, bn_mode=None),
    "tent": dict(batch_size=64, lr=3.5e-4, bn_mode="batch"),
    "temp": dict(batch_size=16, lr=3.5e-4, bn_mode="running"),
    "dart3": dict(batch_size=8, lr=1e-4, bn_mode="batch"),
}


@dataclasses.dataclass
class AdaptConfig:
    """What to adapt and how (CLI option in brackets; defaults = dart3.md §5).

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
        """True when the method re-runs the backbone (needs --model and the images)."""
        return self.method in MODEL_METHODS or (self.method == "dart3" and self.mode == "full")

    @property
    def optimises(self) -> bool:
        return self.method in ("tent", "temp", "dart3")

    def resolved(self) -> "AdaptConfig":
        """A copy with the method defaults filled in and every value validated."""
        method, mode = canonical_method(self.method, self.mode)
        defaults = METHOD_DEFAULTS[method]
        cfg = dataclasses.replace(
            self, method=method, mode=mode,
            batch_size=defaults["batch_size"] if self.batch_size is None else self.batch_size,
            lr=defaults["lr"] if self.lr is None else self.lr,
            bn_mode=defaults["bn_mode"] if self.bn_mode is None else self.bn_mode)
        cfg._validate()
        return cfg

    def _validate(self) -> None:
        _choice("--mode", self.mode, ("lite", "full"))
        _choice("--optimizer", self.optimizer, ("adam", "sgd"))
        _choice("--distance", self.distance, ("euclidean", "cosine"))
        _choice("--emit", self.emit, ("pre", "post"))
        _choice("--stats", self.stats, ("pooled", "separate"))
        _choice("--tent-logits", self.tent_logits, ("classifier", "features"))
        _choice("--precision", self.precision, ("fp32", "bf16"))
        if self.bn_mode is not None:
            _choice("--bn-mode", self.bn_mode, ("batch", "running"))
        if isinstance(self.order, str):
            _choice("--order", self.order, ("shuffle", "stored"))
        _positive("--batch-size", self.batch_size)
        _positive("--steps", self.steps)
        _positive("--topk", self.topk)
        _positive("--temp-k", self.temp_k)
        _positive("--temp-gallery-sample", self.temp_gallery_sample)
        if self.std_ddof not in (0, 1):
            raise UsageError(f"--std-ddof {self.std_ddof} must be 0 or 1",
                             "0 = population std (the paper's formula), 1 = unbiased")
        for option, value in (("--tau", self.tau), ("--eps", self.eps)):
            if not value > 0:
                raise UsageError(f"{option} {value} must be > 0", "give a positive number")
        for option, value in (("--lr", self.lr), ("--temp-reg", self.temp_reg),
                              ("--grounding", self.grounding)):
            if value < 0:
                raise UsageError(f"{option} {value} must be ≥ 0", "give 0 or more")
        if self.stats_max_per_camera is not None:
            _positive("--stats-max-per-camera", self.stats_max_per_camera)
        if self.method == "dart3" and not self.external and self.mode == "lite":
            raise UsageError("--no-external with --mode lite leaves nothing to learn",
                             "use --mode full (BN γ/β only, the Tab 4 ablation)")
        if self.uses_model and self.bn_mode == "batch" and self.batch_size < 2:
            raise UsageError(f"--batch-size {self.batch_size} with {self.method} "
                             f"({self.mode if self.method == 'dart3' else 'model'} mode): "
                             "batch-statistics BN needs at least 2 rows per batch",
                             "use --batch-size 2 or more, --bn-mode running, or dart3 "
                             "--mode lite (works with batches of one)")

    def as_params(self) -> dict[str, Any]:
        """Every hyper-parameter, JSON-ready (``/adapt/<method>`` attr ``params_json``)."""
        out = dataclasses.asdict(self)
        if not isinstance(self.order, str):
            out["order"] = "explicit"
        return out


def canonical_method(method: str, mode: str = "lite") -> tuple[str, str]:
    """``dart3-lite`` → ``("dart3", "lite")``; unknown names are a one-line UsageError."""
    name = method.lower()
    if name in ALIASES:
        name, forced = ALIASES[name]
        mode = forced or mode
    if name not in METHODS:
        raise UsageError(f"adaptation method {method!r} is unknown",
                         f"use one of {', '.join(METHODS)}, dart3-lite")
    return name, mode


def _choice(option: str, value: str, allowed: Sequence[str]) -> None:
    if value not in allowed:
        raise UsageError(f"{option} {value!r} is not one of {', '.join(allowed)}",
                         f"use {option} {allowed[0]}")


def _positive(option: str, value: int) -> None:
    if value is None or int(value) < 1:
        raise UsageError(f"{option} {value} must be ≥ 1", "give a positive integer")


__all__ = ["AdaptConfig", "METHODS", "METHOD_DEFAULTS", "MODEL_METHODS", "canonical_method"]
