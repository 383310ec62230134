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
* files in the run directory: ``config.json`` (the full config + provenance, the data
  trained on, ``"format": "reidcli.run"``),
  ``metrics.csv`` (one row per logged iteration: epoch, iteration, lr, loss, images_per_s,
  seconds, and the method's extra columns), ``train_records.csv`` (audit of the training
  rows and labels), ``checkpoint.pt`` every ``checkpoint_every`` epochs and ``model.pt`` at
  the end — each written atomically, into ``RUN_DIR.partial`` which is renamed onto
  ``RUN_DIR`` when the run is complete (:mod:`reidcli.training.run_dir`: lock, ``--force``
  replaces an older run only then; ``--resume`` checks method, data and options,
  :mod:`reidcli.training.resume`);
* DDP when launched by ``torchrun`` (WORLD_SIZE > 1): one process per GPU, rank-0 logging
  and checkpointing, rank-aware samplers.
"""
from __future__ import annotations

import csv
import dataclasses
import io as _io
import os
import time
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from reidcli.data.image_dataset import ImageRecordDataset, make_loader
from reidcli.data.samplers import EpochTaggedSampler
from reidcli.device import amp_dtype, autocast, resolve_device, use_channels_last
from reidcli.errors import InputFileError, UsageError
from reidcli.io import output_errors, write_json_atomic
from reidcli.models.checkpoint import build_model, save_model
from reidcli.models.fixed_order import fixed_order_convolutions
from reidcli.models.weights import initialize_trunk
from reidcli.naming import param
from reidcli.progress import StepBar
from reidcli.provenance import make_provenance
from reidcli.training.config import TrainConfig, method_info
from reidcli.training.data import SeededAugmentDataset, training_options, training_records
from reidcli.training.preset_fit import fit_preset_batch
from reidcli.training.resume import (check_data, check_records, data_root_of, load_checkpoint,
                                     records_digest, resumed_config)
from reidcli.training.run_dir import (RUN_FILES, RUN_FORMAT, RunDirectory, resume_source,
                                      run_path)

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
        from reidcli.distributed_env import read_launch

        launch = read_launch()              # each variable checked; an error names it
        self.launch = launch
        self.world = launch.world_size if launch else 1
        self.rank = launch.rank if launch else 0
        self.local_rank = launch.local_rank if launch else 0
        self.active = self.world > 1

    def setup(self, device: torch.device) -> None:
        """Join the group as extraction does (reidcli.distributed_env): the wait for the other
        ranks is announced and bounded, a failure is one line."""
        if self.active and not torch.distributed.is_initialized():
            from reidcli.distributed_env import join_process_group

            if device.type == "cuda":
                # NCCL binds each rank to the current device: select it before the group
                torch.cuda.set_device(self.local_rank if device.index is None
                                      else device.index)
            join_process_group("nccl" if device.type == "cuda" else "gloo", self.launch)

    @property
    def main(self) -> bool:
        return self.rank == 0

    def barrier(self) -> None:
        if self.active:
            torch.distributed.barrier()


class _MetricsLog:
    """``metrics.csv``: header on creation, one flushed row per logged iteration."""

    def __init__(self, path: Path, columns: list[str], keep_until: int | None):
        self.path, self.columns = path, columns
        rows: list[dict] = []
        if keep_until is not None and path.exists():         # resume: drop rows after ckpt
            rows = _logged_rows(path, keep_until)
        with output_errors(f"{path}"):
            self.file = path.open("w", newline="")
            self.writer = csv.DictWriter(self.file, fieldnames=columns, extrasaction="ignore")
            self.writer.writeheader()
            self.writer.writerows(rows)
            self.file.flush()

    def write(self, row: dict) -> None:
        with output_errors(f"{self.path}"):
            self.writer.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v)
                                  for k, v in row.items()})
            self.file.flush()

    def close(self) -> None:
        self.file.close()


def _logged_rows(path: Path, keep_until: int) -> list[dict]:
    """The rows of a resumed run's ``metrics.csv`` up to iteration ``keep_until``."""
    try:
        with path.open(newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            if not set(BASE_COLUMNS) <= set(reader.fieldnames or ()):
                raise ValueError("header")
            return [r for r in reader if int(r["iteration"]) <= keep_until]
    except (ValueError, TypeError, KeyError, UnicodeDecodeError, csv.Error):
        raise InputFileError(f"{path} is damaged (not the metrics log reid train writes)",
                             "restore it, or delete it to resume without the earlier rows")
    except OSError as exc:
        raise InputFileError(f"{path} cannot be read ({exc.strerror or exc})",
                             "check its permissions") from None


def _records_text(records, labels: np.ndarray) -> str:
    """``train_records.csv``: the training rows and their labels (the audit of the run)."""
    # the audit columns a trainer added (DMG-Net: dataset, global camera cam, domain dom)
    extra = [c for c in ("dataset", "cam", "dom") if c in records.columns]
    frame = records[["path", "pid", "camid", "domain", *extra]].copy()
    frame["label"] = labels
    buffer = _io.StringIO()
    frame.to_csv(buffer, index=False)
    return buffer.getvalue()


def _records_csv(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".partial")
    with output_errors(f"{path}"):
        with open(tmp, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        os.replace(tmp, path)


def _class_keys(classes: list) -> list:
    return [[str(x) if not isinstance(x, (int, np.integer)) else int(x) for x in k]
            if isinstance(k, tuple) else k for k in classes]


def train_model(cfg: TrainConfig, run_dir: str | os.PathLike, *, resume: bool = False,
                force: bool = False, progress: bool = True, command: list[str] | None = None,
                echo: Callable[[str], None] | None = None,
                on_epoch_end: Callable[[int], None] | None = None,
                given: dict | None = None) -> TrainResult:
    """Train ``cfg.method`` into ``run_dir`` (see the module docstring); returns a summary.

    The run is written into ``run_dir.partial`` and renamed onto ``run_dir`` when complete
    (:class:`~reidcli.training.run_dir.RunDirectory`); an existing run there is replaced only
    then, and only with ``force``. ``resume`` continues the interrupted ``run_dir.partial``
    (else ``run_dir``'s last checkpoint) with the recorded config: ``cfg`` must be of the same
    method and gives only ``device``/``workers``; ``given`` (the options given again, None =
    not given) may change only :data:`~reidcli.training.resume.RESUME_CHANGES`, which are
    applied and recorded. ``on_epoch_end(epoch)`` is called after each epoch's checkpoint
    (tests use it to simulate an interruption).
    """
    out = run_path(run_dir)
    echo = echo or (lambda text: None)
    dist = _Distributed()
    run = None
    try:
        if dist.main:
            if not resume:            # bad device/amp: refused before anything is written
                amp_dtype(cfg.amp, resolve_device(cfg.device, dist.local_rank if dist.active
                                                  else None, owner="training"),
                          owner="training")
            run = RunDirectory(out, force=force, resume=resume)
        result = _train(cfg, out, run, dist, resume=resume, progress=progress,
                        command=command, echo=echo, on_epoch_end=on_epoch_end, given=given)
    except BaseException:
        if run is not None:
            run.abort()
            if run.kept:
                echo(f"the interrupted run is kept in {run.work}: continue it with "
                     f"{param('resume')} {out}")
        raise
    return result


def _train(cfg: TrainConfig, out: Path, run: RunDirectory | None, dist: _Distributed, *,
           resume: bool, progress: bool, command, echo, on_epoch_end,
           given: dict | None) -> TrainResult:
    """The run of :func:`train_model`; rank 0 writes into ``run.work`` (other ranks: run
    is None)."""
    work = run.work if run is not None else None
    checkpoint, changes, recorded_data, source = None, {}, None, None
    if resume:
        source = run.source if run is not None else resume_source(out)
        if source is None:
            raise InputFileError(f"run directory {out} has no checkpoint.pt to resume from",
                                 "give the run directory of an interrupted training run")
        checkpoint = load_checkpoint(source)
        cfg, changes = resumed_config(cfg, checkpoint, out, given)
        recorded_data = checkpoint.get("data") or _config_json(source).get("data")
        check_data(recorded_data, (given or {}).get("root"), out)
        if recorded_data and recorded_data.get("root"):
            cfg.root = recorded_data["root"]        # the data it trained on, from any folder
    device = resolve_device(cfg.device, dist.local_rank if dist.active else None,
                            owner="training")
    autocast_dtype = amp_dtype(cfg.amp, device, owner="training")
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
    records_text = _records_text(records, base.labels)
    data = {"root": data_root_of(cfg.root), "images": len(base)}
    data["records_sha256"] = records_digest(records, base.labels, data["root"])
    if resume:
        check_records(recorded_data, len(base), data["records_sha256"], out)
        if run is not None:
            run.copy_source()
    cfg = fit_preset_batch(cfg, base.labels, dist.world, echo)   # a tiny set, a preset's batch
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
        try:
            model.load_state_dict(checkpoint["model_state"])
        except (RuntimeError, TypeError, AttributeError) as exc:
            raise InputFileError(f"checkpoint {source / 'checkpoint.pt'} does not fit the "
                                 f"recorded model ({str(exc).splitlines()[0][:120]})",
                                 f"start over ({param('force')})") from None
    channels_last = use_channels_last(cfg.channels_last, device)
    model.to(device, memory_format=torch.channels_last if channels_last else
             torch.preserve_format)
    scaler = torch.amp.GradScaler("cuda", enabled=autocast_dtype == torch.float16)

    if dist.main:
        resumes = list(_config_json(source).get("resumes", [])) if resume else []
        if resume:                  # each resume and the options it changed, in order
            resumes.append({"after_epoch": start_epoch - 1, "iteration": iteration,
                            "changes": changes,
                            "command": make_provenance(command=command)["command"]})
        run_config = {
            "format": RUN_FORMAT, "status": "running",
            "method": cfg.method, "config": cfg.as_dict(own_fields_only=True),
            "model": spec.as_dict(),
            "num_classes": base.num_classes, "num_images": len(base),
            "dataset_options": dataset_options, "data": data,
            "init": init_report, "device": str(device), "world_size": dist.world,
            "provenance": make_provenance(command=command, seed=cfg.seed,
                                          **({"resumed_with": changes} if resume else {})),
            **({"resumes": resumes} if resumes else {})}
        write_json_atomic(work / "config.json", run_config, force=True)
        if not resume:
            _records_csv(work / "train_records.csv", records_text)
        if changes:
            echo("resumed with " + ", ".join(f"{param(k, v[1])} (was {v[0]})"
                                             for k, v in changes.items()))
        echo(f"{cfg.method}: {len(base)} images, {base.num_classes} identities, "
             f"{cfg.backbone} {cfg.input_size[0]}x{cfg.input_size[1]}, device {device}"
             + (f", amp {autocast_dtype}".replace("torch.", "") if autocast_dtype else "")
             + (f"; {init_report.get('source')}" if not resume else
                f"; resuming after epoch {start_epoch - 1}"))
        if init is not None:
            echo(init.summary())             # loaded / missing / unexpected keys

    extra_columns = list(getattr(trainer, "log_columns", ["acc"]))
    log = _MetricsLog(work / "metrics.csv", BASE_COLUMNS + extra_columns + ["phase"],
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
    if cfg.max_iters is not None:         # 0: save the initialised model, untrained
        total_steps = min(total_steps, max(0, cfg.max_iters - iteration))
    try:
        with StepBar(total_steps, f"train {cfg.method}", enabled=progress and dist.main) as bar, \
                fixed_order_convolutions(device):      # same bits on any CPU thread count
            for epoch in range(start_epoch, total_epochs):
                if cfg.max_iters is not None and iteration >= cfg.max_iters:
                    break
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
                        save_model(work / "checkpoint.pt", model, spec, meta, extra={
                            "config": cfg.as_dict(), "epoch": epoch, "iteration": iteration,
                            "phase": idx, "optimizer_state": optimizer.state_dict(),
                            "scaler_state": scaler.state_dict(), "data": data})
                        run.checkpointed()
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
        save_model(work / "model.pt", model, spec, meta)
        write_json_atomic(work / "config.json", {**run_config, "status": "complete"},
                          force=True)
        run.commit()
    dist.barrier()
    return TrainResult(run_dir=out, model_path=out / "model.pt",
                       epochs=total_epochs, iterations=iteration, first_loss=first_loss,
                       last_loss=last_loss, seconds=seconds,
                       images_per_s=images_seen / max(seconds, 1e-9), init=init_report)


def _config_json(folder: Path | None) -> dict:
    """``folder/config.json`` as a dict ({} when absent or unreadable)."""
    import json

    if folder is None:
        return {}
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return {}
    return config if isinstance(config, dict) else {}


__all__ = ["train_model", "TrainResult", "RUN_FILES"]
