"""``--init imagenet | PATH | scratch`` (issue 5 deliverable 2): never downloads from the
internet in tests — the download path runs against a loopback HTTP server."""
from __future__ import annotations

import functools
import http.server
import threading

import pytest
import torch
import torchvision

from reidcli.errors import InputFileError, OfflineError, UsageError
from reidcli.models.backbones import build_backbone
from reidcli.models.weights import fetch_imagenet_state, initialize_trunk, load_trunk_state


@pytest.fixture(scope="module")
def resnet18_state():
    torch.manual_seed(0)
    return torchvision.models.resnet18(weights=None).state_dict()


def test_torchvision_state_dict_loads_every_trunk_tensor(tmp_path, resnet18_state):
    path = tmp_path / "r18.pth"
    torch.save(resnet18_state, path)
    trunk = build_backbone("resnet18")
    report = initialize_trunk(trunk, str(path))
    assert report.missing == [] and sorted(report.unexpected) == ["fc.bias", "fc.weight"]
    torch.testing.assert_close(trunk.layer3[1].conv2.weight, resnet18_state["layer3.1.conv2.weight"])
    assert "2 unexpected" in report.summary()


def test_torchreid_style_checkpoint(tmp_path, resnet18_state):
    state = {f"module.{k}": v for k, v in resnet18_state.items() if not k.startswith("fc")
             and not k.startswith("layer4.1")}
    state["module.classifier.weight"] = torch.zeros(751, 512)
    path = tmp_path / "torchreid.pth.tar"
    torch.save({"state_dict": state, "epoch": 60, "rank1": 0.9}, path)
    trunk = build_backbone("resnet18")
    report = initialize_trunk(trunk, str(path))
    assert report.unexpected == ["classifier.weight"]
    assert report.missing and all(k.startswith("layer4.1") for k in report.missing)
    torch.testing.assert_close(trunk.conv1.weight, resnet18_state["conv1.weight"])


def test_wrong_architecture_and_bad_files(tmp_path, resnet18_state):
    path = tmp_path / "r18.pth"
    torch.save(resnet18_state, path)
    with pytest.raises(InputFileError, match="none of its"):
        load_trunk_state(build_backbone("tiny"), resnet18_state, str(path))
    junk = tmp_path / "junk.pth"
    junk.write_text("not torch")
    with pytest.raises(InputFileError, match="not a torch state dict"):
        initialize_trunk(build_backbone("resnet18"), str(junk))
    with pytest.raises(InputFileError, match="--init imagenet .* or --init scratch"):
        initialize_trunk(build_backbone("resnet18"), str(tmp_path / "missing.pth"))
    with pytest.raises(UsageError, match="tiny backbone"):
        initialize_trunk(build_backbone("tiny"), "imagenet")


def test_scratch_keeps_random_weights():
    torch.manual_seed(1)
    trunk = build_backbone("resnet18")
    before = trunk.conv1.weight.clone()
    assert initialize_trunk(trunk, "scratch").source == "scratch"
    assert torch.equal(before, trunk.conv1.weight)


def test_imagenet_offline_without_cache_names_the_three_choices(tmp_path):
    with pytest.raises(OfflineError) as info:
        fetch_imagenet_state("resnet18", cache_dir=tmp_path, offline=True)
    message = info.value.message
    assert "--init imagenet" in message and "--init PATH" in message and "scratch" in message


def test_imagenet_download_into_cache_then_offline(tmp_path, resnet18_state):
    served = tmp_path / "served"
    served.mkdir()
    torch.save(resnet18_state, served / "resnet18-test.pth")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    handler.log_message = lambda *a, **k: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/resnet18-test.pth"
        cache = tmp_path / "cache"
        state, path = fetch_imagenet_state("resnet18", url=url, cache_dir=cache, offline=False)
        assert path == str(cache / "resnet18-test.pth")
        torch.testing.assert_close(state["conv1.weight"], resnet18_state["conv1.weight"])
        missing = f"http://127.0.0.1:{server.server_address[1]}/nothing.pth"
        with pytest.raises(OfflineError, match="cannot download"):
            fetch_imagenet_state("resnet18", url=missing, cache_dir=cache, offline=False)
    finally:
        server.shutdown()
    # the cached copy now works with the network gone
    state, _ = fetch_imagenet_state("resnet18", url=url, cache_dir=cache, offline=True)
    assert "layer4.1.bn2.weight" in state


def test_torchvision_urls_are_the_v1_weights():
    from reidcli.models.weights import hub_cache_file, imagenet_weights_url

    url = imagenet_weights_url("resnet50")
    assert url.endswith(".pth") and "resnet50" in url
    assert hub_cache_file(url, "/x").name == url.rsplit("/", 1)[1]
