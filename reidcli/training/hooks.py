"""The hooks of the training loop (:class:`reidcli.training.engine.TrainLoop`): everything a
run does besides the optimisation step — the NaN guard, the progress bar, ``metrics.csv``,
evaluation during training, the best checkpoint, TensorBoard, the epoch line, checkpoints
and the DDP barrier (docs/training.md).

A hook sees the loop's state (``loop.epoch``, ``loop.iteration``, ``loop.loss``, …) at five
points: :meth:`Hook.before_train`, :meth:`Hook.before_epoch`, :meth:`Hook.after_step`,
:meth:`Hook.after_epoch`, and :meth:`Hook.close` (always, also after an error). Hooks run in
the order of the loop's list; :func:`default_hooks` gives the order a run uses.
"""
from __future__ import annotations

import contextlib
import csv
import os
import random
import shutil
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator

import numpy as np
import torch

from reidcli.errors import InputFileError, UsageError
from reidcli.io import output_errors
from reidcli.naming import param

if TYPE_CHECKING:
    from reidcli.training.engine import TrainLoop

BASE_COLUMNS = ["epoch", "iteration", "lr", "loss", "images_per_s", "seconds"]
TENSORBOARD_HINT = "pip install 'reidcli[tensorboard]'"


class Hook:
    """No-op defaults; a hook overrides the points it acts at."""

    def before_train(self, loop: "TrainLoop") -> None:
        pass

    def before_epoch(self, loop: "TrainLoop") -> None:
        pass

    def after_step(self, loop: "TrainLoop") -> None:
        pass

    def after_epoch(self, loop: "TrainLoop") -> None:
        pass

    def close(self, loop: "TrainLoop") -> None:
        """After the last epoch, an early stop or an error."""


class NaNGuard(Hook):
    """Stop with a one-line error when the loss is not finite (NaN, ±inf)."""

    def after_step(self, loop: "TrainLoop") -> None:
        if not np.isfinite(loop.loss):
            raise UsageError(f"the {loop.cfg.method} loss became {loop.loss} at iteration "
                             f"{loop.iteration}",
                             f"lower {param('lr')}, or use {param('amp', 'off')}")


class ProgressBar(Hook):
    """The step bar: epoch, loss, lr, images/s and the method's ``bar_terms``."""

    def __init__(self, enabled: bool):
        self.enabled, self.bar = enabled, None

    def before_train(self, loop: "TrainLoop") -> None:
        from reidcli.progress import StepBar

        self.bar = StepBar(loop.total_steps, f"train {loop.cfg.method}", enabled=self.enabled)
        self.bar.__enter__()

    def after_step(self, loop: "TrainLoop") -> None:
        stage = f" {loop.phase.name}" if len(loop.phases) > 1 else ""
        terms = set(loop.trainer.bar_terms)
        self.bar.update(1, description=f"{loop.cfg.method}{stage} epoch "
                        f"{loop.epoch + 1}/{loop.total_epochs}", loss=loop.loss, lr=loop.lr,
                        img_s=loop.rate, **{k: v for k, v in loop.parts.items() if k in terms})

    def close(self, loop: "TrainLoop") -> None:
        if self.bar is not None:
            self.bar.__exit__(None, None, None)
            self.bar = None


class MetricsCSV(Hook):
    """``metrics.csv``: header on creation, one flushed row per logged iteration (means over
    the iterations since the last row). The row of an epoch's last step is written at the
    end of the epoch, with that epoch's evaluation (``loop.evaluation``) when there is one.
    Each written row is also handed to ``sinks`` (TensorBoard)."""

    def __init__(self, path: Path, columns: list[str], keep_until: int | None,
                 sinks: list[Callable[[dict], None]] = ()):
        self.path, self.columns, self.sinks = path, columns, list(sinks)
        self.pending: dict | None = None
        rows: list[dict] = []
        if keep_until is not None and path.exists():         # resume: drop rows after ckpt
            rows = logged_rows(path, keep_until)
        with output_errors(f"{path}"):
            self.file = path.open("w", newline="")
            self.writer = csv.DictWriter(self.file, fieldnames=columns, extrasaction="ignore")
            self.writer.writeheader()
            self.writer.writerows(rows)
            self.file.flush()

    def after_step(self, loop: "TrainLoop") -> None:
        if not (loop.iteration % loop.cfg.log_every == 0 or loop.last_step or loop.hit_max):
            return
        row = {"epoch": loop.epoch, "iteration": loop.iteration, "lr": loop.lr,
               "images_per_s": loop.rate, "seconds": time.perf_counter() - loop.started,
               "phase": loop.phase.name}
        row.update({k: float(np.mean(v)) for k, v in loop.window.items()})
        loop.reset_window()
        if loop.last_step and not loop.hit_max:
            self.pending = row                  # completed by the epoch's evaluation
        else:
            self.write(row)

    def after_epoch(self, loop: "TrainLoop") -> None:
        if self.pending is not None:
            self.write({**self.pending, **loop.evaluation})
            self.pending = None

    def write(self, row: dict) -> None:
        with output_errors(f"{self.path}"):
            self.writer.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v)
                                  for k, v in row.items()})
            self.file.flush()
        for sink in self.sinks:
            sink(row)

    def close(self, loop: "TrainLoop") -> None:
        if self.pending is not None:
            self.write(self.pending)
            self.pending = None
        self.file.close()


def logged_rows(path: Path, keep_until: int) -> list[dict]:
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


class Evaluate(Hook):
    """Every ``cfg.eval_every`` epochs (and after the last one): the epoch's model saved as
    a model file and scored on the query/gallery of ``cfg.eval_dataset`` (default: the
    training dataset) as ``reid extract --model`` + ``reid eval`` do
    (:mod:`reidcli.training.evaluation`); ``loop.evaluation`` holds the numbers, and
    ``loop.evaluated_model`` the model file until the epoch ends."""

    def __init__(self, work: Path, root: str | None):
        self.work, self.root = work, root

    def before_train(self, loop: "TrainLoop") -> None:
        for left in self.work.glob(".eval-*"):      # of a resumed run killed while evaluating
            shutil.rmtree(left, ignore_errors=True)

    def after_epoch(self, loop: "TrainLoop") -> None:
        from reidcli.training.evaluation import evaluate_model_file

        cfg = loop.cfg
        if (loop.epoch + 1) % cfg.eval_every and loop.epoch + 1 != loop.total_epochs:
            return
        scratch = Path(tempfile.mkdtemp(prefix=".eval-", dir=self.work))
        model_path = loop.save_model(scratch / "model.pt")
        dataset = cfg.eval_dataset or cfg.dataset
        options = cfg.eval_options if cfg.eval_dataset else cfg.options
        with kept_random_state(loop.device):   # training goes on as without the evaluation
            loop.evaluation = evaluate_model_file(model_path, dataset, self.root, options,
                                                  scratch, device=str(loop.device),
                                                  workers=cfg.workers)
        loop.evaluated_model = model_path
        loop.cleanups.append(lambda: shutil.rmtree(scratch, ignore_errors=True))


@contextlib.contextmanager
def kept_random_state(device) -> Iterator[None]:
    """Restore the torch (CPU and ``device``), NumPy and Python random states on exit."""
    devices = [device] if torch.device(device).type == "cuda" else []
    py_state, np_state = random.getstate(), np.random.get_state()
    with torch.random.fork_rng(devices=devices):
        try:
            yield
        finally:
            random.setstate(py_state)
            np.random.set_state(np_state)


class KeepBest(Hook):
    """``model_best.pt``: the evaluated model whose ``cfg.keep_metric`` is the highest so far
    (the first of equal ones), moved into place atomically; the best value and epoch ride in
    every checkpoint so that a resumed run goes on comparing."""

    def __init__(self, work: Path, checkpoint: dict | None):
        self.work = work
        self.best = dict((checkpoint or {}).get("best") or {})

    def before_train(self, loop: "TrainLoop") -> None:
        if self.best:                               # resumed: carried on in checkpoints
            loop.checkpoint_extra["best"] = dict(self.best)

    def after_epoch(self, loop: "TrainLoop") -> None:
        metric = loop.cfg.keep_metric
        if loop.evaluated_model is None or metric not in loop.evaluation:
            return
        value = loop.evaluation[metric]
        if self.best and value <= self.best["value"]:
            return
        with output_errors(f"{self.work / 'model_best.pt'}"):
            os.replace(loop.evaluated_model, self.work / "model_best.pt")
        self.best = {"metric": metric, "value": value, "epoch": loop.epoch}
        loop.checkpoint_extra["best"] = dict(self.best)


class TensorBoard(Hook):
    """TensorBoard scalars (``RUN_DIR/tensorboard/``): every column of every metrics.csv row
    (a sink of :class:`MetricsCSV`), at its iteration."""

    def __init__(self, folder: Path):
        SummaryWriter = require_tensorboard()
        self.writer = SummaryWriter(log_dir=str(folder))

    def write_row(self, row: dict) -> None:
        step = int(row["iteration"])
        for key, value in row.items():
            if key not in ("epoch", "iteration") and isinstance(value, (int, float)):
                self.writer.add_scalar(key, float(value), step)
        self.writer.flush()

    def close(self, loop: "TrainLoop") -> None:
        self.writer.close()


def require_tensorboard():
    """``torch.utils.tensorboard.SummaryWriter``; a one-line UsageError naming the extra
    when the tensorboard package is not installed."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        raise UsageError(f"{param('tensorboard')} needs the tensorboard package, which is not "
                         "installed", f"install the tensorboard extra: {TENSORBOARD_HINT}"
                         ) from None
    return SummaryWriter


class EpochLine(Hook):
    """``epoch E/N: loss …, lr …`` (and the evaluation) on the terminal after each epoch."""

    def __init__(self, echo: Callable[[str], None]):
        self.echo = echo

    def after_epoch(self, loop: "TrainLoop") -> None:
        scores = "".join(f", {k} {v:.4f}" for k, v in loop.evaluation.items())
        self.echo(f"epoch {loop.epoch + 1}/{loop.total_epochs}: loss {loop.last_loss:.4f}, "
                  f"lr {loop.optimizer.param_groups[-1]['lr']:.3g}{scores}")


class Checkpoint(Hook):
    """``checkpoint.pt`` every ``cfg.checkpoint_every`` epochs and after the last one (model,
    optimiser and scaler state, position, the data; resumable bit for bit)."""

    def __init__(self, work: Path, run, data: dict):
        self.work, self.run, self.data = work, run, data

    def after_epoch(self, loop: "TrainLoop") -> None:
        if (loop.epoch + 1) % loop.cfg.checkpoint_every and loop.epoch + 1 != loop.total_epochs:
            return
        loop.save_model(self.work / "checkpoint.pt", extra={
            "config": loop.cfg.as_dict(), "epoch": loop.epoch, "iteration": loop.iteration,
            "phase": loop.phase_index, "optimizer_state": loop.optimizer.state_dict(),
            "scaler_state": loop.scaler.state_dict(), "data": self.data,
            **loop.checkpoint_extra})
        self.run.checkpointed()


class Barrier(Hook):
    """DDP: every rank waits for the others (rank 0's checkpoint, evaluation) each epoch."""

    def __init__(self, dist):
        self.dist = dist

    def after_epoch(self, loop: "TrainLoop") -> None:
        self.dist.barrier()


class Cleanup(Hook):
    """Runs the epoch's clean-ups (e.g. the evaluation's scratch folder), also on errors."""

    def after_epoch(self, loop: "TrainLoop") -> None:
        loop.run_cleanups()

    def close(self, loop: "TrainLoop") -> None:
        loop.run_cleanups()


class EpochCallback(Hook):
    """``on_epoch_end(epoch)`` of :func:`~reidcli.training.engine.train_model` (tests use it
    to simulate an interruption)."""

    def __init__(self, callback: Callable[[int], None]):
        self.callback = callback

    def after_epoch(self, loop: "TrainLoop") -> None:
        self.callback(loop.epoch)


__all__ = ["Hook", "NaNGuard", "ProgressBar", "MetricsCSV", "Evaluate", "KeepBest",
           "TensorBoard", "EpochLine", "Checkpoint", "Barrier", "Cleanup", "EpochCallback",
           "BASE_COLUMNS", "TENSORBOARD_HINT", "logged_rows", "require_tensorboard"]
