"""BoT training recipe (docs/methods/bot.md): P×K batches, label-smoothed softmax
on the BNNeck logits + batch-hard triplet on pool5, Adam with warm-up and steps."""
from __future__ import annotations

import torch

from reidcli.data.samplers import PKSampler
from reidcli.data.transforms import train_transform
from reidcli.models.checkpoint import Architecture, ModelSpec, register_architecture
from reidcli.training.config import (TrainConfig, check_pk_triplet, defaults_only, pk_batch,
                                     shared)
from reidcli.training.losses import batch_hard_triplet, label_smoothing_cross_entropy
from reidcli.registry import register_info
from reidcli.training.phases import Phase
from reidcli.training.schedule import warmup_step_factor
from reidcli.training.trainer_base import TrainerBase


class BoTTrainer(TrainerBase):
    """L = L_soft(ε=0.1) + L_tri(m=0.3), Adam 3.5e-4, wd 5e-4, warm-up 10 epochs from 0.1×,
    ×0.1 at 40 and 70 of 120 epochs, P=16 × K=4."""

    name = "bot"

    def model_spec(self, cfg: TrainConfig, num_classes: int) -> ModelSpec:
        return ModelSpec(kind="bot", backbone=cfg.backbone, last_stride=cfg.last_stride,
                         num_classes=num_classes, input_size=tuple(cfg.input_size))

    log_columns = ("loss_ce", "loss_tri", "acc")

    def train_transform(self, cfg: TrainConfig):
        return train_transform("bot", cfg.input_size, erasing=cfg.random_erasing)

    def batch_sampler(self, cfg: TrainConfig, labels, world: int, rank: int, records=None):
        return PKSampler(labels, p=cfg.p, k=cfg.k, seed=cfg.seed, num_replicas=world, rank=rank)

    def phases(self, cfg: TrainConfig) -> list[Phase]:
        def groups(model, c):
            new_ids = {id(p) for p in model.new_parameters()}
            backbone = [p for p in model.parameters() if p.requires_grad and id(p) not in new_ids]
            return [{"name": "backbone", "params": backbone, "lr": c.lr * c.backbone_lr_mult},
                    {"name": "new", "params": model.new_parameters(), "lr": c.lr}]

        return [Phase("bot", cfg.epochs, lambda m: None, groups,
                      lambda e, c: warmup_step_factor(e, c.lr_steps, c.lr_gamma,
                                                      c.warmup_epochs, c.warmup_factor))]

    def optimizer(self, groups, cfg: TrainConfig) -> torch.optim.Optimizer:
        if cfg.optimizer == "sgd":
            return torch.optim.SGD(groups, lr=cfg.lr, momentum=cfg.momentum,
                                   weight_decay=cfg.weight_decay, nesterov=cfg.nesterov)
        return torch.optim.Adam(groups, lr=cfg.lr, weight_decay=cfg.weight_decay)

    def loss(self, output, labels: torch.Tensor, cfg: TrainConfig):
        ce = label_smoothing_cross_entropy(output.logits, labels, cfg.label_smooth)
        tri = batch_hard_triplet(output.pool5, labels, cfg.triplet_margin)
        with torch.no_grad():
            acc = (output.logits.argmax(1) == labels).float().mean()
        return ce + tri, {"loss_ce": float(ce.detach()), "loss_tri": float(tri.detach()),
                          "acc": float(acc)}


# -- the BoT architecture (docs/methods/bot.md): kind "bot", features bnneck (test) and pool5
def build_bot(spec: ModelSpec):
    """A randomly initialised BoT of ``spec`` (trunk, BNNeck, classifier)."""
    from reidcli.models.backbones import build_backbone
    from reidcli.models.bot import BoT

    return BoT(build_backbone(spec.backbone, spec.last_stride), spec.num_classes)


def _bot_dims(spec: ModelSpec) -> dict[str, tuple[int, int]]:
    from reidcli.models.backbones import TAP_CHANNELS

    c5 = TAP_CHANNELS[spec.backbone][-1]
    return {"bnneck": (c5, 1), "pool5": (c5, 1)}


def _bot_features(output):
    from reidcli.models.bot import bot_features

    return bot_features(output)


register_architecture(Architecture(
    "bot", build_bot, _bot_dims, _bot_features,
    {"bot": (("bnneck", "pool5"), ("bnneck",))}, module=__name__))


def data_parameters(preset_help: str, *, init_help: str = "imagenet | PATH | scratch.",
                    input_size=(256, 128)) -> list:
    """The data and trunk options of a BoT-like command (shared with DMG-Net)."""
    return [shared("preset", help=preset_help), shared("train_cams"), shared("train_split"),
            shared("max_images"), shared("subsample_seed"), shared("backbone"),
            shared("init", help=init_help),
            shared("input_size", input_size, "HxW (%dx%d)." % tuple(input_size))]


#: BoT's schedule options (the paper's defaults, docs/methods/bot.md), shared with DMG-Net
SCHEDULE = [
    shared("epochs", 120, "120 (steps/warm-up rescaled)."),
    shared("batch_size", help="Images per batch, P×K (64): keeps --images-per-id, sets "
           "--ids-per-batch = batch / K."),
    shared("p", 16, "Identities per batch P (16)."),
    shared("k", 4, "Images per identity K (4)."),
    shared("optimizer", "adam", "adam | sgd."),
    shared("lr", 3.5e-4, "3.5e-4."),
    shared("lr_steps", [40, 70], "40,70."),
    shared("lr_gamma", 0.1, "0.1."),
    shared("warmup_epochs", 10, "10."),
    shared("warmup_factor", 0.1, "0.1."),
    shared("weight_decay", 5e-4, "5e-4."),
    shared("label_smooth", 0.1, "ε = 0.1."),
    shared("triplet_margin", 0.3, "0.3."),
    shared("random_erasing", 0.5),
    shared("seed", 0),
    *defaults_only(backbone_lr_mult=1.0),
]
#: ``reid train bot``
PARAMETERS = [
    *data_parameters("Shrunk settings, explicit options win: tiny = toy CNN from scratch, "
                     "64x32, 6 epochs, P=8 ids x K=4 (P lowered to the training ids when "
                     "fewer), minutes on CPU; quick = ResNet-18, 128x64, 30 epochs. Default: "
                     "the paper's settings."),
    *SCHEDULE,
]

register_info(
    "bot", stage="train-net", paper="Luo et al., CVPR-W 2019 (bag of tricks)",
    summary="BoT: last stride 1, BNNeck, label smoothing, batch-hard triplet, warm-up.",
    parameters=PARAMETERS,
    extras={"trainer": BoTTrainer, "batch": pk_batch, "validate": check_pk_triplet,
            "presets": {
                # ``tiny`` trains in well under two minutes on 2 CPU cores
                "tiny": dict(backbone="tiny", input_size=(64, 32), epochs=6, p=8, k=4,
                             lr=3e-3, lr_steps=[4], warmup_epochs=1, init="scratch",
                             workers=0, log_every=5),
                "quick": dict(backbone="resnet18", input_size=(128, 64), epochs=30, p=8, k=4,
                              lr_steps=[10, 18], warmup_epochs=3)}})

__all__ = ["BoTTrainer", "PARAMETERS", "SCHEDULE", "data_parameters"]
