"""DG-VAE networks: shapes of the full and tiny configurations, module wiring and
initialisation (docs/methods/dgvae.md T1; DG-VAE paper Tables 4–7)."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from reidcli.errors import InputFileError, ParameterError
from reidcli.models.backbones import build_backbone
from reidcli.models.dgvae import DGVAE, DGVAEArch, dgvae_arch


def _param_ids(module: torch.nn.Module) -> set[int]:
    return {p.data_ptr() for p in module.parameters()}


@pytest.fixture(scope="module")
def full_model():
    """Full configuration, random init, one forward of a batch of 2 at 384×128 (CPU)."""
    torch.manual_seed(0)
    resnet = build_backbone("resnet50", last_stride=2)
    model = DGVAE(dgvae_arch("full", 395, (384, 128)), resnet).eval()
    images = torch.randn(2, 3, 384, 128)
    infrared = torch.tensor([False, True])
    with torch.no_grad():
        out = model(images, infrared)
        recon = model.decoder.train()(torch.cat([out.mu_d, out.mu_a], dim=1))  # batch BN
    model.decoder.eval()
    return resnet, model, images, infrared, out, recon


def test_full_config_shapes(full_model):
    _, model, _, _, out, recon = full_model
    assert out.f.shape == (2, 1024, 24, 8)                                       # T1
    assert out.mu_d.shape == out.logvar_d.shape == (2, 2048)
    assert out.mu_a.shape == out.logvar_a.shape == (2, 512)
    assert recon.shape == (2, 1024, 24, 8)
    assert float(recon.abs().max()) < 1.0                                        # Tanh
    decoder_params = sum(p.numel() for p in model.decoder.parameters())
    assert abs(decoder_params - 17.05e6) <= 0.05e6
    assert model.classifier.weight.shape == (395, 2048)
    assert model.prior_means.shape == (395, 2048) and model.margin_rho.shape == (395,)


def test_full_config_parts_are_separate_copies_of_the_resnet(full_model):
    resnet, model, _, _, _, _ = full_model
    parts = [model.trunk_visible, model.trunk_infrared, model.idi_encoder, model.iai_encoder,
             model.decoder]
    for i, first in enumerate(parts):                                            # T1
        for second in parts[i + 1:]:
            assert not _param_ids(first) & _param_ids(second)
    assert not _param_ids(model) & _param_ids(resnet)
    torch.testing.assert_close(getattr(model.trunk_infrared.layer3, "0").conv1.weight,
                               resnet.layer3[0].conv1.weight)
    torch.testing.assert_close(getattr(model.iai_encoder.body.layer3, "5").conv3.weight,
                               resnet.layer3[5].conv3.weight)
    torch.testing.assert_close(model.idi_encoder.body.layer4[2].conv1.weight,
                               resnet.layer4[2].conv1.weight)
    resnet_keys = set(resnet.state_dict())
    assert set(model.trunk_visible.state_dict()) <= resnet_keys                  # torchvision keys
    body_keys = set(model.idi_encoder.body.state_dict())
    assert body_keys <= resnet_keys and "layer3.1.conv1.weight" in body_keys
    assert not any(k.startswith("layer3.0.") for k in body_keys)
    assert model.idi_encoder.body.layer4[0].conv2.stride == (2, 2)               # conv5_x stride 2


def test_rows_are_routed_by_modality_and_keep_their_order(full_model):
    _, model, images, infrared, out, _ = full_model
    with torch.no_grad():
        visible_alone = model.trunk_visible(images[:1])
        infrared_alone = model.trunk_infrared(images[1:])
        swapped = model.trunk(images.flip(0), infrared.flip(0))
    torch.testing.assert_close(out.f[0:1], visible_alone, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out.f[1:2], infrared_alone, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(swapped, out.f.flip(0), atol=1e-5, rtol=1e-5)
    # one E^D serves both modalities: re-encoding each map alone gives the batch's rows
    with torch.no_grad():
        mu_ir, _ = model.encode_idi(infrared_alone)
    torch.testing.assert_close(mu_ir, out.mu_d[1:2], atol=1e-4, rtol=1e-4)


def test_initialisation():
    torch.manual_seed(1)
    model = DGVAE(dgvae_arch("tiny", 50, (32, 16), decoder_channels=256))
    classifier = model.classifier.weight.detach()
    assert 0.0008 < float(classifier.std()) < 0.0012
    assert float(model.classifier.bias.detach().abs().max()) == 0
    alpha = model.margins()
    torch.testing.assert_close(alpha, torch.ones(50))                            # softplus(ρ) = 1
    assert 0.9 < float(model.prior_means.detach().std()) < 1.1                   # μ_y ~ N(0, I)
    convs = [m for m in model.decoder.modules()
             if isinstance(m, (torch.nn.ConvTranspose2d, torch.nn.Linear))]
    weights = torch.cat([m.weight.detach().flatten() for m in convs])
    assert 0.018 < float(weights.std()) < 0.022 and abs(float(weights.mean())) < 0.002
    assert all(float(m.bias.detach().abs().max()) == 0 for m in convs)
    bns = [m for m in model.decoder.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    gammas = torch.cat([m.weight.detach() for m in bns])
    assert 0.015 < float(gammas.std()) < 0.025 and abs(float(gammas.mean()) - 1) < 0.005
    assert all(float(m.bias.detach().abs().max()) == 0 for m in bns)


def test_tiny_config_shapes_and_logvar_clamp():
    torch.manual_seed(2)
    arch = dgvae_arch("tiny", 8, (32, 16))
    assert arch.map_size == (8, 4) and (arch.idi_dim, arch.iai_dim) == (16, 8)
    assert arch.trunk_channels == 32 and arch.dropout == 0
    model = DGVAE(arch)
    images, infrared = torch.rand(6, 3, 32, 16), torch.tensor([1, 0, 0, 1, 1, 0]).bool()
    out = model(images, infrared)
    assert out.f.shape == (6, 32, 8, 4)
    assert out.mu_d.shape == out.logvar_d.shape == (6, 16)
    assert out.mu_a.shape == out.logvar_a.shape == (6, 8)
    assert model.decode(out.mu_d, out.mu_a).shape == (6, 32, 8, 4)
    assert model(images, infrared, with_iai=False).mu_a is None
    with torch.no_grad():
        model.idi_encoder.logvar_head.bias.fill_(50.0)
        model.iai_encoder.logvar_head.bias.fill_(-50.0)
        out = model(images, infrared)
    assert float(out.logvar_d.min()) == 10.0 and float(out.logvar_a.max()) == -10.0
    assert out.logvar_d.dtype == torch.float32


def test_shared_trunk_and_linear_decoder_options():
    torch.manual_seed(3)
    model = DGVAE(dgvae_arch("tiny", 4, (32, 16), shared_trunk=True, decoder_out="linear"))
    assert model.trunk_infrared is model.trunk_visible
    assert isinstance(list(model.decoder.deconv)[-1], torch.nn.ConvTranspose2d)
    with torch.no_grad():
        list(model.decoder.deconv)[-1].bias.fill_(5.0)                           # no Tanh bound
        recon = model.eval().decode(torch.zeros(2, 16), torch.zeros(2, 8))
    assert float(recon.abs().max()) > 1.0
    images = torch.rand(3, 3, 32, 16)
    with torch.no_grad():
        mixed = model.trunk(images, torch.tensor([True, False, True]))
    torch.testing.assert_close(mixed, model.trunk_visible(images))


def test_arch_sizes_round_trip_and_errors():
    arch = dgvae_arch("full", 206, (380, 120))
    assert arch.map_size == (math.ceil(380 / 16), math.ceil(120 / 16)) == (24, 8)
    assert DGVAEArch.from_dict(arch.as_dict()) == arch
    assert arch.as_dict()["map_size"] == [24, 8]
    with pytest.raises(ParameterError, match="map_size"):
        dgvae_arch("full", 206, (384, 96))                                       # 24×6
    with pytest.raises(ParameterError, match="map_size"):
        dgvae_arch("tiny", 8, (36, 16))                                          # 9 rows
    with pytest.raises(ParameterError, match="config='huge'"):
        dgvae_arch("huge", 8, (32, 16))
    with pytest.raises(ParameterError, match="trunk_channels"):
        dgvae_arch("full", 8, (384, 128), trunk_channels=512)
    with pytest.raises(ParameterError, match="num_classes"):
        dgvae_arch("tiny", 1, (32, 16))
    with pytest.raises(ParameterError, match="colour"):
        dgvae_arch("tiny", 8, (32, 16), colour=3)
    with pytest.raises(InputFileError, match="unknown entries"):
        DGVAEArch.from_dict({**arch.as_dict(), "extra": 1})
    with pytest.raises(ParameterError, match="last_stride"):
        DGVAE(dgvae_arch("full", 4, (384, 128)), build_backbone("resnet50", last_stride=1))


def test_string_overrides_are_converted():
    arch = dgvae_arch("tiny", 8, (32, 16), shared_trunk="false", dropout="0.1", idi_dim="32")
    assert arch.shared_trunk is False and arch.dropout == 0.1 and arch.idi_dim == 32
    assert DGVAEArch.from_dict({**arch.as_dict(), "shared_trunk": "true"}).shared_trunk is True
    with pytest.raises(ParameterError, match="shared_trunk='maybe'"):
        dgvae_arch("tiny", 8, (32, 16), shared_trunk="maybe")
    with pytest.raises(ParameterError, match="wrong type"):
        DGVAE(DGVAEArch(config="tiny", num_classes=4, map_size=(8, 4), shared_trunk="false"))


def test_margins_follow_rho():
    torch.manual_seed(4)
    model = DGVAE(dgvae_arch("tiny", 3, (32, 16)))
    with torch.no_grad():
        model.margin_rho.copy_(torch.tensor([-2.0, 0.0, 3.0]))
    torch.testing.assert_close(model.margins(), F.softplus(torch.tensor([-2.0, 0.0, 3.0])))
