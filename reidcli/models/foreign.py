"""Foreign re-id models as first-class models: a :class:`ForeignModel` rebuilt from another
toolkit's state dict (fast-reid, torchreid, reid-strong-baseline, layumi), its test feature,
its test transform and a :class:`ForeignLoadReport` of what was loaded.

:func:`load_foreign_state` recognises the architecture (or takes the one named with
``arch``, :mod:`reidcli.models.foreign_arch`), maps every key onto the model and refuses a
mismatch — missing, unexpected or shape-mismatched tensors beyond the toolkit's known extras —
unless ``allow_partial`` (then it warns). docs/models.md lists the formats.

Forward, for ``x`` [N, 3, H, W]: trunk → conv5_x ``t`` [N, C5, h, w] → ``pool`` →
``pool5`` [N, C5] → [``embed`` → d] → [``neck`` BatchNorm] → [ReLU] → the head feature
[N, d] (``bnneck`` or ``embed``) → [``classifier`` → logits [N, K]].
"""
from __future__ import annotations

import dataclasses
import warnings
from typing import Any, Mapping

import torch
import torch.nn.functional as F
from torch import nn

from reidcli.errors import InputFileError
from reidcli.models.fixed_order import BatchNorm1d
from reidcli.models.foreign_arch import (ARCH_NAMES, ForeignArch, build_arch, check_arch_name,
                                         foreign_key, known_extra, looks_like_imagenet_resnet,
                                         own_key, recognise, strip_module)
from reidcli.naming import param

#: names shown per list in a report or an error
SHOWN = 4


class NonLocal(nn.Module):
    """Non-local block (Wang et al., "Non-local Neural Networks", CVPR 2018, eq. 1 with the
    dot-product f and 1/N normalisation, eq. 6 residual) with fast-reid's module names
    ``g``, ``theta``, ``phi`` (1×1 convs C → c) and ``W`` (1×1 conv c → C, BatchNorm):
    [N, C, H, W] → [N, C, H, W]."""

    def __init__(self, channels: int, inner: int = 1):
        super().__init__()
        self.g = nn.Conv2d(channels, inner, 1)
        self.theta = nn.Conv2d(channels, inner, 1)
        self.phi = nn.Conv2d(channels, inner, 1)
        self.W = nn.Sequential(nn.Conv2d(inner, channels, 1), nn.BatchNorm2d(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, _, h, w = x.shape
        theta = self.theta(x).flatten(2)                     # [N, c, HW]
        phi = self.phi(x).flatten(2)
        g = self.g(x).flatten(2)
        f = theta.transpose(1, 2) @ phi / phi.shape[-1]      # [N, HW, HW], f / N
        y = (f @ g.transpose(1, 2)).transpose(1, 2).reshape(n, -1, h, w)
        return x + self.W(y)


class GeMPool(nn.Module):
    """Generalised-mean pooling (Radenović et al., TPAMI 2019, eq. 3):
    (mean(clamp(x, ε)^p))^(1/p), ε = 1e-6; ``p`` fixed or a learnt parameter ``p`` [1].
    [N, C, H, W] → [N, C]."""

    def __init__(self, p: float = 3.0, learnable: bool = False, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        if learnable:
            self.p = nn.Parameter(torch.full((1,), float(p)))
        else:
            self.register_buffer("p", torch.tensor([float(p)]), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        p = self.p.to(x.dtype)
        return x.clamp(min=self.eps).pow(p).mean(dim=(2, 3)).pow(1.0 / p)


@dataclasses.dataclass
class ForeignOutput:
    """``features`` {name: [N, d]} (the arch's store features), ``logits`` [N, K] or None,
    ``taps`` {conv*_x: [N, C, h, w]}, ``t`` conv5_x."""

    features: dict[str, torch.Tensor]
    logits: torch.Tensor | None
    taps: dict[str, torch.Tensor]
    t: torch.Tensor


class _StageWithNonLocal(nn.Sequential):
    """A trunk stage (same blocks, same ``layerK.i.*`` keys) that runs ``blocks[j]`` after
    its block ``first + j``: [N, C, H, W] → [N, C', H', W']. The non-local blocks are
    registered on the trunk (``NL_K``, fast-reid's keys), not here."""

    def __init__(self, stage: nn.Sequential, blocks: nn.ModuleList):
        super().__init__(*stage)
        object.__setattr__(self, "_nonlocal", blocks)     # not a child: keys stay NL_K.*
        self.first = len(stage) - len(blocks)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i, block in enumerate(self):
            x = block(x)
            if i >= self.first:
                x = self._nonlocal[i - self.first](x)
        return x


def _attach_nonlocal(trunk: nn.Module, blocks: Mapping[str, int], inner: int) -> None:
    """fast-reid's ``NL_2``/``NL_3`` … on ``trunk``: ``count`` non-local blocks after the
    last ``count`` bottlenecks of each stage ``layerK``."""
    for stage, count in blocks.items():
        layer = getattr(trunk, stage)
        width = [m for m in layer[-1].modules() if isinstance(m, nn.Conv2d)][-1].out_channels
        nl = nn.ModuleList([NonLocal(width, inner) for _ in range(int(count))])
        setattr(trunk, f"NL_{int(stage[-1])}", nl)
        setattr(trunk, stage, _StageWithNonLocal(layer, nl))


class ForeignModel(nn.Module):
    """A foreign architecture (:class:`~reidcli.models.foreign_arch.ForeignArch`) with
    reidcli's module names: ``backbone`` (a reidcli trunk, plus fast-reid's non-local blocks),
    ``pool``, ``embed``, ``neck``, ``classifier``. ``forward(x, taps)`` →
    :class:`ForeignOutput`."""

    def __init__(self, arch: ForeignArch):
        super().__init__()
        from reidcli.models.backbones import build_backbone

        self.arch = arch
        trunk = build_backbone(arch.backbone, arch.last_stride)
        if arch.stem_pool == "fastreid":          # 3×3 stride 2, no padding, ceil mode
            trunk.maxpool = nn.MaxPool2d(3, stride=2, padding=0, ceil_mode=True)
        if arch.nonlocal_blocks:
            _attach_nonlocal(trunk, arch.nonlocal_blocks, arch.nonlocal_channels)
        self.backbone = trunk
        width = trunk.out_channels
        self.pool = GeMPool(arch.gem_p, learnable=arch.pool == "gem-p") \
            if arch.pool in ("gem", "gem-p") else None
        self.embed = None
        if arch.embed in ("linear", "conv"):
            self.embed = nn.Linear(width, arch.embed_dim, bias=arch.embed_bias)
            width = arch.embed_dim
        self.neck = BatchNorm1d(width) if arch.neck else None
        self.classifier = nn.Linear(width, arch.num_classes, bias=arch.classifier_bias) \
            if arch.classifier != "none" and arch.num_classes > 0 else None

    @property
    def num_classes(self) -> int:
        return self.classifier.out_features if self.classifier is not None else 0

    def feature_dims(self) -> dict[str, int]:
        """``{store feature: dim}``."""
        head = self.embed.out_features if self.embed is not None else self.backbone.out_channels
        dims = {"pool5": self.backbone.out_channels, "bnneck": head, "embed": head}
        return {name: dims[name] for name in self.arch.features}

    def forward(self, x: torch.Tensor, taps=()) -> ForeignOutput:
        t, tapped = self.backbone(x, taps)
        pool5 = self.pool(t) if self.pool is not None else F.adaptive_avg_pool2d(t, 1).flatten(1)
        z = pool5
        if self.embed is not None:
            z = self.embed(z)
        if self.neck is not None:
            z = self.neck(z)
        if self.arch.relu:
            z = F.relu(z)
        logits = None
        if self.classifier is not None:
            if self.arch.classifier == "cosine":      # fast-reid CircleSoftmax: s·cos θ
                logits = self.arch.cosine_scale * F.linear(F.normalize(z),
                                                           F.normalize(self.classifier.weight))
            else:
                logits = self.classifier(z)
        feats = {"pool5": pool5, "bnneck": z, "embed": z}
        return ForeignOutput(features={k: feats[k] for k in self.arch.features}, logits=logits,
                             taps=tapped, t=t)

    def new_parameters(self) -> list[nn.Parameter]:
        mods = [m for m in (self.embed, self.neck, self.classifier) if m is not None]
        return [p for m in mods for p in m.parameters() if p.requires_grad]


@dataclasses.dataclass
class ForeignLoadReport:
    """What :func:`load_foreign_state` loaded: the architecture, how it was chosen
    (``keys`` or ``arch``), the foreign keys loaded / unexpected / shape-mismatched, the
    model tensors missing from the file (in the toolkit's names) and the known extras
    (read or knowingly unused)."""

    source: str
    arch: str
    title: str
    chosen_by: str
    loaded: list[str] = dataclasses.field(default_factory=list)
    missing: list[str] = dataclasses.field(default_factory=list)
    unexpected: list[str] = dataclasses.field(default_factory=list)
    mismatched: list[str] = dataclasses.field(default_factory=list)
    extras: list[str] = dataclasses.field(default_factory=list)

    @property
    def complete(self) -> bool:
        return not (self.missing or self.unexpected or self.mismatched)

    def problems(self) -> str:
        """``65 missing (a, b, …); 12 unexpected (…)`` — empty when complete."""
        parts = []
        for label, keys in (("missing", self.missing), ("unexpected", self.unexpected),
                            ("shape-mismatched", self.mismatched)):
            if keys:
                shown = ", ".join(keys[:SHOWN]) + (", …" if len(keys) > SHOWN else "")
                parts.append(f"{len(keys)} {label} ({shown})")
        return "; ".join(parts)

    def summary(self) -> str:
        """One line: ``model FILE: fast-reid BoT R50 (recognised from its keys): 320
        tensors loaded[, problems][; N extras: …]``."""
        how = "recognised from its keys" if self.chosen_by == "keys" else "named by " + \
            param("arch", self.arch)
        text = f"{self.title} ({how}): {len(self.loaded)} tensors loaded"
        if self.problems():
            text += "; " + self.problems()
        if self.extras:
            shown = ", ".join(self.extras[:SHOWN]) + (", …" if len(self.extras) > SHOWN else "")
            text += f"; {len(self.extras)} outside the model ({shown})"
        return text

    def as_dict(self) -> dict[str, Any]:
        """For the store provenance: counts plus up to 20 names of each list."""
        return {"source": self.source, "arch": self.arch, "chosen_by": self.chosen_by,
                "loaded": len(self.loaded),
                **{k: {"count": len(v), "keys": v[:20]} for k, v in (
                    ("missing", self.missing), ("unexpected", self.unexpected),
                    ("mismatched", self.mismatched), ("outside_model", self.extras))}}


def _fits(value: torch.Tensor, target: torch.Tensor) -> torch.Tensor | None:
    """``value`` shaped as ``target`` when the shapes agree up to size-1 dimensions
    (fast-reid's 1×1 conv embedding [d, C, 1, 1] → Linear [d, C]), else None."""
    if value.shape == target.shape:
        return value
    squeeze = lambda s: [d for d in s if d != 1]
    if value.numel() == target.numel() and squeeze(value.shape) == squeeze(target.shape):
        return value.reshape(target.shape)
    return None


def unrecognised(state: Mapping[str, torch.Tensor], file: str) -> InputFileError:
    """The error for a state dict that is no recognised re-id model."""
    keys = sorted(state)
    sample = ", ".join(keys[:3]) + (", …" if len(keys) > 3 else "")
    if looks_like_imagenet_resnet(state):
        return InputFileError(f"{param('model')} {file} is an ImageNet classifier (fc "
                              "[1000, …]), not a re-id model", f"start training from it with "
                              f"{param('init', file)}")
    return InputFileError(f"{param('model')} {file} is neither a reidcli model file nor a "
                          f"recognised re-id checkpoint ({len(keys)} tensors: {sample})",
                          f"name its architecture with {param('arch', 'NAME')} (one of "
                          f"{', '.join(ARCH_NAMES)}), or give a reidcli run directory")


def load_foreign_state(state: Mapping[str, torch.Tensor], file: str, arch: str | None = None,
                       allow_partial: bool = False
                       ) -> tuple[ForeignModel, ForeignLoadReport]:
    """Build the foreign model of the tensor dict ``state`` (``module.`` prefixes allowed)
    and load it: the architecture named by ``arch`` or :func:`recognise`'d from the keys.

    Raises :class:`InputFileError` (one line) for an unrecognised dict, a trunk this
    reidcli does not have, no matching tensor, or — unless ``allow_partial``, which warns
    instead — missing, unexpected or shape-mismatched tensors."""
    from reidcli.models.backbones import BACKBONES

    state = strip_module(state)
    name = check_arch_name(arch) if arch is not None else recognise(state)
    if name is None:
        raise unrecognised(state, file)
    spec = build_arch(name, state)
    if spec.backbone not in BACKBONES:
        raise InputFileError(f"{param('model')} {file} is a {spec.title}, whose "
                             f"{spec.backbone} trunk this reidcli does not have",
                             f"use a model with one of the trunks {', '.join(BACKBONES)}")
    model = ForeignModel(spec)
    own = model.state_dict()
    report = ForeignLoadReport(source=file, arch=name, title=spec.title,
                               chosen_by="keys" if arch is None else "arch")
    filled = set()
    for key, value in state.items():
        if known_extra(spec, key):
            report.extras.append(key)
            continue
        target = own_key(spec, key)
        if target is None or target not in own or target in filled:
            report.unexpected.append(key)
            continue
        fitted = _fits(value, own[target])
        if fitted is None:
            report.mismatched.append(f"{key} {list(value.shape)} (wants "
                                     f"{list(own[target].shape)})")
            continue
        own[target] = fitted.to(own[target].dtype)
        filled.add(target)
        report.loaded.append(key)
    report.missing = [foreign_key(spec, k) for k in own
                      if k not in filled and not k.endswith("num_batches_tracked")]
    if not any(own[k].ndim > 0 for k in filled):
        raise InputFileError(f"{param('model')} {file}: none of its {len(state)} tensors fit "
                             f"a {spec.title}", f"name its architecture with "
                             f"{param('arch', 'NAME')} (one of {', '.join(ARCH_NAMES)})")
    if not report.complete:
        what = (f"{param('model')} {file}: the weights do not fit a {spec.title} "
                f"({len(report.loaded)} loaded; {report.problems()})")
        if not allow_partial:
            how = f"name the architecture with {param('arch', 'NAME')}" if arch is None \
                else "check the architecture name"
            raise InputFileError(what, f"{how}, or pass {param('allow_partial', True)} to "
                                 "load it anyway (missing tensors keep their initial values)")
        warnings.warn(f"{what}: allowed by {param('allow_partial', True)} — the missing "
                      "tensors keep their initial values, so the features are not the "
                      "trained model's", stacklevel=2)
    model.load_state_dict(own)
    return model, report


def foreign_transform(arch: ForeignArch):
    """The toolkit's test transform: resize to ``arch.input_size`` with its interpolation,
    to a float tensor in [0, 1], normalise with its mean/std: PIL → [3, H, W]."""
    from torchvision.transforms import v2

    mode = {"bilinear": v2.InterpolationMode.BILINEAR,
            "bicubic": v2.InterpolationMode.BICUBIC}[arch.interpolation]
    return v2.Compose([v2.Resize(tuple(arch.input_size), interpolation=mode, antialias=True),
                       v2.ToImage(), v2.ToDtype(torch.float32, scale=True),
                       v2.Normalize(list(arch.mean), list(arch.std)), v2.ToPureTensor()])


__all__ = ["ForeignModel", "ForeignOutput", "ForeignLoadReport", "NonLocal", "GeMPool",
           "load_foreign_state", "foreign_transform", "unrecognised"]
