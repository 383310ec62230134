"""DMG-Net on the training engine and the CLI (docs/methods/dmgnet.md): train on synthetic
domains d0–d2, extract the held-out d3 and evaluate (T12), determinism and resume (T11), the
guards (T14), and the paired support/query batches the engine feeds the step."""
from __future__ import annotations

import csv
import json

import h5py
import numpy as np
import pytest

from reidcli.errors import ParameterError, UsageError
from reidcli.training.config import make_config
from reidcli.training.engine import train_model
from tests.cli.helpers import run_cli
from tests.training.helpers import assert_resume_reproduces, torchrun_reid

pytestmark = pytest.mark.usefixtures("one_torch_thread")

SOURCE_DOMAINS = "synthetic/d0,synthetic/d1,synthetic/d2"


def _data(root, name):
    return ["--sources", "synthetic", "--root", str(root), "--source-option",
            f"synthetic.name={name}", "--domains", SOURCE_DOMAINS]


def _cfg(root, name, **kw):
    base = dict(sources=["synthetic"], root=str(root), source_options={"synthetic": {
        "name": name}}, domains=SOURCE_DOMAINS.split(","), epochs=2, iters_per_epoch=2,
        log_every=1)
    base.update(kw)
    return make_config("dmgnet", preset="tiny", dataset="synthetic", **base)


def _rows(run):
    with open(run / "metrics.csv", newline="") as f:
        return list(csv.DictReader(f))


def test_train_extract_eval_on_a_held_out_domain(capsys, dg_synthetic, tmp_path):
    root, name = dg_synthetic
    run = tmp_path / "run"
    code, _, err = run_cli(capsys, "train", "dmgnet", *_data(root, name), "--preset", "tiny",
                           "--max-iters", "10", "--log-every", "1", "--targets", "synthetic/d3",
                           "--out", run, "--quiet")
    assert code == 0, err
    rows = _rows(run)
    assert len(rows) == 10 and all(r["loss_g"] and r["loss_md"] and r["loss_b"] for r in rows)
    assert all(np.isfinite(float(r["loss"])) for r in rows)
    audit = list(csv.DictReader(open(run / "train_records.csv", newline="")))
    assert {r["domain"] for r in audit} == set(SOURCE_DOMAINS.split(","))
    assert {"cam", "dom", "dataset"} <= set(audit[0])
    store = tmp_path / "d3.h5"
    code, _, err = run_cli(capsys, "extract", "--model", run, "--dataset", "synthetic",
                           "--root", root, "--option", f"name={name}", "--option",
                           "domains=3", "--out", store)
    assert code == 0, err
    with h5py.File(store, "r") as f:
        assert f["features/bnneck"].shape[1] == 128            # tiny trunk's conv5_x
        assert set(f["records/domain"][()].astype(str)) == {"synthetic/d3"}
        shape = f["features/bnneck"].shape
    report = tmp_path / "r.json"
    code, _, err = run_cli(capsys, "eval", "--store", store, "--json", report, "--quiet")
    assert code == 0, err
    result = json.loads(report.read_text())
    cmc = result["cmc"]
    assert 0.0 <= result["mAP"] <= 1.0 and all(a <= b for a, b in zip(cmc, cmc[1:]))
    # chance level: the same store with seeded Gaussian features of the same shape
    import shutil
    chance_store = tmp_path / "chance.h5"
    shutil.copy(store, chance_store)
    with h5py.File(chance_store, "r+") as f:
        f["features/bnneck"][...] = np.random.default_rng(0).standard_normal(shape)
    chance = tmp_path / "c.json"
    code, _, err = run_cli(capsys, "eval", "--store", chance_store, "--json", chance, "--quiet")
    assert code == 0, err
    assert result["mAP"] > json.loads(chance.read_text())["mAP"]


def test_same_seed_same_losses_and_resume_reproduces(dg_synthetic, tmp_path):
    root, name = dg_synthetic
    cfg = _cfg(root, name, epochs=2, iters_per_epoch=2)
    train_model(cfg, tmp_path / "a", progress=False)
    train_model(cfg, tmp_path / "b", progress=False)
    losses = lambda run: [r["loss"] for r in _rows(run)]              # noqa: E731
    assert losses(tmp_path / "a") == losses(tmp_path / "b")
    assert_resume_reproduces(cfg, tmp_path, interrupt_after_epoch=0)


@pytest.mark.parametrize("switches", [dict(meta_order=1), dict(inner_opt="adam1"),
                                      dict(no_meta=True), dict(no_meta=True, md_weight=0.0),
                                      dict(md_weight=0.0)])
def test_table_6_switches_train(dg_synthetic, tmp_path, switches):
    root, name = dg_synthetic
    train_model(_cfg(root, name, epochs=1, iters_per_epoch=2, **switches), tmp_path / "r",
                progress=False)
    rows = _rows(tmp_path / "r")
    assert rows and all(np.isfinite(float(r["loss"])) for r in rows)
    assert bool(rows[0]["loss_g"]) == (not switches.get("no_meta", False))


def test_a_target_that_is_also_a_source_exits_2(capsys, dg_synthetic, tmp_path):
    root, name = dg_synthetic
    code, _, err = run_cli(capsys, "train", "dmgnet", *_data(root, name), "--preset", "tiny",
                           "--targets", "synthetic/d1", "--out", tmp_path / "r")
    lines = [line for line in err.strip().splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "also a training source" in lines[0], err
    assert not (tmp_path / "r" / "model.pt").exists()


def test_guards(capsys, dg_synthetic, tmp_path):
    root, name = dg_synthetic
    with pytest.raises(UsageError, match="identities"):         # P larger than the ids
        train_model(_cfg(root, name, p=400, k=2), tmp_path / "p", progress=False)
    with pytest.raises(ParameterError, match="second-order"):
        _cfg(root, name, amp="bf16")
    with pytest.raises(ParameterError, match="amp='fp16'.*without loss scaling"):
        _cfg(root, name, amp="fp16", meta_order=1)      # the inner gradient is unscaled
    assert _cfg(root, name, amp="bf16", meta_order=1).amp == "bf16"
    assert _cfg(root, name, amp="fp16", no_meta=True).amp == "fp16"
    with pytest.raises(ParameterError, match="meta_order"):
        _cfg(root, name, meta_order=3)
    code, _, err = run_cli(capsys, "train", "dmgnet", "--root", root, "--out", tmp_path / "x")
    assert code == 2 and "--sources" in err
    code, _, err = run_cli(capsys, "train", "dmgnet", *_data(root, name), "--out",
                           tmp_path / "w", "--backbone", "tiny", "--init", "/no/such.pth")
    assert code == 2 and "--init" in err, err


def test_ddp_two_processes_with_torchrun(dg_synthetic, tmp_path):
    """`torchrun --nproc_per_node 2 reid train dmgnet` (gloo on CPU): the second-order meta
    step runs inside the DDP module; rank 0 writes the run."""
    root, name = dg_synthetic
    run = tmp_path / "ddp"
    torchrun_reid("train", "dmgnet", *_data(root, name), "--preset", "tiny", "--epochs", "1",
                  "--iters-per-epoch", "4", "--log-every", "1", "--out", run, "--quiet")
    assert json.loads((run / "config.json").read_text())["world_size"] == 2
    rows = _rows(run)
    assert len(rows) == 2 and all(np.isfinite(float(r["loss_g"])) for r in rows)


def test_meta_split_reaches_the_sampler(dg_synthetic):
    """--meta-split: global by default (DMG-Net paper §4.1, Alg. 1 l. 2: half of all C
    cameras), per-domain on request; the records' camera pairs reach the sampler."""
    from reidcli.training.dmgnet_trainer import DMGNetTrainer

    root, name = dg_synthetic
    trainer = DMGNetTrainer()
    for split in ("global", "per-domain"):
        cfg = _cfg(root, name, **({} if split == "global" else {"meta_split": split}))
        assert cfg.meta_split == split
        records = trainer.training_records(cfg)
        assert (records["cam_group"] == -1).all()                 # no camera pairs here
        sampler = trainer.batch_sampler(cfg, records["label"].to_numpy(), 1, 0,
                                        records=records)
        assert sampler.split == split
        counts = {tuple(sum(str(d) == str(i) for d, _ in sampler.camera_split(epoch=e)[0])
                        for i in range(3)) for e in range(8)}
        assert (len(counts) > 1) == (split == "global")         # per-domain: always 2, 2, 2
    with pytest.raises(ParameterError, match="meta_split"):
        _cfg(root, name, meta_split="domain")
