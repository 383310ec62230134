"""The training engine on the ``tiny`` synthetic preset (CPU): one epoch lowers the loss, files,
bit-for-bit resume, checkpoint round trip, RPP induced training (docs/methods/pcb.md P7, P11)."""
from __future__ import annotations

import csv
import json

import pytest
import torch

from reidcli.data.synthetic import generate
from reidcli.errors import OutputExistsError, UsageError
from reidcli.models.checkpoint import load_model
from reidcli.training.config import make_config
from reidcli.training.engine import train_model

OPTS = {"name": "tiny"}


def _cfg(root, method="pcb", options=OPTS, **kw):
    batch = dict(batch_size=8) if method == "pcb" else dict(p=3, k=4)
    base = dict(dataset="synthetic", root=str(root), options=options, log_every=1, **batch)
    base.update(kw)
    return make_config(method, preset="tiny", **base)


def _rows(run):
    with open(run / "metrics.csv", newline="") as f:
        return list(csv.DictReader(f))


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def tiny16_root(tmp_path_factory):
    """The ``tiny`` synthetic preset with 16 images per identity and camera (6 training ids,
    192 training images), so that one epoch has a dozen or more iterations."""
    root = tmp_path_factory.mktemp("synthetic_tiny16")
    generate(root, "tiny", name="tiny16", overrides={"imgs_per_id_cam": 16}, progress=False,
             workers=1)
    return root


#: one epoch on tiny16: PCB 192/16 = 12 iterations; BoT P = 6 (every id in each batch)
#: × K = 2, ~16 iterations, and no warm-up (the preset's 1 warm-up epoch would be the run)
ONE_EPOCH = {"pcb": dict(batch_size=16), "bot": dict(p=6, k=2, warmup_epochs=0)}


@pytest.mark.parametrize("method", ["pcb", "bot"])
def test_one_epoch_lowers_the_loss_and_writes_the_run(tiny16_root, tmp_path, method):
    run = tmp_path / method
    cfg = _cfg(tiny16_root, method, options={"name": "tiny16"}, epochs=1, **ONE_EPOCH[method])
    result = train_model(cfg, run, progress=False)
    rows = _rows(run)
    assert {r["epoch"] for r in rows} == {"0"} and len(rows) >= 10    # one epoch, every step
    assert [int(r["iteration"]) for r in rows] == list(range(1, len(rows) + 1))
    first, last = float(rows[0]["loss"]), float(rows[-1]["loss"])
    assert first > last, (first, last)
    for name in ("config.json", "metrics.csv", "checkpoint.pt", "model.pt", "train_records.csv"):
        assert (run / name).exists()
    assert not list(run.glob("*.partial"))
    assert list(rows[0])[:6] == ["epoch", "iteration", "lr", "loss", "images_per_s", "seconds"]
    config = json.loads((run / "config.json").read_text())
    assert config["config"]["method"] == method and config["num_classes"] == 6
    assert config["num_images"] == 6 * 2 * 16
    assert result.iterations == int(rows[-1]["iteration"]) and result.first_loss == \
        pytest.approx(first, rel=1e-5)
    if method == "bot":
        assert {"loss_ce", "loss_tri", "acc"} <= set(rows[0])


@pytest.mark.parametrize("method", ["pcb", "bot"])
def test_resume_reproduces_the_uninterrupted_run(tiny_synthetic_root, tmp_path, method):
    cfg = _cfg(tiny_synthetic_root, method, epochs=3)
    train_model(cfg, tmp_path / "straight", progress=False)

    def interrupt(epoch):
        if epoch == 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train_model(cfg, tmp_path / "cut", progress=False, on_epoch_end=interrupt)
    assert not (tmp_path / "cut" / "model.pt").exists()       # no half-finished model
    with pytest.raises(OutputExistsError, match=r"continue it \(resume\)"):
        train_model(cfg, tmp_path / "cut", progress=False)
    train_model(cfg, tmp_path / "cut", resume=True, progress=False)
    a = torch.load(tmp_path / "straight" / "model.pt", weights_only=True)["model_state"]
    b = torch.load(tmp_path / "cut" / "model.pt", weights_only=True)["model_state"]
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)
    losses = lambda run: [r["loss"] for r in _rows(run)]              # noqa: E731
    assert losses(tmp_path / "straight") == losses(tmp_path / "cut")
    assert {r["epoch"] for r in _rows(tmp_path / "cut")} == {"0", "1", "2"}


def test_checkpoint_round_trip_gives_identical_features(tiny_synthetic_root, tmp_path):
    run = tmp_path / "run"
    train_model(_cfg(tiny_synthetic_root, epochs=1), run, progress=False)
    loaded = load_model(run)
    again = load_model(run / "model.pt")
    x = torch.rand(3, 3, *loaded.input_size)
    with torch.no_grad():
        f1, f2 = loaded.features(x), again.features(x)
    assert set(f1) == {"pcb_g", "pcb_h"} and all(torch.equal(f1[k], f2[k]) for k in f1)
    assert loaded.meta["classes"] and len(loaded.logits(x)) == 6
    assert loaded.transform is not None and loaded.kind == "pcb"


def test_rpp_induced_training_freezes_all_but_the_part_classifier(tiny_synthetic_root,
                                                                  tmp_path):
    cfg = _cfg(tiny_synthetic_root, epochs=1, rpp=True, rpp_classifier_epochs=1,
               rpp_finetune_epochs=0)
    base = tmp_path / "pcb"
    train_model(_cfg(tiny_synthetic_root, epochs=1), base, progress=False)
    run = tmp_path / "rpp"
    train_model(cfg, run, progress=False)
    pcb_state = torch.load(base / "model.pt", weights_only=True)["model_state"]
    rpp_state = torch.load(run / "model.pt", weights_only=True)["model_state"]
    assert any(k.startswith("rpp.") for k in rpp_state)
    # the PCB phase is identical (same seed); the classifier-only phase moved nothing else
    for key, value in pcb_state.items():
        if not key.endswith(("running_mean", "running_var", "num_batches_tracked")):
            assert torch.equal(value, rpp_state[key]), key
    assert load_model(run).spec.rpp
    assert load_model(run).feature_names == ["rpp_g", "rpp_h"]               # docs/methods/pcb.md
    phases = {r["phase"] for r in _rows(run)}
    assert phases == {"pcb", "rpp-classifier"}


def test_train_cams_and_max_images_restrict_the_rows(tiny_synthetic_root, tmp_path):
    run = tmp_path / "cams"
    train_model(_cfg(tiny_synthetic_root, epochs=1, train_cams=[0]), run, progress=False)
    with open(run / "train_records.csv") as f:
        cams = {r["camid"] for r in csv.DictReader(f)}
    assert cams == {"0"}
    with pytest.raises(UsageError, match="train_cams='7' selects no training image"):
        train_model(_cfg(tiny_synthetic_root, epochs=1, train_cams=[7]), tmp_path / "x",
                    progress=False)
    run = tmp_path / "max"
    train_model(_cfg(tiny_synthetic_root, epochs=1, max_images=16), run, progress=False)
    assert json.loads((run / "config.json").read_text())["num_images"] == 16


def test_ddp_two_processes_with_torchrun(tiny_synthetic_root, tmp_path):
    """`torchrun --nproc_per_node 2 reid train bot` (gloo on CPU): one run directory written
    by rank 0, world size recorded, P×K batches shared between the ranks."""
    import shutil

    from tests.training.helpers import torchrun_reid

    run = tmp_path / "ddp"
    torchrun_reid("train", "bot", "--dataset", "synthetic", "--root", tiny_synthetic_root,
                  "--option", "name=tiny", "--preset", "tiny", "--ids-per-batch", "3", "--images-per-id", "2",
                  "--epochs", "2", "--log-every", "1", "--out", run, "--quiet")
    config = json.loads((run / "config.json").read_text())
    assert config["world_size"] == 2
    rows = _rows(run)
    assert rows and {r["epoch"] for r in rows} == {"0", "1"}
    assert (run / "model.pt").exists()
    shutil.rmtree(run)


def test_fp16_on_cpu_is_refused_before_the_run_dir_is_made(tiny_synthetic_root, tmp_path):
    with pytest.raises(UsageError, match="amp='fp16' needs a CUDA device"):
        train_model(_cfg(tiny_synthetic_root, amp="fp16", device="cpu"), tmp_path / "run")
    assert not (tmp_path / "run").exists()
