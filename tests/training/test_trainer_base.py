"""Every network trainer derives from TrainerBase: the engine asks it, never probes it."""
from __future__ import annotations

import contextlib

import torch

from reidcli import registry
from reidcli.training.config import make_config
from reidcli.training.phases import Phase
from reidcli.training.trainer_base import TrainerBase


def test_every_trainer_is_a_trainer_base_with_phases():
    trainers = {m.name: m.extras["trainer"] for m in registry.methods("train-net")}
    assert {"pcb", "bot", "dgvae", "dmgnet"} <= set(trainers)
    for name, trainer in trainers.items():
        assert issubclass(trainer, TrainerBase), name
    phases = trainers["pcb"]().phases(make_config("pcb", rpp=True))
    assert [type(p) for p in phases] == [Phase] * 3
    assert [p.name for p in phases] == ["pcb", "rpp-classifier", "rpp-finetune"]


def test_default_step_runs_the_forward_under_amp_and_the_loss_outside():
    seen = []

    class Probe(TrainerBase):
        def loss(self, output, labels, cfg):
            seen.append(("loss", output.shape))
            return output.sum(), {"acc": 1.0}

    @contextlib.contextmanager
    def amp():
        seen.append("amp on")
        yield
        seen.append("amp off")

    loss, parts = Probe().train_step(torch.nn.Identity(), torch.ones(2, 3), None, {}, None,
                                     None, lr=0.1, amp=amp)
    assert seen == ["amp on", "amp off", ("loss", (2, 3))]
    assert float(loss) == 6.0 and parts == {"acc": 1.0}
