"""ResNet-50-IBN-a and OSNet trunks (issue 31): parameter counts, state-dict key names and
shapes equal to the reference implementations', output shapes and taps, IBN semantics,
random init, a forward/backward, ``init`` refusal/loading and a 1-iteration BoT run."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from reidcli.errors import InputFileError, ParameterError, UsageError
from reidcli.models.backbones import BACKBONES, TAP_CHANNELS, TAPS, build_backbone
from reidcli.models.bot import BoT
from reidcli.models.osnet import OSNetHead
from reidcli.models.pcb import PCB
from reidcli.models.resnet_ibn import IBN
from reidcli.models.weights import initialize_trunk, load_trunk_state
from tests.faults.helpers import assert_one_line_error_in_process, reid_in_process

NEW = ("resnet50_ibn_a", "osnet_x1_0", "osnet_x0_25", "osnet_ibn_x1_0")
OSNETS = NEW[1:]

# Key names and shapes of each reference state dict, listed once (not copied code): fast-reid's
# ResNet (depth 50x, WITH_IBN; IBN-Net's resnet50_ibn_a without fc has the same list) and
# torchreid's osnet_x1_0 / osnet_x0_25 / osnet_ibn_x1_0 split into trunk (all but fc.* and
# classifier.*) and head (fc.*). The file's "_source" names the commits.
REFERENCE = json.loads((Path(__file__).parent / "data" / "backbone_reference_keys.json")
                       .read_text())
# Trainable parameters (trunk, head) = sum(p.numel() for p in parameters()) of those same
# reference modules, counted once with the reference code: fast-reid R50-ibn 23,508,032 (=
# ResNet-50 without fc: an affine IN has as many parameters as the BN half it replaces);
# torchreid OSNet x1.0 1,905,828 + fc 263,680 (≈ 2.2M of the OSNet paper's Table 1).
REFERENCE_PARAMS = {"resnet50_ibn_a": (23_508_032, 0), "osnet_x1_0": (1_905_828, 263_680),
                    "osnet_x0_25": (134_792, 67_072), "osnet_ibn_x1_0": (1_906_852, 263_680)}
# keys a reader of foreign checkpoints relies on (after stripping backbone./module. prefixes)
SENTINELS = {
    "resnet50_ibn_a": {"conv1.weight": [64, 3, 7, 7], "layer1.0.bn1.IN.weight": [32],
                       "layer1.0.bn1.BN.running_mean": [32], "layer3.5.bn1.IN.bias": [128],
                       "layer4.0.bn1.running_var": [512],
                       "layer4.0.downsample.1.running_mean": [2048]},
    "osnet_x1_0": {"conv1.conv.weight": [64, 3, 7, 7], "conv1.bn.running_mean": [64],
                   "conv2.0.conv2a.conv1.weight": [64, 64, 1, 1],
                   "conv2.0.conv2d.3.conv2.weight": [64, 1, 3, 3],
                   "conv2.0.gate.fc1.weight": [4, 64, 1, 1],
                   "conv2.0.downsample.conv.weight": [256, 64, 1, 1],
                   "conv2.2.0.conv.weight": [256, 256, 1, 1], "conv5.bn.running_var": [512]},
    "osnet_x0_25": {"conv2.0.conv2b.1.bn.weight": [16], "conv3.2.0.bn.running_var": [96],
                    "conv4.1.conv3.conv.weight": [128, 32, 1, 1]},
    "osnet_ibn_x1_0": {"conv1.bn.weight": [64], "conv2.0.IN.weight": [256],
                       "conv2.1.IN.bias": [256]},
}
ABSENT = {"resnet50_ibn_a": ["layer4.0.bn1.IN.weight", "fc.weight"],
          "osnet_x1_0": ["conv2.0.IN.weight", "fc.0.weight"],
          "osnet_ibn_x1_0": ["conv1.bn.running_mean", "conv3.0.IN.weight"]}


def _shapes(module: torch.nn.Module) -> dict[str, list[int]]:
    return {k: list(v.shape) for k, v in module.state_dict().items()}


def _params(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


@pytest.mark.parametrize("name", NEW)
def test_keys_shapes_and_parameter_counts_equal_the_reference(name):
    with torch.device("meta"):                       # shapes only: no memory, no init cost
        trunk = build_backbone(name)
        head = OSNetHead(trunk.out_channels) if name in OSNETS else None
    ref = REFERENCE[name]
    assert name in BACKBONES and trunk.name == name
    assert _shapes(trunk) == ref["trunk"]            # every key, same shape, nothing extra
    assert _params(trunk) == ref["params"] == REFERENCE_PARAMS[name][0]
    if head is not None:
        assert _shapes(head) == ref["head"]          # fc.0.weight, fc.1.running_mean …
        assert _params(head) == ref["head_params"] == REFERENCE_PARAMS[name][1]
    for key, shape in SENTINELS[name].items():
        assert ref["trunk"][key] == shape and list(trunk.state_dict()[key].shape) == shape
    assert not set(ABSENT.get(name, ())) & set(trunk.state_dict())


@pytest.mark.parametrize("name", NEW)
def test_output_shapes_and_taps_at_256x128_and_384x128(name):
    with torch.device("meta"):
        trunk = build_backbone(name)
        c2, c3, c4, c5 = TAP_CHANNELS[name]
        assert trunk.tap_channels == dict(zip(TAPS, (c2, c3, c4, c5)))
        assert trunk.out_channels == c5
        for h in (256, 384):
            t, taps = trunk(torch.empty(2, 3, h, 128), TAPS)
            assert tuple(t.shape) == (2, c5, h // 16, 8)    # last stride 1 / OSNet's layout
            assert {k: tuple(v.shape) for k, v in taps.items()} == {
                "conv2_x": (2, c2, h // 4, 32), "conv3_x": (2, c3, h // 8, 16),
                "conv4_x": (2, c4, h // 16, 8), "conv5_x": (2, c5, h // 16, 8)}
            assert taps["conv5_x"] is t
        _, only = trunk(torch.empty(1, 3, 64, 32), ["conv3_x"])
        assert list(only) == ["conv3_x"]
    for tap in TAPS:                                 # names the extraction store can record
        trunk.get_submodule(trunk.tap_modules[tap])


def test_osnet_layout_and_last_stride():
    with torch.device("meta"):
        x1 = build_backbone("osnet_x1_0")
        ibn = build_backbone("osnet_ibn_x1_0")
        r50 = build_backbone("resnet50_ibn_a", last_stride=2)
        assert tuple(r50(torch.empty(1, 3, 256, 128))[0].shape) == (1, 2048, 8, 4)
    assert r50.layer4[0].conv2.stride == (2, 2) and r50.layer4[0].downsample[0].stride == (2, 2)
    # OSNet paper Table 1: 2 OS blocks per stage, transitions after conv2 and conv3 only
    assert [len(x1.conv2), len(x1.conv3), len(x1.conv4)] == [3, 3, 2]
    assert isinstance(x1.conv2[2][1], torch.nn.AvgPool2d) and x1.conv2[0].IN is None
    assert isinstance(ibn.conv1.bn, torch.nn.InstanceNorm2d) and ibn.conv3[0].IN is None
    assert all(isinstance(block.IN, torch.nn.InstanceNorm2d) for block in ibn.conv2[:2])
    for name in OSNETS:
        with pytest.raises(ParameterError, match="last_stride=2 has no meaning for osnet"):
            build_backbone(name, last_stride=2)


def test_ibn_splits_channels_into_instance_and_batch_norm():
    torch.manual_seed(0)
    ibn = IBN(8).train()                             # IBN-a: first C/2 IN, last C/2 BN
    assert ibn.half == 4 and ibn.IN.num_features == ibn.BN.num_features == 4
    x = torch.randn(3, 8, 5, 4) * 3 + 2
    y = ibn(x)
    first = y[:, :4].flatten(2)                      # per image and channel: mean 0, var 1
    torch.testing.assert_close(first.mean(-1), torch.zeros(3, 4), atol=1e-5, rtol=0)
    torch.testing.assert_close(first.var(-1, unbiased=False), torch.ones(3, 4), atol=1e-3,
                               rtol=0)
    second = y[:, 4:].transpose(0, 1).flatten(1)     # per channel over the batch
    torch.testing.assert_close(second.mean(-1), torch.zeros(4), atol=1e-5, rtol=0)
    assert float(y[:, 4:].detach().flatten(2).mean(-1).abs().max()) > 0.01   # not per image


@pytest.mark.parametrize("name", ["resnet50_ibn_a", "osnet_ibn_x1_0"])
def test_forward_backward_and_reference_init(name, one_torch_thread):
    torch.manual_seed(0)
    trunk = build_backbone(name).train()
    norms = [m for m in trunk.modules()
             if isinstance(m, (torch.nn.BatchNorm2d, torch.nn.InstanceNorm2d))]
    assert all(bool((m.weight == 1).all() and (m.bias == 0).all()) for m in norms)
    # He init, fan-out: std sqrt(2 / (k·k·C_out)) (IBN-Net, fast-reid and torchreid alike)
    conv = trunk.layer3[0].conv2 if name == "resnet50_ibn_a" else trunk.conv2[2][0].conv
    fan_out = conv.kernel_size[0] * conv.kernel_size[1] * conv.out_channels
    assert abs(float(conv.weight.detach().std()) / (2 / fan_out) ** 0.5 - 1) < 0.05
    t, taps = trunk(torch.randn(2, 3, 64, 32), ["conv2_x"])
    (t.square().mean() + taps["conv2_x"].mean()).backward()
    grads = {n: p.grad for n, p in trunk.named_parameters()}
    assert all(g is not None and bool(torch.isfinite(g).all()) for g in grads.values())
    in_key = "layer1.0.bn1.IN.weight" if name == "resnet50_ibn_a" else "conv2.0.IN.weight"
    assert float(grads[in_key].abs().sum()) > 0


def test_pcb_and_bot_heads_run_on_osnet():
    torch.manual_seed(0)
    pcb = PCB(build_backbone("osnet_x0_25"), num_classes=5).eval()
    bot = BoT(build_backbone("osnet_x0_25"), num_classes=5).eval()
    x = torch.randn(2, 3, 96, 32)
    with torch.no_grad():
        out, b = pcb(x), bot(x)
    assert out.g.shape == (2, 6, 128) and out.h.shape == (2, 6, 256)
    assert b.bnneck.shape == b.pool5.shape == (2, 128) and b.logits.shape == (2, 5)


def test_osnet_head_is_torchreids_fc():
    torch.manual_seed(0)
    head = OSNetHead(128).eval()
    assert [type(m).__name__ for m in head.fc] == ["Linear", "BatchNorm1d", "ReLU"]
    assert abs(float(head.fc[0].weight.detach().std()) - 0.01) < 0.001
    assert float(head.fc[0].bias.detach().abs().max()) == 0.0
    t = torch.randn(3, 128, 4, 2)
    v = head(t)
    manual = torch.relu(head.fc[1](head.fc[0](t.mean(dim=(2, 3)))))
    assert v.shape == (3, 512)
    torch.testing.assert_close(v, manual)


def test_init_imagenet_is_refused_and_a_path_loads_key_for_key(tmp_path):
    for name in NEW:
        with torch.device("meta"):
            trunk = build_backbone(name)
        with pytest.raises(UsageError, match=f"no ImageNet weights for the {name} backbone"
                                             ".*init=scratch"):
            initialize_trunk(trunk, "imagenet")
    torch.manual_seed(0)
    source = build_backbone("osnet_x0_25")
    # a torchreid-style file: module. prefixes, the fc head and the classifier besides
    state = {f"module.{k}": v for k, v in source.state_dict().items()}
    state.update({f"module.{k}": v for k, v in OSNetHead(128).state_dict().items()})
    state["module.classifier.weight"] = torch.zeros(10, 512)
    torch.save({"state_dict": state}, tmp_path / "osnet.pth")
    torch.manual_seed(1)
    trunk = build_backbone("osnet_x0_25")
    report = initialize_trunk(trunk, str(tmp_path / "osnet.pth"))
    assert report.missing == [] and report.mismatched == []
    assert len(report.loaded) == len(REFERENCE["osnet_x0_25"]["trunk"])
    assert sorted(report.unexpected) == sorted(["classifier.weight",
                                                *REFERENCE["osnet_x0_25"]["head"]])
    assert all(torch.equal(a, b) for a, b in zip(trunk.state_dict().values(),
                                                 source.state_dict().values()))
    with pytest.raises(InputFileError, match="none of its"):       # a ResNet file does not fit
        load_trunk_state(trunk, {"layer1.0.conv1.weight": torch.zeros(64, 64, 1, 1)}, "x")


def _bot_args(root: Path, *extra) -> list:
    return ["train", "bot", "--dataset", "synthetic", "--root", root, "--option", "name=tiny",
            "--preset", "tiny", "--ids-per-batch", "3", "--images-per-id", "2", "--epochs",
            "1", "--quiet", *extra]


def test_bot_trains_one_iteration_on_osnet_x0_25(capsys, tiny_synthetic_root, tmp_path,
                                                 one_torch_thread):
    code, _, err = reid_in_process(*_bot_args(tiny_synthetic_root, "--backbone", "osnet_x0_25",
                                              "--max-iters", "1", "--out", tmp_path / "run"),
                                   capsys=capsys)
    assert code == 0, err
    payload = torch.load(tmp_path / "run" / "model.pt", weights_only=True)
    assert payload["spec"]["backbone"] == "osnet_x0_25"
    assert payload["model_state"]["backbone.conv2.0.conv2a.conv1.weight"].shape == (16, 16, 1, 1)
    # case: --init imagenet with an OSNet backbone (no torchvision weights) → one line
    result = reid_in_process(*_bot_args(tiny_synthetic_root, "--backbone", "osnet_x0_25",
                                        "--init", "imagenet", "--out", tmp_path / "run2"),
                             capsys=capsys)
    assert_one_line_error_in_process(result, "--init", "no ImageNet weights", "osnet_x0_25",
                                     "--init scratch")
    assert not (tmp_path / "run2").exists()
