"""Training configuration: one dataclass for every image model, filled from the method's
published defaults (pcb.md §2, dmgnet.md §4 / §7 ``bot``), a size preset, then the user's
explicit options — in that order."""
from __future__ import annotations

import dataclasses
from typing import Any

from reidcli.errors import UsageError


@dataclasses.dataclass
class TrainConfig:
    """Every option of ``reid train pcb|bot`` (saved whole as ``RUN_DIR/config.json``)."""

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

    def as_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["input_size"] = list(self.input_size)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "TrainConfig":
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in d.items() if k in known}
        if "input_size" in values:
            values["input_size"] = tuple(values["input_size"])
        return cls(**values)


#: the papers' defaults (pcb.md §2; dmgnet.md §4 for BoT)
METHOD_DEFAULTS: dict[str, dict[str, Any]] = {
    "pcb": dict(epochs=60, batch_size=64, optimizer="sgd", lr=0.1, backbone_lr_mult=0.1,
                momentum=0.9, nesterov=True, weight_decay=5e-4, lr_steps=[40], lr_gamma=0.1,
                warmup_epochs=0, input_size=(384, 128), dropout=0.5, seed=1,
                label_smooth=0.0, random_erasing=0.0),
    "bot": dict(epochs=120, p=16, k=4, optimizer="adam", lr=3.5e-4, backbone_lr_mult=1.0,
                weight_decay=5e-4, lr_steps=[40, 70], lr_gamma=0.1, warmup_epochs=10,
                warmup_factor=0.1, label_smooth=0.1, triplet_margin=0.3,
                input_size=(256, 128), random_erasing=0.5, seed=0),
}

#: size presets for quick runs: ``tiny`` trains in well under two minutes on 2 CPU cores
PRESETS: dict[str, dict[str, dict[str, Any]]] = {
    "tiny": {
        "pcb": dict(backbone="tiny", input_size=(96, 32), epochs=6, batch_size=32,
                    backbone_lr_mult=1.0, lr=0.05, lr_steps=[4], init="scratch", workers=0,
                    log_every=5),
        "bot": dict(backbone="tiny", input_size=(64, 32), epochs=6, p=8, k=4, lr=3e-3,
                    lr_steps=[4], warmup_epochs=1, init="scratch", workers=0, log_every=5),
    },
    "quick": {
        "pcb": dict(backbone="resnet18", input_size=(192, 64), epochs=20, batch_size=32,
                    lr_steps=[14]),
        "bot": dict(backbone="resnet18", input_size=(128, 64), epochs=30, p=8, k=4,
                    lr_steps=[10, 18], warmup_epochs=3),
    },
}


def make_config(method: str, preset: str | None = None, **explicit: Any) -> TrainConfig:
    """Defaults of ``method`` ← ``preset`` ← explicit options (``None`` values are ignored).

    When ``epochs`` is given but ``lr_steps``/``warmup_epochs`` are not, they are rescaled
    from the paper's schedule (dmgnet.md §4): step s of E₀ epochs → round(E·s/E₀).
    """
    if method not in METHOD_DEFAULTS:
        raise UsageError(f"training method {method!r} is unknown",
                         f"use one of {', '.join(METHOD_DEFAULTS)}")
    values: dict[str, Any] = dict(METHOD_DEFAULTS[method])
    if preset is not None:
        if preset not in PRESETS:
            raise UsageError(f"--preset {preset!r} is unknown",
                             f"use one of {', '.join(PRESETS)}")
        values.update(PRESETS[preset][method])
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
    if method == "bot":
        _pk_batch(values, given)
    cfg = TrainConfig(method=method, preset=preset, **{k: v for k, v in values.items()
                                                       if k not in ("method", "preset")})
    validate_config(cfg)
    return cfg


def _pk_batch(values: dict[str, Any], given: dict[str, Any]) -> None:
    """BoT: ``--batch-size B`` is the total P×K — keep K, set P = B / K; without it the
    recorded ``batch_size`` is P×K."""
    k = values["k"]
    if "batch_size" in given and k >= 1:
        b = int(given["batch_size"])
        if b % k:
            near = max(k, round(b / k) * k)
            raise UsageError(f"--batch-size {b} is not a multiple of --K {k} (a BoT batch is "
                             f"P identities × K images)", f"use e.g. --batch-size {near}")
        if "p" in given and given["p"] * k != b:
            raise UsageError(f"--batch-size {b} disagrees with --P {given['p']} × --K {k}",
                             "give --batch-size or --P, not both")
        values["p"] = b // k
    values["batch_size"] = values["p"] * k


def validate_config(cfg: TrainConfig) -> None:
    """One-line UsageErrors naming the option for impossible values."""
    checks = [(cfg.epochs >= 1, "--epochs must be ≥ 1"),
              (cfg.batch_size >= 1 and cfg.p >= 1 and cfg.k >= 1, "--batch-size/--P/--K must be ≥ 1"),
              (cfg.lr > 0, "--lr must be > 0"),
              (cfg.amp in ("off", "auto", "bf16", "fp16"), f"--amp {cfg.amp!r}: use off, auto, bf16 or fp16"),
              (cfg.channels_last in ("auto", "on", "off"), "--channels-last: use auto, on or off"),
              (cfg.optimizer in ("sgd", "adam"), f"--optimizer {cfg.optimizer!r}: use sgd or adam"),
              (cfg.checkpoint_every >= 1 and cfg.log_every >= 1, "--checkpoint-every/--log-every must be ≥ 1"),
              (cfg.max_iters is None or cfg.max_iters >= 1, "--max-iters must be ≥ 1"),
              (0.0 <= cfg.dropout < 1.0, "--dropout must be in [0, 1)"),
              (cfg.parts >= 1, "--parts must be ≥ 1")]
    for ok, message in checks:
        if not ok:
            raise UsageError(message, "see reid train --help")
    if cfg.method == "pcb" and cfg.input_size[0] // 16 < cfg.parts:
        raise UsageError(f"--input-size {cfg.input_size[0]}x{cfg.input_size[1]} gives a conv5_x "
                         f"map of {cfg.input_size[0] // 16} rows, fewer than --parts {cfg.parts}",
                         f"use an input height ≥ {16 * cfg.parts}")


__all__ = ["TrainConfig", "METHOD_DEFAULTS", "PRESETS", "make_config", "validate_config"]
