"""DG-VAE networks: two modality trunks, the IDI/IAI Gaussian encoders, the feature-map
decoder and the latent code classifier (docs/methods/dgvae.md; DG-VAE paper §3, Tables 4–7).

Full configuration (input [B, 3, 384, 128], a ResNet-50 with last stride 2 split after
``layer3[0]``, DG-VAE paper Table 4–5)::

    E^V, E^I  conv1 … layer2, layer3[0]            → f      [B, 1024, 24, 8]
    E^D       layer3[1:] + layer4 → max pool → heads → μ_φ, log σ²_φ [B, 2048]
    E^A       layer3[1:] + layer4 → avg pool → heads → μ_ψ, log σ²_ψ [B, 512]
    G         concat(d, a) [B, 2560] → FC 512 → ConvT (6×2) → ConvT ×2 → ConvT ×2
              → f̂ [B, 1024, 24, 8]                                  (Table 7)
    D^C       Linear(2048 → N_y)

The ``tiny`` configuration has the same structure with small convolution stacks
(f [B, 32, 8, 4] at 32×16 input, codes of 16 and 8 dimensions) for tests and CPU demos.
Module names keep torchvision's (``conv1``, ``layer3.1`` …), so each part's state dict keys
are a subset of a torchvision ResNet-50's.
"""
from __future__ import annotations

import copy
import dataclasses
import math
from collections import OrderedDict
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

from reidcli.errors import InputFileError, ParameterError
from reidcli.models.backbones import ResNetTrunk, build_backbone
from reidcli.params import BOOL, Interval, Options, validate_params

CONFIGS = ("full", "tiny")
DECODER_OUTPUTS = ("tanh", "linear")
#: ρ such that softplus(ρ) = 1: the initial margin α_y (docs/methods/dgvae.md, ALMC)
MARGIN_RHO_INIT = math.log(math.e - 1.0)
#: log-variance heads are clamped to this range (docs/methods/dgvae.md D14)
LOGVAR_RANGE = (-10.0, 10.0)
#: trunk-to-map downsampling per configuration: f is (⌈H/s⌉, ⌈W/s⌉)
TRUNK_STRIDE = {"full": 16, "tiny": 4}
#: the decoder upsamples its first (h/4 × w/4) map twice by 2 (Table 7)
DECODER_UPSAMPLING = 4

_CONFIG_DEFAULTS: dict[str, dict[str, Any]] = {
    "full": dict(idi_dim=2048, iai_dim=512, trunk_channels=1024, encoder_channels=2048,
                 decoder_channels=512, dropout=0.2),
    "tiny": dict(idi_dim=16, iai_dim=8, trunk_channels=32, encoder_channels=64,
                 decoder_channels=64, dropout=0.0),
}


@dataclasses.dataclass
class DGVAEArch:
    """Architecture numbers of a DG-VAE (saved in checkpoints with :meth:`as_dict`).

    ``map_size`` is f's (h, w): (⌈H/16⌉, ⌈W/16⌉) in the full configuration, (⌈H/4⌉, ⌈W/4⌉)
    in the tiny one; both must be multiples of 4 (the decoder's first kernel is h/4 × w/4).
    ``encoder_channels`` is the pooled width the heads read (ResNet-50: 2048) and
    ``decoder_channels`` the decoder's inner width (Table 7: 512)."""

    config: str = "full"
    num_classes: int = 0
    idi_dim: int = 2048
    iai_dim: int = 512
    trunk_channels: int = 1024
    map_size: tuple = (24, 8)
    dropout: float = 0.2
    decoder_out: str = "tanh"
    shared_trunk: bool = False
    encoder_channels: int = 2048
    decoder_channels: int = 512

    def as_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["map_size"] = list(self.map_size)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "DGVAEArch":
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise InputFileError(f"DG-VAE architecture has unknown entries {unknown}",
                                 "the checkpoint was written by a newer reidcli; upgrade it")
        arch = cls(**_canonical(dict(d)))
        validate_arch(arch)
        return arch


#: constraints of the scalar architecture fields (``--set`` strings are converted)
_ARCH_CONSTRAINTS = {
    "config": [Options(CONFIGS)], "num_classes": [Interval(int, 2, None)],
    "idi_dim": [Interval(int, 1, None)], "iai_dim": [Interval(int, 1, None)],
    "trunk_channels": [Interval(int, 1, None)], "encoder_channels": [Interval(int, 1, None)],
    "decoder_channels": [Interval(int, 1, None)], "dropout": [Interval(float, 0, 1, "left")],
    "decoder_out": [Options(DECODER_OUTPUTS)], "shared_trunk": [BOOL],
}


def _canonical(values: dict[str, Any]) -> dict[str, Any]:
    """``values`` with the scalar fields checked and converted ("0.1" → 0.1, "true" → True)."""
    out = validate_params("DG-VAE", values, _ARCH_CONSTRAINTS)
    if "map_size" in out:
        out["map_size"] = tuple(int(v) for v in out["map_size"])
    return out


def validate_arch(arch: DGVAEArch) -> None:
    """Raise :class:`ParameterError` when ``arch`` cannot be built."""
    values = dataclasses.asdict(arch)
    if _canonical(values) != {**values, "map_size": tuple(values["map_size"])}:
        raise ParameterError("DG-VAE", "architecture", arch,
                             "has fields of the wrong type", "build it with dgvae_arch()")
    h, w = arch.map_size
    if h % DECODER_UPSAMPLING or w % DECODER_UPSAMPLING or h < 4 or w < 4:
        stride = TRUNK_STRIDE.get(arch.config, 16) * DECODER_UPSAMPLING
        raise ParameterError("DG-VAE", "map_size", tuple(arch.map_size),
                             "must be multiples of 4 (the decoder upsamples h/4 × w/4 twice)",
                             f"use an input size whose height and width are multiples of "
                             f"{stride}")
    if arch.config == "full":
        fixed = {"trunk_channels": 1024, "encoder_channels": 2048}
        for name, value in fixed.items():
            if int(getattr(arch, name)) != value:
                raise ParameterError("DG-VAE", name, getattr(arch, name),
                                     f"must be {value} in the full configuration (ResNet-50)")


def dgvae_arch(config: str, num_classes: int, input_size: tuple[int, int],
               **overrides: Any) -> DGVAEArch:
    """The architecture of ``config`` ("full" | "tiny") for ``num_classes`` training
    identities and images of ``input_size`` (H, W); ``overrides`` replace single fields."""
    if config not in CONFIGS:
        raise ParameterError("DG-VAE", "config", config, "is unknown",
                             f"use one of {', '.join(CONFIGS)}")
    height, width = (int(v) for v in input_size)
    stride = TRUNK_STRIDE[config]
    values: dict[str, Any] = dict(_CONFIG_DEFAULTS[config])
    values.update(config=config, num_classes=int(num_classes),
                  map_size=(math.ceil(height / stride), math.ceil(width / stride)))
    known = {f.name for f in dataclasses.fields(DGVAEArch)}
    for name in overrides:
        if name not in known or name == "config":
            raise ParameterError("DG-VAE", name, overrides[name], "is not an architecture field",
                                 f"use one of {', '.join(sorted(known - {'config'}))}")
    values.update(overrides)
    arch = DGVAEArch(**_canonical(values))
    validate_arch(arch)
    return arch


@dataclasses.dataclass
class DGVAEOutput:
    """One forward pass: ``f`` [B, C, h, w] trunk maps; ``mu_d``, ``logvar_d`` [B, idi_dim]
    (the IDI posterior q_φ(d|f), Eq. 4); ``mu_a``, ``logvar_a`` [B, iai_dim] (q_ψ(a|f),
    Eq. 10), None when the IAI branch was not run. Log-variances are fp32, clamped to
    [−10, 10]."""

    f: torch.Tensor
    mu_d: torch.Tensor
    logvar_d: torch.Tensor
    mu_a: torch.Tensor | None = None
    logvar_a: torch.Tensor | None = None


def _conv_bn_relu(cin: int, cout: int, stride: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout),
                         nn.ReLU(inplace=True))


def _indexed(blocks: list[nn.Module], first: int) -> nn.Sequential:
    """Blocks numbered from ``first`` (``layer3.1`` … keep torchvision's keys)."""
    return nn.Sequential(OrderedDict((str(first + i), b) for i, b in enumerate(blocks)))


class ResNetConv4Trunk(nn.Module):
    """A modality trunk E^V / E^I: ResNet conv1 … layer2 and ``layer3[0]`` (conv4_1, stride 2;
    DG-VAE paper Table 4). [B, 3, H, W] → f [B, 1024, ⌈H/16⌉, ⌈W/16⌉]."""

    def __init__(self, resnet: ResNetTrunk):
        super().__init__()
        self.conv1, self.bn1 = copy.deepcopy(resnet.conv1), copy.deepcopy(resnet.bn1)
        self.relu, self.maxpool = copy.deepcopy(resnet.relu), copy.deepcopy(resnet.maxpool)
        self.layer1, self.layer2 = copy.deepcopy(resnet.layer1), copy.deepcopy(resnet.layer2)
        self.layer3 = _indexed([copy.deepcopy(resnet.layer3[0])], 0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        return self.layer3(self.layer2(self.layer1(x)))


class ResNetConv5Body(nn.Module):
    """An encoder body: ``layer3[1:]`` (conv4_2 – conv4_6) + ``layer4`` (conv5_x, stride 2;
    DG-VAE paper Tables 5–6). f [B, 1024, h, w] → [B, 2048, ⌈h/2⌉, ⌈w/2⌉]."""

    def __init__(self, resnet: ResNetTrunk):
        super().__init__()
        blocks = [copy.deepcopy(b) for b in list(resnet.layer3.children())[1:]]
        self.layer3 = _indexed(blocks, 1)
        self.layer4 = copy.deepcopy(resnet.layer4)

    def forward(self, f: torch.Tensor) -> torch.Tensor:
        return self.layer4(self.layer3(f))


class GaussianEncoder(nn.Module):
    """E^D or E^A: body → global max/avg pool → mean and log-variance heads (Linear = 1×1 conv
    on the pooled map; pooling first as DG-VAE paper Tables 5–6, docs/methods/dgvae.md D13).

    f [B, C, h, w] → (μ [B, out_dim], log σ² [B, out_dim] in fp32 clamped to [−10, 10]);
    the log-variance head starts at 0 (σ = 1, D14)."""

    def __init__(self, body: nn.Module, channels: int, out_dim: int, pool: str):
        super().__init__()
        if pool not in ("max", "avg"):
            raise ParameterError("DG-VAE encoder", "pool", pool, "must be max or avg")
        self.body = body
        self.pool = pool
        self.out_dim = out_dim
        self.mean_head = nn.Linear(channels, out_dim)
        self.logvar_head = nn.Linear(channels, out_dim)
        # σ = 1 at initialisation, the variance of the prior's components (Eq. 2, Eq. 10):
        # a default-initialised head on pooled ResNet-50 maps starts at log σ² ≈ ±9, where
        # the e^±9 factors swamp every other loss (docs/methods/dgvae.md D14)
        nn.init.zeros_(self.logvar_head.weight)
        nn.init.zeros_(self.logvar_head.bias)

    def pooled(self, f: torch.Tensor) -> torch.Tensor:
        """The pooled body output [B, channels]."""
        x = self.body(f)
        x = F.adaptive_max_pool2d(x, 1) if self.pool == "max" else F.adaptive_avg_pool2d(x, 1)
        return x.flatten(1)

    def forward(self, f: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.pooled(f)
        logvar = self.logvar_head(x).float().clamp(*LOGVAR_RANGE)
        return self.mean_head(x), logvar


class FeatureMapDecoder(nn.Module):
    """G_θ (DG-VAE paper Table 7): concat(d, a) [B, in_dim] → FC → [B, c, 1, 1] →
    ConvT(k = h/4 × w/4) → BN → LeakyReLU(0.2) → Dropout → ConvT(4, 2, 1) → BN → LReLU →
    Dropout → ConvT(4, 2, 1) → BN → LReLU → Tanh → f̂ [B, out_channels, h, w].

    ``output="linear"`` ends at the last transposed convolution (no BN, LReLU, Tanh;
    docs/methods/dgvae.md D15).
    Initialisation: conv/linear weights N(0, 0.02), biases 0, BN γ N(1, 0.02), β 0."""

    def __init__(self, in_dim: int, channels: int, out_channels: int, map_size: tuple,
                 dropout: float, output: str = "tanh"):
        super().__init__()
        h, w = map_size
        self.fc = nn.Linear(in_dim, channels)
        layers: list[nn.Module] = [
            nn.ConvTranspose2d(channels, channels, (h // 4, w // 4)), nn.BatchNorm2d(channels),
            nn.LeakyReLU(0.2, inplace=True), nn.Dropout(dropout),
            nn.ConvTranspose2d(channels, channels, 4, 2, 1), nn.BatchNorm2d(channels),
            nn.LeakyReLU(0.2, inplace=True), nn.Dropout(dropout),
            nn.ConvTranspose2d(channels, out_channels, 4, 2, 1)]
        if output == "tanh":
            layers += [nn.BatchNorm2d(out_channels), nn.LeakyReLU(0.2, inplace=True), nn.Tanh()]
        self.deconv = nn.Sequential(*layers)
        self.channels = channels
        self._init_weights()

    def _init_weights(self) -> None:
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.ConvTranspose2d, nn.Conv2d)):
                nn.init.normal_(m.weight, 0.0, 0.02)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.normal_(m.weight, 1.0, 0.02)
                nn.init.zeros_(m.bias)

    def forward(self, codes: torch.Tensor) -> torch.Tensor:
        x = self.fc(codes).view(codes.shape[0], self.channels, 1, 1)
        return self.deconv(x)


def without_bn_update(module: nn.Module, *args):
    """``module(*args)`` in its current mode, with its buffers replaced by copies that are
    then dropped: in train mode BatchNorm still normalises with the batch's statistics and
    gradients reach the module's parameters, but its running statistics (and batch counts)
    stay as they were (docs/methods/dgvae.md D29: reconstructed maps are not test-time
    data)."""
    scratch = {name: b.clone() for name, b in module.named_buffers()}
    return functional_call(module, scratch, args)


class DGVAE(nn.Module):
    """Dual Gaussian-based VAE (DG-VAE paper §3, Fig. 3). See the module docstring.

    ``resnet`` (full configuration): a ResNet-50 :class:`ResNetTrunk` with last stride 2,
    already initialised by the caller; every part copies its own blocks from it. None builds a
    randomly initialised one. The tiny configuration ignores it."""

    def __init__(self, arch: DGVAEArch, resnet: ResNetTrunk | None = None):
        super().__init__()
        validate_arch(arch)
        self.arch = arch
        if arch.config == "full":
            if resnet is None:
                resnet = build_backbone("resnet50", last_stride=2)
            _check_resnet(resnet)
            visible: nn.Module = ResNetConv4Trunk(resnet)
            infrared = visible if arch.shared_trunk else ResNetConv4Trunk(resnet)
            idi_body: nn.Module = ResNetConv5Body(resnet)
            iai_body: nn.Module = ResNetConv5Body(resnet)
        else:
            c = arch.trunk_channels

            def tiny_trunk() -> nn.Module:
                return nn.Sequential(_conv_bn_relu(3, max(c // 2, 1), 2),
                                     _conv_bn_relu(max(c // 2, 1), c, 2))

            def tiny_body() -> nn.Module:
                e = arch.encoder_channels
                return nn.Sequential(_conv_bn_relu(c, e, 1), _conv_bn_relu(e, e, 2))

            visible = tiny_trunk()
            infrared = visible if arch.shared_trunk else tiny_trunk()
            idi_body, iai_body = tiny_body(), tiny_body()
        self.trunk_visible = visible
        self.trunk_infrared = infrared
        self.idi_encoder = GaussianEncoder(idi_body, arch.encoder_channels, arch.idi_dim, "max")
        self.iai_encoder = GaussianEncoder(iai_body, arch.encoder_channels, arch.iai_dim, "avg")
        self.decoder = FeatureMapDecoder(arch.idi_dim + arch.iai_dim, arch.decoder_channels,
                                         arch.trunk_channels, tuple(arch.map_size),
                                         arch.dropout, arch.decoder_out)
        self.classifier = nn.Linear(arch.idi_dim, arch.num_classes)
        nn.init.normal_(self.classifier.weight, 0.0, 0.001)
        nn.init.zeros_(self.classifier.bias)
        self.prior_means = nn.Parameter(torch.randn(arch.num_classes, arch.idi_dim))
        self.margin_rho = nn.Parameter(torch.full((arch.num_classes,), MARGIN_RHO_INIT))

    @property
    def num_classes(self) -> int:
        return self.arch.num_classes

    def trunk(self, images: torch.Tensor, infrared: torch.Tensor) -> torch.Tensor:
        """images [B, 3, H, W], infrared bool [B] → f [B, C, h, w] in the batch's row order;
        each row goes through E^I when ``infrared`` else E^V."""
        infrared = infrared.to(device=images.device, dtype=torch.bool)
        if self.trunk_visible is self.trunk_infrared:
            return self.trunk_visible(images)
        ir_rows = torch.nonzero(infrared).flatten()
        vis_rows = torch.nonzero(~infrared).flatten()
        if len(ir_rows) == 0:
            return self.trunk_visible(images)
        if len(vis_rows) == 0:
            return self.trunk_infrared(images)
        maps = torch.cat([self.trunk_visible(images[vis_rows]),
                          self.trunk_infrared(images[ir_rows])])
        return maps[torch.argsort(torch.cat([vis_rows, ir_rows]))]

    def encode_idi(self, f: torch.Tensor, update_bn: bool = True
                   ) -> tuple[torch.Tensor, torch.Tensor]:
        """f [B, C, h, w] → (μ_φ [B, idi_dim], log σ²_φ [B, idi_dim]); ``update_bn=False``
        leaves E^D's BN running statistics as they are (:func:`without_bn_update`)."""
        return self.idi_encoder(f) if update_bn else without_bn_update(self.idi_encoder, f)

    def encode_iai(self, f: torch.Tensor, update_bn: bool = True
                   ) -> tuple[torch.Tensor, torch.Tensor]:
        """f [B, C, h, w] → (μ_ψ [B, iai_dim], log σ²_ψ [B, iai_dim]); ``update_bn`` as in
        :meth:`encode_idi`."""
        return self.iai_encoder(f) if update_bn else without_bn_update(self.iai_encoder, f)

    def decode(self, d: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        """d [B, idi_dim], a [B, iai_dim] → f̂ = G(d ⊕ a) [B, C, h, w] (IDI first)."""
        return self.decoder(torch.cat([d, a.to(d.dtype)], dim=1))

    def margins(self) -> torch.Tensor:
        """α = softplus(ρ) [num_classes], the ALMC margins (fp32)."""
        return F.softplus(self.margin_rho.float())

    def forward(self, images: torch.Tensor, infrared: torch.Tensor,
                with_iai: bool = True) -> DGVAEOutput:
        f = self.trunk(images, infrared)
        mu_d, logvar_d = self.encode_idi(f)
        mu_a = logvar_a = None
        if with_iai:
            mu_a, logvar_a = self.encode_iai(f)
        return DGVAEOutput(f=f, mu_d=mu_d, logvar_d=logvar_d, mu_a=mu_a, logvar_a=logvar_a)


def _check_resnet(resnet: ResNetTrunk) -> None:
    if getattr(resnet, "name", None) != "resnet50":
        raise ParameterError("DG-VAE", "backbone", getattr(resnet, "name", type(resnet).__name__),
                             "must be resnet50 in the full configuration",
                             "build it with build_backbone('resnet50', last_stride=2)")
    if resnet.layer4[0].conv2.stride != (2, 2):
        raise ParameterError("DG-VAE", "last_stride", resnet.layer4[0].conv2.stride[0],
                             "must be 2 (conv5_x keeps its stride, DG-VAE paper Table 5)",
                             "build it with build_backbone('resnet50', last_stride=2)")


__all__ = ["DGVAE", "DGVAEArch", "DGVAEOutput", "dgvae_arch", "validate_arch",
           "GaussianEncoder", "FeatureMapDecoder", "ResNetConv4Trunk", "ResNetConv5Body",
           "CONFIGS", "DECODER_OUTPUTS", "LOGVAR_RANGE", "MARGIN_RHO_INIT", "without_bn_update"]
