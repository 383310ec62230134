"""A new network trainer is one module (issue 29): a plugin written by the test into a
temporary package (``REIDCLI_PLUGINS``) declares a tiny architecture of its own (kind,
builder, features) and one parameter; `reid methods`, the generated `reid train <name>`
(--help, a refused value, a 2-iteration run writing model.pt) and `reid extract --model RUN`
(which finds the architecture by the kind model.pt records) pick it up with no edit
anywhere else."""
from __future__ import annotations

import sys
import textwrap

import h5py
import pytest

from reidcli import registry
from tests.faults.helpers import assert_one_line_error_in_process, reid_in_process

TOY = textwrap.dedent('''
    """A toy network trainer: one strided 3×3 convolution of ``width`` channels, global
    average pooling, a linear classifier; cross-entropy, plain SGD."""
    import collections

    import torch
    from torch import nn

    from reidcli.data.samplers import UniformBatchSampler
    from reidcli.data.transforms import train_transform
    from reidcli.models.checkpoint import Architecture, ModelSpec, register_architecture
    from reidcli.params import Interval
    from reidcli.registry import Parameter, register_info
    from reidcli.training.config import defaults_only, shared
    from reidcli.training.phases import Phase
    from reidcli.training.trainer_base import TrainerBase

    Output = collections.namedtuple("Output", "embedding logits")


    class ToyNet(nn.Module):
        def __init__(self, width, num_classes):
            super().__init__()
            self.backbone = nn.Sequential(nn.Conv2d(3, width, 3, stride=2, padding=1),
                                          nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
            self.classifier = nn.Linear(width, num_classes)

        def forward(self, images, taps=()):
            f = self.backbone(images)                       # [B, width]
            return Output(f, self.classifier(f))


    register_architecture(Architecture(
        "toy-net", lambda spec: ToyNet(spec.settings["width"], spec.num_classes),
        lambda spec: {"toy_embed": (spec.settings["width"], 1)},
        lambda output: {"toy_embed": output.embedding},
        {"toy-net": (("toy_embed",), ("toy_embed",))}, module=__name__))


    class ToyTrainer(TrainerBase):
        name = "toy-net"

        def model_spec(self, cfg, num_classes):
            return ModelSpec(kind="toy-net", num_classes=num_classes,
                             input_size=tuple(cfg.input_size), settings={"width": cfg.width})

        def train_transform(self, cfg):
            return train_transform("bot", cfg.input_size, erasing=0.0)

        def batch_sampler(self, cfg, labels, world, rank, records=None):
            return UniformBatchSampler(len(labels), cfg.batch_size, seed=cfg.seed)

        def phases(self, cfg):
            return [Phase("toy", cfg.epochs, lambda m: None,
                          lambda m, c: [{"name": "all", "params": list(m.parameters()),
                                         "lr": c.lr}], lambda e, c: 1.0)]

        def optimizer(self, groups, cfg):
            return torch.optim.SGD(groups, lr=cfg.lr)

        def loss(self, output, labels, cfg):
            loss = nn.functional.cross_entropy(output.logits, labels)
            return loss, {"acc": float((output.logits.argmax(1) == labels).float().mean())}


    register_info(
        "toy-net", stage="train-net", paper="a test", summary="A toy one-layer network.",
        parameters=[Parameter("width", 8, (Interval(int, 1, 64),), "Channels of the layer."),
                    shared("epochs", 1, "1."), shared("batch_size", 8, "8."),
                    shared("lr", 0.01, "0.01."), shared("input_size", (32, 16), "HxW."),
                    *defaults_only(init="scratch", workers=0)],
        extras={"trainer": ToyTrainer})
''')


@pytest.fixture
def toy_trainer(tmp_path, monkeypatch):
    """The plugin module on sys.path and in REIDCLI_PLUGINS; forgotten afterwards."""
    folder = tmp_path / "plugins"
    folder.mkdir()
    (folder / "toy_net.py").write_text(TOY)
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setenv("REIDCLI_PLUGINS", "toy_net")
    yield "toy-net"
    from reidcli.cli import train as cli_train
    from reidcli.models import checkpoint

    registry._METHODS.pop("toy-net", None)
    registry._DISCOVERED.discard("toy_net")
    sys.modules.pop("toy_net", None)
    checkpoint.ARCHITECTURES.entries.pop("toy-net", None)
    for table in (checkpoint.FEATURES, checkpoint.DEFAULT_FEATURES):
        table.pop("toy-net", None)
    cli_train.app.registered_commands[:] = [c for c in cli_train.app.registered_commands
                                            if c.name != "toy-net"]
    cli_train._TRAINERS.discard("toy-net")


def test_a_new_network_trainer_is_one_module(toy_trainer, capsys, tiny_synthetic_root,
                                             tmp_path):
    code, out, err = reid_in_process("methods", capsys=capsys)
    assert code == 0, err
    assert "toy-net" in out
    code, out, err = reid_in_process("train", "toy-net", "--help", capsys=capsys)
    assert code == 0, err
    assert "--width" in out and "Channels of the layer." in out
    assert "--eval-every" in out and "--ids-per-batch" not in out   # shared; not declared
    data = ("--dataset", "synthetic", "--root", tiny_synthetic_root, "--option", "name=tiny")
    bad = reid_in_process("train", "toy-net", *data, "--width", "0", "--out",
                          tmp_path / "bad", capsys=capsys)
    assert_one_line_error_in_process(bad, "--width 0", "[1, 64]")
    assert not (tmp_path / "bad").exists()
    run = tmp_path / "run"
    code, _, err = reid_in_process("train", "toy-net", *data, "--width", "4", "--max-iters",
                                   "2", "--device", "cpu", "--out", run, "--quiet",
                                   capsys=capsys)
    assert code == 0, err
    assert (run / "model.pt").is_file()
    store = tmp_path / "s.h5"
    code, _, err = reid_in_process("extract", "--model", run, *data, "--device", "cpu",
                                   "--out", store, capsys=capsys)
    assert code == 0, err
    with h5py.File(store, "r") as f:
        assert list(f["features"]) == ["toy_embed"]
        rows, dim = f["features/toy_embed"].shape
    assert dim == 4 and rows > 0                         # --width 4: the declared dimension
