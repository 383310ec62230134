"""Shapes, last stride, stripes, initialisation of the ResNet trunks, PCB, RPP and BoT
(docs/methods/pcb.md P1–P4, P11; the DMGNET paper)."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from reidcli.errors import UsageError
from reidcli.evaluation.distances import normalize_features
from reidcli.models.backbones import build_backbone
from reidcli.models.bot import BoT, bot_features
from reidcli.models.pcb import PCB, pcb_features


@pytest.fixture(scope="module")
def resnet50_pcb_output():
    torch.manual_seed(0)
    model = PCB(build_backbone("resnet50"), num_classes=7).eval()
    x = torch.randn(2, 3, 384, 128)
    with torch.no_grad():
        out = model(x, ("conv2_x", "conv3_x", "conv4_x", "conv5_x"))
    return model, out


def test_resnet50_pcb_shapes_and_taps(resnet50_pcb_output):
    model, out = resnet50_pcb_output
    assert out.t.shape == (2, 2048, 24, 8)                               # P1
    assert out.g.shape == (2, 6, 2048) and out.h.shape == (2, 6, 256)
    assert len(out.logits) == 6 and all(z.shape == (2, 7) for z in out.logits)
    assert {k: tuple(v.shape[1:]) for k, v in out.taps.items()} == {
        "conv2_x": (256, 96, 32), "conv3_x": (512, 48, 16), "conv4_x": (1024, 24, 8),
        "conv5_x": (2048, 24, 8)}
    assert torch.equal(out.taps["conv5_x"], out.t)


def test_last_stride_is_one_and_configurable():
    trunk = build_backbone("resnet50", last_stride=1)
    assert trunk.layer4[0].conv2.stride == (1, 1)                       # P2
    assert trunk.layer4[0].downsample[0].stride == (1, 1)
    assert build_backbone("resnet50", last_stride=2).layer4[0].conv2.stride == (2, 2)
    with torch.no_grad():
        t, taps = build_backbone("resnet18", 1).eval()(torch.randn(1, 3, 64, 32), ["conv4_x"])
    assert t.shape[2:] == taps["conv4_x"].shape[2:] == (4, 2)
    with pytest.raises(UsageError, match="backbone='vgg16' is unknown"):
        build_backbone("vgg16")


def test_stripes_are_row_band_means(resnet50_pcb_output):
    _, out = resnet50_pcb_output
    for i in range(6):                                                   # P3
        manual = out.t[:, :, 4 * i:4 * i + 4, :].mean(dim=(2, 3))
        torch.testing.assert_close(out.g[:, i], manual, atol=1e-5, rtol=1e-5)


def test_shared_reduction_and_classifier_init():
    torch.manual_seed(1)
    model = PCB(build_backbone("resnet50"), num_classes=751)
    convs = [m for name, m in model.named_modules() if isinstance(m, torch.nn.Conv2d)
             and not name.startswith("backbone")]
    assert len(convs) == 1 and convs[0].weight.shape == (256, 2048, 1, 1)  # P4
    assert convs[0].bias is None and model.local_bn.num_features == 256
    assert len({id(fc) for fc in model.classifiers}) == 6
    weights = torch.stack([fc.weight.detach() for fc in model.classifiers])
    assert 0.0008 < float(weights.std()) < 0.0012
    assert all(float(fc.bias.abs().max()) == 0.0 for fc in model.classifiers)


def test_pcb_features_part_major_and_parts_normalisation():
    torch.manual_seed(2)
    model = PCB(build_backbone("tiny"), num_classes=3).eval()
    with torch.no_grad():
        out = model(torch.rand(3, 3, 96, 32))
    feats = pcb_features(out)
    assert feats["pcb_g"].shape == (3, 6 * 128) and feats["pcb_h"].shape == (3, 6 * 256)
    torch.testing.assert_close(feats["pcb_g"].view(3, 6, 128), out.g)
    normed = normalize_features(feats["pcb_g"].numpy(), "parts", 6)
    manual = torch.cat([F.normalize(out.g[:, i], dim=1) for i in range(6)], dim=1)
    torch.testing.assert_close(torch.from_numpy(normed), manual, atol=1e-6, rtol=1e-5)


def test_dropout_inactive_in_eval_mode():
    torch.manual_seed(3)
    model = PCB(build_backbone("tiny"), num_classes=3).eval()
    x = torch.rand(2, 3, 96, 32)
    with torch.no_grad():
        a, b = model(x), model(x)                                        # P8
    assert torch.equal(a.h, b.h) and torch.equal(a.g, b.g)


def test_rpp_uniform_assignment_reduces_to_the_scaled_mean():
    torch.manual_seed(4)
    model = PCB(build_backbone("tiny"), num_classes=3, rpp=True).eval()
    torch.nn.init.zeros_(model.rpp.classifier.weight)                    # P(P_i|f) = 1/6
    with torch.no_grad():
        out = model(torch.rand(2, 3, 96, 32))
    s = out.t.shape[2] * out.t.shape[3]
    expected = (6 / s) * out.t.sum(dim=(2, 3)) / 6                       # g_i = (p/S)Σ f/p
    for i in range(6):
        torch.testing.assert_close(out.g[:, i], expected, atol=1e-5, rtol=1e-5)


def test_bot_bnneck():
    torch.manual_seed(5)
    model = BoT(build_backbone("resnet18"), num_classes=10)
    assert not model.bottleneck.bias.requires_grad
    assert float(model.bottleneck.weight.min()) == 1.0
    assert model.classifier.bias is None
    out = model(torch.rand(4, 3, 256, 128))
    assert out.pool5.shape == out.bnneck.shape == (4, 512) and out.logits.shape == (4, 10)
    assert out.t.shape == (4, 512, 16, 8)                                 # last stride 1
    feats = bot_features(out)
    assert set(feats) == {"bnneck", "pool5"}
    assert 0.0008 < float(model.classifier.weight.detach().std()) < 0.0012
