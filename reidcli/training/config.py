"""Training configuration: one dataclass for every image model, filled from the method's
published defaults (docs/methods/pcb.md, docs/methods/bot.md), a size preset, then the user's
explicit options — in that order."""
from __future__ import annotations

import dataclasses
from typing import Any

from reidcli.device import AMP_CHOICES, CHANNELS_LAST_CHOICES
from reidcli.errors import ParameterError
from reidcli.models.backbone_names import BACKBONES
from reidcli.naming import param
from reidcli.params import NONE, SEED, Interval, Options, check_param


@dataclasses.dataclass
class TrainConfig:
    """Every option of ``reid train pcb|bot|dgvae`` (saved whole as ``RUN_DIR/config.json``)."""

    method: str = "pcb"
    # data
    dataset: str = "synthetic"
    root: str | None = None
    options: dict = dataclasses.field(default_factory=dict)
    train_split: str = "train"
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
    # DG-VAE (docs/methods/dgvae.md): Table 2 variant, the three stages and their schedule
    variant: str = "dgvae"
    stages: list | None = None            # stages to run (default: all of the variant's)
    stage_epochs: list = dataclasses.field(default_factory=lambda: [100, 50, 100])
    iters_per_epoch: int | None = None    # DG-VAE, DMG-Net: default one pass (their docs)
    stage_lrs: list = dataclasses.field(default_factory=lambda: [2e-4, 2e-4, 2e-5])
    classifier_lrs: list = dataclasses.field(default_factory=lambda: [0.01, 0.01, 0.001])
    lr_decay: str = "constant"            # constant | linear (to 0 within each stage)
    settings: dict = dataclasses.field(default_factory=dict)   # --set key=value
    # DMG-Net (docs/methods/dmgnet.md): sources, meta step, Table 6 switches
    sources: list = dataclasses.field(default_factory=list)   # datasets or mixed_a / mixed_b
    source_options: dict = dataclasses.field(default_factory=dict)   # {dataset: {key: value}}
    domains: list | None = None           # keep only these source domains
    targets: list = dataclasses.field(default_factory=list)   # refused as sources
    meta_order: int = 2
    inner_opt: str = "sgd"
    inner_lr: float | None = None         # None: the scheduled lr (DMG-Net paper Alg. 1)
    md_weight: float = 1.0
    md_scale: float = 1.0
    md_features: str = "theta"
    outer_base_weight: float = 0.0
    no_meta: bool = False
    color_jitter: bool = False
    resplit: str = "epoch"
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

    def as_dict(self, own_fields_only: bool = False) -> dict[str, Any]:
        """Every field; ``own_fields_only`` leaves out the fields of other methods (the
        run directory's ``config.json``)."""
        d = dataclasses.asdict(self)
        d["input_size"] = list(self.input_size)
        if own_fields_only:
            for method, names in METHOD_FIELDS.items():
                if method != self.method:
                    for name in names:
                        d.pop(name, None)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "TrainConfig":
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in d.items() if k in known}
        if "input_size" in values:
            values["input_size"] = tuple(values["input_size"])
        return cls(**values)


#: fields only one trainer reads (left out of the other methods' config.json)
METHOD_FIELDS = {
    "dgvae": ("variant", "stages", "stage_epochs", "stage_lrs", "classifier_lrs", "lr_decay",
              "settings"),
    "dmgnet": ("sources", "source_options", "domains", "targets", "meta_order", "inner_opt",
               "inner_lr", "md_weight", "md_scale", "md_features", "outer_base_weight",
               "no_meta", "color_jitter", "resplit"),
}


def method_info(method: str):
    """The registry entry of network trainer ``method`` (defaults, presets, trainer class)."""
    from reidcli import registry
    return registry.get(method, "train-net")


def method_defaults(method: str) -> dict[str, Any]:
    """The paper's defaults of trainer ``method``, declared in its trainer module."""
    return method_info(method).defaults()


def make_config(method: str, preset: str | None = None, **explicit: Any) -> TrainConfig:
    """Defaults of ``method`` ← ``preset`` ← explicit options (``None`` values are ignored).

    When ``epochs`` is given but ``lr_steps``/``warmup_epochs`` are not, they are rescaled
    from the paper's schedule (docs/methods/bot.md): step s of E₀ epochs → round(E·s/E₀).
    """
    info = method_info(method)
    values: dict[str, Any] = info.defaults()
    if preset is not None:
        presets = info.extras.get("presets", {})
        if preset not in presets:
            raise ParameterError("training", "preset", preset, "is unknown",
                                 f"use one of {', '.join(presets) or 'none'}")
        values.update(presets[preset])
    given = {k: v for k, v in explicit.items() if v is not None}
    if "epochs" in given and given["epochs"] != values["epochs"]:
        base_epochs = values["epochs"]
        if "lr_steps" not in given:
            values["lr_steps"] = sorted({max(1, round(given["epochs"] * s / base_epochs))
                                         for s in values["lr_steps"]})
        if "warmup_epochs" not in given and values.get("warmup_epochs"):
            values["warmup_epochs"] = max(1, round(given["epochs"] * values["warmup_epochs"]
                                                   / base_epochs))
    values.update(given)
    if method in ("bot", "dmgnet"):
        _pk_batch(values, given)
    if method == "dgvae":                 # P ids × (K visible + K infrared) images
        values["batch_size"] = 2 * values["p"] * values["k"]
    cfg = TrainConfig(method=method, preset=preset, **{k: v for k, v in values.items()
                                                       if k not in ("method", "preset")})
    validate_config(cfg)
    if "validate" in info.extras:                # the method's own checks
        info.extras["validate"](cfg)
    return cfg


def _pk_batch(values: dict[str, Any], given: dict[str, Any]) -> None:
    """BoT: ``batch_size`` B is the total P×K — keep K, set P = B / K; without it the
    recorded ``batch_size`` is P×K."""
    k = values["k"]
    if "batch_size" in given and k >= 1:
        b = int(given["batch_size"])
        if b % k:
            near = max(k, round(b / k) * k)
            raise ParameterError("training", "batch_size", b,
                                 f"is not a multiple of {param('k', k)} (a BoT batch is "
                                 "P identities × K images)",
                                 f"use e.g. {param('batch_size', near)}")
        if "p" in given and given["p"] * k != b:
            raise ParameterError("training", "batch_size", b,
                                 f"disagrees with {param('p', given['p'])} × {param('k', k)}",
                                 f"give {param('batch_size')} or {param('p')}, not both")
        values["p"] = b // k
    values["batch_size"] = values["p"] * k


#: the evaluation numbers ``keep="best"`` may select on (docs/training.md)
KEEP_METRICS = ("mAP", "rank1")
#: one constraint per numeric or choice option (:mod:`reidcli.params`): ranges, finiteness,
#: integer-ness, seeds in [0, 2³²). Epoch and iteration counts are bounded so that schedule
#: arithmetic stays in int64; counts of images per batch so that a batch fits any memory.
_EPOCHS = Interval(int, 0, 100_000)   # 0: save the initialised model, untrained
_EPOCHS_OR_NONE = Interval(int, 0, 100_000)
_POSITIVE = Interval(float, 0, None, closed="right")         # a finite number > 0
_NON_NEGATIVE = Interval(float, 0, None)                     # a finite number ≥ 0
_FRACTION = Interval(float, 0, 1, closed="left")             # [0, 1)
FIELD_CONSTRAINTS: dict[str, tuple] = {
    "max_images": (NONE, Interval(int, 1, None)),
    "subsample_seed": (SEED,),
    "backbone": (Options(BACKBONES),),
    "last_stride": (Interval(int, 1, 2),),
    "parts": (Interval(int, 1, 64),),
    "reduced_dim": (Interval(int, 1, 65_536),),
    "dropout": (_FRACTION,),
    "epochs": (_EPOCHS,),
    "batch_size": (Interval(int, 1, 100_000),),
    # a batch-hard triplet (BoT, DMG-Net, DG-VAE) needs negatives: ≥ 2 identities per batch
    "p": (Interval(int, 2, 10_000),),
    "k": (Interval(int, 1, 10_000),),
    "optimizer": (Options(("sgd", "adam")),),
    "lr": (_POSITIVE,),
    "backbone_lr_mult": (_NON_NEGATIVE,),
    "momentum": (_FRACTION,),
    "weight_decay": (_NON_NEGATIVE,),
    "lr_gamma": (_POSITIVE,),
    "warmup_epochs": (_EPOCHS_OR_NONE,),
    "warmup_factor": (Interval(float, 0, 1, closed="right"),),
    "label_smooth": (_FRACTION,),
    "triplet_margin": (_NON_NEGATIVE,),
    "random_erasing": (Interval(float, 0, 1),),
    "rpp_classifier_epochs": (_EPOCHS_OR_NONE,),
    "rpp_finetune_epochs": (_EPOCHS_OR_NONE,),
    "rpp_lr": (_POSITIVE,),
    "iters_per_epoch": (NONE, Interval(int, 1, 10**9)),
    "meta_order": (Interval(int, 1, 2),),
    "inner_opt": (Options(("sgd", "adam1")),),
    "inner_lr": (NONE, _NON_NEGATIVE),
    "md_weight": (_NON_NEGATIVE,),
    "md_scale": (_POSITIVE,),
    "md_features": (Options(("theta", "adapted")),),
    "outer_base_weight": (_NON_NEGATIVE,),
    "resplit": (Options(("epoch", "iter")),),
    "lr_decay": (Options(("constant", "linear")),),
    "amp": (Options(AMP_CHOICES),),
    "channels_last": (Options(CHANNELS_LAST_CHOICES),),
    "workers": (NONE, Interval(int, 0, 1024)),
    "seed": (SEED,),
    "checkpoint_every": (Interval(int, 1, 100_000),),
    "log_every": (Interval(int, 1, 10**9),),
    "max_iters": (NONE, Interval(int, 0, 10**12)),
    "eval_every": (NONE, Interval(int, 1, 100_000)),
    "keep": (Options(("last", "best")),),
    "keep_metric": (Options(KEEP_METRICS, aliases={"map": "mAP"}),),
}
#: constraint of each item of a list option (``input_size``: each side, in pixels)
ITEM_CONSTRAINTS: dict[str, object] = {
    "input_size": Interval(int, 16, 4096),
    "lr_steps": _EPOCHS,
    "stage_epochs": _EPOCHS_OR_NONE,
    "stage_lrs": _NON_NEGATIVE,
    "classifier_lrs": _NON_NEGATIVE,
    "train_cams": Interval(int, 0, 10_000),
    "stages": Interval(int, 1, 3),
}


def validate_config(cfg: TrainConfig) -> None:
    """One-line ParameterErrors naming the parameter for impossible values (every option of
    :data:`FIELD_CONSTRAINTS` / :data:`ITEM_CONSTRAINTS`, in the order of the dataclass);
    accepted values are stored in canonical form (``3.0`` epochs → 3)."""
    for field in dataclasses.fields(cfg):
        name, value = field.name, getattr(cfg, field.name)
        if name in FIELD_CONSTRAINTS:
            setattr(cfg, name, check_param("training", name, value, *FIELD_CONSTRAINTS[name]))
        elif name in ITEM_CONSTRAINTS and value is not None:
            items = list(value) if isinstance(value, (list, tuple)) else [value]
            shown = ",".join(map(str, items)) if name != "input_size" else \
                "x".join(map(str, items))
            if name == "input_size" and len(items) != 2:
                raise ParameterError("training", name, shown, "is not HxW", "e.g. 384x128")
            constraint = ITEM_CONSTRAINTS[name]
            bad = [v for v in items if not constraint.accepts(v)]
            if bad:
                raise ParameterError("training", name, shown, f"has {bad[0]!r}: each "
                                     f"{'side' if name == 'input_size' else 'value'} must "
                                     f"be {constraint.describe()}")
            items = [constraint.convert(v) for v in items]
            setattr(cfg, name, tuple(items) if isinstance(value, tuple) else items)
    if cfg.method in ("bot", "dmgnet") and cfg.k < 2:
        raise ParameterError("training", "k", cfg.k, "leaves the batch-hard triplet loss no "
                             "positive pair (one image per identity)",
                             f"use {param('k', 2)} or more")
    if list(cfg.lr_steps) != sorted(set(cfg.lr_steps)):
        raise ParameterError("training", "lr_steps", ",".join(map(str, cfg.lr_steps)),
                             "is not increasing",
                             f"give the epochs in order, e.g. "
                             f"{param('lr_steps', ','.join(map(str, sorted(set(cfg.lr_steps)))))}")
    if cfg.keep == "best" and cfg.eval_every is None:
        raise ParameterError("training", "keep", "best", "selects by the evaluation during "
                             "training, which is off", f"add {param('eval_every', 1)}")
    if cfg.method == "dmgnet" and cfg.eval_every is not None and not cfg.eval_dataset:
        raise ParameterError("training", "eval_every", cfg.eval_every, "needs a dataset to "
                             "evaluate on (DMG-Net trains on several sources)",
                             f"name a target with {param('eval_dataset')}")
    if cfg.method == "pcb" and cfg.input_size[0] // 16 < cfg.parts:
        raise ParameterError("training", "input_size",
                             f"{cfg.input_size[0]}x{cfg.input_size[1]}",
                             f"gives a conv5_x map of {cfg.input_size[0] // 16} rows, fewer "
                             f"than {param('parts', cfg.parts)}",
                             f"use an input height ≥ {16 * cfg.parts}")


__all__ = ["TrainConfig", "make_config", "method_defaults", "method_info", "validate_config",
           "FIELD_CONSTRAINTS", "ITEM_CONSTRAINTS", "KEEP_METRICS"]
