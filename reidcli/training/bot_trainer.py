"""BoT training recipe (docs/methods/bot.md): P×K batches, label-smoothed softmax
on the BNNeck logits + batch-hard triplet on pool5, Adam with warm-up and steps.

One dataset (``--dataset``) or several merged sources (``sources``, the DMG-Net paper's
"baseline (Bag-of-Tricks)" trained on the same sources as DMG-Net, docs/methods/dmgnet.md):
the sources' records come from :func:`reidcli.training.sources.source_training_records`
(identities relabelled per source so they never collide), then BoT's own P×K sampler and
schedule run on them unchanged."""
from __future__ import annotations

import dataclasses

import torch

from reidcli.data.samplers import PKSampler
from reidcli.data.transforms import train_transform
from reidcli.models.checkpoint import Architecture, ModelSpec, register_architecture
from reidcli.errors import ParameterError
from reidcli.naming import param
from reidcli.params import NONE
from reidcli.registry import Parameter
from reidcli.training.config import (NAMED_KEY_VALUES, NAMES, OWNER, SWITCH, TrainConfig,
                                     check_pk_triplet, defaults_only, pk_batch, shared)
from reidcli.training.losses import batch_hard_triplet, label_smoothing_cross_entropy
from reidcli.registry import register_info
from reidcli.training.phases import Phase
from reidcli.training.schedule import warmup_step_factor
from reidcli.training.trainer_base import TrainerBase


class BoTTrainer(TrainerBase):
    """L = L_soft(ε=0.1) + L_tri(m=0.3), Adam 3.5e-4, wd 5e-4, warm-up 10 epochs from 0.1×,
    ×0.1 at 40 and 70 of 120 epochs, P=16 × K=4."""

    name = "bot"

    def dataset_options(self, cfg: TrainConfig) -> dict:
        if getattr(cfg, "sources", None):
            return {}                           # the sources' own: cfg.source_options
        return super().dataset_options(cfg)

    def training_records(self, cfg: TrainConfig):
        """One dataset's training rows (split ``train`` unless ``train_split``), or the merged
        rows of ``sources`` (:func:`reidcli.training.sources.source_training_records`)."""
        if getattr(cfg, "sources", None):
            from reidcli.training.sources import source_training_records

            return source_training_records(cfg, owner="BoT")
        from reidcli.training.data import training_records

        return training_records(cfg.dataset, cfg.root, cfg.options, train_cams=cfg.train_cams,
                                max_images=cfg.max_images, subsample_seed=cfg.subsample_seed,
                                split=cfg.train_split or "train")

    def model_spec(self, cfg: TrainConfig, num_classes: int) -> ModelSpec:
        return ModelSpec(kind="bot", backbone=cfg.backbone, last_stride=cfg.last_stride,
                         num_classes=num_classes, input_size=tuple(cfg.input_size))

    log_columns = ("loss_ce", "loss_tri", "acc")

    def train_transform(self, cfg: TrainConfig):
        return train_transform("bot", cfg.input_size, erasing=cfg.random_erasing,
                               color_jitter=bool(getattr(cfg, "color_jitter", False)))

    def batch_sampler(self, cfg: TrainConfig, labels, world: int, rank: int, records=None):
        return PKSampler(labels, p=cfg.p, k=cfg.k, seed=cfg.seed, num_replicas=world, rank=rank,
                         iterations=getattr(cfg, "iters_per_epoch", None))

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
    """The data and trunk options of a BoT-like command."""
    return [shared("preset", help=preset_help), shared("train_cams"),
            shared("train_split", None, "train | all (every split; default: train, with "
                   "--sources each composition's own: Mixed A all, Mixed B train)."),
            shared("max_images"), shared("subsample_seed"), shared("backbone"),
            shared("init", help=init_help),
            shared("input_size", input_size, "HxW (%dx%d)." % tuple(input_size))]


#: the multi-source data parameters (DMG-Net paper §5: several labelled source datasets),
#: shared by BoT and DMG-Net
SOURCE_PARAMETERS = [
    Parameter("sources", [], (NAMES,), "Source datasets, comma list (reid data list) or "
              "mixed_a / mixed_b."),
    Parameter("source_options", {}, (NAMED_KEY_VALUES,), "Loader option of one source, "
              "NAME.KEY=VALUE (repeatable)."),
    Parameter("domains", None, (NONE, NAMES), "Keep only these source domains, e.g. "
              "synthetic/d0,synthetic/d1."),
    Parameter("targets", [], (NAMES,), "Target datasets or dataset/domain; refused if also "
              "a source."),
]
#: BoT's own: the same, naming the alternative to --dataset
_BOT_SOURCE_PARAMETERS = [
    dataclasses.replace(SOURCE_PARAMETERS[0], help="Train on several source datasets merged "
                        "instead of --dataset (identities kept apart per source): a comma "
                        "list or mixed_a / mixed_b."),
    *SOURCE_PARAMETERS[1:],
]


def _validate(cfg: TrainConfig) -> None:
    """BoT's checks between values: K ≥ 2; with ``sources``, no single-dataset setting."""
    check_pk_triplet(cfg)
    if not getattr(cfg, "sources", None):
        for name in ("source_options", "domains", "targets"):
            if getattr(cfg, name, None):
                raise ParameterError(OWNER, name, getattr(cfg, name), "needs source datasets",
                                     f"name them with {param('sources')}")
        return
    if cfg.options:
        raise ParameterError(OWNER, "options", cfg.options, "is one dataset's loader option; "
                             "the run trains on sources", f"give "
                             f"{param('source_options', 'NAME.KEY=VALUE')} per source")
    if cfg.train_cams is not None:
        raise ParameterError(OWNER, "train_cams", cfg.train_cams, "names the cameras of one "
                             "dataset; the run trains on sources",
                             f"choose source domains with {param('domains')}")
    if cfg.eval_every is not None and not cfg.eval_dataset:
        raise ParameterError(OWNER, "eval_every", cfg.eval_every, "needs a dataset to "
                             "evaluate on (the run trains on several sources)",
                             f"name a target with {param('eval_dataset')}")


#: BoT's schedule options (the paper's defaults, docs/methods/bot.md), shared with DMG-Net
SCHEDULE = [
    shared("epochs", 120, "120 (steps/warm-up rescaled)."),
    shared("batch_size", help="Images per batch, P×K (64): keeps --images-per-id, sets "
           "--ids-per-batch = batch / K."),
    shared("p", 16, "Identities per batch P (16)."),
    shared("k", 4, "Images per identity K (4)."),
    shared("iters_per_epoch", help="Default: one pass, every identity's images in chunks of "
           "K (BoT's epoch)."),
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
                     "fewer), minutes on CPU; quick = ResNet-18, 128x64, 30 epochs; "
                     "dmgnet_tiny = reid train dmgnet's tiny sizes (32x16, 4 epochs, P=4 x "
                     "K=2). Default: the paper's settings."),
    *_BOT_SOURCE_PARAMETERS,
    *SCHEDULE,
    Parameter("color_jitter", False, (SWITCH,), "on | off (off; the DMG-Net recipes turn it "
              "on for the Mixed benchmarks, as for DMG-Net)."),
]

#: ``reid train dmgnet --preset tiny`` (CPU scale: toy trunk at 32x16, docs/methods/dmgnet.md),
#: also BoT's ``dmgnet_tiny`` so the DMG-Net recipes' BoT row trains at the same sizes
DMGNET_TINY = dict(backbone="tiny", input_size=(32, 16), epochs=4, p=4, k=2, lr=3e-3,
                   lr_steps=[3], warmup_epochs=1, init="scratch", workers=0, log_every=5)

register_info(
    "bot", stage="train-net", paper="Luo et al., CVPR-W 2019 (bag of tricks)",
    summary="BoT: last stride 1, BNNeck, label smoothing, batch-hard triplet, warm-up.",
    parameters=PARAMETERS,
    extras={"trainer": BoTTrainer, "batch": pk_batch, "validate": _validate,
            "sources_parameter": "sources",
            "presets": {
                # ``tiny`` trains in well under two minutes on 2 CPU cores
                "tiny": dict(backbone="tiny", input_size=(64, 32), epochs=6, p=8, k=4,
                             lr=3e-3, lr_steps=[4], warmup_epochs=1, init="scratch",
                             workers=0, log_every=5),
                "quick": dict(backbone="resnet18", input_size=(128, 64), epochs=30, p=8, k=4,
                              lr_steps=[10, 18], warmup_epochs=3),
                "dmgnet_tiny": DMGNET_TINY}})

__all__ = ["BoTTrainer", "PARAMETERS", "SCHEDULE", "SOURCE_PARAMETERS", "DMGNET_TINY",
           "data_parameters"]
