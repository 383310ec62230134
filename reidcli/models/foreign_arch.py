"""Foreign re-id checkpoints: which architecture a state dict is, and where its keys go.

A foreign model file is a state dict written by another toolkit (fast-reid, torchreid,
reid-strong-baseline, layumi's Person_reID_baseline_pytorch). :func:`recognise` names its
architecture (:data:`ARCH_NAMES`) from the key names and tensor shapes; :func:`build_arch`
turns a name (recognised, or given with ``arch``) plus the shapes into a
:class:`ForeignArch` — trunk, head, test feature, input size and normalisation — and
:func:`own_key` maps each foreign key onto :class:`reidcli.models.foreign.ForeignModel`'s
names (``backbone.*``, ``pool.p``, ``embed.*``, ``neck.*``, ``classifier.*``).

The facts below were read from each toolkit's own source (named in the comments); no code of
theirs is used. docs/models.md lists the recognised formats and keys.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Mapping

import torch

from reidcli.errors import ParameterError

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)

#: store-feature family of a head (reidcli.models.checkpoint.FEATURES): test feature first
FAMILY_FEATURES = {"bot": ("bnneck", "pool5"), "bot-before": ("pool5", "bnneck"),
                   "embed": ("embed", "pool5"), "pool5": ("pool5",)}


@dataclasses.dataclass
class ForeignArch:
    """Everything needed to rebuild a foreign model (not its weights).

    Trunk ``backbone`` (a :func:`reidcli.models.backbones.build_backbone` name) with
    ``last_stride``, ``stem_pool`` (``torchvision``: max-pool 3×3/2 padding 1; ``fastreid``:
    padding 0, ceil mode) and fast-reid non-local blocks ``nonlocal_blocks`` {stage: count,
    after the stage's last blocks}; head: ``pool`` (``avg`` | ``gem`` fixed p | ``gem-p``
    learnt p) → optional ``embed`` (``linear`` | ``conv`` 1×1, ``embed_dim``) → optional
    BatchNorm ``neck`` → optional ``relu`` → optional ``classifier`` (``linear`` |
    ``cosine`` × ``cosine_scale``). ``family`` picks the store features
    (:data:`FAMILY_FEATURES`; the first is the toolkit's test feature) and ``metric`` the
    store metric of that feature. ``input_size`` (H, W), ``mean``/``std`` (0–1 scale) and
    ``interpolation`` are the toolkit's test transform.
    """

    name: str
    toolkit: str
    title: str
    backbone: str = "resnet50"
    last_stride: int = 1
    stem_pool: str = "torchvision"
    nonlocal_blocks: dict = dataclasses.field(default_factory=dict)
    nonlocal_channels: int = 1
    pool: str = "avg"
    gem_p: float = 3.0
    embed: str = "none"
    embed_dim: int = 0
    embed_bias: bool = False
    neck: bool = False
    relu: bool = False
    classifier: str = "none"
    num_classes: int = 0
    classifier_bias: bool = False
    cosine_scale: float = 1.0
    family: str = "pool5"
    metric: str = "euclidean"
    input_size: tuple = (256, 128)
    mean: tuple = IMAGENET_MEAN
    std: tuple = IMAGENET_STD
    interpolation: str = "bilinear"

    @property
    def features(self) -> tuple[str, ...]:
        return FAMILY_FEATURES[self.family]

    @property
    def test_feature(self) -> str:
        return self.features[0]

    def as_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        for key in ("input_size", "mean", "std"):
            d[key] = [float(v) if key != "input_size" else int(v) for v in d[key]]
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "ForeignArch":
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in d.items() if k in known}
        for key in ("input_size", "mean", "std"):
            if key in values:
                values[key] = tuple(values[key])
        return cls(**values)

    def describe(self) -> str:
        """``fast-reid BoT R50-ibn: test feature bnneck (after the BNNeck), 256x128 bicubic``."""
        what = {"bnneck": "after the BNNeck", "pool5": "global pooling",
                "embed": "the embedding layer's output"}[self.test_feature]
        return (f"{self.title}: test feature {self.test_feature} ({what}), input "
                f"{self.input_size[0]}x{self.input_size[1]} {self.interpolation}, "
                f"mean {_fmt(self.mean)} std {_fmt(self.std)}")


def _fmt(values) -> str:
    return "/".join(f"{v:.3f}" for v in values)


# ---------------------------------------------------------------------------------------
# Recipes. Each entry: toolkit, title, trunk, head and test transform of one architecture.
#
# fast-reid (JDAI-CV/fast-reid):
#  * fastreid/modeling/meta_arch/baseline.py — Baseline = ``backbone`` + ``heads``; inputs are
#    0–255 images normalised inside the model by ``pixel_mean``/``pixel_std`` (buffers saved
#    in the state dict before v1.0, non-persistent after).
#  * fastreid/config/defaults.py — PIXEL_MEAN [0.485, 0.456, 0.406]×255, PIXEL_STD
#    [0.229, 0.224, 0.225]×255, SIZE_TEST [256, 128].
#  * fastreid/data/transforms/build.py — test transform: Resize(SIZE_TEST, interpolation=3
#    = bicubic), to a 0–255 tensor.
#  * fastreid/modeling/heads/embedding_head.py — pool_layer → bottleneck = Sequential(
#    [Conv2d(feat, EMBEDDING_DIM, 1, bias=False) if EMBEDDING_DIM > 0], [BN with frozen
#    bias if WITH_BNNECK]) → classifier ``heads.weight`` [K, d] (v1.x; ``heads.classifier.
#    weight`` before); in eval mode the head returns the bottleneck output (after BN).
#  * fastreid/layers/pooling.py — GeneralizedMeanPooling: clamp(min 1e-6)^p → average →
#    ^(1/p), p = 3 fixed; GeneralizedMeanPoolingP: the same with p an ``nn.Parameter``
#    (``heads.pool_layer.p`` [1]).
#  * fastreid/modeling/backbones/resnet.py — ResNet stem max-pool 3×3 stride 2 padding 0,
#    ceil_mode; IBN (``bn1.IN``/``bn1.BN``) in layer1–layer3 only; non-local blocks
#    ``NL_1 … NL_4`` after the last [0, 2, 3, 0] blocks of layer1–layer4 for R50.
#  * fastreid/layers/non_local.py — Non_local: 1×1 convs ``g``, ``theta``, ``phi`` (with
#    bias, C → 1 channel), f = θᵀφ / N, y = f g, z = ``W``(y) + x, W = (1×1 conv, BN).
#  * configs/Base-bagtricks.yml (BoT: GlobalAvgPool, BNNeck, 256×128), Base-AGW.yml (AGW:
#    + WITH_NL, GeneralizedMeanPooling), Base-SBS.yml (SBS: + WITH_NL,
#    GeneralizedMeanPoolingP, CircleSoftmax scale 64, 384×128).
#  * fastreid/utils/checkpoint.py — files are {"model": state_dict, "optimizer", "scheduler",
#    "iteration", …}, ``module.`` stripped on load.
# torchreid (KaiyangZhou/deep-person-reid):
#  * torchreid/models/resnet.py — resnet50: last_stride 2, no fc, ``classifier`` Linear(2048,
#    K) with bias, eval output = global average pool (2048); resnet50_fc512: last_stride 1,
#    ``fc`` = (Linear(2048, 512), BatchNorm1d, ReLU), eval output = fc output.
#  * torchreid/models/osnet.py — ``conv1`` … ``conv5`` trunk, global pool, ``fc`` =
#    (Linear(C5, 512), BatchNorm1d, ReLU), ``classifier`` Linear(512, K) with bias; eval
#    output = fc output; channels [64, 256, 384, 512] (x1_0) / [16, 64, 96, 128] (x0_25);
#    osnet_ibn_x1_0 = x1_0 with InstanceNorm (affine, no running stats) in conv1 and conv2.
#  * torchreid/data/transforms.py — test transform Resize((h, w)) (bilinear), ImageNet
#    mean/std; default 256×128.
#  * torchreid/utils/torchtools.py — files are {"state_dict": …, "epoch", "rank1",
#    "optimizer", …}, keys ``module.``-prefixed when trained under DataParallel.
# reid-strong-baseline (michuanhaohao/reid-strong-baseline):
#  * modeling/baseline.py — ``base`` trunk (last stride 1), gap, ``bottleneck``
#    BatchNorm1d(2048) with frozen bias, ``classifier`` Linear(2048, K, bias=False); with
#    neck 'no' no bottleneck and a classifier with bias; eval returns the feature after BN
#    (TEST.NECK_FEAT 'after') or the pooled one ('before').
#  * modeling/backbones/resnet.py — torchvision-style stem (max-pool padding 1);
#    resnet_ibn_a.py — IBN (``bn1.IN``/``bn1.BN``) in layer1–layer3.
#  * config/defaults.py, data/transforms/build.py — ImageNet mean/std, Resize(SIZE_TEST)
#    (bilinear); configs/*.yml test at 256×128.
# layumi (layumi/Person_reID_baseline_pytorch):
#  * model.py — ft_net: ``model`` = torchvision resnet50 (its unused ImageNet ``model.fc``
#    stays in the state dict), stride 2 by default (1 with --stride 1), ``classifier`` =
#    ClassBlock: ``add_block`` = (Linear(2048, 512), BatchNorm1d(512), Dropout) and
#    ``classifier.classifier.0`` Linear(512, K) with bias; --linear_num 0 drops the Linear.
#  * test.py — the classifier is removed, so the test feature is the add_block output,
#    L2-normalised and compared by dot product (cosine); Resize((256, 128),
#    interpolation=3 = bicubic), ImageNet mean/std.
#  * utils.py save_network — files are plain state dicts (net_last.pth).
# ---------------------------------------------------------------------------------------
_FASTREID = dict(toolkit="fast-reid", stem_pool="fastreid", last_stride=1, neck=True,
                 classifier="linear", family="bot", interpolation="bicubic")
_RSB = dict(toolkit="reid-strong-baseline", last_stride=1, neck=True, classifier="linear",
            family="bot")
_TORCHREID = dict(toolkit="torchreid", classifier="linear", classifier_bias=True)
_LAYUMI = dict(toolkit="layumi", last_stride=2, embed="linear", embed_dim=512,
               embed_bias=True, neck=True, classifier="linear", classifier_bias=True,
               family="embed", metric="cosine", interpolation="bicubic")
_NL = {"layer2": 2, "layer3": 3}

RECIPES: dict[str, dict[str, Any]] = {}
_TRUNKS = (("resnet50", "", " R50"), ("resnet50_ibn_a", "-ibn", " R50-ibn"))
for _trunk, _sfx, _t in _TRUNKS:
    RECIPES[f"fastreid-bot-r50{_sfx}"] = dict(_FASTREID, title=f"fast-reid BoT{_t}",
                                              backbone=_trunk)
    RECIPES[f"fastreid-agw-r50{_sfx}"] = dict(_FASTREID, title=f"fast-reid AGW{_t}",
                                              backbone=_trunk, nonlocal_blocks=_NL, pool="gem")
    RECIPES[f"fastreid-sbs-r50{_sfx}"] = dict(_FASTREID, title=f"fast-reid SBS{_t}",
                                              backbone=_trunk, nonlocal_blocks=_NL,
                                              pool="gem-p", classifier="cosine",
                                              cosine_scale=64.0, input_size=(384, 128))
for _trunk, _sfx, _t in _TRUNKS:
    RECIPES[f"rsb-r50{_sfx}"] = dict(_RSB, title=f"reid-strong-baseline{_t}",
                                     backbone=_trunk)
    RECIPES[f"rsb-r50{_sfx}-before"] = dict(_RSB, title=f"reid-strong-baseline{_t} "
                                            "(test feature before BN)", backbone=_trunk,
                                            family="bot-before")
for _trunk, _sfx, _t in _TRUNKS:
    for _stride in (2, 1):
        RECIPES[f"layumi-ft_net{_sfx}" + ("-stride1" if _stride == 1 else "")] = dict(
            _LAYUMI, title=f"layumi ft_net{_t}" + (" stride 1" if _stride == 1 else ""),
            backbone=_trunk, last_stride=_stride)
RECIPES["torchreid-resnet50"] = dict(_TORCHREID, title="torchreid resnet50", last_stride=2)
RECIPES["torchreid-resnet50_fc512"] = dict(_TORCHREID, title="torchreid resnet50_fc512",
                                           last_stride=1, embed="linear", embed_dim=512,
                                           embed_bias=True, neck=True, relu=True,
                                           family="embed")
for _osnet in ("osnet_x1_0", "osnet_x0_25", "osnet_ibn_x1_0"):
    RECIPES[f"torchreid-{_osnet}"] = dict(_TORCHREID, title=f"torchreid {_osnet}",
                                          backbone=_osnet, embed="linear", embed_dim=512,
                                          embed_bias=True, neck=True, relu=True,
                                          family="embed")

ARCH_NAMES = tuple(RECIPES)
#: conv1 width of torchreid's OSNets (torchreid/models/osnet.py channels[0])
_OSNET_WIDTH = {64: "osnet_x1_0", 16: "osnet_x0_25"}


def strip_module(state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Keys without DataParallel's leading ``module.`` (torchreid / fast-reid files)."""
    out = {}
    for key, value in state.items():
        while key.startswith("module."):
            key = key[len("module."):]
        out.setdefault(key, value)
    return out


def _has_prefix(keys, prefix: str) -> bool:
    return any(k.startswith(prefix) for k in keys)


def recognise(state: Mapping[str, torch.Tensor]) -> str | None:
    """The :data:`ARCH_NAMES` entry that the keys and shapes of ``state`` (``module.``
    stripped) match, else None."""
    keys = set(state)
    if _has_prefix(keys, "backbone.") and _has_prefix(keys, "heads."):
        return _fastreid_name(keys)
    if _has_prefix(keys, "base.") and ("classifier.weight" in keys
                                       or "bottleneck.weight" in keys):
        return "rsb-r50" + ("-ibn" if "base.layer1.0.bn1.IN.weight" in keys else "")
    if _has_prefix(keys, "classifier.add_block.") and _has_prefix(keys, "model."):
        return "layumi-ft_net" + ("-ibn" if "model.layer1.0.bn1.IN.weight" in keys else "")
    if "conv1.conv.weight" in keys and _has_prefix(keys, "conv5."):
        return _osnet_name(state, keys)
    if "conv1.weight" in keys and "layer4.0.conv3.weight" in keys and (
            "classifier.weight" in keys or "fc.0.weight" in keys):
        return "torchreid-resnet50_fc512" if "fc.0.weight" in keys else "torchreid-resnet50"
    return None


def _fastreid_name(keys: set[str]) -> str:
    """fast-reid's recipe: SBS (learnt GeM p), AGW (non-local blocks) or BoT; IBN or not."""
    ibn = "-ibn" if "backbone.layer1.0.bn1.IN.weight" in keys else ""
    if "heads.pool_layer.p" in keys:
        return f"fastreid-sbs-r50{ibn}"
    return f"fastreid-{'agw' if _has_prefix(keys, 'backbone.NL_') else 'bot'}-r50{ibn}"


def _osnet_name(state: Mapping[str, torch.Tensor], keys: set[str]) -> str | None:
    """torchreid's OSNet of the first conv's width (IBN when it has no running stats)."""
    width = state["conv1.conv.weight"].shape[0]
    name = _OSNET_WIDTH.get(int(width))
    if name == "osnet_x1_0" and "conv1.bn.running_mean" not in keys:
        name = "osnet_ibn_x1_0"                        # InstanceNorm: no running stats
    return f"torchreid-{name}" if name else None


def looks_like_imagenet_resnet(state: Mapping[str, torch.Tensor]) -> bool:
    """A torchvision ImageNet ResNet (``fc.weight`` [1000, C], no re-id head)."""
    fc = state.get("fc.weight")
    return "conv1.weight" in state and fc is not None and fc.ndim == 2 and fc.shape[0] == 1000


def _shape(state, key, dim=None):
    value = state.get(key)
    if value is None:
        return None
    return tuple(value.shape) if dim is None else (value.shape[dim] if value.ndim > dim
                                                   else None)


def build_arch(name: str, state: Mapping[str, torch.Tensor]) -> ForeignArch:
    """The :class:`ForeignArch` of recipe ``name`` with the sizes read from ``state``
    (classifier classes, embedding width, learnt GeM p, fast-reid's saved normalisation).
    Parts the recipe has but ``state`` lacks stay in (they are reported missing)."""
    recipe = dict(RECIPES[name])
    arch = ForeignArch(name=name, **recipe)
    tk = arch.toolkit
    if tk == "fast-reid":
        _fastreid_sizes(arch, state)
    elif tk == "reid-strong-baseline":
        if "bottleneck.weight" not in state and "classifier.bias" in state:   # neck 'no'
            arch.neck, arch.family, arch.classifier_bias = False, "pool5", True
        _classifier(arch, state, "classifier.weight", "classifier.bias")
    elif tk == "torchreid":
        if arch.embed == "linear" and _shape(state, "fc.0.weight") is not None:
            arch.embed_dim = int(state["fc.0.weight"].shape[0])
        _classifier(arch, state, "classifier.weight", "classifier.bias")
    elif tk == "layumi":
        first = state.get("classifier.add_block.0.weight")
        if first is not None and first.ndim == 1:             # --linear_num 0: BN only
            arch.embed, arch.embed_dim, arch.embed_bias = "none", 0, False
        elif first is not None:
            arch.embed_dim = int(first.shape[0])
        _classifier(arch, state, "classifier.classifier.0.weight",
                    "classifier.classifier.0.bias")
    return arch


def _classifier(arch: ForeignArch, state, weight: str, bias: str) -> None:
    w = state.get(weight)
    if w is None or w.ndim != 2:
        arch.classifier, arch.num_classes = "none", 0
        return
    arch.num_classes = int(w.shape[0])
    arch.classifier_bias = bias in state


def _fastreid_sizes(arch: ForeignArch, state) -> None:
    _fastreid_head(arch, state)
    _fastreid_extras(arch, state)
    for key in ("heads.weight", "heads.classifier.weight"):
        if key in state and state[key].ndim == 2:
            arch.num_classes = int(state[key].shape[0])
            return
    arch.classifier, arch.num_classes = "none", 0


def _fastreid_head(arch: ForeignArch, state) -> None:
    """fast-reid's embedding conv (EMBEDDING_DIM > 0) and BN neck (WITH_BNNECK) or not."""
    first = state.get("heads.bottleneck.0.weight")
    if first is not None and first.ndim == 4:                  # EMBEDDING_DIM > 0
        arch.embed, arch.embed_dim = "conv", int(first.shape[0])
    bn_key = f"heads.bottleneck.{1 if arch.embed != 'none' else 0}.running_mean"
    if bn_key not in state and any(k.startswith("heads.") for k in state):
        # WITH_BNNECK False: the eval output is the pooled (or embedded) feature
        arch.neck, arch.family = False, "embed" if arch.embed != "none" else "pool5"


def _fastreid_extras(arch: ForeignArch, state) -> None:
    """fast-reid's learnt GeM p, non-local width and saved pixel normalisation."""
    p = state.get("heads.pool_layer.p")
    if p is not None and arch.pool == "gem-p" and p.numel() == 1:
        arch.gem_p = float(p.reshape(-1)[0])
    nl = state.get("backbone.NL_2.0.g.weight")
    if nl is not None and nl.ndim == 4:
        arch.nonlocal_channels = int(nl.shape[0])
    mean, std = state.get("pixel_mean"), state.get("pixel_std")
    if mean is not None and std is not None and mean.numel() == 3 and std.numel() == 3:
        arch.mean = tuple(float(v) / 255.0 for v in mean.reshape(-1))
        arch.std = tuple(float(v) / 255.0 for v in std.reshape(-1))


#: keys a toolkit saves that the model does not need (read or knowingly dropped)
def known_extra(arch: ForeignArch, key: str) -> bool:
    """fast-reid's ``pixel_mean``/``pixel_std`` (read into the normalisation) and layumi's
    unused ImageNet ``model.fc`` (ft_net never calls it)."""
    if arch.toolkit == "fast-reid":
        return key in ("pixel_mean", "pixel_std")
    if arch.toolkit == "layumi":
        return key.startswith("model.fc.")
    return False


def key_prefixes(arch: ForeignArch) -> list[tuple[str, str]]:
    """(foreign prefix, :class:`~reidcli.models.foreign.ForeignModel` prefix) pairs of
    ``arch``'s toolkit, first match wins; a pair without a trailing dot is one exact key."""
    tk = arch.toolkit
    embed = arch.embed != "none"
    if tk == "fast-reid":
        bottleneck = [("heads.bottleneck.0.", "embed."), ("heads.bottleneck.1.", "neck.")] \
            if embed else [("heads.bottleneck.0.", "neck.")]
        return [("backbone.", "backbone."), ("heads.pool_layer.p", "pool.p"),
                ("heads.weight", "classifier.weight"),
                ("heads.classifier.weight", "classifier.weight"), *bottleneck]
    if tk == "reid-strong-baseline":
        return [("base.", "backbone."), ("bottleneck.", "neck."), ("classifier.", "classifier.")]
    if tk == "layumi":
        block = [("classifier.add_block.0.", "embed."), ("classifier.add_block.1.", "neck.")] \
            if embed else [("classifier.add_block.0.", "neck.")]
        return [("model.", "backbone."), *block, ("classifier.classifier.0.", "classifier.")]
    # torchreid: the trunk's keys at the top level, fc = (Linear, BatchNorm1d, ReLU)
    return [("fc.0.", "embed."), ("fc.1.", "neck."), ("classifier.", "classifier."),
            ("", "backbone.")]


def _match(key: str, prefix: str) -> bool:
    return key.startswith(prefix) if prefix.endswith(".") or not prefix else key == prefix


def own_key(arch: ForeignArch, key: str) -> str | None:
    """The :class:`~reidcli.models.foreign.ForeignModel` name of the foreign ``key`` (None
    when no rule of the toolkit covers it)."""
    for theirs, ours in key_prefixes(arch):
        if _match(key, theirs):
            return ours + key[len(theirs):]
    return None


def foreign_key(arch: ForeignArch, own: str) -> str:
    """The toolkit's name of the model key ``own`` (the inverse of :func:`own_key`)."""
    for theirs, ours in key_prefixes(arch):
        if _match(own, ours):
            return theirs + own[len(ours):]
    return own


def arch_choices() -> str:
    return ", ".join(ARCH_NAMES)


def check_arch_name(name: str) -> str:
    """``name`` if it is a recipe (case-insensitive), else :class:`ParameterError`."""
    canon = str(name).strip().lower()
    if canon not in RECIPES:
        raise ParameterError("model", "arch", name, "is not a known architecture",
                             f"use one of {arch_choices()}")
    return canon


__all__ = ["ForeignArch", "RECIPES", "ARCH_NAMES", "FAMILY_FEATURES", "recognise",
           "build_arch", "own_key", "foreign_key", "key_prefixes", "known_extra",
           "strip_module", "check_arch_name",
           "looks_like_imagenet_resnet", "arch_choices", "IMAGENET_MEAN", "IMAGENET_STD"]
