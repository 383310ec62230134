"""PCB training recipe and RPP induced training (docs/methods/pcb.md)."""
from __future__ import annotations

import torch

from reidcli.data.samplers import UniformBatchSampler
from reidcli.data.transforms import train_transform
from reidcli.models.checkpoint import FEATURES, Architecture, ModelSpec, register_architecture
from reidcli.registry import register_info
from reidcli.errors import ParameterError
from reidcli.naming import param
from reidcli.training.config import OWNER, TrainConfig, defaults_only, shared
from reidcli.training.losses import part_cross_entropy
from reidcli.training.phases import Phase
from reidcli.training.schedule import step_factor
from reidcli.training.trainer_base import TrainerBase


def _two_groups(model, cfg: TrainConfig, new_lr: float, backbone_mult: float) -> list[dict]:
    new_ids = {id(p) for p in model.new_parameters()}
    backbone = [p for p in model.parameters() if id(p) not in new_ids and p.requires_grad]
    new = [p for p in model.new_parameters() if p.requires_grad]
    return [{"name": "backbone", "params": backbone, "lr": new_lr * backbone_mult},
            {"name": "new", "params": new, "lr": new_lr}]


def _unfreeze(model) -> None:
    for p in model.parameters():
        p.requires_grad_(True)


def _rpp_classifier_only(model) -> None:
    """Step 2–3 of the induced training: add the part classifier, freeze everything else."""
    model.enable_rpp()
    for p in model.parameters():
        p.requires_grad_(False)
    for p in model.rpp.parameters():
        p.requires_grad_(True)


class PCBTrainer(TrainerBase):
    """Uniform batches of 64, sum of 6 part cross-entropies, SGD (Nesterov) with the
    backbone at 0.1× the new layers' rate, ×0.1 from epoch 40 of 60 (docs/methods/pcb.md)."""

    name = "pcb"

    def model_spec(self, cfg: TrainConfig, num_classes: int) -> ModelSpec:
        return ModelSpec(kind="pcb", backbone=cfg.backbone, last_stride=cfg.last_stride,
                         num_classes=num_classes, parts=cfg.parts, reduced_dim=cfg.reduced_dim,
                         dropout=cfg.dropout, rpp=False, input_size=tuple(cfg.input_size))

    def train_transform(self, cfg: TrainConfig):
        return train_transform("pcb", cfg.input_size, erasing=cfg.random_erasing or 0.0)

    def batch_sampler(self, cfg: TrainConfig, labels, world: int, rank: int, records=None):
        per_rank = max(1, cfg.batch_size // world)
        return UniformBatchSampler(len(labels), per_rank * world, seed=cfg.seed,
                                   num_replicas=world, rank=rank) \
            if world == 1 else _PerRankUniform(len(labels), per_rank, cfg.seed, world, rank)

    def phases(self, cfg: TrainConfig) -> list[Phase]:
        main = Phase("pcb", cfg.epochs, _unfreeze,
                     lambda m, c: _two_groups(m, c, c.lr, c.backbone_lr_mult),
                     lambda e, c: step_factor(e, c.lr_steps, c.lr_gamma))
        if not cfg.rpp:
            return [main]
        # docs/methods/pcb.md: 10 epochs part classifier only at 0.01, then 10 epochs jointly at
        # 0.01 (new layers and part classifier) / 0.001 (backbone)
        classifier = Phase("rpp-classifier", cfg.rpp_classifier_epochs, _rpp_classifier_only,
                           lambda m, c: [{"name": "rpp", "params": list(m.rpp.parameters()),
                                          "lr": c.rpp_lr}],
                           lambda e, c: 1.0)
        finetune = Phase("rpp-finetune", cfg.rpp_finetune_epochs,
                         lambda m: (m.enable_rpp(), _unfreeze(m)),
                         lambda m, c: _two_groups(m, c, c.rpp_lr, 0.1),
                         lambda e, c: 1.0)
        return [main, classifier, finetune]

    def optimizer(self, groups: list[dict], cfg: TrainConfig) -> torch.optim.Optimizer:
        return torch.optim.SGD(groups, lr=cfg.lr, momentum=cfg.momentum,
                               weight_decay=cfg.weight_decay, nesterov=cfg.nesterov) \
            if cfg.optimizer == "sgd" else torch.optim.Adam(groups, lr=cfg.lr,
                                                            weight_decay=cfg.weight_decay)

    def loss(self, output, labels: torch.Tensor, cfg: TrainConfig
             ) -> tuple[torch.Tensor, dict[str, float]]:
        loss = part_cross_entropy(output.logits, labels)
        with torch.no_grad():
            acc = torch.stack([(z.argmax(1) == labels).float().mean() for z in output.logits])
        return loss, {"acc": float(acc.mean())}


class _PerRankUniform(UniformBatchSampler):
    """DDP: one global permutation per epoch, each rank takes its slice of every batch."""

    def __init__(self, n, per_rank, seed, world, rank):
        super().__init__(n, per_rank * world, seed=seed, num_replicas=1, rank=0)
        self.world, self.rank_, self.per_rank = world, rank, per_rank

    def __iter__(self):
        for batch in self.all_batches():
            yield batch[self.rank_ * self.per_rank:(self.rank_ + 1) * self.per_rank]


# -- the PCB architecture (docs/methods/pcb.md): kind "pcb", features pcb_g / pcb_h (RPP: rpp_*)
def build_pcb(spec: ModelSpec):
    """A randomly initialised PCB of ``spec`` (trunk, p stripes, reduction, classifiers)."""
    from reidcli.models.backbones import build_backbone
    from reidcli.models.pcb import PCB

    return PCB(build_backbone(spec.backbone, spec.last_stride), spec.num_classes,
               parts=spec.parts, reduced_dim=spec.reduced_dim, dropout=spec.dropout,
               rpp=spec.rpp)


def _pcb_family(spec: ModelSpec) -> str:
    return "rpp" if spec.rpp else "pcb"


def _pcb_dims(spec: ModelSpec) -> dict[str, tuple[int, int]]:
    """g: p stripes × C5 channels; h: p × the reduced dimension."""
    from reidcli.models.backbones import TAP_CHANNELS

    c5 = TAP_CHANNELS[spec.backbone][-1]
    g, h = FEATURES[_pcb_family(spec)]
    return {g: (spec.parts * c5, spec.parts), h: (spec.parts * spec.reduced_dim, spec.parts)}


def _pcb_features(output):
    from reidcli.models.pcb import pcb_features

    return pcb_features(output)


register_architecture(Architecture(
    "pcb", build_pcb, _pcb_dims, _pcb_features,
    {"pcb": (("pcb_g", "pcb_h"), ("pcb_g", "pcb_h")),
     "rpp": (("rpp_g", "rpp_h"), ("rpp_g", "rpp_h"))},
    family=_pcb_family, logits=lambda output: list(output.logits), module=__name__))


#: ``reid train pcb``: the paper's defaults (docs/methods/pcb.md) and the help of each option
PARAMETERS = [
    shared("preset", help="Shrunk settings, explicit options win: tiny = toy CNN from "
           "scratch, 96x32, 6 epochs, batch 32 (lowered to the training images when fewer), "
           "minutes on CPU; quick = ResNet-18, 192x64, 20 epochs, batch 32. Default: the "
           "paper's settings."),
    shared("train_cams"), shared("train_split"), shared("max_images"), shared("subsample_seed"),
    shared("backbone"),
    shared("init", help="imagenet | PATH (local state dict) | scratch."),
    shared("input_size", (384, 128), "HxW (384x128)."),
    shared("epochs", 60, "60 (LR steps rescaled)."),
    shared("batch_size", 64, "64."),
    shared("lr", 0.1, "New layers' LR (0.1)."),
    shared("backbone_lr_mult", 0.1, "0.1."),
    shared("lr_steps", [40], "40."),
    shared("lr_gamma", 0.1, "0.1."),
    shared("momentum", 0.9, "0.9."),
    shared("weight_decay", 5e-4, "5e-4."),
    shared("nesterov", True, "Plain momentum SGD."),
    shared("parts", help="Stripes p (6)."),
    shared("reduced_dim", help="256."),
    shared("dropout", 0.5, "0.5."),
    shared("rpp", help="Refined part pooling, induced training after the PCB epochs "
           "(docs/methods/pcb.md)."),
    shared("rpp_classifier_epochs"), shared("rpp_finetune_epochs"), shared("rpp_lr"),
    shared("seed", 1, "1 (the authors' code)."),
    *defaults_only(optimizer="sgd", warmup_epochs=0, label_smooth=0.0, random_erasing=0.0),
]


def _check_parts(cfg: TrainConfig) -> None:
    """PCB's stripes need as many rows of the conv5_x map (input height / 16)."""
    if cfg.input_size[0] // 16 < cfg.parts:
        raise ParameterError(OWNER, "input_size", f"{cfg.input_size[0]}x{cfg.input_size[1]}",
                             f"gives a conv5_x map of {cfg.input_size[0] // 16} rows, fewer "
                             f"than {param('parts', cfg.parts)}",
                             f"use an input height ≥ {16 * cfg.parts}")


register_info(
    "pcb", stage="train-net", paper="Sun et al., ECCV 2018",
    summary="PCB: 6 stripes, shared 1×1 reduction, 6 classifiers; optional RPP.",
    parameters=PARAMETERS,
    extras={"trainer": PCBTrainer, "validate": _check_parts, "presets": {
        # ``tiny`` trains in well under two minutes on 2 CPU cores
        "tiny": dict(backbone="tiny", input_size=(96, 32), epochs=6, batch_size=32,
                     backbone_lr_mult=1.0, lr=0.05, lr_steps=[4], init="scratch", workers=0,
                     log_every=5),
        "quick": dict(backbone="resnet18", input_size=(192, 64), epochs=20, batch_size=32,
                      lr_steps=[14])}})

__all__ = ["PCBTrainer", "PARAMETERS"]
