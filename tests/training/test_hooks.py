"""The hooks of the training loop (docs/training.md): evaluation during training equals
`reid extract --model` + `reid eval`, --keep best keeps the maximum, the NaN guard, the
TensorBoard extra."""
from __future__ import annotations

import csv
import json
import sys
from types import SimpleNamespace

import pytest
import torch

from reidcli.errors import UsageError
from reidcli.training.config import make_config
from reidcli.training.engine import train_model
from reidcli.training.hooks import NaNGuard
from tests.faults.helpers import assert_one_line_error_in_process, reid_in_process

pytestmark = pytest.mark.usefixtures("one_torch_thread")

DATA = ["--dataset", "synthetic", "--option", "name=tiny"]
BOT = ["train", "bot", *DATA, "--preset", "tiny", "--ids-per-batch", "3", "--images-per-id",
       "4", "--quiet"]


def _rows(run):
    with open(run / "metrics.csv", newline="") as f:
        return list(csv.DictReader(f))


def _weights(path):
    return torch.load(path, weights_only=True)["model_state"]


def test_evaluation_during_training_equals_reid_eval_and_best_is_the_max(
        tiny_synthetic_root, tmp_path, capsys):
    run = tmp_path / "run"
    code, _, err = reid_in_process(*BOT, "--root", tiny_synthetic_root, "--epochs", "2",
                                   "--eval-every", "1", "--keep", "best", "--out", run,
                                   capsys=capsys)
    assert code == 0, err
    rows = [r for r in _rows(run) if r["mAP"]]
    assert [int(r["epoch"]) for r in rows] == [0, 1]          # one evaluation per epoch
    best = max(rows, key=lambda r: float(r["mAP"]))
    # the best model file, extracted and scored as a user would: the logged numbers
    store, report = tmp_path / "best.h5", tmp_path / "best.json"
    assert reid_in_process("extract", "--model", run / "model_best.pt", *DATA, "--root",
                           tiny_synthetic_root, "--out", store, capsys=capsys)[0] == 0
    assert reid_in_process("eval", "--store", store, "--json", report, "--quiet",
                           capsys=capsys)[0] == 0
    scored = json.loads(report.read_text())
    assert float(best["mAP"]) == pytest.approx(scored["mAP"], abs=1e-6)
    assert float(best["rank1"]) == pytest.approx(scored["cmc"][0], abs=1e-6)
    assert float(best["mINP"]) == pytest.approx(scored["mINP"], abs=1e-6)
    checkpoint = torch.load(run / "checkpoint.pt", weights_only=True)
    assert checkpoint["best"]["epoch"] == int(best["epoch"])
    assert not list(run.glob(".eval-*"))                      # scratch folders removed
    # evaluating changes nothing in the training: the same weights as a run without it
    plain = make_config("bot", preset="tiny", dataset="synthetic",
                        root=str(tiny_synthetic_root), options={"name": "tiny"}, p=3, k=4,
                        epochs=2)
    train_model(plain, tmp_path / "plain", progress=False)
    a, b = _weights(run / "model.pt"), _weights(tmp_path / "plain" / "model.pt")
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_keep_best_needs_evaluation(tiny_synthetic_root, tmp_path, capsys):
    result = reid_in_process(*BOT, "--root", tiny_synthetic_root, "--keep", "best",
                             "--out", tmp_path / "x", capsys=capsys)
    assert_one_line_error_in_process(result, "--keep", "--eval-every")
    result = reid_in_process(*BOT, "--root", tiny_synthetic_root, "--eval-every", "1",
                             "--keep-metric", "top5", "--out", tmp_path / "x", capsys=capsys)
    assert_one_line_error_in_process(result, "--keep-metric", "mAP, rank1")
    assert not (tmp_path / "x").exists() and not (tmp_path / "x.partial").exists()


def test_nan_guard_stops_with_one_line_error():
    loop = SimpleNamespace(cfg=SimpleNamespace(method="bot"), iteration=7, loss=1.5)
    NaNGuard().after_step(loop)                                # finite: nothing happens
    for bad in (float("nan"), float("inf")):
        loop.loss = bad
        with pytest.raises(UsageError, match="loss became .* at iteration 7.*lower lr"):
            NaNGuard().after_step(loop)


def test_tensorboard_missing_is_one_line_naming_the_extra(tiny_synthetic_root, tmp_path,
                                                          capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)    # import fails
    result = reid_in_process(*BOT, "--root", tiny_synthetic_root, "--tensorboard",
                             "--out", tmp_path / "tb", capsys=capsys)
    assert_one_line_error_in_process(result, "--tensorboard",
                                     "pip install 'reidcli[tensorboard]'")
    assert not (tmp_path / "tb").exists() and not (tmp_path / "tb.partial").exists()


def test_tensorboard_writes_an_event_file(tiny_synthetic_root, tmp_path, capsys):
    pytest.importorskip("tensorboard", reason="the tensorboard extra is not installed")
    run = tmp_path / "tb"
    code, _, err = reid_in_process(*BOT, "--root", tiny_synthetic_root, "--max-iters", "2",
                                   "--log-every", "1", "--tensorboard", "--out", run,
                                   capsys=capsys)
    assert code == 0, err
    events = list((run / "tensorboard").glob("events.out.tfevents.*"))
    assert len(events) == 1
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    scalars = EventAccumulator(str(events[0])).Reload().Tags()["scalars"]
    assert {"loss", "lr", "loss_ce", "loss_tri", "acc", "images_per_s"} <= set(scalars)


@pytest.mark.slow
def test_resumed_run_keeps_the_same_best_model(tiny_synthetic_root, tmp_path):
    """Interrupted after epoch 1 of 3 and resumed: model.pt, model_best.pt and every logged
    evaluation as in the straight run (the best value rides in the checkpoint)."""
    def cfg():
        return make_config("pcb", preset="tiny", dataset="synthetic",
                           root=str(tiny_synthetic_root), options={"name": "tiny"},
                           batch_size=8, epochs=3, log_every=1, eval_every=1, keep="best",
                           keep_metric="rank1")

    train_model(cfg(), tmp_path / "straight", progress=False)

    def interrupt(epoch):
        if epoch == 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train_model(cfg(), tmp_path / "cut", progress=False, on_epoch_end=interrupt)
    train_model(cfg(), tmp_path / "cut", resume=True, progress=False)
    for name in ("model.pt", "model_best.pt"):
        a, b = _weights(tmp_path / "straight" / name), _weights(tmp_path / "cut" / name)
        assert all(torch.equal(a[k], b[k]) for k in a), name
    logged = [[(r["epoch"], r["mAP"], r["rank1"]) for r in _rows(tmp_path / run)]
              for run in ("straight", "cut")]
    assert logged[0] == logged[1]
