"""One training loop for every image model (PCB, BoT; later DG-VAE / DMG-Net).

``train_model(cfg, run_dir)`` loads the training rows, builds the model of ``cfg.method``,
initialises the trunk (``--init``), and runs the method's phases epoch by epoch:

* optimiser and per-epoch LR factors from the method recipe (:mod:`pcb_trainer`,
  :mod:`bot_trainer`);
* AMP (``--amp bf16|fp16|auto``; fp16 with gradient scaling; bf16 also on CPU) and
  channels_last on CUDA;
* reproducibility: the sampler is seeded per (seed, epoch), augmentations per
  (seed, epoch, image) and dropout per (seed, epoch), so ``--resume`` from an epoch
  checkpoint continues bit for bit on CPU;
* files in the run directory: ``config.json`` (the full config + provenance),
  ``metrics.csv`` (one row per logged iteration: epoch, iteration, lr, loss, images_per_s,
  seconds, and the method's extra columns), ``train_records.csv`` (audit of the training
  rows and labels), ``checkpoint.pt`` every ``checkpoint_every`` epochs and ``model.pt`` at
  the end — each written atomically;
* DDP when launched by ``torchrun`` (WORLD_SIZE > 1): one process per GPU, rank-0 logging
  and checkpointing, rank-aware samplers.
"""
from __future__ import annotations

import csv
import dataclasses
import os
import time
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from reidcli.data.image_dataset import ImageRecordDataset, make_loader
from reidcli.data.samplers import EpochTaggedSampler
from reidcli.device import amp_dtype, autocast, resolve_device, use_channels_last
from reidcli.errors import InputFileError, OutputExistsError, UsageError
from reidcli.io import write_json_atomic
from reidcli.models.checkpoint import build_model, save_model
from reidcli.models.weights import initialize_trunk
from reidcli.naming import param
from reidcli.progress import StepBar
from reidcli.provenance import make_provenance
from reidcli.training.config import TrainConfig, method_info
from reidcli.training.data import SeededAugmentDataset, training_options, training_records

RUN_FILES = ("config.json", "metrics.csv", "checkpoint.pt", "model.pt", "train_records.csv")
BASE_COLUMNS = ["epoch", "iteration", "lr", "loss", "images_per_s", "seconds"]


@dataclasses.dataclass
class TrainResult:
    """What a run did: files, epochs/iterations done, first/last logged loss, speed."""

    run_dir: Path
    model_path: Path
    epochs: int
    iterations: int
    first_loss: float | None
    last_loss: float | None
    seconds: float
    images_per_s: float
    init: dict


def _seed_all(seed: int) -> None:
    import random

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def _epoch_seed(seed: int, epoch: int) -> int:
    return int(np.random.SeedSequence([seed, epoch, 31]).generate_state(1)[0])


class _Distributed:
    """torchrun environment: world size, rank, local rank; process group set up on demand."""

    def __init__(self) -> None:
        self.world = int(os.environ.get("WORLD_SIZE", "1"))
        self.rank = int(os.environ.get("RANK", "0"))
        self.local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        self.active = self.world > 1

    def setup(self, device: torch.device) -> None:
        if self.active and not torch.distributed.is_initialized():
            if device.type == "cuda":
                # NCCL binds each rank to the current device: select it before the group
                torch.cuda.set_device(self.local_rank if device.index is None
                                      else device.index)
                torch.distributed.init_process_group("nccl")
            else:
                torch.distributed.init_process_group("gloo")

    @property
    def main(self) -> bool:
        return self.rank == 0

    def barrier(self) -> None:
        if self.active:
            torch.distributed.barrier()


def prepare_run_dir(run_dir: Path, force: bool, resume: bool) -> None:
    """Refuse to mix runs: an existing run needs ``force`` (start over) or ``resume``."""
    if resume:
        if not (run_dir / "checkpoint.pt").exists():
            raise InputFileError(f"run directory {run_dir} has no checkpoint.pt to resume from",
                                 "give the run directory of an interrupted training run")
        return
    if run_dir.exists() and any((run_dir / f).exists() for f in RUN_FILES):
        if not force:
            raise OutputExistsError(f"run directory {run_dir} already holds a training run",
                                    f"start over ({param('force')}) or continue it "
                                    f"({param('resume')})")
        for name in RUN_FILES:
            (run_dir / name).unlink(missing_ok=True)
    run_dir.mkdir(parents=True, exist_ok=True)


class _MetricsLog:
    """``metrics.csv``: header on creation, one flushed row per logged iteration."""

    def __init__(self, path: Path, columns: list[str], keep_until: int | None):
        self.path, self.columns = path, columns
        rows: list[dict] = []
        if keep_until is not None and path.exists():         # resume: drop rows after ckpt
            with path.open(newline="") as f:
                rows = [r for r in csv.DictReader(f) if int(r["iteration"]) <= keep_until]
        self.file = path.open("w", newline="")
        self.writer = csv.DictWriter(self.file, fieldnames=columns, extrasaction="ignore")
        self.writer.writeheader()
        self.writer.writerows(rows)
        self.file.flush()

    def write(self, row: dict) -> None:
        self.writer.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v)
                              for k, v in row.items()})
        self.file.flush()

    def close(self) -> None:
        self.file.close()


def _records_csv(path: Path, records, labels: np.ndarray) -> None:
    # the audit columns a trainer added (DMG-Net: dataset, global camera cam, domain dom)
    extra = [c for c in ("dataset", "cam", "dom") if c in records.columns]
    frame = records[["path", "pid", "camid", "domain", *extra]].copy()
    frame["label"] = labels
    tmp = path.with_name(path.name + ".partial")
    frame.to_csv(tmp, index=False)
    os.replace(tmp, path)


def _class_keys(classes: list) -> list:
    return [[str(x) if not isinstance(x, (int, np.integer)) else int(x) for x in k]
            if isinstance(k, tuple) else k for k in classes]


def train_model(cfg: TrainConfig, run_dir: str | os.PathLike, *, resume: bool = False,
                force: bool = False, progress: bool = True, command: list[str] | None = None,
                echo: Callable[[str], None] | None = None,
                on_epoch_end: Callable[[int], None] | None = None) -> TrainResult:
    """Train ``cfg.method`` into ``run_dir`` (see the module docstring); returns a summary.

    ``resume`` continues from ``run_dir/checkpoint.pt`` with the saved config (the given
    ``cfg`` is ignored except for ``device``/``workers``). ``on_epoch_end(epoch)`` is called
    after each epoch's checkpoint (tests use it to simulate an interruption).
    """
    run_dir = Path(run_dir)
    echo = echo or (lambda text: None)
    dist = _Distributed()
    checkpoint = None
    if resume:
        prepare_run_dir(run_dir, force, resume=True)
        checkpoint = torch.load(run_dir / "checkpoint.pt", map_location="cpu", weights_only=False)
        saved = TrainConfig.from_dict(checkpoint["config"])
        saved.device, saved.workers = cfg.device, cfg.workers
        cfg = saved
    device = resolve_device(cfg.device, dist.local_rank if dist.active else None,
                            owner="training")
    autocast_dtype = amp_dtype(cfg.amp, device, owner="training")   # bad device/amp: no run dir
    if not resume and dist.main:
        prepare_run_dir(run_dir, force, resume=False)
    trainer = method_info(cfg.method).extras["trainer"]()
    dist.setup(device)
    _seed_all(cfg.seed)

    # -- data -------------------------------------------------------------------------
    if hasattr(trainer, "training_records"):     # e.g. several source datasets (DMG-Net)
        records = trainer.training_records(cfg)
        dataset_options = dict(cfg.options)
    else:
        dataset_options = training_options(cfg.dataset, cfg.options)
        records = training_records(cfg.dataset, cfg.root, cfg.options, train_cams=cfg.train_cams,
                                   max_images=cfg.max_images, subsample_seed=cfg.subsample_seed,
                                   split=cfg.train_split)
    base = ImageRecordDataset(records, trainer.train_transform(cfg), labels="encode",
                              return_index=False)
    if base.num_classes < 2:
        raise UsageError(f"dataset {cfg.dataset}: {base.num_classes} training identity",
                         "training needs at least 2 identities; check "
                         f"{param('train_cams')}/{param('max_images')}")
    sampler = EpochTaggedSampler(trainer.batch_sampler(cfg, base.labels, dist.world, dist.rank,
                                                       records=records), len(base))
    loader = make_loader(SeededAugmentDataset(base, cfg.seed), batch_sampler=sampler,
                         workers=cfg.workers, device=device, seed=cfg.seed)

    # -- model ------------------------------------------------------------------------
    spec = trainer.model_spec(cfg, base.num_classes)
    if resume:
        model, init = build_model(spec), None
    elif hasattr(trainer, "create_model"):       # a model whose init is not one trunk's
        model, init = trainer.create_model(spec, cfg)
    else:
        model = build_model(spec)
        init = initialize_trunk(model.backbone, cfg.init)
    init_report = {"source": "checkpoint"} if init is None else init.as_dict()
    phases = trainer.phases(cfg)
    bounds = np.cumsum([0] + [p.epochs for p in phases])
    total_epochs = int(bounds[-1])
    start_epoch, iteration = 0, 0
    if checkpoint is not None:
        start_epoch, iteration = int(checkpoint["epoch"]) + 1, int(checkpoint["iteration"])
        for idx, phase in enumerate(phases):             # rebuild RPP etc. before loading
            if bounds[idx] <= min(start_epoch, total_epochs - 1):
                phase.prepare(model)
        model.load_state_dict(checkpoint["model_state"])
    channels_last = use_channels_last(cfg.channels_last, device)
    model.to(device, memory_format=torch.channels_last if channels_last else
             torch.preserve_format)
    scaler = torch.amp.GradScaler("cuda", enabled=autocast_dtype == torch.float16)

    if dist.main:
        write_json_atomic(run_dir / "config.json", {
            "method": cfg.method, "config": cfg.as_dict(own_fields_only=True),
            "model": spec.as_dict(),
            "num_classes": base.num_classes, "num_images": len(base),
            "dataset_options": dataset_options,
            "init": init_report, "device": str(device), "world_size": dist.world,
            "provenance": make_provenance(command=command, seed=cfg.seed)}, force=True)
        if not resume:
            _records_csv(run_dir / "train_records.csv", records, base.labels)
        echo(f"{cfg.method}: {len(base)} images, {base.num_classes} identities, "
             f"{cfg.backbone} {cfg.input_size[0]}x{cfg.input_size[1]}, device {device}"
             + (f", amp {autocast_dtype}".replace("torch.", "") if autocast_dtype else "")
             + (f"; {init_report.get('source')}" if not resume else
                f"; resuming after epoch {start_epoch - 1}"))
        if init is not None:
            echo(init.summary())             # loaded / missing / unexpected keys

    extra_columns = list(getattr(trainer, "log_columns", ["acc"]))
    log = _MetricsLog(run_dir / "metrics.csv", BASE_COLUMNS + extra_columns + ["phase"],
                      keep_until=iteration if resume else None) if dist.main else None
    meta = {"classes": _class_keys(base.classes), "train_cams": cfg.train_cams,
            "dataset": cfg.dataset, "options": dataset_options,
            "method": cfg.method, "config": cfg.as_dict(), "init": init_report}

    current_phase, optimizer, ddp_model = None, None, model
    bar_terms = set(getattr(trainer, "bar_terms", ()))      # loss terms shown on the bar
    first_loss = last_loss = None
    started = time.perf_counter()
    images_seen = 0
    steps_per_epoch = len(sampler)
    stop = False
    total_steps = steps_per_epoch * (total_epochs - start_epoch)
    if cfg.max_iters:
        total_steps = min(total_steps, max(0, cfg.max_iters - iteration))
    try:
        with StepBar(total_steps, f"train {cfg.method}", enabled=progress and dist.main) as bar:
            for epoch in range(start_epoch, total_epochs):
                idx = int(np.searchsorted(bounds, epoch, side="right") - 1)
                phase = phases[idx]
                if idx != current_phase:
                    phase.prepare(model)
                    model.to(device)
                    groups = phase.groups(model, cfg)
                    for g in groups:
                        g["initial_lr"] = g["lr"]
                    optimizer = trainer.optimizer(groups, cfg)
                    if checkpoint is not None and int(checkpoint.get("phase", 0)) == idx \
                            and epoch == start_epoch:
                        optimizer.load_state_dict(checkpoint["optimizer_state"])
                        scaler.load_state_dict(checkpoint["scaler_state"])
                    # a method whose loss needs the model's parts trains through a module
                    # holding both, so DDP sees the whole step in one forward
                    net = trainer.train_module(model, cfg) if hasattr(trainer, "train_module") \
                        else model
                    ddp_model = torch.nn.parallel.DistributedDataParallel(
                        net, device_ids=[device.index] if device.type == "cuda" else None,
                        find_unused_parameters=len(phases) > 1) if dist.active else net
                    current_phase = idx
                factor = phase.lr_factor(epoch - int(bounds[idx]), cfg)
                for g in optimizer.param_groups:
                    g["lr"] = g["initial_lr"] * factor
                sampler.set_epoch(epoch)
                steps_per_epoch = len(sampler)       # P×K epochs vary slightly in length
                torch.manual_seed(_epoch_seed(cfg.seed, epoch))     # dropout stream
                model.train()
                if phase.train_modes is not None:     # e.g. frozen modules' BN in eval mode
                    phase.train_modes(model)
                window: dict[str, list[float]] = {}
                window_images, window_start = 0, time.perf_counter()
                for step, batch in enumerate(loader):
                    images = batch["image"].to(device, non_blocking=True)
                    if channels_last:
                        images = images.contiguous(memory_format=torch.channels_last)
                    labels = batch["label"].to(device, non_blocking=True)
                    if hasattr(trainer, "step_loss"):    # the method's own forward + loss
                        with autocast(device, autocast_dtype):
                            loss, parts = trainer.step_loss(
                                ddp_model, images, labels, batch, phase, cfg,
                                lr=optimizer.param_groups[-1]["lr"])
                    else:
                        with autocast(device, autocast_dtype):
                            output = ddp_model(images)
                        loss, parts = trainer.loss(output, labels, cfg)
                    optimizer.zero_grad(set_to_none=True)
                    scaler.scale(loss).backward()
                    scaler.step(optimizer)
                    scaler.update()
                    iteration += 1
                    value = float(loss.detach())
                    if not np.isfinite(value):
                        raise UsageError(f"the {cfg.method} loss became {value} at iteration "
                                         f"{iteration}",
                                         f"lower {param('lr')}, or use {param('amp', 'off')}")
                    first_loss = value if first_loss is None else first_loss
                    last_loss = value
                    n = int(images.shape[0]) * dist.world
                    images_seen += n
                    window_images += n
                    for key, v in {"loss": value, **parts}.items():
                        window.setdefault(key, []).append(v)
                    lr_now = optimizer.param_groups[-1]["lr"]
                    rate = window_images / max(time.perf_counter() - window_start, 1e-9)
                    stage = f" {phase.name}" if len(phases) > 1 else ""
                    bar.update(1, description=f"{cfg.method}{stage} epoch "
                               f"{epoch + 1}/{total_epochs}", loss=value, lr=lr_now, img_s=rate,
                               **{k: v for k, v in parts.items() if k in bar_terms})
                    last_step = step == steps_per_epoch - 1
                    hit_max = cfg.max_iters is not None and iteration >= cfg.max_iters
                    if log is not None and (iteration % cfg.log_every == 0 or last_step
                                            or hit_max):
                        row = {"epoch": epoch, "iteration": iteration, "lr": lr_now,
                               "images_per_s": rate,
                               "seconds": time.perf_counter() - started, "phase": phase.name}
                        row.update({k: float(np.mean(v)) for k, v in window.items()})
                        log.write(row)
                        window, window_images = {}, 0
                        window_start = time.perf_counter()
                    if hit_max:
                        stop = True
                        break
                if stop:
                    break
                if dist.main:
                    echo(f"epoch {epoch + 1}/{total_epochs}: loss {last_loss:.4f}, "
                         f"lr {optimizer.param_groups[-1]['lr']:.3g}")
                    if (epoch + 1) % cfg.checkpoint_every == 0 or epoch + 1 == total_epochs:
                        spec.rpp = model.rpp is not None if hasattr(model, "rpp") else False
                        save_model(run_dir / "checkpoint.pt", model, spec, meta, extra={
                            "config": cfg.as_dict(), "epoch": epoch, "iteration": iteration,
                            "phase": idx, "optimizer_state": optimizer.state_dict(),
                            "scaler_state": scaler.state_dict()})
                dist.barrier()
                if on_epoch_end is not None:
                    on_epoch_end(epoch)
    finally:
        if log is not None:
            log.close()
    seconds = time.perf_counter() - started
    if dist.main:
        spec.rpp = getattr(model, "rpp", None) is not None
        meta.update(iterations=iteration, seconds=seconds, stopped_early=stop,
                    epochs_done=epoch + 1 if total_epochs > start_epoch else start_epoch)
        save_model(run_dir / "model.pt", model, spec, meta)
    dist.barrier()
    return TrainResult(run_dir=run_dir, model_path=run_dir / "model.pt",
                       epochs=total_epochs, iterations=iteration, first_loss=first_loss,
                       last_loss=last_loss, seconds=seconds,
                       images_per_s=images_seen / max(seconds, 1e-9), init=init_report)


__all__ = ["train_model", "TrainResult", "prepare_run_dir"]
