"""`reid train pcb|bot|dgvae` — network training (thin CLI over :mod:`reidcli.training.engine`).

Defaults are the papers' (docs/methods/pcb.md, docs/methods/bot.md, docs/methods/dgvae.md);
``--preset tiny|quick`` shrinks the model and schedule for CPU runs; explicit options win over
both.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import List, Optional

import typer

from reidcli.models.backbone_names import BACKBONES

DATA_HELP = "Dataset name or alias (reid data list)."

# options shared by every network trainer (one definition, reused as defaults)
DATASET = typer.Option(None, "--dataset", help=DATA_HELP)
ROOT = typer.Option(None, "--root", help="Data root (default $REIDCLI_DATA or ./data).")
OPTION = typer.Option(None, "--option", help="Dataset loader option key=value (repeatable).")
OUT = typer.Option(None, "--out", help="Run directory to create (written into OUT.partial, "
                   "renamed onto OUT when the run is complete).")
RESUME = typer.Option(None, "--resume", help="Continue the run in this directory (or its "
                      "interrupted OUT.partial) from its last checkpoint, with its recorded "
                      "options and data; only --epochs, --max-iters, --log-every, "
                      "--checkpoint-every, --device, --workers may change.")
TRAIN_CAMS = typer.Option(None, "--train-cams", help="Train only on these 0-based cameras "
                          "(DART3 protocols).")
TRAIN_SPLIT = typer.Option(None, "--train-split", help="train (default) | all.")
MAX_IMAGES = typer.Option(None, "--max-images",
                          help="Seeded random subset of training images.")
SUBSAMPLE_SEED = typer.Option(None, "--subsample-seed")
BACKBONE = typer.Option(None, "--backbone", help=" | ".join(BACKBONES) + ".")
AMP = typer.Option(None, "--amp", help="off | auto | bf16 | fp16 (auto = fp32 on CPU; bf16 works on CPU).")
CHANNELS_LAST = typer.Option(None, "--channels-last", help="auto | on | off.")
DEVICE = typer.Option(None, "--device", help="auto | cpu | cuda.")
WORKERS = typer.Option(None, "--workers", help="Loader workers.")
CHECKPOINT_EVERY = typer.Option(None, "--checkpoint-every", help="Epochs.")
LOG_EVERY = typer.Option(None, "--log-every", help="Iterations.")
MAX_ITERS = typer.Option(None, "--max-iters", help="Stop after N iterations.")
FORCE = typer.Option(False, "--force", help="Replace the run in an existing --out (only "
                     "once the new run is complete).")
QUIET = typer.Option(False, "--quiet")
SEED = typer.Option(None, "--seed", help="0.")
RANDOM_ERASING = typer.Option(None, "--random-erasing", help="0.5.")
# evaluation during training, checkpoint selection, logging, re-runs (docs/training.md)
EVAL_EVERY = typer.Option(None, "--eval-every", help="Evaluate every N epochs (and after "
                          "the last) on the query/gallery of the dataset, as reid extract "
                          "--model + reid eval do; mAP, rank1, mINP in metrics.csv and the "
                          "epoch line.")
EVAL_DATASET = typer.Option(None, "--eval-dataset", help="--eval-every: the dataset to "
                            "evaluate on (default: the training dataset).")
EVAL_OPTION = typer.Option(None, "--eval-option", help="--eval-dataset: loader option "
                           "key=value (repeatable).")
KEEP = typer.Option(None, "--keep", help="last (default) | best: also write model_best.pt, "
                    "the evaluated model with the highest --keep-metric (needs --eval-every).")
KEEP_METRIC = typer.Option(None, "--keep-metric", help="mAP (default) | rank1.")
TENSORBOARD = typer.Option(False, "--tensorboard", help="TensorBoard scalars of every logged "
                           "term in OUT/tensorboard (pip install 'reidcli[tensorboard]').")
CONFIG = typer.Option(None, "--config", help="Train again from a recorded run's "
                      "RUN/config.json (into a new --out); options given override it.")


def _cams(text: Optional[str]) -> Optional[list[int]]:
    from reidcli.cameras import parse_cameras
    return parse_cameras(text, "train_cams", owner="training")


def _steps(text: Optional[str]) -> Optional[list[int]]:
    from reidcli.errors import UsageError

    if text is None:
        return None
    try:
        return [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise UsageError(f"--lr-steps {text!r} is not a comma list of epochs",
                         "e.g. --lr-steps 40,70") from None


def run_training(method: str, *, dataset: Optional[str], root: Optional[Path],
                 option: Optional[List[str]], out: Optional[Path], resume: Optional[Path],
                 preset: Optional[str], force: bool, quiet: bool, **explicit) -> None:
    """Build the config, train, print a one-line summary (shared by every method).

    ``explicit`` holds the command's other options as parsed (None = not given)."""
    from reidcli.cli.context import invoked_command, set_flag_names
    from reidcli.cli.data import parse_key_values
    from reidcli.data.transforms import parse_size
    from reidcli.errors import UsageError
    from reidcli.progress import ENABLED
    from reidcli.training.config import make_config
    from reidcli.training.engine import train_model

    set_flag_names({"p": "--ids-per-batch", "k": "--images-per-id",
                    "eval_options": "--eval-option"})
    recorded = _recorded_run(method, explicit.pop("config", None), resume, out)
    explicit["eval_options"] = parse_key_values(explicit.pop("eval_option", None),
                                                "--eval-option") or None
    if explicit.get("tensorboard") is False:
        explicit["tensorboard"] = None                  # not given: keep the recorded value
    if resume is not None:
        run_dir, resuming = resume, True
        if out is not None and Path(out) != Path(resume):
            raise UsageError("--out and --resume name different run directories",
                             "give only --resume RUN_DIR")
    else:
        if out is None or (dataset is None and recorded is None):
            raise UsageError("--dataset and --out are required",
                             f"e.g. reid train {method} --dataset market1501 --root DIR "
                             "--out runs/x (or --resume RUN_DIR)")
        run_dir, resuming = out, False
    explicit["train_cams"] = _cams(explicit.get("train_cams"))
    explicit["lr_steps"] = _steps(explicit.get("lr_steps"))
    if explicit.pop("no_nesterov", False):
        explicit["nesterov"] = False
    if explicit.get("rpp") is False:
        explicit["rpp"] = None                          # not given: keep the default
    if explicit.get("input_size") is not None:
        try:
            explicit["input_size"] = parse_size(explicit["input_size"])
        except UsageError:
            raise UsageError(f"--input-size {explicit['input_size']!r} is not HxW with sides "
                             "≥ 1", "e.g. --input-size 256x128 (height x width)") from None
    options = parse_key_values(option, "--option")
    if recorded is not None:               # --config: the recorded run ← the options given
        cfg = recorded.config({**explicit, "dataset": dataset, "preset": preset,
                               "root": recorded.data_root if root is None else str(root),
                               "options": {**recorded.options.get("options", {}), **options}},
                              override_batch=explicit.get("batch_size") is not None)
    else:
        cfg = make_config(method, preset=preset, dataset=dataset or "synthetic",
                          root=None if root is None else str(root), options=options,
                          **explicit)
    given = None
    if resuming:                    # the options given again: checked against the run's
        if force:
            raise UsageError("--force and --resume contradict each other",
                             "give --resume RUN_DIR to continue a run, or --force --out "
                             "RUN_DIR to replace it")
        given = {k: v for k, v in explicit.items() if v is not None}
        given.update({k: v for k, v in (("dataset", dataset), ("preset", preset),
                                        ("options", options or None))
                      if v is not None})
        if root is not None:
            given["root"] = str(root)
    echo = (lambda text: None) if quiet else (lambda text: typer.echo(text, err=True))
    result = train_model(cfg, run_dir, resume=resuming, force=force,
                         progress=ENABLED and not quiet, command=invoked_command(), echo=echo,
                         given=given)
    if int(os.environ.get("RANK", "0")) != 0:          # torchrun: rank 0 reports
        return
    losses = "" if result.first_loss is None else \
        f", loss {result.first_loss:.4f} → {result.last_loss:.4f}"
    typer.echo(f"wrote {result.model_path}: {result.iterations} iterations{losses}, "
               f"{result.images_per_s:.1f} images/s, {result.seconds:.1f} s", err=True)


def _recorded_run(method: str, config: Optional[Path], resume: Optional[Path],
                  out: Optional[Path]):
    """The run recorded in ``--config`` (None when not given), checked to be of ``method``."""
    from reidcli.errors import UsageError
    from reidcli.training.rerun import read_recorded_run

    if config is None:
        return None
    if resume is not None:
        raise UsageError("--config and --resume both name a run",
                         "give --resume RUN_DIR to continue it, or --config "
                         "RUN/config.json --out NEW_DIR to train it again")
    recorded = read_recorded_run(config)
    if recorded.method != method:
        raise UsageError(f"{recorded.path} records a {recorded.method} run, not {method}",
                         f"use reid train {recorded.method} --config {config}")
    if out is None:
        raise UsageError("--config needs --out (the new run directory)",
                         f"e.g. reid train {method} --config {config} --out runs/again")
    return recorded


def pcb(
    dataset: Optional[str] = DATASET,
    root: Optional[Path] = ROOT,
    option: Optional[List[str]] = OPTION,
    out: Optional[Path] = OUT,
    resume: Optional[Path] = RESUME,
    preset: Optional[str] = typer.Option(None, "--preset", help="Shrunk settings, "
                                         "explicit options win: tiny = toy CNN from scratch, "
                                         "96x32, 6 epochs, batch 32 (lowered to the training "
                                         "images when fewer), minutes on CPU; quick = "
                                         "ResNet-18, 192x64, 20 epochs, batch 32. Default: "
                                         "the paper's settings."),
    train_cams: Optional[str] = TRAIN_CAMS,
    train_split: str = TRAIN_SPLIT,
    max_images: Optional[int] = MAX_IMAGES,
    subsample_seed: Optional[int] = SUBSAMPLE_SEED,
    backbone: Optional[str] = BACKBONE,
    init: Optional[str] = typer.Option(None, "--init", help="imagenet | PATH "
                                       "(local state dict) | scratch."),
    input_size: Optional[str] = typer.Option(None, "--input-size", help="HxW (384x128)."),
    epochs: Optional[int] = typer.Option(None, "--epochs", help="60 (LR steps rescaled)."),
    batch_size: Optional[int] = typer.Option(None, "--batch-size", help="64."),
    lr: Optional[float] = typer.Option(None, "--lr", help="New layers' LR (0.1)."),
    backbone_lr_mult: Optional[float] = typer.Option(None, "--backbone-lr-mult", help="0.1."),
    lr_steps: Optional[str] = typer.Option(None, "--lr-steps", help="40."),
    lr_gamma: Optional[float] = typer.Option(None, "--lr-gamma", help="0.1."),
    momentum: Optional[float] = typer.Option(None, "--momentum", help="0.9."),
    weight_decay: Optional[float] = typer.Option(None, "--weight-decay", help="5e-4."),
    no_nesterov: bool = typer.Option(False, "--no-nesterov", help="Plain momentum SGD."),
    parts: Optional[int] = typer.Option(None, "--parts", help="Stripes p (6)."),
    reduced_dim: Optional[int] = typer.Option(None, "--reduced-dim", help="256."),
    dropout: Optional[float] = typer.Option(None, "--dropout", help="0.5."),
    rpp: bool = typer.Option(False, "--rpp", help="Refined part pooling, induced training "
                             "after the PCB epochs (docs/methods/pcb.md)."),
    rpp_classifier_epochs: Optional[int] = typer.Option(None, "--rpp-classifier-epochs"),
    rpp_finetune_epochs: Optional[int] = typer.Option(None, "--rpp-finetune-epochs"),
    rpp_lr: Optional[float] = typer.Option(None, "--rpp-lr"),
    amp: Optional[str] = AMP,
    channels_last: Optional[str] = CHANNELS_LAST,
    device: Optional[str] = DEVICE,
    workers: Optional[int] = WORKERS,
    seed: Optional[int] = typer.Option(None, "--seed", help="1 (the authors' code)."),
    checkpoint_every: Optional[int] = CHECKPOINT_EVERY,
    log_every: Optional[int] = LOG_EVERY,
    max_iters: Optional[int] = MAX_ITERS,
    eval_every: Optional[int] = EVAL_EVERY,
    eval_dataset: Optional[str] = EVAL_DATASET,
    eval_option: Optional[List[str]] = EVAL_OPTION,
    keep: Optional[str] = KEEP,
    keep_metric: Optional[str] = KEEP_METRIC,
    tensorboard: bool = TENSORBOARD,
    config: Optional[Path] = CONFIG,
    force: bool = FORCE,
    quiet: bool = QUIET,
) -> None:
    """PCB (Sun et al. 2018): 6 stripes, shared 1×1 reduction, 6 classifiers; optional RPP."""
    run_training("pcb", **locals())


def bot(
    dataset: Optional[str] = DATASET,
    root: Optional[Path] = ROOT,
    option: Optional[List[str]] = OPTION,
    out: Optional[Path] = OUT,
    resume: Optional[Path] = RESUME,
    preset: Optional[str] = typer.Option(None, "--preset", help="Shrunk settings, "
                                         "explicit options win: tiny = toy CNN from scratch, "
                                         "64x32, 6 epochs, P=8 ids x K=4 (P lowered to the "
                                         "training ids when fewer), minutes on CPU; quick = "
                                         "ResNet-18, 128x64, 30 epochs. Default: the paper's "
                                         "settings."),
    train_cams: Optional[str] = TRAIN_CAMS,
    train_split: str = TRAIN_SPLIT,
    max_images: Optional[int] = MAX_IMAGES,
    subsample_seed: Optional[int] = SUBSAMPLE_SEED,
    backbone: Optional[str] = BACKBONE,
    init: Optional[str] = typer.Option(None, "--init", help="imagenet | PATH | "
                                       "scratch."),
    input_size: Optional[str] = typer.Option(None, "--input-size", help="HxW (256x128)."),
    epochs: Optional[int] = typer.Option(None, "--epochs", help="120 (steps/warm-up rescaled)."),
    batch_size: Optional[int] = typer.Option(None, "--batch-size", help="Images per batch, "
                                             "P×K (64): keeps --images-per-id, sets "
                                             "--ids-per-batch = batch / K."),
    p: Optional[int] = typer.Option(None, "--ids-per-batch", help="Identities per batch P "
                                    "(16)."),
    k: Optional[int] = typer.Option(None, "--images-per-id", help="Images per identity K "
                                    "(4)."),
    optimizer: Optional[str] = typer.Option(None, "--optimizer", help="adam | sgd."),
    lr: Optional[float] = typer.Option(None, "--lr", help="3.5e-4."),
    lr_steps: Optional[str] = typer.Option(None, "--lr-steps", help="40,70."),
    lr_gamma: Optional[float] = typer.Option(None, "--lr-gamma", help="0.1."),
    warmup_epochs: Optional[int] = typer.Option(None, "--warmup-epochs", help="10."),
    warmup_factor: Optional[float] = typer.Option(None, "--warmup-factor", help="0.1."),
    weight_decay: Optional[float] = typer.Option(None, "--weight-decay", help="5e-4."),
    label_smooth: Optional[float] = typer.Option(None, "--label-smooth", help="ε = 0.1."),
    triplet_margin: Optional[float] = typer.Option(None, "--triplet-margin", help="0.3."),
    random_erasing: Optional[float] = RANDOM_ERASING,
    amp: Optional[str] = AMP,
    channels_last: Optional[str] = CHANNELS_LAST,
    device: Optional[str] = DEVICE,
    workers: Optional[int] = WORKERS,
    seed: Optional[int] = SEED,
    checkpoint_every: Optional[int] = CHECKPOINT_EVERY,
    log_every: Optional[int] = LOG_EVERY,
    max_iters: Optional[int] = MAX_ITERS,
    eval_every: Optional[int] = EVAL_EVERY,
    eval_dataset: Optional[str] = EVAL_DATASET,
    eval_option: Optional[List[str]] = EVAL_OPTION,
    keep: Optional[str] = KEEP,
    keep_metric: Optional[str] = KEEP_METRIC,
    tensorboard: bool = TENSORBOARD,
    config: Optional[Path] = CONFIG,
    force: bool = FORCE,
    quiet: bool = QUIET,
) -> None:
    """BoT strong baseline: last stride 1, BNNeck, label smoothing, triplet, warm-up."""
    run_training("bot", **locals())


def _numbers(text: Optional[str], flag: str, cast, example: str) -> Optional[list]:
    from reidcli.errors import UsageError

    if text is None:
        return None
    try:
        return [cast(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise UsageError(f"{flag} {text!r} is not a comma list of numbers",
                         f"e.g. {flag} {example}") from None


def dgvae(
    dataset: Optional[str] = DATASET,
    root: Optional[Path] = ROOT,
    option: Optional[List[str]] = OPTION,
    out: Optional[Path] = OUT,
    resume: Optional[Path] = RESUME,
    preset: Optional[str] = typer.Option(None, "--preset", help="tiny = the 60/60/60-"
                                         "iteration CPU configuration (toy trunk from scratch, "
                                         "32x16 input, P=4 x K=2); explicit options win. "
                                         "Default: the paper's settings."),
    variant: Optional[str] = typer.Option(None, "--variant", help="Table 2 row: baseline | mog "
                                          "| mog_lmc | ae_tsr | ae_tsr_idc | ae_tsr_idc_cyc | "
                                          "vae1_tsr | vae1_tsr_idc | vae1_tsr_idc_cyc | "
                                          "vae2_tsr | dgvae_nolmc | dgvae (default)."),
    stages: Optional[str] = typer.Option(None, "--stages", help="Stages to run, e.g. 1 or "
                                         "1,2,3 (default: all of the variant's)."),
    epochs: Optional[str] = typer.Option(None, "--epochs", help="Epochs of stages 1,2,3 "
                                         "(100,50,100)."),
    iters_per_epoch: Optional[int] = typer.Option(None, "--iters-per-epoch", help="Iterations "
                                                  "per epoch (default ⌈max(N_vis, N_ir) / "
                                                  "(P·K)⌉)."),
    init: Optional[str] = typer.Option(None, "--init", help="imagenet | PATH (local ResNet-50 "
                                       "state dict) | scratch."),
    backbone: Optional[str] = typer.Option(None, "--backbone", help="resnet50 (the paper's "
                                           "MGN split) | tiny."),
    input_size: Optional[str] = typer.Option(None, "--input-size", help="HxW (384x128)."),
    p: Optional[int] = typer.Option(None, "--ids-per-batch", help="Identities per batch P "
                                    "(4)."),
    k: Optional[int] = typer.Option(None, "--images-per-id", help="Visible and infrared images "
                                    "per identity K (4 + 4)."),
    stage_lrs: Optional[str] = typer.Option(None, "--stage-lrs", help="Adam lr of stages "
                                            "1,2,3 (2e-4,2e-4,2e-5)."),
    classifier_lrs: Optional[str] = typer.Option(None, "--classifier-lrs", help="SGD lr of "
                                                 "the code classifier D^C per stage "
                                                 "(0.01,0.01,0.001)."),
    lr_decay: Optional[str] = typer.Option(None, "--lr-decay", help="constant (default) | "
                                           "linear (to 0 within each stage, FD-GAN)."),
    weight_decay: Optional[float] = typer.Option(None, "--weight-decay", help="5e-4 (none on "
                                                 "μ_y, ρ)."),
    random_erasing: Optional[float] = RANDOM_ERASING,
    setting: Optional[List[str]] = typer.Option(None, "--set", help="Loss weight or model "
                                                "setting key=value (repeatable), e.g. "
                                                "tsr=1.0, gmm_estimator=mc, shared_trunk=true "
                                                "(docs/methods/dgvae.md)."),
    max_images: Optional[int] = MAX_IMAGES,
    subsample_seed: Optional[int] = SUBSAMPLE_SEED,
    amp: Optional[str] = AMP,
    channels_last: Optional[str] = CHANNELS_LAST,
    device: Optional[str] = DEVICE,
    workers: Optional[int] = WORKERS,
    seed: Optional[int] = SEED,
    checkpoint_every: Optional[int] = CHECKPOINT_EVERY,
    log_every: Optional[int] = LOG_EVERY,
    max_iters: Optional[int] = MAX_ITERS,
    eval_every: Optional[int] = EVAL_EVERY,
    eval_dataset: Optional[str] = EVAL_DATASET,
    eval_option: Optional[List[str]] = EVAL_OPTION,
    keep: Optional[str] = KEEP,
    keep_metric: Optional[str] = KEEP_METRIC,
    tensorboard: bool = TENSORBOARD,
    config: Optional[Path] = CONFIG,
    force: bool = FORCE,
    quiet: bool = QUIET,
) -> None:
    """DG-VAE (Pu et al. 2020): visible-infrared re-id in three stages."""
    from reidcli.cli.context import set_flag_names
    from reidcli.cli.data import parse_key_values

    set_flag_names({"stage_epochs": "--epochs", "settings": "--set"})
    given = dict(locals())
    for key in ("setting", "set_flag_names", "parse_key_values"):
        given.pop(key, None)
    given["stage_epochs"] = _numbers(given.pop("epochs"), "--epochs", int, "100,50,100")
    given["stages"] = _numbers(stages, "--stages", int, "1,2,3")
    given["stage_lrs"] = _numbers(stage_lrs, "--stage-lrs", float, "2e-4,2e-4,2e-5")
    given["classifier_lrs"] = _numbers(classifier_lrs, "--classifier-lrs", float,
                                       "0.01,0.01,0.001")
    given["settings"] = parse_key_values(setting, "--set") if setting else None
    run_training("dgvae", **given)


def _source_options(items: Optional[List[str]]) -> Optional[dict]:
    """``["market1501.protocol=x", ...]`` → ``{"market1501": {"protocol": "x"}}``."""
    from reidcli.cli.data import parse_key_values
    from reidcli.errors import UsageError

    if not items:
        return None
    out: dict = {}
    for item in items:
        name, dot, rest = item.partition(".")
        if not dot or "=" not in rest:
            raise UsageError(f"--source-option {item!r} is not NAME.KEY=VALUE",
                             "e.g. --source-option cuhk03.labels=detected")
        out.setdefault(name.strip(), {}).update(parse_key_values([rest], "--source-option"))
    return out


def _switch(text: Optional[str], flag: str) -> Optional[bool]:
    from reidcli.errors import UsageError

    if text is None:
        return None
    low = text.strip().lower()
    if low not in ("on", "off", "true", "false"):
        raise UsageError(f"{flag} {text!r} is not on or off", f"e.g. {flag} on")
    return low in ("on", "true")


def dmgnet(
    sources: Optional[str] = typer.Option(None, "--sources", help="Source datasets, comma "
                                          "list (reid data list) or mixed_a / mixed_b."),
    root: Optional[Path] = ROOT,
    source_option: Optional[List[str]] = typer.Option(None, "--source-option", help="Loader "
                                                      "option of one source, "
                                                      "NAME.KEY=VALUE (repeatable)."),
    source_split: Optional[str] = typer.Option(None, "--source-split", help="train | all "
                                               "(every split of each source; default: "
                                               "train, a composition's own: Mixed A all, "
                                               "Mixed B train)."),
    domains: Optional[str] = typer.Option(None, "--domains", help="Keep only these source "
                                          "domains, e.g. synthetic/d0,synthetic/d1."),
    targets: Optional[str] = typer.Option(None, "--targets", help="Target datasets or "
                                          "dataset/domain; refused if also a source."),
    out: Optional[Path] = OUT,
    resume: Optional[Path] = RESUME,
    preset: Optional[str] = typer.Option(None, "--preset", help="tiny = toy trunk from "
                                         "scratch, 32x16, 4 epochs, P=4 x K=2, for CPU; "
                                         "explicit options win. Default: the paper's "
                                         "settings."),
    init: Optional[str] = typer.Option(None, "--init", help="imagenet | PATH | scratch."),
    backbone: Optional[str] = BACKBONE,
    input_size: Optional[str] = typer.Option(None, "--input-size", help="HxW (256x128)."),
    epochs: Optional[int] = typer.Option(None, "--epochs", help="120 (steps/warm-up "
                                         "rescaled)."),
    iters_per_epoch: Optional[int] = typer.Option(None, "--iters-per-epoch", help="Default "
                                                  "⌊N_images / (2·P·K)⌋."),
    p: Optional[int] = typer.Option(None, "--ids-per-batch", help="Identities per batch P "
                                    "(16), the same in the support and the query set."),
    k: Optional[int] = typer.Option(None, "--images-per-id", help="Images per identity and "
                                    "set K (4)."),
    lr: Optional[float] = typer.Option(None, "--lr", help="3.5e-4."),
    lr_steps: Optional[str] = typer.Option(None, "--lr-steps", help="40,70."),
    warmup_epochs: Optional[int] = typer.Option(None, "--warmup-epochs", help="10."),
    weight_decay: Optional[float] = typer.Option(None, "--weight-decay", help="5e-4."),
    meta_order: Optional[int] = typer.Option(None, "--meta-order", help="2 (full "
                                             "meta-gradient, Eq. 4) | 1 (first order)."),
    inner_opt: Optional[str] = typer.Option(None, "--inner-opt", help="sgd (Eq. 2) | adam1 "
                                            "(normalised step g/(|g|+1e-8))."),
    inner_lr: Optional[str] = typer.Option(None, "--inner-lr", help="same (the scheduled lr, "
                                           "Alg. 1) | a number."),
    md_weight: Optional[float] = typer.Option(None, "--md-weight", help="λ_MD (1; 0 = "
                                              "meta-generalisation only)."),
    md_scale: Optional[float] = typer.Option(None, "--md-scale", help="Scale s of Eq. 6 (1)."),
    md_features: Optional[str] = typer.Option(None, "--md-features", help="theta | adapted."),
    outer_base_weight: Optional[float] = typer.Option(None, "--outer-base-weight",
                                                      help="β: + β·L_B(θ) in the outer "
                                                      "loss (0)."),
    no_meta: bool = typer.Option(False, "--no-meta", help="No inner step: L_B on both sets "
                                 "+ λ_MD L_MD (with --md-weight 0: BoT on the same batches)."),
    color_jitter: Optional[str] = typer.Option(None, "--color-jitter", help="on | off (off; "
                                               "on for the Mixed benchmarks)."),
    resplit: Optional[str] = typer.Option(None, "--resplit", help="epoch (Alg. 1) | iter."),
    random_erasing: Optional[float] = RANDOM_ERASING,
    max_images: Optional[int] = MAX_IMAGES,
    subsample_seed: Optional[int] = SUBSAMPLE_SEED,
    amp: Optional[str] = AMP,
    channels_last: Optional[str] = CHANNELS_LAST,
    device: Optional[str] = DEVICE,
    workers: Optional[int] = WORKERS,
    seed: Optional[int] = SEED,
    checkpoint_every: Optional[int] = CHECKPOINT_EVERY,
    log_every: Optional[int] = LOG_EVERY,
    max_iters: Optional[int] = MAX_ITERS,
    eval_every: Optional[int] = EVAL_EVERY,
    eval_dataset: Optional[str] = EVAL_DATASET,
    eval_option: Optional[List[str]] = EVAL_OPTION,
    keep: Optional[str] = KEEP,
    keep_metric: Optional[str] = KEEP_METRIC,
    tensorboard: bool = TENSORBOARD,
    config: Optional[Path] = CONFIG,
    force: bool = FORCE,
    quiet: bool = QUIET,
) -> None:
    """DMG-Net (Bai et al. 2021): domain generalisation from several source datasets."""
    from reidcli.errors import UsageError

    given = {k: v for k, v in locals().items() if k != "UsageError"}
    names = [s.strip() for s in (sources or "").split(",") if s.strip()]
    if not names and resume is None and config is None:
        raise UsageError("--sources is required", "e.g. --sources market1501,dukemtmc or "
                         "--sources mixed_b")
    given.pop("sources")
    given["sources"] = names or None
    given["source_options"] = _source_options(given.pop("source_option"))
    given["train_split"] = given.pop("source_split")
    given["domains"] = [d.strip() for d in domains.split(",") if d.strip()] if domains else None
    given["targets"] = [t.strip() for t in targets.split(",") if t.strip()] if targets else None
    if inner_lr is not None:
        try:
            given["inner_lr"] = None if inner_lr.strip().lower() == "same" else float(inner_lr)
        except ValueError:
            raise UsageError(f"--inner-lr {inner_lr!r} is not 'same' or a number",
                             "e.g. --inner-lr same") from None
    given["color_jitter"] = _switch(color_jitter, "--color-jitter")
    given["no_meta"] = True if no_meta else None
    run_training("dmgnet", dataset="+".join(names) if names else None, option=None, **given)


__all__ = ["pcb", "bot", "dgvae", "dmgnet", "run_training"]
