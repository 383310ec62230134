"""Shared checks of the training tests: bit-for-bit resume, and `reid train` under torchrun."""
from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from reidcli.training.engine import train_model


def metrics_rows(run: Path) -> list[dict]:
    with open(Path(run) / "metrics.csv", newline="") as f:
        return list(csv.DictReader(f))


def assert_resume_reproduces(cfg, tmp_path: Path, interrupt_after_epoch: int) -> None:
    """Train ``cfg`` straight, then again interrupted after ``interrupt_after_epoch`` and
    resumed: the same weights bit for bit and the same logged losses."""
    train_model(cfg, tmp_path / "straight", progress=False)

    def interrupt(epoch):
        if epoch == interrupt_after_epoch:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train_model(cfg, tmp_path / "cut", progress=False, on_epoch_end=interrupt)
    assert not (tmp_path / "cut" / "model.pt").exists()       # no half-finished model
    train_model(cfg, tmp_path / "cut", resume=True, progress=False)
    a = torch.load(tmp_path / "straight" / "model.pt", weights_only=True)["model_state"]
    b = torch.load(tmp_path / "cut" / "model.pt", weights_only=True)["model_state"]
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    losses = [[r["loss"] for r in metrics_rows(tmp_path / run)] for run in ("straight", "cut")]
    assert losses[0] == losses[1]


def torchrun_reid(*args: str, processes: int = 2) -> subprocess.CompletedProcess:
    """``torchrun --standalone --nproc_per_node N reid ARGS`` (gloo on CPU, one thread per
    process); skips the test when the scripts are not installed next to the interpreter."""
    torchrun = Path(sys.executable).with_name("torchrun")
    reid = Path(sys.executable).with_name("reid")
    if not torchrun.exists() or not reid.exists():
        pytest.skip("torchrun / reid scripts not installed next to the interpreter")
    cmd = [str(torchrun), "--standalone", "--nproc_per_node", str(processes), str(reid),
           *map(str, args)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stderr.count("wrote ") == 1                     # rank 0 only
    return done
