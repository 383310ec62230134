"""Losses (docs/methods/pcb.md P6, the DMGNET paper), optimiser groups and LR schedules (docs/methods/pcb.md P5)."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from reidcli.errors import UsageError
from reidcli.models.checkpoint import build_model
from reidcli.training.bot_trainer import BoTTrainer
from reidcli.training.config import make_config
from reidcli.device import amp_dtype
from reidcli.training.losses import (batch_hard_triplet, label_smoothing_cross_entropy,
                                     part_cross_entropy)
from reidcli.training.pcb_trainer import PCBTrainer
from reidcli.training.schedule import warmup_step_factor


def test_part_cross_entropy_is_the_sum_of_six_hand_computed_losses():
    torch.manual_seed(0)
    logits = [torch.randn(5, 4) for _ in range(6)]
    labels = torch.tensor([0, 1, 2, 3, 1])
    by_hand = 0.0
    for z in logits:
        for j in range(5):
            by_hand += -(z[j, labels[j]] - torch.logsumexp(z[j], 0)) / 5
    torch.testing.assert_close(part_cross_entropy(logits, labels), by_hand)


def test_label_smoothing_matches_the_formula():
    torch.manual_seed(1)
    z, y = torch.randn(3, 5), torch.tensor([4, 0, 2])
    eps, k = 0.1, 5
    q = torch.full((3, k), eps / k)
    q[torch.arange(3), y] += 1 - eps
    expected = -(q * F.log_softmax(z, 1)).sum(1).mean()
    torch.testing.assert_close(label_smoothing_cross_entropy(z, y, eps), expected)
    torch.testing.assert_close(label_smoothing_cross_entropy(z, y, 0.0), F.cross_entropy(z, y))


def test_batch_hard_triplet_on_a_hand_example():
    x = torch.tensor([[0.0, 0.0], [1.0, 0.0], [0.0, 3.0], [0.0, 5.0]])
    y = torch.tensor([0, 0, 1, 1])
    # anchor 0: hardest pos 1, hardest neg 3 → max(0, 1-3+0.3)=0; anchor 1: pos 1, neg √10
    # anchor 2: pos 2, neg 3 → 0; anchor 3: pos 2, neg 5 → 0. With margin 2.5: 0.5, …
    loss = batch_hard_triplet(x, y, margin=2.5)
    expected = (max(0, 1 - 3 + 2.5) + max(0, 1 - math.sqrt(10) + 2.5)
                + max(0, 2 - 3 + 2.5) + max(0, 2 - math.sqrt(26) + 2.5)) / 4
    assert float(loss) == pytest.approx(expected, rel=1e-5)
    assert float(batch_hard_triplet(x, y, margin=0.3)) == 0.0
    x.requires_grad_(True)
    batch_hard_triplet(torch.cat([x[:1], x[:1], x[2:]]), y, 2.5).backward()
    assert torch.isfinite(x.grad).all()                     # zero distance: finite gradient


def test_pcb_groups_and_step_schedule():
    cfg = make_config("pcb", backbone="tiny", input_size=(96, 32))
    trainer = PCBTrainer()
    model = build_model(trainer.model_spec(cfg, 5))
    phase = trainer.phases(cfg)[0]
    groups = phase.groups(model, cfg)
    opt = trainer.optimizer(groups, cfg)
    assert [g["name"] for g in opt.param_groups] == ["backbone", "new"]     # P5
    n_params = sum(1 for _ in model.parameters())
    assert sum(len(g["params"]) for g in opt.param_groups) == n_params
    d = opt.defaults
    assert d["momentum"] == 0.9 and d["nesterov"] and d["weight_decay"] == 5e-4
    for epoch, want in ((0, (0.01, 0.1)), (39, (0.01, 0.1)), (40, (0.001, 0.01)),
                        (59, (0.001, 0.01))):
        f = phase.lr_factor(epoch, cfg)
        assert [g["lr"] * f for g in groups] == pytest.approx(list(want))


def test_bot_defaults_warmup_and_steps():
    cfg = make_config("bot")
    assert (cfg.epochs, cfg.p, cfg.k, cfg.lr, cfg.lr_steps) == (120, 16, 4, 3.5e-4, [40, 70])
    assert (cfg.label_smooth, cfg.triplet_margin, cfg.random_erasing) == (0.1, 0.3, 0.5)
    f = [warmup_step_factor(e, cfg.lr_steps, 0.1, 10, 0.1) for e in (0, 5, 10, 39, 40, 70)]
    assert f == pytest.approx([0.1, 0.55, 1.0, 1.0, 0.1, 0.01])
    phase = BoTTrainer().phases(cfg)[0]
    assert phase.lr_factor(0, cfg) == pytest.approx(0.1)


def test_epoch_rescaling_presets_and_validation():
    cfg = make_config("bot", epochs=12)
    assert cfg.lr_steps == [4, 7] and cfg.warmup_epochs == 1            # the DMGNET paper
    assert make_config("pcb", epochs=30).lr_steps == [20]
    assert make_config("pcb", epochs=30, lr_steps=[25]).lr_steps == [25]
    tiny = make_config("pcb", preset="tiny", batch_size=8)
    assert (tiny.backbone, tiny.init, tiny.batch_size) == ("tiny", "scratch", 8)
    with pytest.raises(UsageError, match="amp='fp8'"):
        make_config("pcb", amp="fp8")
    with pytest.raises(UsageError, match="fewer than parts=6"):
        make_config("pcb", input_size=(64, 32))
    with pytest.raises(UsageError, match="preset='huge'"):
        make_config("pcb", preset="huge")


def test_bot_batch_size_is_the_total_p_times_k():
    from reidcli.errors import UsageError

    assert (make_config("bot").batch_size, make_config("bot", p=8, k=2).batch_size) == (64, 16)
    cfg = make_config("bot", batch_size=32)                      # K = 4 kept, P = 8
    assert (cfg.p, cfg.k, cfg.batch_size) == (8, 4, 32)
    cfg = make_config("bot", preset="tiny", batch_size=24, k=6, p=4)   # consistent: fine
    assert (cfg.p, cfg.k, cfg.batch_size) == (4, 6, 24)
    with pytest.raises(UsageError, match=r"batch_size=30 is not a multiple of k=4.* — "
                                         r"use e.g. batch_size=32"):
        make_config("bot", batch_size=30)
    with pytest.raises(UsageError, match="disagrees with p=3"):
        make_config("bot", batch_size=32, p=3)
    assert make_config("pcb", batch_size=30).batch_size == 30    # PCB: plain batch size


def test_amp_dtype_on_cpu_honours_only_an_explicit_bf16():
    cpu = torch.device("cpu")
    assert amp_dtype("off", cpu) is None and amp_dtype("auto", cpu) is None
    assert amp_dtype("bf16", cpu) is torch.bfloat16
    with pytest.raises(UsageError, match="amp='fp16' needs a CUDA device"):
        amp_dtype("fp16", cpu)
    with pytest.raises(UsageError, match="amp='fp8'"):
        amp_dtype("fp8", cpu)
