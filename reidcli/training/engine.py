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
  and checkpointing, rank-aware samplers;
* the step loop (:class:`TrainLoop`) only optimises; the rest is hooks
  (:mod:`reidcli.training.hooks`): NaN guard, progress bar, ``metrics.csv``, evaluation
  during training (``eval_every``), ``model_best.pt`` (``keep="best"``), TensorBoard,
  the epoch line, checkpoints, the DDP barrier. The method is a
  :class:`~reidcli.training.trainer_base.TrainerBase`.
"""
from __future__ import annotations

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
from reidcli.naming import param
from reidcli.provenance import make_provenance
from reidcli.training.config import TrainConfig, method_info
from reidcli.training.data import SeededAugmentDataset
from reidcli.training.evaluation import EVAL_COLUMNS
from reidcli.training.hooks import (BASE_COLUMNS, Barrier, Checkpoint, Cleanup, EpochCallback,
                                    EpochLine, Evaluate, Hook, KeepBest, MetricsCSV, NaNGuard,
                                    ProgressBar, TensorBoard, require_tensorboard)
from reidcli.training.preset_fit import fit_preset_batch
from reidcli.training.resume import (check_data, check_records, data_root_of, load_checkpoint,
                                     records_digest, resumed_config)
from reidcli.training.run_dir import (RUN_FILES, RUN_FORMAT, RunDirectory, resume_source,
                                      run_path)

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
        if cfg.tensorboard and dist.main:       # a missing package: before anything is written
            require_tensorboard()
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
    state = _ResumeState.load(cfg, out, run, given) if resume else _ResumeState()
    cfg = state.cfg or cfg
    device = resolve_device(cfg.device, dist.local_rank if dist.active else None,
                            owner="training")
    autocast_dtype = amp_dtype(cfg.amp, device, owner="training")
    trainer = method_info(cfg.method).extras["trainer"]()
    dist.setup(device)
    _seed_all(cfg.seed)

    # -- data -------------------------------------------------------------------------
    dataset_options = trainer.dataset_options(cfg)
    records = trainer.training_records(cfg)
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
        check_records(state.data, len(base), data["records_sha256"], out)
        if run is not None:
            run.copy_source()
    cfg = fit_preset_batch(cfg, base.labels, dist.world, echo)   # a tiny set, a preset's batch
    sampler = EpochTaggedSampler(trainer.batch_sampler(cfg, base.labels, dist.world, dist.rank,
                                                       records=records), len(base))
    loader = make_loader(SeededAugmentDataset(base, cfg.seed), batch_sampler=sampler,
                         workers=cfg.workers, device=device, seed=cfg.seed)

    # -- model ------------------------------------------------------------------------
    spec = trainer.model_spec(cfg, base.num_classes)
    model, init = (build_model(spec), None) if resume else trainer.create_model(spec, cfg)
    init_report = {"source": "checkpoint"} if init is None else init.as_dict()
    phases = trainer.phases(cfg)
    if state.checkpoint is not None:
        state.restore(model, phases)
    channels_last = use_channels_last(cfg.channels_last, device)
    model.to(device, memory_format=torch.channels_last if channels_last else
             torch.preserve_format)

    run_config = None
    if dist.main:
        run_config = _run_config(cfg, state, spec, base, dataset_options, data, init_report,
                                 device, dist, command)
        write_json_atomic(work / "config.json", run_config, force=True)
        if not resume:
            _records_csv(work / "train_records.csv", records_text)
        _announce(echo, cfg, state, base, device, autocast_dtype, init, init_report)

    meta = {"classes": _class_keys(base.classes), "train_cams": cfg.train_cams,
            "dataset": cfg.dataset, "options": dataset_options,
            "method": cfg.method, "config": cfg.as_dict(), "init": init_report}
    loop = TrainLoop(cfg, trainer, model, spec, meta, phases, loader, sampler, device,
                     autocast_dtype, channels_last, dist, state.checkpoint)
    loop.hooks = _hooks(loop, work, run, data, dist, state.checkpoint, echo,
                        progress=progress and dist.main, on_epoch_end=on_epoch_end)
    loop.run()
    seconds = time.perf_counter() - loop.started
    if dist.main:
        loop.meta.update(iterations=loop.iteration, seconds=seconds, stopped_early=loop.stop,
                         epochs_done=loop.epoch + 1 if loop.total_epochs > loop.start_epoch
                         else loop.start_epoch)
        loop.save_model(work / "model.pt")
        write_json_atomic(work / "config.json", {**run_config, "status": "complete"},
                          force=True)
        run.commit()
    dist.barrier()
    return TrainResult(run_dir=out, model_path=out / "model.pt",
                       epochs=loop.total_epochs, iterations=loop.iteration,
                       first_loss=loop.first_loss, last_loss=loop.last_loss, seconds=seconds,
                       images_per_s=loop.images_seen / max(seconds, 1e-9), init=init_report)


@dataclasses.dataclass
class _ResumeState:
    """What ``--resume`` continues from: the recorded config (with the changes given), the
    checkpoint and the folder it is in, the data it trained on."""

    cfg: TrainConfig | None = None
    checkpoint: dict | None = None
    changes: dict = dataclasses.field(default_factory=dict)
    data: dict | None = None
    source: Path | None = None

    @classmethod
    def load(cls, cfg: TrainConfig, out: Path, run: RunDirectory | None,
             given: dict | None) -> "_ResumeState":
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
        return cls(cfg, checkpoint, changes, recorded_data, source)

    def restore(self, model: torch.nn.Module, phases: list) -> None:
        """The checkpoint's weights into ``model``, after the phases begun before it (RPP
        etc.) have prepared it."""
        bounds = np.cumsum([0] + [p.epochs for p in phases])
        start_epoch = int(self.checkpoint["epoch"]) + 1
        for idx, phase in enumerate(phases):             # rebuild RPP etc. before loading
            if bounds[idx] <= min(start_epoch, int(bounds[-1]) - 1):
                phase.prepare(model)
        try:
            model.load_state_dict(self.checkpoint["model_state"])
        except (RuntimeError, TypeError, AttributeError) as exc:
            raise InputFileError(f"checkpoint {self.source / 'checkpoint.pt'} does not fit the "
                                 f"recorded model ({str(exc).splitlines()[0][:120]})",
                                 f"start over ({param('force')})") from None


def _run_config(cfg, state: _ResumeState, spec, base, dataset_options, data, init_report,
                device, dist, command) -> dict:
    """``config.json`` of a running run (each resume and the options it changed, in order)."""
    resume = state.checkpoint is not None
    resumes = list(_config_json(state.source).get("resumes", [])) if resume else []
    if resume:
        resumes.append({"after_epoch": int(state.checkpoint["epoch"]),
                        "iteration": int(state.checkpoint["iteration"]),
                        "changes": state.changes,
                        "command": make_provenance(command=command)["command"]})
    return {
        "format": RUN_FORMAT, "status": "running",
        "method": cfg.method, "config": cfg.as_dict(own_fields_only=True),
        "model": spec.as_dict(),
        "num_classes": base.num_classes, "num_images": len(base),
        "dataset_options": dataset_options, "data": data,
        "init": init_report, "device": str(device), "world_size": dist.world,
        "provenance": make_provenance(command=command, seed=cfg.seed,
                                      **({"resumed_with": state.changes} if resume else {})),
        **({"resumes": resumes} if resumes else {})}


def _announce(echo, cfg, state: _ResumeState, base, device, autocast_dtype, init,
              init_report) -> None:
    """The run's first lines: options changed by a resume, data, model, device, init."""
    if state.changes:
        echo("resumed with " + ", ".join(f"{param(k, v[1])} (was {v[0]})"
                                         for k, v in state.changes.items()))
    after = f"; resuming after epoch {int(state.checkpoint['epoch'])}" \
        if state.checkpoint is not None else f"; {init_report.get('source')}"
    echo(f"{cfg.method}: {len(base)} images, {base.num_classes} identities, "
         f"{cfg.backbone} {cfg.input_size[0]}x{cfg.input_size[1]}, device {device}"
         + (f", amp {autocast_dtype}".replace("torch.", "") if autocast_dtype else "")
         + after)
    if init is not None:
        echo(init.summary())             # loaded / missing / unexpected keys


def _hooks(loop: "TrainLoop", work: Path | None, run, data: dict, dist: _Distributed,
           checkpoint: dict | None, echo, *, progress: bool, on_epoch_end) -> list[Hook]:
    """The hooks of a run, in order (:mod:`reidcli.training.hooks`); rank 0 writes files."""
    cfg = loop.cfg
    hooks: list[Hook] = [NaNGuard(), ProgressBar(progress)]
    if dist.main:
        if cfg.eval_every is not None:
            hooks.append(Evaluate(work, data["root"]))
            if cfg.keep == "best":
                hooks.append(KeepBest(work, checkpoint))
        tensorboard = TensorBoard(work / "tensorboard") if cfg.tensorboard else None
        columns = BASE_COLUMNS + list(loop.trainer.log_columns) + ["phase"] + \
            (list(EVAL_COLUMNS) if cfg.eval_every is not None else [])
        hooks.append(MetricsCSV(work / "metrics.csv", columns,
                                keep_until=loop.iteration if checkpoint is not None else None,
                                sinks=[tensorboard.write_row] if tensorboard else []))
        hooks += [tensorboard] if tensorboard else []
        hooks += [EpochLine(echo), Checkpoint(work, run, data)]
    hooks += [Cleanup(), Barrier(dist)]
    return hooks + ([EpochCallback(on_epoch_end)] if on_epoch_end is not None else [])


class TrainLoop:
    """The step loop: epochs of the method's phases, one optimisation step per batch; all else
    is done by :attr:`hooks` (:mod:`reidcli.training.hooks`), which read the state kept here
    (``epoch``, ``iteration``, ``loss``, ``parts``, ``lr``, ``rate``, …)."""

    def __init__(self, cfg, trainer, model, spec, meta, phases, loader, sampler, device,
                 autocast_dtype, channels_last, dist, checkpoint):
        self.cfg, self.trainer, self.model, self.spec, self.meta = cfg, trainer, model, spec, meta
        self.phases, self.loader, self.sampler, self.device = phases, loader, sampler, device
        self.autocast_dtype, self.channels_last, self.dist = autocast_dtype, channels_last, dist
        self.checkpoint = checkpoint
        self.bounds = np.cumsum([0] + [p.epochs for p in phases])
        self.total_epochs = int(self.bounds[-1])
        self.start_epoch, self.iteration = 0, 0
        if checkpoint is not None:
            self.start_epoch = int(checkpoint["epoch"]) + 1
            self.iteration = int(checkpoint["iteration"])
        self.scaler = torch.amp.GradScaler("cuda", enabled=autocast_dtype == torch.float16)
        self.hooks: list[Hook] = []
        self.phase, self.phase_index, self.optimizer, self.net = None, None, None, model
        self.epoch = self.start_epoch
        self.first_loss = self.last_loss = None
        self.loss, self.parts, self.lr, self.rate = float("nan"), {}, 0.0, 0.0
        self.images_seen, self.stop = 0, False
        self.last_step = self.hit_max = False
        self.evaluation: dict[str, float] = {}
        self.evaluated_model: Path | None = None
        self.checkpoint_extra: dict = {}
        self.cleanups: list[Callable[[], None]] = []
        total_steps = len(sampler) * (self.total_epochs - self.start_epoch)
        if cfg.max_iters is not None:         # 0: save the initialised model, untrained
            total_steps = min(total_steps, max(0, cfg.max_iters - self.iteration))
        self.total_steps = total_steps
        self.started = time.perf_counter()
        self.reset_window()

    # -- the loop -----------------------------------------------------------------------
    def run(self) -> None:
        """Every epoch from the start (or the resumed) epoch to the last, or to max_iters."""
        try:
            self._call("before_train")
            for epoch in range(self.start_epoch, self.total_epochs):
                self.epoch = epoch
                if self.cfg.max_iters is not None and self.iteration >= self.cfg.max_iters:
                    break
                self._begin_epoch()
                self._call("before_epoch")
                with fixed_order_convolutions(self.device):   # same bits on any CPU threads
                    for step, batch in enumerate(self.loader):
                        self._step(step, batch)
                        if self.stop:
                            break
                if self.stop:
                    break
                self._call("after_epoch")
        finally:
            self._call("close")

    def _call(self, point: str) -> None:
        for hook in self.hooks:
            getattr(hook, point)(self)

    def _begin_epoch(self) -> None:
        """Phase (trainable set, optimiser, DDP wrap) on a phase change, the epoch's LR,
        sampler epoch and dropout seed, train modes."""
        idx = int(np.searchsorted(self.bounds, self.epoch, side="right") - 1)
        if idx != self.phase_index:
            self._enter_phase(idx)
        factor = self.phase.lr_factor(self.epoch - int(self.bounds[idx]), self.cfg)
        for g in self.optimizer.param_groups:
            g["lr"] = g["initial_lr"] * factor
        self.sampler.set_epoch(self.epoch)
        self.steps_per_epoch = len(self.sampler)     # P×K epochs vary slightly in length
        torch.manual_seed(_epoch_seed(self.cfg.seed, self.epoch))     # dropout stream
        self.model.train()
        if self.phase.train_modes is not None:     # e.g. frozen modules' BN in eval mode
            self.phase.train_modes(self.model)
        self.evaluation, self.evaluated_model = {}, None

    def _enter_phase(self, idx: int) -> None:
        phase = self.phase = self.phases[idx]
        phase.prepare(self.model)
        self.model.to(self.device)
        groups = phase.groups(self.model, self.cfg)
        for g in groups:
            g["initial_lr"] = g["lr"]
        self.optimizer = self.trainer.optimizer(groups, self.cfg)
        checkpoint = self.checkpoint
        if checkpoint is not None and int(checkpoint.get("phase", 0)) == idx \
                and self.epoch == self.start_epoch:
            self.optimizer.load_state_dict(checkpoint["optimizer_state"])
            self.scaler.load_state_dict(checkpoint["scaler_state"])
        # a method whose loss needs the model's parts trains through a module holding both,
        # so DDP sees the whole step in one forward
        net = self.trainer.train_module(self.model, self.cfg)
        self.net = torch.nn.parallel.DistributedDataParallel(
            net, device_ids=[self.device.index] if self.device.type == "cuda" else None,
            find_unused_parameters=len(self.phases) > 1) if self.dist.active else net
        self.phase_index = idx

    def _step(self, step: int, batch: dict) -> None:
        """One optimisation step, then the hooks' after_step."""
        device = self.device
        images = batch["image"].to(device, non_blocking=True)
        if self.channels_last:
            images = images.contiguous(memory_format=torch.channels_last)
        labels = batch["label"].to(device, non_blocking=True)
        loss, parts = self.trainer.train_step(
            self.net, images, labels, batch, self.phase, self.cfg,
            lr=self.optimizer.param_groups[-1]["lr"],
            amp=lambda: autocast(device, self.autocast_dtype))
        self.optimizer.zero_grad(set_to_none=True)
        self.scaler.scale(loss).backward()
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.iteration += 1
        self.loss, self.parts = float(loss.detach()), parts
        if np.isfinite(self.loss):
            self.first_loss = self.loss if self.first_loss is None else self.first_loss
            self.last_loss = self.loss
        n = int(images.shape[0]) * self.dist.world
        self.images_seen += n
        self.window_images += n
        for key, v in {"loss": self.loss, **parts}.items():
            self.window.setdefault(key, []).append(v)
        self.lr = self.optimizer.param_groups[-1]["lr"]
        self.rate = self.window_images / max(time.perf_counter() - self.window_start, 1e-9)
        self.last_step = step == self.steps_per_epoch - 1
        self.hit_max = self.cfg.max_iters is not None and self.iteration >= self.cfg.max_iters
        self._call("after_step")
        self.stop = self.hit_max

    # -- for the hooks ------------------------------------------------------------------
    def reset_window(self) -> None:
        """Start a new averaging window of the logged terms and the images/s rate."""
        self.window: dict[str, list[float]] = {}
        self.window_images, self.window_start = 0, time.perf_counter()

    def save_model(self, path: Path, extra: dict | None = None) -> Path:
        """The model (its spec brought up to date: RPP on or off) into model file ``path``."""
        self.spec.rpp = getattr(self.model, "rpp", None) is not None
        return save_model(path, self.model, self.spec, self.meta, extra=extra)

    def run_cleanups(self) -> None:
        while self.cleanups:
            self.cleanups.pop()()

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
