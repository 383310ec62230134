"""Foreign checkpoints as first-class models (issue 31): state dicts generated here with the
toolkits' exact key names and shapes (docs/models.md) are recognised, mapped and give the
same features as the model written out by hand in Python."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from reidcli.models.backbones import build_backbone
from reidcli.models.checkpoint import load_model
from reidcli.models.foreign_arch import RECIPES, recognise


def shapes(trunk: str) -> dict:
    """The state dict of a reidcli trunk (the toolkits' module names) on the meta device:
    names, shapes and dtypes only, nothing initialised."""
    with torch.device("meta"):
        return build_backbone(trunk).state_dict()


def randomise(state: dict, seed: int = 0) -> dict:
    """Random values (BN variances positive, step counters 7) for every tensor."""
    g = torch.Generator().manual_seed(seed)
    out = {}
    for key, value in state.items():
        if not value.is_floating_point():
            out[key] = torch.full(value.shape, 7, dtype=value.dtype)
        elif key.endswith("running_var"):
            out[key] = torch.rand(value.shape, generator=g) + 0.5
        elif key.endswith("weight") and value.ndim == 1:            # BN / IN γ
            out[key] = 1 + 0.1 * torch.randn(value.shape, generator=g)
        elif value.ndim >= 2:                                       # conv / linear: He scale
            fan_in = value[0].numel()
            out[key] = torch.randn(value.shape, generator=g) * (1.0 / fan_in) ** 0.5
        else:
            out[key] = 0.1 * torch.randn(value.shape, generator=g)
    return out


def bn(prefix: str, c: int, seed: int) -> dict:
    """BatchNorm keys ``prefix{weight,bias,running_mean,running_var,num_batches_tracked}``."""
    return randomise({f"{prefix}weight": torch.ones(c), f"{prefix}bias": torch.zeros(c),
                      f"{prefix}running_mean": torch.zeros(c),
                      f"{prefix}running_var": torch.ones(c),
                      f"{prefix}num_batches_tracked": torch.tensor(7)}, seed)


def nonlocal_keys(prefix: str, c: int, seed: int) -> dict:
    """fast-reid Non_local: g/theta/phi Conv2d(C, 1, 1) with bias, W = (Conv2d(1, C), BN)."""
    keys = {}
    for name in ("g", "theta", "phi"):
        keys[f"{prefix}{name}.weight"] = torch.zeros(1, c, 1, 1)
        keys[f"{prefix}{name}.bias"] = torch.zeros(1)
    keys[f"{prefix}W.0.weight"] = torch.zeros(c, 1, 1, 1)
    keys[f"{prefix}W.0.bias"] = torch.zeros(c)
    return {**randomise(keys, seed), **bn(f"{prefix}W.1.", c, seed + 1)}


@pytest.fixture(scope="module")
def trunks():
    """Randomised trunk state dicts (reidcli trunks use the toolkits' module names)."""
    return {name: randomise(shapes(name), i)
            for i, name in enumerate(("resnet50", "resnet50_ibn_a", "osnet_x0_25",
                                      "osnet_x1_0", "osnet_ibn_x1_0"))}


def fastreid_state(trunks, ibn=False, nl=False, gem_p=None, classes=5, pixel=False, embed=0):
    """fast-reid Baseline state dict: ``backbone.*``, ``heads.pool_layer.p``,
    ``heads.bottleneck.0.*`` (BNNeck), ``heads.weight`` [K, 2048]; before v1.0 also
    ``pixel_mean``/``pixel_std`` [1, 3, 1, 1] in 0–255 units. ``embed`` > 0: EMBEDDING_DIM,
    ``heads.bottleneck.0.weight`` [d, 2048, 1, 1] (1×1 conv) and the BN at ``.1``."""
    sd = {f"backbone.{k}": v for k, v in trunks["resnet50_ibn_a" if ibn else "resnet50"].items()}
    if nl:
        for stage, c, n in ((2, 512, 2), (3, 1024, 3)):
            for i in range(n):
                sd.update(nonlocal_keys(f"backbone.NL_{stage}.{i}.", c, 10 * stage + i))
    if gem_p is not None:
        sd["heads.pool_layer.p"] = torch.tensor([gem_p])
    if embed:
        sd["heads.bottleneck.0.weight"] = torch.randn(embed, 2048, 1, 1) / 2048 ** 0.5
    sd.update(bn(f"heads.bottleneck.{int(bool(embed))}.", embed or 2048, 3))
    sd["heads.weight"] = 0.1 * torch.randn(classes, embed or 2048)
    if pixel:
        sd["pixel_mean"] = torch.tensor([120.0, 110.0, 100.0]).view(1, 3, 1, 1)
        sd["pixel_std"] = torch.tensor([60.0, 55.0, 50.0]).view(1, 3, 1, 1)
    return sd


def torchreid_state(trunks, trunk="resnet50", fc=None, classes=5):
    """torchreid state dict (``module.`` from DataParallel): trunk keys at the top level,
    ``fc.0`` Linear(C5, 512) + ``fc.1`` BatchNorm1d, ``classifier`` Linear with bias."""
    sd = dict(trunks[trunk])
    width = 2048 if trunk.startswith("resnet") else {"osnet_x0_25": 128}.get(trunk, 512)
    if fc:
        sd["fc.0.weight"] = 0.05 * torch.randn(fc, width)
        sd["fc.0.bias"] = 0.1 * torch.randn(fc)
        sd.update(bn("fc.1.", fc, 4))
    sd["classifier.weight"] = 0.1 * torch.randn(classes, fc or width)
    sd["classifier.bias"] = 0.1 * torch.randn(classes)
    return {f"module.{k}": v for k, v in sd.items()}


def rsb_state(trunks, ibn=False, classes=5):
    """reid-strong-baseline: ``base.*``, ``bottleneck`` BatchNorm1d(2048),
    ``classifier.weight`` [K, 2048] (no bias)."""
    sd = {f"base.{k}": v for k, v in trunks["resnet50_ibn_a" if ibn else "resnet50"].items()}
    sd.update(bn("bottleneck.", 2048, 5))
    sd["classifier.weight"] = 0.1 * torch.randn(classes, 2048)
    return sd


def layumi_state(trunks, ibn=False, classes=5):
    """layumi ft_net: ``model.*`` (with torchvision's unused ``model.fc`` [1000, 2048]),
    ``classifier.add_block.0`` Linear(2048, 512), ``.1`` BatchNorm1d(512),
    ``classifier.classifier.0`` Linear(512, K)."""
    sd = {f"model.{k}": v for k, v in trunks["resnet50_ibn_a" if ibn else "resnet50"].items()}
    sd["model.fc.weight"], sd["model.fc.bias"] = torch.zeros(1000, 2048), torch.zeros(1000)
    sd["classifier.add_block.0.weight"] = 0.05 * torch.randn(512, 2048)
    sd["classifier.add_block.0.bias"] = 0.1 * torch.randn(512)
    sd.update(bn("classifier.add_block.1.", 512, 6))
    sd["classifier.classifier.0.weight"] = 0.1 * torch.randn(classes, 512)
    sd["classifier.classifier.0.bias"] = torch.zeros(classes)
    return sd


def test_generated_dicts_carry_the_toolkits_key_names(trunks):
    fr = fastreid_state(trunks, ibn=True, nl=True, gem_p=3.5)
    for key, shape in (("backbone.layer1.0.bn1.IN.weight", (32,)),
                       ("backbone.layer3.5.bn1.BN.running_var", (128,)),
                       ("backbone.NL_3.2.W.0.weight", (1024, 1, 1, 1)),
                       ("heads.bottleneck.0.running_mean", (2048,)), ("heads.weight", (5, 2048)),
                       ("heads.pool_layer.p", (1,))):
        assert tuple(fr[key].shape) == shape, key
    assert "backbone.layer4.0.bn1.IN.weight" not in fr             # IBN-a: conv2_x–conv4_x
    assert len([k for k in fr if k.startswith("backbone.")]) == 318 + 2 * 13 + 13 * 5
    assert len(trunks["resnet50"]) == 318                           # the 318 tensors
    tr = torchreid_state(trunks, "osnet_x1_0", fc=512)
    for key in ("module.conv1.conv.weight", "module.conv2.0.conv2b.1.conv1.weight",
                "module.conv2.0.gate.fc1.bias", "module.conv5.bn.running_var",
                "module.fc.0.weight", "module.classifier.bias"):
        assert key in tr, key
    assert "conv2.0.IN.weight" in trunks["osnet_ibn_x1_0"]
    assert "conv1.bn.running_mean" not in trunks["osnet_ibn_x1_0"]


@pytest.mark.parametrize("name, make", [
    ("fastreid-bot-r50", lambda t: fastreid_state(t)),
    ("fastreid-bot-r50-ibn", lambda t: fastreid_state(t, ibn=True)),
    ("fastreid-agw-r50", lambda t: fastreid_state(t, nl=True)),
    ("fastreid-sbs-r50-ibn", lambda t: fastreid_state(t, ibn=True, nl=True, gem_p=3.0)),
    ("rsb-r50", lambda t: rsb_state(t)),
    ("rsb-r50-ibn", lambda t: rsb_state(t, ibn=True)),
    ("torchreid-resnet50", lambda t: torchreid_state(t)),
    ("torchreid-resnet50_fc512", lambda t: torchreid_state(t, fc=512)),
    ("torchreid-osnet_x1_0", lambda t: torchreid_state(t, "osnet_x1_0", fc=512)),
    ("torchreid-osnet_x0_25", lambda t: torchreid_state(t, "osnet_x0_25", fc=512)),
    ("torchreid-osnet_ibn_x1_0", lambda t: torchreid_state(t, "osnet_ibn_x1_0", fc=512)),
    ("layumi-ft_net", lambda t: layumi_state(t)),
    ("layumi-ft_net-ibn", lambda t: layumi_state(t, ibn=True)),
])
def test_recognised_from_keys_and_shapes(trunks, name, make):
    from reidcli.models.foreign_arch import strip_module

    assert recognise(strip_module(make(trunks))) == name
    assert name in RECIPES


# --- the same model written out by hand -------------------------------------------------

def _stem_and_stages(trunk_name, state, prefix, last_stride, fastreid_stem):
    with torch.device("meta"):
        ref = build_backbone(trunk_name, last_stride)
    ref.load_state_dict({k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)
                         and not k[len(prefix):].startswith(("fc.", "NL_", "classifier."))},
                        assign=True)
    if fastreid_stem:
        ref.maxpool = nn.MaxPool2d(3, 2, padding=0, ceil_mode=True)
    return ref.eval()


def _bn(x, state, p):
    return F.batch_norm(x, state[p + "running_mean"], state[p + "running_var"],
                        state[p + "weight"], state[p + "bias"], False, 0.0, 1e-5)


def _nonlocal(x, state, p):
    n, c, h, w = x.shape
    conv = lambda name, y: F.conv2d(y, state[p + name + ".weight"], state[p + name + ".bias"])
    t, ph, g = (conv(k, x).flatten(2) for k in ("theta", "phi", "g"))
    y = torch.bmm(torch.bmm(t.transpose(1, 2), ph) / (h * w), g.transpose(1, 2))
    y = y.transpose(1, 2).reshape(n, 1, h, w)
    return x + _bn(conv("W.0", y), state, p + "W.1.")


def reference_resnet(x, ref, state, prefix="backbone.", nl=False):
    """conv5_x of a ResNet trunk with fast-reid's non-local blocks after layer2[2, 3] and
    layer3[3, 4, 5] when ``nl``."""
    x = ref.maxpool(ref.relu(ref.bn1(ref.conv1(x))))
    for stage, layer in enumerate((ref.layer1, ref.layer2, ref.layer3, ref.layer4), 1):
        count = {2: 2, 3: 3}.get(stage, 0) if nl else 0
        for i, block in enumerate(layer):
            x = block(x)
            j = i - (len(layer) - count)
            if j >= 0:
                x = _nonlocal(x, state, f"{prefix}NL_{stage}.{j}.")
    return x


def _features(path, x, **kw):
    loaded = load_model(path, **kw)
    with torch.no_grad():
        return loaded, loaded.features(x)


def test_fastreid_sbs_r50_ibn_matches_the_hand_written_model(trunks, tmp_path):
    """Non-local blocks, learnt GeM p, BNNeck test feature, cosine logits, pixel mean/std."""
    sd = fastreid_state(trunks, ibn=True, nl=True, gem_p=3.5, pixel=True)
    # random residual stacks grow activations by orders of magnitude per block, and GeM's
    # x^3.5 then overflows float32: damp each block's last BN (as zero-init-residual does)
    sd = {k: v * 0.2 if k.endswith("bn3.weight") else v for k, v in sd.items()}
    path = tmp_path / "model_final.pth"
    torch.save({"model": sd, "optimizer": {}, "iteration": 100}, path)
    x = torch.randn(2, 3, 64, 32, generator=torch.Generator().manual_seed(3))
    loaded, got = _features(path, x)
    assert loaded.spec.foreign["name"] == "fastreid-sbs-r50-ibn"
    assert loaded.input_size == (384, 128)
    np.testing.assert_allclose(loaded.spec.foreign["mean"], [120 / 255, 110 / 255, 100 / 255])
    ref = _stem_and_stages("resnet50_ibn_a", sd, "backbone.", 1, True)
    with torch.no_grad():
        t = reference_resnet(x, ref, sd, nl=True)
        pool = t.clamp(min=1e-6).pow(3.5).mean((2, 3)).pow(1 / 3.5)
        neck = _bn(pool, sd, "heads.bottleneck.0.")
        logits = 64 * F.normalize(neck) @ F.normalize(sd["heads.weight"]).T
    assert torch.isfinite(pool).all() and torch.isfinite(neck).all()
    assert (got["pool5"] - pool).abs().max() <= 1e-5 * max(1.0, pool.abs().max())
    assert (got["bnneck"] - neck).abs().max() <= 1e-5 * max(1.0, neck.abs().max())
    with torch.no_grad():
        assert torch.allclose(loaded.logits(x)[0], logits, atol=1e-4)


@pytest.mark.parametrize("kind", ["torchreid-resnet50_fc512", "layumi-ft_net", "rsb-before",
                                  "fastreid-embedding"])
def test_resnet_heads_match_the_hand_written_model(trunks, tmp_path, kind):
    x = torch.randn(2, 3, 64, 32)
    if kind == "torchreid-resnet50_fc512":
        sd, prefix, stride, arch = torchreid_state(trunks, fc=512), "module.", 1, None
    elif kind == "layumi-ft_net":
        sd, prefix, stride, arch = layumi_state(trunks), "model.", 2, None
    elif kind == "rsb-before":
        sd, prefix, stride, arch = rsb_state(trunks), "base.", 1, "rsb-r50-before"
    else:
        sd, prefix, stride, arch = fastreid_state(trunks, embed=256), "backbone.", 1, None
    path = tmp_path / "net.pth"
    torch.save({"state_dict": sd, "epoch": 3} if prefix == "module." else sd, path)
    loaded, got = _features(path, x, arch=arch)
    ref = _stem_and_stages("resnet50", sd, prefix, stride, kind == "fastreid-embedding")
    with torch.no_grad():
        pool = reference_resnet(x, ref, sd, prefix).mean((2, 3))
        if kind == "torchreid-resnet50_fc512":
            s = {k[len("module."):]: v for k, v in sd.items()}
            want = {"embed": F.relu(_bn(F.linear(pool, s["fc.0.weight"], s["fc.0.bias"]),
                                        s, "fc.1."))}
        elif kind == "layumi-ft_net":
            lin = F.linear(pool, sd["classifier.add_block.0.weight"],
                           sd["classifier.add_block.0.bias"])
            want = {"embed": _bn(lin, sd, "classifier.add_block.1.")}
        elif kind == "rsb-before":
            want = {"bnneck": _bn(pool, sd, "bottleneck.")}
        else:                                       # 1×1 conv on [N, C, 1, 1] = linear
            conv = F.linear(pool, sd["heads.bottleneck.0.weight"].flatten(1))
            want = {"bnneck": _bn(conv, sd, "heads.bottleneck.1.")}
    want["pool5"] = pool
    assert loaded.feature_names[0] == ("pool5" if arch else next(iter(want)))
    for name, value in want.items():
        assert (got[name] - value).abs().max() <= 1e-5 * max(1.0, value.abs().max()), name
    metric = "cosine" if kind == "layumi-ft_net" else "euclidean"
    from reidcli.models.checkpoint import feature_metric
    assert feature_metric(loaded.spec, loaded.feature_names[0]) == metric


def test_adapted_foreign_model_saves_and_reloads_as_a_reidcli_model(trunks, tmp_path):
    from reidcli.models.checkpoint import save_model

    path = tmp_path / "osnet.pth"
    torch.save({"state_dict": torchreid_state(trunks, "osnet_x0_25", fc=512)}, path)
    loaded = load_model(path)
    save_model(tmp_path / "model.pt", loaded.module, loaded.spec, meta=loaded.meta)
    again = load_model(tmp_path / "model.pt")
    x = torch.randn(2, 3, 64, 32)
    with torch.no_grad():
        assert torch.equal(loaded.features(x)["embed"], again.features(x)["embed"])
    assert again.kind == "foreign" and again.feature_names == ["embed", "pool5"]
    from reidcli.adapt.base import BackboneRunner         # reid adapt --model re-runs it

    feats, logits = BackboneRunner(again, "embed", "batch").forward(x)
    assert feats.shape == (2, 512) and logits[0].shape == (2, 5)


def test_sizes_and_options_read_from_the_shapes(trunks):
    from reidcli.models.foreign_arch import build_arch, strip_module

    sd = {k: v for k, v in fastreid_state(trunks, classes=7).items()
          if not k.startswith("heads.bottleneck.")}               # WITH_BNNECK False
    arch = build_arch(recognise(sd), sd)
    assert not arch.neck and arch.test_feature == "pool5" and arch.num_classes == 7
    sd = strip_module(torchreid_state(trunks, "osnet_x0_25", fc=256, classes=3))
    arch = build_arch(recognise(sd), sd)
    assert (arch.embed_dim, arch.num_classes, arch.classifier_bias) == (256, 3, True)
    sd = fastreid_state(trunks, nl=True, gem_p=4.25, pixel=True)
    arch = build_arch(recognise(sd), sd)
    assert arch.gem_p == 4.25 and arch.input_size == (384, 128)
    assert arch.mean == pytest.approx((120 / 255, 110 / 255, 100 / 255))
