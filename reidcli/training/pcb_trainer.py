"""PCB training recipe and RPP induced training (docs/methods/pcb.md)."""
from __future__ import annotations

import torch

from reidcli.data.samplers import UniformBatchSampler
from reidcli.data.transforms import train_transform
from reidcli.models.checkpoint import ModelSpec
from reidcli.registry import register_info
from reidcli.training.config import TrainConfig
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


register_info(
    "pcb", stage="train-net", paper="Sun et al., ECCV 2018",
    summary="PCB: 6 stripes, shared 1×1 reduction, 6 classifiers; optional RPP.",
    # the paper's defaults (docs/methods/pcb.md)
    defaults=dict(epochs=60, batch_size=64, optimizer="sgd", lr=0.1, backbone_lr_mult=0.1,
                  momentum=0.9, nesterov=True, weight_decay=5e-4, lr_steps=[40], lr_gamma=0.1,
                  warmup_epochs=0, input_size=(384, 128), dropout=0.5, seed=1,
                  label_smooth=0.0, random_erasing=0.0),
    extras={"trainer": PCBTrainer, "presets": {
        # ``tiny`` trains in well under two minutes on 2 CPU cores
        "tiny": dict(backbone="tiny", input_size=(96, 32), epochs=6, batch_size=32,
                     backbone_lr_mult=1.0, lr=0.05, lr_steps=[4], init="scratch", workers=0,
                     log_every=5),
        "quick": dict(backbone="resnet18", input_size=(192, 64), epochs=20, batch_size=32,
                      lr_steps=[14])}})

__all__ = ["PCBTrainer"]
