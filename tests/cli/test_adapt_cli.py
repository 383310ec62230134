"""`reid adapt` on the command line: outputs, exit codes and one-line errors."""
from __future__ import annotations

import h5py
import pytest
import torch

from tests.cli.helpers import run_cli


def test_help_lists_every_method(capsys):
    code, out, _ = run_cli(capsys, "adapt", "--help")
    assert code == 0
    for name in ("none", "norm", "dart3", "dart3-lite", "tent", "temp"):
        assert name in out


def test_dart3_lite_then_eval(biased_stores, tmp_path, capsys):
    out = tmp_path / "a.h5"
    code, _, err = run_cli(capsys, "adapt", "dart3-lite", "--store", biased_stores[0], "--out",
                           out, "--lr", "0.01", "--steps", "3", "--batch-size", "16",
                           "--split-by-query-camera")
    assert code == 0, err
    assert "dart3 (lite) on 80 queries" in err and "ms/query" in err
    with h5py.File(out) as f:
        assert f["adapt"]["dart3"].attrs["mode"] == "lite"
        assert f.attrs["complete"]
    code, stdout, err = run_cli(capsys, "eval", "--store", out, "--per-camera", "--nmi",
                                "--feat-norm", "none")
    assert code == 0, err
    assert "weighted mean" in stdout and "NMI" in stdout


@pytest.mark.parametrize("args,message", [
    (["tent"], "needs --model"),
    (["dart3", "--mode", "full", "--batch-size", "1"], "at least 2 rows"),
    (["dart3", "--feature", "nope"], "has no feature 'nope'"),
    (["dart3", "--query-cams", "9"], "no query of the store is from these cameras"),
    (["dart3", "--optimizer", "lbfgs"], "--optimizer 'lbfgs' is not one of"),
    (["dart3", "--trial", "3"], "--trial 3"),
    (["wat"], None),
])
def test_user_errors_are_one_line_exit_2(biased_stores, tmp_path, capsys, args, message):
    code, _, err = run_cli(capsys, "adapt", *args[:1], "--store", biased_stores[0], "--out",
                           tmp_path / "o.h5", *args[1:])
    assert code == 2
    if message is not None:
        assert message in err
        assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "o.h5").exists()


def test_missing_store_and_debug_traceback(tmp_path, capsys):
    code, _, err = run_cli(capsys, "adapt", "norm", "--store", tmp_path / "no.h5", "--out",
                           tmp_path / "o.h5")
    assert code == 2 and "does not exist" in err and "Traceback" not in err
    code, _, err = run_cli(capsys, "--debug", "adapt", "norm", "--store", tmp_path / "no.h5",
                           "--out", tmp_path / "o.h5")
    assert code == 2 and "Traceback" in err


def test_full_mode_with_images_root_and_save_model(tiny_model_store, tmp_path, capsys):
    from reidcli.models.checkpoint import load_model

    model, store, images = tiny_model_store
    saved = tmp_path / "adapted.pt"
    code, _, err = run_cli(capsys, "adapt", "dart3", "--mode", "full", "--store", store,
                           "--out", tmp_path / "f.h5", "--model", model, "--images-root",
                           images, "--batch-size", "4", "--lr", "0.01", "--save-model", saved,
                           "--device", "cpu", "--workers", "0")
    assert code == 0, err
    before, after = load_model(model).module, load_model(saved).module
    assert not torch.equal(before.bottleneck.weight, after.bottleneck.weight)
    assert torch.equal(before.bottleneck.running_mean, after.bottleneck.running_mean)
    with h5py.File(tmp_path / "f.h5") as f:
        assert "bn" in f["adapt"]["dart3"] and f["adapt"]["dart3"].attrs["mode"] == "full"
    code, _, err = run_cli(capsys, "adapt", "norm", "--store", store, "--out",
                           tmp_path / "g.h5", "--save-model", tmp_path / "x.pt")
    assert code == 2 and "--save-model" in err
