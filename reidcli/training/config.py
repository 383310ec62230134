"""Training configuration of the network trainers (``reid train pcb|bot|dgvae|dmgnet|…``):
one declaration of the settings every trainer shares (:data:`COMMON`), and each trainer's
own parameters, declared by its module (docs/architecture.md, "Adding a network trainer").

* :data:`COMMON` — the shared settings (data, model trunk, schedule, execution, evaluation
  during training …), each a :class:`~reidcli.registry.Parameter` with its constraints
  (:mod:`reidcli.params`) and the help its option shows;
* a trainer registers with :func:`reidcli.registry.register_info` (stage ``train-net``)
  ``parameters``: its own parameters (values in :attr:`TrainConfig.params`) and its defaults
  of shared settings (:func:`shared`, with the help its command shows), ``extras``
  (:data:`EXTRAS`).

A trainer's config is the shared settings ← its own parameters: :class:`TrainConfig` holds
the shared settings as fields and the trainer's own in ``params`` (also read as attributes:
``cfg.variant``); ``config.json`` records both, flat. Values are filled from the method's
published defaults, a size preset, then the user's explicit options — in that order — and
checked by :func:`validate_config` (one :class:`~reidcli.errors.ParameterError` naming the
parameter; the CLI maps it to the flag).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from reidcli.device import AMP_CHOICES, CHANNELS_LAST_CHOICES
from reidcli.errors import ParameterError
from reidcli.models.backbone_names import BACKBONES
from reidcli.naming import param
from reidcli.params import NONE, SEED, Constraint, Interval, Options, OwnParameters, check_param
from reidcli.registry import Parameter

#: who the parameters below belong to, in error messages
OWNER = "training"

#: what a trainer's registration ``extras`` may hold (docs/architecture.md)
EXTRAS = {
    "trainer": "the TrainerBase subclass the engine runs",
    "presets": "{name: {parameter: value}}: size presets (--preset)",
    "validate": "validate(cfg) or a tuple of them: checks between values (ParameterError), "
                "after each value's own constraints",
    "batch": "batch(values, given): derives batch_size (e.g. P×K) before the checks",
    "data_parameter": "the parameter that names the training data instead of --dataset "
                      "(e.g. DMG-Net's sources)",
    "data_example": "what to show when the data parameter is missing",
    "sources_parameter": "a parameter that, when given, names the training data instead of "
                         "--dataset (BoT's sources)",
}


@dataclasses.dataclass
class TrainConfig(OwnParameters):
    """The settings every network trainer shares (saved with ``params``, the trainer's own
    parameters, as ``RUN_DIR/config.json``)."""

    method: str = "pcb"
    # data
    dataset: str = "synthetic"
    root: str | None = None
    options: dict = dataclasses.field(default_factory=dict)
    train_split: str | None = "train"
    train_cams: list | None = None
    max_images: int | None = None
    subsample_seed: int = 0
    # model
    backbone: str = "resnet50"
    last_stride: int = 1
    init: str = "imagenet"
    input_size: tuple = (384, 128)
    parts: int = 6
    reduced_dim: int = 256
    dropout: float = 0.5
    rpp: bool = False
    # optimisation
    epochs: int = 60
    batch_size: int = 64              # images per batch (BoT: P×K)
    p: int = 16                       # BoT: identities per batch
    k: int = 4                        # BoT: images per identity
    optimizer: str = "sgd"
    lr: float = 0.1
    backbone_lr_mult: float = 0.1
    momentum: float = 0.9
    nesterov: bool = True
    weight_decay: float = 5e-4
    lr_steps: list = dataclasses.field(default_factory=lambda: [40])
    lr_gamma: float = 0.1
    warmup_epochs: int = 0
    warmup_factor: float = 0.1
    label_smooth: float = 0.0
    triplet_margin: float = 0.3
    random_erasing: float = 0.0
    rpp_classifier_epochs: int = 10
    rpp_finetune_epochs: int = 10
    rpp_lr: float = 0.01
    iters_per_epoch: int | None = None    # DG-VAE, DMG-Net: default one pass (their docs)
    # execution
    device: str = "auto"
    amp: str = "off"
    channels_last: str = "auto"
    workers: int | None = None
    seed: int = 1
    checkpoint_every: int = 1
    log_every: int = 20
    max_iters: int | None = None
    preset: str | None = None
    # evaluation during training, checkpoint selection, logging (docs/training.md)
    eval_every: int | None = None         # epochs; None: no evaluation during training
    eval_dataset: str | None = None       # None: the training dataset (its test trials)
    eval_options: dict = dataclasses.field(default_factory=dict)   # its loader options
    keep: str = "last"                    # last | best (model_best.pt by keep_metric)
    keep_metric: str = "mAP"              # mAP | rank1
    tensorboard: bool = False
    #: the trainer's own parameters (declared by its module), read as attributes too
    params: dict = dataclasses.field(default_factory=dict)


    def __setattr__(self, name: str, value: Any) -> None:
        params = self.__dict__.get("params")
        if params is not None and name in params and name not in _FIELD_NAMES:
            params[name] = value
        else:
            object.__setattr__(self, name, value)

    def as_dict(self, own_fields_only: bool = False) -> dict[str, Any]:
        """The shared settings and the trainer's own parameters, flat (``config.json``;
        ``own_fields_only`` is kept for callers: a config holds no other trainer's)."""
        d = dataclasses.asdict(self)
        d.update(d.pop("params"))
        d["input_size"] = list(self.input_size)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "TrainConfig":
        """The config recorded as ``d`` (names of neither the shared settings nor the
        method's own parameters are ignored: other versions' records)."""
        method = d.get("method", "pcb")
        own = own_parameters(method)
        values = {k: v for k, v in d.items() if k in _FIELD_NAMES and k != "params"}
        if "input_size" in values:
            values["input_size"] = tuple(values["input_size"])
        params = {p.name: _copy(d.get(p.name, p.default)) for p in own}
        return cls(**values, params=params)


_FIELD_NAMES = frozenset(f.name for f in dataclasses.fields(TrainConfig))


def _copy(value: Any) -> Any:
    import copy
    return copy.deepcopy(value)


# -- constraints of list, size and mapping values -------------------------------------------
class Each(Constraint):
    """A list whose every item satisfies ``item`` (``lr_steps``, ``stage_lrs`` …); the CLI
    reads it as a comma list of ``cast`` (``noun`` and ``example`` in its error)."""

    def __init__(self, item: Interval, noun: str = "numbers", example: str = "1,2"):
        self.item, self.noun, self.example = item, noun, example
        self.cast = item.kind

    def accepts(self, value: Any) -> bool:
        return isinstance(value, (list, tuple)) and all(self.item.accepts(v) for v in value)

    def convert(self, value: Any) -> Any:
        return [self.item.convert(v) for v in value]

    def describe(self) -> str:
        return f"a list of {self.item.describe()}"


class _Size(Each):
    """``HxW`` in pixels, each side in [16, 4096]."""

    def __init__(self):
        super().__init__(Interval(int, 16, 4096), "sides", "384x128")


class _Form(Constraint):
    """A value the CLI builds from its own syntax (``form``), checked for its type only."""

    def __init__(self, form: str, kinds: tuple, text: str):
        self.form, self.kinds, self.text = form, kinds, text

    def accepts(self, value: Any) -> bool:
        return isinstance(value, self.kinds)

    def describe(self) -> str:
        return self.text


#: ``HxW`` (``input_size``)
SIZE = _Size()
#: repeated ``key=value`` (loader options, DG-VAE's ``--set``)
KEY_VALUES = _Form("key_values", (dict,), "key=value pairs")
#: repeated ``NAME.KEY=VALUE`` (per-dataset loader options)
NAMED_KEY_VALUES = _Form("named_key_values", (dict,), "NAME.KEY=VALUE pairs")
#: a comma list of names (datasets, domains)
NAMES = _Form("names", (list, tuple), "a comma list of names")


class _Cameras(Each):
    """0-based camera ids; the CLI reads ``0,2`` or ``0-3``
    (:func:`reidcli.cameras.parse_cameras`)."""

    form = "cameras"

    def __init__(self):
        super().__init__(Interval(int, 0, 10_000), "camera ids", "0,2")


#: 0-based camera ids
CAMERAS = _Cameras()
#: ``on`` | ``off``
SWITCH = _Form("switch", (bool,), "on or off")
#: a flag (``--name``; ``--no-name`` for one that defaults to true)
FLAG = _Form("flag", (bool,), "true or false")


class SameOr(Constraint):
    """None (the CLI's ``same``: the value it defaults to) or a value of ``other``."""

    form = "same_or_number"

    def __init__(self, other: Constraint):
        self.other = other

    def accepts(self, value: Any) -> bool:
        return value is None or self.other.accepts(value)

    def convert(self, value: Any) -> Any:
        return None if value is None else self.other.convert(value)

    def describe(self) -> str:
        return f"same or {self.other.describe()}"

#: the evaluation numbers ``keep="best"`` may select on (docs/training.md)
KEEP_METRICS = ("mAP", "rank1")
#: Epoch and iteration counts are bounded so that schedule arithmetic stays in int64; counts
#: of images per batch so that a batch fits any memory.
EPOCHS = Interval(int, 0, 100_000)   # 0: save the initialised model, untrained
POSITIVE = Interval(float, 0, None, closed="right")         # a finite number > 0
NON_NEGATIVE = Interval(float, 0, None)                     # a finite number ≥ 0
FRACTION = Interval(float, 0, 1, closed="left")             # [0, 1)
#: the shared settings' constraints (one per numeric or choice option; :mod:`reidcli.params`):
#: ranges, finiteness, integer-ness, seeds in [0, 2³²)
FIELD_CONSTRAINTS: dict[str, tuple] = {
    "max_images": (NONE, Interval(int, 1, None)),
    "subsample_seed": (SEED,),
    "backbone": (Options(BACKBONES),),
    "last_stride": (Interval(int, 1, 2),),
    "parts": (Interval(int, 1, 64),),
    "reduced_dim": (Interval(int, 1, 65_536),),
    "dropout": (FRACTION,),
    "epochs": (EPOCHS,),
    "batch_size": (Interval(int, 1, 100_000),),
    # a batch-hard triplet (BoT, DMG-Net, DG-VAE) needs negatives: ≥ 2 identities per batch
    "p": (Interval(int, 2, 10_000),),
    "k": (Interval(int, 1, 10_000),),
    "optimizer": (Options(("sgd", "adam")),),
    "lr": (POSITIVE,),
    "backbone_lr_mult": (NON_NEGATIVE,),
    "momentum": (FRACTION,),
    "weight_decay": (NON_NEGATIVE,),
    "lr_gamma": (POSITIVE,),
    "warmup_epochs": (EPOCHS,),
    "warmup_factor": (Interval(float, 0, 1, closed="right"),),
    "label_smooth": (FRACTION,),
    "triplet_margin": (NON_NEGATIVE,),
    "random_erasing": (Interval(float, 0, 1),),
    "rpp_classifier_epochs": (EPOCHS,),
    "rpp_finetune_epochs": (EPOCHS,),
    "rpp_lr": (POSITIVE,),
    "iters_per_epoch": (NONE, Interval(int, 1, 10**9)),
    "amp": (Options(AMP_CHOICES),),
    "channels_last": (Options(CHANNELS_LAST_CHOICES),),
    "workers": (NONE, Interval(int, 0, 1024)),
    "seed": (SEED,),
    "checkpoint_every": (Interval(int, 1, 100_000),),
    "log_every": (Interval(int, 1, 10**9),),
    "max_iters": (NONE, Interval(int, 0, 10**12)),
    "eval_every": (NONE, Interval(int, 1, 100_000)),
    "keep": (Options(("last", "best")),),
    "keep_metric": (Options(KEEP_METRICS),),             # any case: map → mAP
}
#: constraint of each item of a shared list setting (``input_size``: each side, in pixels)
ITEM_CONSTRAINTS: dict[str, Interval] = {
    "input_size": SIZE.item,
    "lr_steps": EPOCHS,
    "train_cams": CAMERAS.item,
}
_LIST_FORMS = {"input_size": SIZE, "lr_steps": Each(EPOCHS, "epochs", "40,70"),
               "options": KEY_VALUES, "eval_options": KEY_VALUES, "nesterov": FLAG,
               "rpp": FLAG, "tensorboard": FLAG}

#: the help of the shared settings' options (a trainer gives its own with :func:`shared`)
COMMON_HELP = {
    "dataset": "Dataset name or alias (reid data list).",
    "root": "Data root (default $REIDCLI_DATA or ./data).",
    "options": "Dataset loader option key=value (repeatable).",
    "train_cams": "Train only on these 0-based cameras (DART3 protocols).",
    "train_split": "train (default) | all.",
    "max_images": "Seeded random subset of training images.",
    "subsample_seed": "",
    "backbone": " | ".join(BACKBONES) + ".",
    "preset": "Shrunk settings (the trainer's presets); explicit options win.",
    "random_erasing": "0.5.",
    "amp": "off | auto | bf16 | fp16 (auto = fp32 on CPU; bf16 works on CPU).",
    "channels_last": "auto | on | off.",
    "device": "auto | cpu | cuda.",
    "workers": "Loader workers.",
    "seed": "0.",
    "checkpoint_every": "Epochs.",
    "log_every": "Iterations.",
    "max_iters": "Stop after N iterations.",
    "eval_every": "Evaluate every N epochs (and after the last) on the query/gallery of the "
                  "dataset, as reid extract --model + reid eval do; mAP, rank1, mINP in "
                  "metrics.csv and the epoch line.",
    "eval_dataset": "--eval-every: the dataset to evaluate on (default: the training "
                    "dataset).",
    "eval_options": "--eval-dataset: loader option key=value (repeatable).",
    "keep": "last (default) | best: also write model_best.pt, the evaluated model with the "
            "highest --keep-metric (needs --eval-every).",
    "keep_metric": "mAP (default) | rank1.",
    "tensorboard": "TensorBoard scalars of every logged term in OUT/tensorboard (pip install "
                   "'reidcli[tensorboard]').",
}


def _constraints(name: str) -> tuple[Constraint, ...]:
    if name in _LIST_FORMS:
        return (_LIST_FORMS[name],)
    if name == "train_cams":
        return (NONE, CAMERAS)
    return tuple(FIELD_CONSTRAINTS.get(name, ()))


#: the settings every network trainer shares, in :class:`TrainConfig` order
COMMON: tuple[Parameter, ...] = tuple(
    Parameter(f.name, f.default_factory() if f.default_factory is not dataclasses.MISSING
              else f.default, _constraints(f.name), COMMON_HELP.get(f.name, ""))
    for f in dataclasses.fields(TrainConfig) if f.name not in ("method", "params"))
COMMON_NAMES = tuple(p.name for p in COMMON)
#: the shared settings every ``reid train <trainer>`` shows (in this order), around the
#: trainer's own list: the data and run first, execution and evaluation last
RUN_SETTINGS = ("dataset", "root", "options", "preset")
EXECUTION_SETTINGS = ("amp", "channels_last", "device", "workers", "seed", "checkpoint_every",
                      "log_every", "max_iters", "eval_every", "eval_dataset", "eval_options",
                      "keep", "keep_metric", "tensorboard")
_COMMON_BY_NAME = {p.name: p for p in COMMON}


def shared(name: str, default: Any = dataclasses.MISSING, help: str | None = None,
           cli: bool = True) -> Parameter:
    """A trainer's declaration of shared setting ``name``: its default (the trainer's
    paper's) and the help its command shows (``cli=False``: a default only, no option)."""
    base = _COMMON_BY_NAME[name]
    return dataclasses.replace(base, default=base.default if default is dataclasses.MISSING
                               else default, help=base.help if help is None else help,
                               cli=cli)


def defaults_only(**values: Any) -> list[Parameter]:
    """The trainer's defaults of shared settings it shows no option for."""
    return [shared(name, value, cli=False) for name, value in values.items()]


# -- the trainers ------------------------------------------------------------------------------
def method_info(method: str):
    """The registry entry of network trainer ``method`` (parameters, presets, trainer class)."""
    from reidcli import registry
    return registry.get(method, "train-net")


def own_parameters(method: str) -> tuple[Parameter, ...]:
    """The parameters trainer ``method`` declares for itself (not shared settings)."""
    return tuple(p for p in method_info(method).parameters if p.name not in _COMMON_BY_NAME)


def config_names(method: str) -> tuple[str, ...]:
    """Every setting of ``method``'s config: the shared ones, then its own."""
    return COMMON_NAMES + tuple(p.name for p in own_parameters(method))


def method_parameters(method: str) -> list[Parameter]:
    """The parameters of ``method``'s config with its defaults and help: the shared settings
    (its declarations of them over :data:`COMMON`), then its own."""
    declared = {p.name: p for p in method_info(method).parameters}
    return [declared.get(p.name, p) for p in COMMON] + list(own_parameters(method))


def method_defaults(method: str) -> dict[str, Any]:
    """Every default of trainer ``method``: the shared settings' ← its declared ones."""
    return _copy({p.name: p.default for p in method_parameters(method)})


def make_config(method: str, preset: str | None = None, **explicit: Any) -> TrainConfig:
    """Defaults of ``method`` ← ``preset`` ← explicit options (``None`` values are ignored).

    When ``epochs`` is given but ``lr_steps``/``warmup_epochs`` are not, they are rescaled
    from the paper's schedule (docs/methods/bot.md): step s of E₀ epochs → round(E·s/E₀).
    """
    info = method_info(method)
    values: dict[str, Any] = method_defaults(method)
    if preset is not None:
        presets = info.extras.get("presets", {})
        if preset not in presets:
            raise ParameterError(OWNER, "preset", preset, "is unknown",
                                 f"use one of {', '.join(presets) or 'none'}")
        values.update(_copy(presets[preset]))
    given = {k: v for k, v in explicit.items() if v is not None and k not in ("method",
                                                                              "preset")}
    unknown = sorted(set(given) - set(values))
    if unknown:
        raise ParameterError(OWNER, unknown[0], given[unknown[0]],
                             f"is not a setting of {method}",
                             f"its settings: {', '.join(sorted(values))}")
    if "epochs" in given and given["epochs"] != values["epochs"]:
        base_epochs = values["epochs"]
        if "lr_steps" not in given:
            values["lr_steps"] = sorted({max(1, round(given["epochs"] * s / base_epochs))
                                         for s in values["lr_steps"]})
        if "warmup_epochs" not in given and values.get("warmup_epochs"):
            values["warmup_epochs"] = max(1, round(given["epochs"] * values["warmup_epochs"]
                                                   / base_epochs))
    values.update(given)
    if "batch" in info.extras:                  # the method's batch (e.g. P × K)
        info.extras["batch"](values, given)
    own = {p.name: values.pop(p.name) for p in own_parameters(method)}
    cfg = TrainConfig(method=method, preset=preset, params=own,
                      **{k: v for k, v in values.items() if k not in ("method", "preset")})
    validate_config(cfg)
    return cfg


def pk_batch(values: dict[str, Any], given: dict[str, Any]) -> None:
    """BoT: ``batch_size`` B is the total P×K — keep K, set P = B / K; without it the
    recorded ``batch_size`` is P×K."""
    k = values["k"]
    if "batch_size" in given and k >= 1:
        b = int(given["batch_size"])
        if b % k:
            near = max(k, round(b / k) * k)
            raise ParameterError(OWNER, "batch_size", b,
                                 f"is not a multiple of {param('k', k)} (a BoT batch is "
                                 "P identities × K images)",
                                 f"use e.g. {param('batch_size', near)}")
        if "p" in given and given["p"] * k != b:
            raise ParameterError(OWNER, "batch_size", b,
                                 f"disagrees with {param('p', given['p'])} × {param('k', k)}",
                                 f"give {param('batch_size')} or {param('p')}, not both")
        values["p"] = b // k
    values["batch_size"] = values["p"] * k


def check_value(p: Parameter, value: Any) -> Any:
    """``value`` of parameter ``p`` checked against its constraints, in canonical form
    (``3.0`` epochs → 3); ParameterError naming ``p`` otherwise."""
    each = [c for c in p.constraints if isinstance(c, Each)]
    if each:
        return None if value is None else _check_items(p.name, value, each[0])
    return check_param(OWNER, p.name, value, *p.constraints) if p.constraints else value


def _check_items(name: str, value: Any, constraint: Each) -> Any:
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    size = isinstance(constraint, _Size)
    shown = "x".join(map(str, items)) if size else ",".join(map(str, items))
    if size and len(items) != 2:
        raise ParameterError(OWNER, name, shown, "is not HxW", "e.g. 384x128")
    bad = [v for v in items if not constraint.item.accepts(v)]
    if bad:
        raise ParameterError(OWNER, name, shown, f"has {bad[0]!r}: each "
                             f"{'side' if size else 'value'} must "
                             f"be {constraint.item.describe()}")
    items = [constraint.item.convert(v) for v in items]
    return tuple(items) if isinstance(value, tuple) else items


def validate_config(cfg: TrainConfig) -> None:
    """One-line ParameterErrors naming the parameter for impossible values (the constraints
    of every shared setting and of the trainer's own parameters, in that order, then the
    checks between values: the shared ones and the trainer's ``validate``); accepted values
    are stored in canonical form (``3.0`` epochs → 3)."""
    for p in (*COMMON, *own_parameters(cfg.method)):
        if p.constraints:
            setattr(cfg, p.name, check_value(p, getattr(cfg, p.name)))
    if list(cfg.lr_steps) != sorted(set(cfg.lr_steps)):
        raise ParameterError(OWNER, "lr_steps", ",".join(map(str, cfg.lr_steps)),
                             "is not increasing",
                             f"give the epochs in order, e.g. "
                             f"{param('lr_steps', ','.join(map(str, sorted(set(cfg.lr_steps)))))}")
    if cfg.keep == "best" and cfg.eval_every is None:
        raise ParameterError(OWNER, "keep", "best", "selects by the evaluation during "
                             "training, which is off", f"add {param('eval_every', 1)}")
    checks = method_info(cfg.method).extras.get("validate", ())
    for check in (checks if isinstance(checks, (tuple, list)) else (checks,)):
        check(cfg)


def check_pk_triplet(cfg: TrainConfig) -> None:
    """A batch-hard triplet over P×K batches needs a positive pair: K ≥ 2."""
    if cfg.k < 2:
        raise ParameterError(OWNER, "k", cfg.k, "leaves the batch-hard triplet loss no "
                             "positive pair (one image per identity)",
                             f"use {param('k', 2)} or more")


__all__ = ["TrainConfig", "COMMON", "COMMON_NAMES", "shared", "defaults_only", "make_config",
           "method_defaults", "method_info", "method_parameters", "own_parameters",
           "config_names", "validate_config", "check_value", "pk_batch", "check_pk_triplet",
           "Each", "SIZE", "KEY_VALUES", "NAMED_KEY_VALUES", "NAMES", "CAMERAS", "SWITCH",
           "FLAG", "SameOr", "EPOCHS", "POSITIVE", "NON_NEGATIVE", "FRACTION",
           "FIELD_CONSTRAINTS", "ITEM_CONSTRAINTS", "KEEP_METRICS", "OWNER", "EXTRAS"]
