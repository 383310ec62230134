"""`reid train pcb|bot` and `reid extract --model` end to end on the tiny synthetic data."""
from __future__ import annotations

import json

import pytest
import torch

from tests.cli.helpers import run_cli


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _data(root):
    return ["--dataset", "synthetic", "--root", str(root), "--option", "name=tiny"]


def test_train_extract_eval_chain(capsys, tiny_synthetic_root, tmp_path):
    run = tmp_path / "run"
    code, _, err = run_cli(capsys, "train", "bot", *_data(tiny_synthetic_root), "--preset",
                           "tiny", "--P", "3", "--K", "4", "--epochs", "2", "--out", run)
    assert code == 0, err
    assert "wrote" in err and (run / "model.pt").exists()
    store = tmp_path / "s.h5"
    code, _, err = run_cli(capsys, "extract", "--model", run, *_data(tiny_synthetic_root),
                           "--features", "bnneck,pool5", "--maps", "conv5_x", "--map-size",
                           "4x2", "--flip", "--out", store)
    assert code == 0, err
    code, out, err = run_cli(capsys, "store", "info", store)
    assert code == 0 and "bnneck" in out and "pool5" in out and "conv5_x" in out
    report = tmp_path / "r.json"
    code, _, err = run_cli(capsys, "eval", "--store", store, "--json", report, "--quiet")
    assert code == 0, err
    result = json.loads(report.read_text())
    assert result["feature"] == "bnneck" and result["feat_norm"] == "global"
    assert 0.0 <= result["mAP"] <= 1.0


def test_resume_and_refusals(capsys, tiny_synthetic_root, tmp_path):
    run = tmp_path / "pcb"
    args = ["train", "pcb", *_data(tiny_synthetic_root), "--preset", "tiny", "--batch-size",
            "8", "--epochs", "1", "--out", run]
    assert run_cli(capsys, *args)[0] == 0
    code, _, err = run_cli(capsys, *args)
    assert code == 2 and "--force" in err and "Traceback" not in err
    assert run_cli(capsys, "train", "pcb", "--resume", run, "--quiet")[0] == 0
    code, _, err = run_cli(capsys, "train", "pcb", "--resume", tmp_path / "none")
    assert code == 2 and "checkpoint.pt" in err
    code, _, err = run_cli(capsys, "train", "pcb", "--out", tmp_path / "x")
    assert code == 2 and "--dataset" in err


def test_init_errors_are_one_line(capsys, tiny_synthetic_root, tmp_path, monkeypatch):
    monkeypatch.setenv("REIDCLI_OFFLINE", "1")
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    base = ["train", "pcb", *_data(tiny_synthetic_root), "--batch-size", "8", "--epochs", "1",
            "--input-size", "96x32"]
    code, _, err = run_cli(capsys, *base, "--backbone", "resnet18", "--init", "imagenet",
                           "--out", tmp_path / "a")
    assert code == 2 and err.count("\n") == 1
    assert "--init PATH" in err and "--init scratch" in err
    code, _, err = run_cli(capsys, *base, "--backbone", "resnet18", "--init",
                           tmp_path / "missing.pth", "--out", tmp_path / "b")
    assert code == 2 and "missing.pth" in err


def test_extract_model_errors(capsys, tiny_synthetic_root, tmp_path):
    code, _, err = run_cli(capsys, "extract", "--model", tmp_path, *_data(tiny_synthetic_root),
                           "--out", tmp_path / "s.h5")
    assert code == 2 and "model.pt" in err
    code, _, err = run_cli(capsys, "extract", *_data(tiny_synthetic_root), "--shard", "0/2",
                           "--out", tmp_path / "s.h5")
    assert code == 2 and "--model" in err
