"""DG-VAE on the training engine: stage freezing (T6), optimisers per stage, variants'
stages, the engine run on the synthetic ``vi`` preset with bit-for-bit resume, and the CPU
sanity scenario on the two-modality toy (T8 staged mini-training, T9 retrieval;
docs/methods/dgvae.md)."""
from __future__ import annotations

import csv
import math

import numpy as np
import pytest
import torch

from reidcli.errors import ParameterError
from reidcli.models.checkpoint import build_model, load_model
from reidcli.paper.dgvae_toy import (STAGE_RATIO_BOUNDS, ir_to_visible_scores, stage_ratio,
                                     toy_config, toy_features, train_on_toy)
from reidcli.synthetic.vi_toy import make_vi_toy, vi_toy_batch
from reidcli.training.config import make_config
from reidcli.training.dgvae_trainer import DGVAETrainer, run_stages
from reidcli.training.engine import train_model
from tests.training.helpers import assert_resume_reproduces, torchrun_reid

pytestmark = pytest.mark.usefixtures("one_torch_thread")

FROZEN_IN_STAGE_2 = ("trunk_visible", "trunk_infrared", "idi_encoder", "prior_means",
                     "margin_rho")


def _snapshot(model, prefixes):
    """Every parameter and buffer (BN running statistics) under ``prefixes``, cloned."""
    state = model.state_dict()
    return {k: v.clone() for k, v in state.items() if k.split(".")[0] in prefixes}


def _one_step(trainer, cfg, model, stage, batch):
    phase = [p for p in trainer.phases(cfg) if p.name == f"stage{stage}"][0]
    phase.prepare(model)
    optimizer = trainer.optimizer(phase.groups(model, cfg), cfg)
    model.train()
    phase.train_modes(model)
    loss, _ = trainer.train_module(model, cfg)(batch.images, batch.labels, batch.infrared,
                                               stage)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()


@pytest.fixture
def tiny_model_and_batch():
    torch.manual_seed(0)
    cfg = toy_config(seed=0, iterations=1)
    trainer = DGVAETrainer()
    model = build_model(trainer.model_spec(cfg, 8))
    toy = make_vi_toy(num_ids=8, per_id=4, seed=0)
    batch = vi_toy_batch(toy, p=4, k=2, rng=np.random.default_rng(0))
    return trainer, cfg, model, batch


def test_a_stage_2_step_leaves_the_trunks_idi_encoder_and_prior_bit_identical(
        tiny_model_and_batch):
    trainer, cfg, model, batch = tiny_model_and_batch
    before_frozen = _snapshot(model, FROZEN_IN_STAGE_2)
    before_trained = _snapshot(model, ("iai_encoder", "decoder", "classifier"))
    _one_step(trainer, cfg, model, 2, batch)
    after = model.state_dict()
    assert any("running_mean" in k for k in before_frozen)          # BN statistics checked
    for key, value in before_frozen.items():
        assert torch.equal(after[key], value), key
    for prefix in ("iai_encoder", "decoder", "classifier"):
        keys = [k for k in before_trained if k.startswith(prefix + ".")]
        assert any(not torch.equal(after[k], before_trained[k]) for k in keys), prefix


def test_a_stage_1_step_leaves_the_iai_encoder_and_decoder_unchanged(tiny_model_and_batch):
    trainer, cfg, model, batch = tiny_model_and_batch
    before = _snapshot(model, ("iai_encoder", "decoder"))
    trained = _snapshot(model, ("trunk_visible", "idi_encoder", "prior_means"))
    _one_step(trainer, cfg, model, 1, batch)
    after = model.state_dict()
    assert all(torch.equal(after[k], v) for k, v in before.items())
    assert any(not torch.equal(after[k], v) for k, v in trained.items())


def test_stage_optimisers_sgd_for_the_code_classifier_adam_for_the_rest():
    cfg = make_config("dgvae", backbone="tiny", init="scratch", input_size=(32, 16))
    trainer = DGVAETrainer()
    model = build_model(trainer.model_spec(cfg, 5))
    for stage, phase in zip((1, 2, 3), trainer.phases(cfg)):
        phase.prepare(model)
        groups = phase.groups(model, cfg)
        optimizer = trainer.optimizer(groups, cfg)
        kinds = {type(o).__name__: o for o in optimizer.optimizers}
        assert set(kinds) == {"SGD", "Adam"}
        sgd = kinds["SGD"].param_groups[0]
        assert sgd["momentum"] == 0.9 and sgd["lr"] == cfg.classifier_lrs[stage - 1]
        assert {id(p) for p in sgd["params"]} == {id(p) for p in model.classifier.parameters()}
        adam = {g["name"]: g for g in kinds["Adam"].param_groups}
        assert all(g["lr"] == cfg.stage_lrs[stage - 1] for g in adam.values())
        if stage != 2:                       # μ_y and ρ train in stages 1 and 3, no decay
            assert adam["prior"]["weight_decay"] == 0.0
            assert {id(p) for p in adam["prior"]["params"]} == {
                id(model.prior_means), id(model.margin_rho)}
        trained = {id(p) for o in optimizer.optimizers for g in o.param_groups
                   for p in g["params"]}
        trunk = {id(p) for p in model.trunk_visible.parameters()}
        assert (trunk <= trained) == (stage != 2)


def test_variants_without_a_decoder_run_stages_1_and_3_and_stages_are_checked():
    assert run_stages(make_config("dgvae", variant="baseline")) == [1, 3]
    assert run_stages(make_config("dgvae")) == [1, 2, 3]
    assert run_stages(make_config("dgvae", stages=[1])) == [1]
    with pytest.raises(ParameterError, match="stages"):
        make_config("dgvae", variant="mog", stages=[2])
    with pytest.raises(ParameterError, match="variant"):
        make_config("dgvae", variant="nope")
    with pytest.raises(ParameterError, match="not a DG-VAE setting"):
        make_config("dgvae", settings={"no_such_weight": 1})


@pytest.fixture
def vi_root(vi_synthetic_root):
    return vi_synthetic_root


def _vi_cfg(root, **kw):
    base = dict(dataset="synthetic", root=str(root), options={"name": "vi"}, log_every=1,
                stage_epochs=[1, 1, 1], iters_per_epoch=3)
    base.update(kw)
    return make_config("dgvae", preset="tiny", **base)


def _rows(run):
    with open(run / "metrics.csv", newline="") as f:
        return list(csv.DictReader(f))


def test_engine_trains_three_stages_and_logs_every_term(vi_root, tmp_path):
    run = tmp_path / "run"
    result = train_model(_vi_cfg(vi_root), run, progress=False)
    rows = _rows(run)
    assert [r["phase"] for r in rows] == ["stage1"] * 3 + ["stage2"] * 3 + ["stage3"] * 3
    assert result.iterations == 9
    stage1, stage2, stage3 = rows[0], rows[3], rows[6]
    assert stage1["loss_gmm"] and stage1["loss_id"] and not stage1["loss_rec"]
    assert stage2["loss_rec"] and stage2["loss_ambi"] and not stage2["loss_gmm"]
    assert all(stage3[f"loss_{t}"] for t in ("id", "cmtl", "gmm", "lmc", "ambi", "rec",
                                             "cyc", "idc"))
    assert not [c for c in stage1 if c.startswith("gradnorm_")]     # grad_norms off
    model = load_model(run)
    assert model.kind == "dgvae" and model.feature_names == ["dgvae_idi", "dgvae_iai"]
    x = torch.rand(4, 3, 32, 16)
    with torch.no_grad():
        vis = model.features(x, modality=torch.zeros(4))["dgvae_idi"]
        ir = model.features(x, modality=torch.ones(4))["dgvae_idi"]
    assert vis.shape == (4, 16) and not torch.allclose(vis, ir)    # two trunks


def test_grad_norms_setting_logs_a_finite_norm_per_active_term(vi_root, tmp_path):
    """--set grad_norms=true: gradnorm_<term> columns, finite and ≥ 0 for the stage's terms,
    empty for the others; the losses are those of the same run without the switch."""
    runs = {}
    for on in (False, True):
        run = tmp_path / f"run{int(on)}"
        train_model(_vi_cfg(vi_root, stages=[1], iters_per_epoch=2,
                            settings={"grad_norms": "true"} if on else {}),
                    run, progress=False)
        runs[on] = _rows(run)
    rows = runs[True]
    for row, plain in zip(rows, runs[False]):
        for term in ("id", "cmtl", "gmm", "lmc"):
            value = float(row[f"gradnorm_{term}"])
            assert math.isfinite(value) and value > 0, term
            assert row[f"loss_{term}"] == plain[f"loss_{term}"]
        assert float(row["gradnorm_lmc_alpha_reg"]) == 0.0           # reaches ρ only
        assert row["gradnorm_rec"] == "" and row["gradnorm_ambi"] == ""
    assert not [c for c in runs[False][0] if c.startswith("gradnorm_")]


def test_resume_reproduces_the_uninterrupted_run(vi_root, tmp_path):
    assert_resume_reproduces(_vi_cfg(vi_root, iters_per_epoch=2), tmp_path,
                             interrupt_after_epoch=1)                # after stage 2


@pytest.fixture(scope="module")
def toy_run():
    """Seed 0 of the CPU sanity scenario: 60 / 60 / 60 iterations on the toy."""
    return train_on_toy(seed=0)


@pytest.mark.parametrize("stage,term,bound", STAGE_RATIO_BOUNDS)
def test_staged_mini_training_lowers_each_stage_loss(toy_run, stage, term, bound):
    ratio = stage_ratio(toy_run.history[stage][term])
    assert ratio <= bound, (stage, term, ratio)


def test_the_idi_code_retrieves_across_modalities_and_beats_the_baselines(toy_run):
    closed = make_vi_toy(num_ids=8, per_id=4, pattern_seed=0, seed=100)
    opened = make_vi_toy(num_ids=8, per_id=4, pattern_seed=1, seed=101)
    scores = {}
    for name, toy in (("closed", closed), ("open", opened)):
        labels, ir = toy.labels.numpy(), toy.infrared.numpy()
        trained = toy_features(toy_run.model, toy)
        untrained = toy_features(toy_run.untrained, toy)
        scores[name] = {kind: ir_to_visible_scores(trained[kind], labels, ir)
                        for kind in ("idi", "iai", "pixels")}
        scores[name]["untrained"] = ir_to_visible_scores(untrained["idi"], labels, ir)
    c = {k: v[0] for k, v in scores["closed"].items()}
    assert c["idi"] >= 0.80 and scores["closed"]["idi"][1] >= 0.85, scores
    assert c["idi"] >= c["pixels"] + 0.5, scores
    assert c["idi"] >= c["iai"] + 0.3, scores
    assert c["idi"] >= c["untrained"] + 0.4, scores
    o = {k: v[0] for k, v in scores["open"].items()}
    assert o["idi"] >= max(o["pixels"], o["iai"]) + 0.15, scores


def test_ddp_two_processes_with_torchrun(vi_root, tmp_path):
    """`torchrun --nproc_per_node 2 reid train dgvae` (gloo on CPU) through all three stages:
    the whole step runs inside the DDP module, frozen stage-2 parameters included."""
    import json

    run = tmp_path / "ddp"
    torchrun_reid("train", "dgvae", "--dataset", "synthetic", "--root", vi_root, "--option",
                  "name=vi", "--preset", "tiny", "--epochs", "1,1,1", "--iters-per-epoch", "4",
                  "--log-every", "1", "--out", run, "--quiet")
    assert json.loads((run / "config.json").read_text())["world_size"] == 2
    assert [r["phase"] for r in _rows(run)] == ["stage1"] * 2 + ["stage2"] * 2 + ["stage3"] * 2
    assert load_model(run).kind == "dgvae"


def test_the_toy_comparison_prints_each_variant(capsys):
    from reidcli.paper.dgvae_toy import main

    main(["--variants", "dgvae,baseline", "--seeds", "0", "--iterations", "3"])
    lines = capsys.readouterr().out.splitlines()
    assert "3 iterations per stage, seeds 0" in lines[0]
    assert [row.split()[0] for row in lines[2:4]] == ["dgvae", "baseline"]
    assert all(len(row.split()) == 1 + 4 * 3 for row in lines[2:4])   # 4 cells "m ± s"
