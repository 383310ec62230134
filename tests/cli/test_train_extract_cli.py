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
                           "tiny", "--ids-per-batch", "3", "--images-per-id", "4", "--epochs", "2",
                           "--out", run)
    assert code == 0, err
    assert "wrote" in err and (run / "model.pt").exists()
    store = tmp_path / "s.h5"
    code, _, err = run_cli(capsys, "extract", "--model", run, *_data(tiny_synthetic_root),
                           "--features", "bnneck,pool5", "--maps", "conv5_x", "--map-size",
                           "4x2", "--flip", "--out", store)
    assert code == 0, err
    code, out, err = run_cli(capsys, "store", "info", "--store", store)
    assert code == 0 and "bnneck" in out and "pool5" in out and "conv5_x" in out
    from reidcli.store import open_store
    with open_store(store) as st:                 # provenance: the model and the images read
        model_input, images_input = st.provenance["inputs"]
    assert model_input["sha256"] and images_input["listing_sha256"]
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


def test_training_prints_the_init_report_of_a_torchreid_state_dict(capsys, tiny_synthetic_root,
                                                                   tmp_path):
    from reidcli.models.backbones import build_backbone

    state = {f"module.{k}": v for k, v in build_backbone("tiny").state_dict().items()
             if k != "conv1.weight"}                                      # 1 missing
    state.update({"module.classifier.weight": torch.zeros(6, 128),      # 2 unexpected
                  "module.classifier.bias": torch.zeros(6)})
    weights = tmp_path / "torchreid.pth.tar"
    torch.save({"state_dict": state, "epoch": 60}, weights)
    code, _, err = run_cli(capsys, "train", "pcb", *_data(tiny_synthetic_root), "--preset",
                           "tiny", "--batch-size", "8", "--max-iters", "1", "--init", weights,
                           "--out", tmp_path / "run")
    assert code == 0, err
    line = next(t for t in err.splitlines() if t.startswith("init: "))
    assert f"{len(state) - 2} tensors loaded" in line
    assert "; 1 missing (conv1.weight)" in line
    assert "; 2 unexpected (classifier.weight, classifier.bias)" in line


def test_train_bot_batch_size_sets_p_from_k(capsys, tiny_synthetic_root, tmp_path):
    run = tmp_path / "bot"
    code, _, err = run_cli(capsys, "train", "bot", *_data(tiny_synthetic_root), "--preset",
                           "tiny", "--batch-size", "6", "--images-per-id", "2", "--max-iters", "1",
                           "--out", run)
    assert code == 0, err
    config = json.loads((run / "config.json").read_text())["config"]
    assert (config["p"], config["k"], config["batch_size"]) == (3, 2, 6)
    code, _, err = run_cli(capsys, "train", "bot", *_data(tiny_synthetic_root), "--preset",
                           "tiny", "--batch-size", "7", "--images-per-id", "2", "--out", tmp_path / "x")
    assert code == 2 and err.count("\n") == 1 and "multiple of --images-per-id 2" in err
    assert not (tmp_path / "x").exists()
