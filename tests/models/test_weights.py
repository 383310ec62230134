"""``--init imagenet | PATH | scratch`` (issue 5 deliverable 2): never downloads from the
internet in tests — the download path runs against a loopback HTTP server."""
from __future__ import annotations

import functools
import hashlib
import http.server
import json
import socket
import threading

import pytest
import torch
import torchvision

from reidcli.errors import InputFileError, OfflineError, UsageError
from reidcli.models.backbones import build_backbone
from reidcli.models import weights
from reidcli.models.weights import (expected_sha256_prefix, fetch_imagenet_state,
                                    initialize_trunk, load_trunk_state)


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
    with pytest.raises(InputFileError, match="init weights .*junk.pth is not a torch file"):
        initialize_trunk(build_backbone("resnet18"), str(junk))
    with pytest.raises(InputFileError, match="init=imagenet .* or init=scratch"):
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
    assert "init=imagenet" in message and "init=PATH" in message and "scratch" in message


@pytest.fixture
def served(tmp_path, resnet18_state):
    """A loopback HTTP server over ``tmp_path/served``; yields (folder, base URL, sha256)."""
    folder = tmp_path / "served"
    folder.mkdir()
    torch.save(resnet18_state, folder / "weights.pth")
    sha = hashlib.sha256((folder / "weights.pth").read_bytes()).hexdigest()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
    handler.log_message = lambda *a, **k: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield folder, f"http://127.0.0.1:{server.server_address[1]}", sha
    finally:
        server.shutdown()
        server.server_close()


def test_imagenet_download_into_cache_then_offline(tmp_path, resnet18_state, served):
    folder, base, sha = served
    name = f"resnet18-{sha[:8]}.pth"                      # torchvision-style hash suffix
    (folder / "weights.pth").rename(folder / name)
    url = f"{base}/{name}"
    assert expected_sha256_prefix(url) == sha[:8]
    cache = tmp_path / "cache"
    state, path = fetch_imagenet_state("resnet18", url=url, cache_dir=cache, offline=False)
    assert path == str(cache / name)
    torch.testing.assert_close(state["conv1.weight"], resnet18_state["conv1.weight"])
    with pytest.raises(OfflineError, match="cannot download"):
        fetch_imagenet_state("resnet18", url=f"{base}/nothing.pth", cache_dir=cache,
                             offline=False)
    (folder / name).unlink()                               # the network copy is gone ...
    state, _ = fetch_imagenet_state("resnet18", url=url, cache_dir=cache, offline=True)
    assert "layer4.1.bn2.weight" in state                  # ... the cached one still works


def test_imagenet_download_with_a_wrong_hash_is_refused(tmp_path, served):
    folder, base, sha = served
    wrong = "0" * 8 if not sha.startswith("0" * 8) else "f" * 8
    (folder / "weights.pth").rename(folder / f"resnet18-{wrong}.pth")
    cache = tmp_path / "cache"
    with pytest.raises(InputFileError) as info:
        fetch_imagenet_state("resnet18", url=f"{base}/resnet18-{wrong}.pth", cache_dir=cache,
                             offline=False)
    message = info.value.message
    assert "\n" not in message and f"not {wrong}" in message and sha[:16] in message
    assert "init=PATH" in message
    assert list(cache.iterdir()) == []                     # nothing cached, no .partial


def test_imagenet_download_times_out_on_a_silent_network(tmp_path, monkeypatch):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)                                     # accepts the connection, never answers
    monkeypatch.setattr(weights, "DOWNLOAD_TIMEOUT_S", 0.3)
    connect = socket.create_connection
    timeouts = []                                          # the timeout each socket was given

    def recording_connect(address, timeout=socket._GLOBAL_DEFAULT_TIMEOUT, *args, **kwargs):
        timeouts.append(timeout)
        return connect(address, timeout, *args, **kwargs)

    monkeypatch.setattr(socket, "create_connection", recording_connect)
    default = socket.getdefaulttimeout()
    socket.setdefaulttimeout(60)           # a download that forgot its timeout fails, not hangs
    try:
        with pytest.raises(OfflineError, match="cannot download .*Timeout.* — init=imagenet"):
            fetch_imagenet_state("resnet18", cache_dir=tmp_path, offline=False,
                                 url=f"http://127.0.0.1:{listener.getsockname()[1]}/r.pth")
    finally:
        socket.setdefaulttimeout(default)
        listener.close()
    # the socket waited DOWNLOAD_TIMEOUT_S, not forever (no wall-clock bound: busy machines)
    assert timeouts == [0.3]
    assert list(tmp_path.iterdir()) == []                  # nothing cached, no .partial


@pytest.mark.usefixtures("one_torch_thread")
def test_train_with_init_imagenet_downloads_verifies_and_reports(capsys, tmp_path, served,
                                                                  monkeypatch,
                                                                  tiny_synthetic_root):
    from tests.cli.helpers import run_cli

    folder, base, sha = served
    name = f"resnet18-{sha[:8]}.pth"
    (folder / "weights.pth").rename(folder / name)
    monkeypatch.setattr(weights, "imagenet_weights_url", lambda arch: f"{base}/{name}")
    monkeypatch.delenv("REIDCLI_OFFLINE", raising=False)
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    code, _, err = run_cli(capsys, "train", "pcb", "--dataset", "synthetic", "--root",
                           tiny_synthetic_root, "--option", "name=tiny", "--backbone",
                           "resnet18", "--input-size", "96x32", "--batch-size", "4",
                           "--max-iters", "1", "--init", "imagenet", "--workers", "0",
                           "--out", tmp_path / "run")
    assert code == 0, err
    assert (tmp_path / "torch" / "hub" / "checkpoints" / name).exists()
    line = next(t for t in err.splitlines() if t.startswith("init: imagenet"))
    assert "; 2 unexpected (fc.weight, fc.bias)" in line and "missing" not in line
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["init"]["source"].startswith("imagenet") and config["init"]["loaded"] > 100


def test_torchvision_urls_are_the_v1_weights():
    from reidcli.models.weights import hub_cache_file, imagenet_weights_url

    url = imagenet_weights_url("resnet50")
    assert url.endswith(".pth") and "resnet50" in url
    assert hub_cache_file(url, "/x").name == url.rsplit("/", 1)[1]


@pytest.mark.parametrize("value,offline", [("1", True), ("yes", True), ("0", False),
                                           ("false", False), ("", False)])
def test_reidcli_offline_zero_means_downloads_allowed(monkeypatch, tmp_path, value, offline):
    """REIDCLI_OFFLINE=0 (or false/no/off) allows downloads; any other value forbids them."""
    from reidcli.errors import ReidError

    tried = []

    def no_network(url, path):
        tried.append(url)
        raise OSError("no network in tests")

    monkeypatch.setattr(weights, "download_verified", no_network)
    monkeypatch.setenv("REIDCLI_OFFLINE", value)
    with pytest.raises(ReidError) as caught:
        weights.fetch_imagenet_state("resnet18", url="http://127.0.0.1:9/resnet18-deadbeef.pth",
                                     cache_dir=tmp_path)
    assert bool(tried) is not offline
    assert ("downloads are off" in str(caught.value)) is offline
