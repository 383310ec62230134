"""Faults of distributed extraction started by hand (issue 28): a torchrun environment that is
malformed names the variable at fault; a rank whose peers never come says so at once, gives
up after REIDCLI_DIST_JOIN_TIMEOUT seconds with one error line (no C++ log or stack) and
writes nothing (reidcli.distributed_env; docs/formats.md, "Distributed extraction")."""
from __future__ import annotations

import socket

import pytest

from reidcli.distributed_env import JOIN_TIMEOUT_ENV, join_timeout, read_launch
from reidcli.errors import UsageError
from tests.faults.helpers import (assert_one_line_error, assert_one_line_error_in_process,
                                  files, reid, reid_in_process)

LAUNCH_VARIABLES = ("WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                    "MASTER_PORT", JOIN_TIMEOUT_ENV)
#: a well-formed launch of 2 ranks, which each case below spoils in one variable
GOOD = {"WORLD_SIZE": "2", "RANK": "1", "LOCAL_RANK": "1", "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": "29500"}


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    import torch

    from reidcli.models.checkpoint import ModelSpec, build_model, save_model

    torch.manual_seed(3)
    spec = ModelSpec(kind="pcb", backbone="tiny", num_classes=4, input_size=(96, 32))
    path = tmp_path_factory.mktemp("dist_fault_model") / "model.pt"
    save_model(path, build_model(spec), spec)
    return path


@pytest.fixture
def clean_launch(monkeypatch):
    """No launch variable of the test run leaks into a case."""
    for name in LAUNCH_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


# case "LOCAL_RANK=-1 is blamed on RANK", and every other malformed or inconsistent variable:
# the error names the variable at fault (and its value)
@pytest.mark.parametrize("change, needle", [
    ({"LOCAL_RANK": "-1"}, "LOCAL_RANK=-1 must be ≥ 0"),
    ({"LOCAL_RANK": "2"}, "LOCAL_RANK=2 is outside 0…1 (WORLD_SIZE=2)"),
    ({"LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "1"}, "LOCAL_RANK=1 is outside 0…0 "
                                                   "(LOCAL_WORLD_SIZE=1)"),
    ({"LOCAL_WORLD_SIZE": "3"}, "LOCAL_WORLD_SIZE=3 is outside 1…2"),
    ({"LOCAL_RANK": "one"}, "LOCAL_RANK='one' is not an integer"),
    ({"WORLD_SIZE": "two"}, "WORLD_SIZE='two' is not an integer"),
    ({"WORLD_SIZE": "0"}, "WORLD_SIZE=0 must be ≥ 1"),
    ({"WORLD_SIZE": "1"}, "RANK=1 is outside 0…0 (WORLD_SIZE=1)"),
    ({"RANK": "2"}, "RANK=2 is outside 0…1 (WORLD_SIZE=2)"),
    ({"RANK": "-1"}, "RANK=-1 is outside 0…1"),
    ({"RANK": "1.0"}, "RANK='1.0' is not an integer"),
    ({"MASTER_ADDR": None}, "MASTER_ADDR is not set"),
    ({"MASTER_ADDR": " "}, "MASTER_ADDR is not set"),
    ({"MASTER_PORT": None}, "MASTER_PORT is not set"),
    ({"MASTER_PORT": "http"}, "MASTER_PORT='http' is not an integer"),
    ({"MASTER_PORT": "70000"}, "MASTER_PORT=70000 is outside 1…65535"),
])
def test_a_malformed_launch_names_the_variable_at_fault(change, needle):
    env = {k: v for k, v in {**GOOD, **change}.items() if v is not None}
    with pytest.raises(UsageError) as caught:
        read_launch(env)
    message = str(caught.value)
    assert needle in message, message
    assert message.startswith(needle.split("=")[0].split(" ")[0]), message  # blamed first
    assert "torchrun" in message                       # what to do


def test_a_well_formed_launch_and_the_join_timeout():
    launch = read_launch(GOOD)
    assert (launch.rank, launch.world_size, launch.local_rank, launch.endpoint) == \
        (1, 2, 1, "127.0.0.1:29500")
    assert read_launch({}) is None and read_launch({"RANK": "5"}) is None
    assert read_launch({"WORLD_SIZE": "1", "RANK": "0"}) is None
    assert read_launch({**GOOD, "LOCAL_RANK": ""}).local_rank == 1   # defaults to RANK
    assert join_timeout({}) == 300.0 and join_timeout({JOIN_TIMEOUT_ENV: "2.5"}) == 2.5
    for bad in ("0", "-3", "nan", "inf", "soon"):      # case: a malformed join timeout
        with pytest.raises(UsageError, match=JOIN_TIMEOUT_ENV):
            join_timeout({JOIN_TIMEOUT_ENV: bad})


def _extract_args(root, model, out):
    return ["extract", "--model", model, "--dataset", "synthetic", "--root", root, "--option",
            "name=tiny", "--device", "cpu", "--features", "pcb_h", "--batch-size", "8",
            "--out", out]


# case "LOCAL_RANK=-1 is blamed on RANK", through the CLI: one line, exit 2, nothing written
def test_cli_names_local_rank(clean_launch, capsys, tiny_synthetic_root, tiny_model, tmp_path):
    for name, value in {**GOOD, "RANK": "0", "LOCAL_RANK": "-1"}.items():
        clean_launch.setenv(name, value)
    out = tmp_path / "out"
    out.mkdir()
    result = reid_in_process(*_extract_args(tiny_synthetic_root, tiny_model, out / "m.h5"),
                             capsys=capsys)
    line = assert_one_line_error_in_process(result, "LOCAL_RANK=-1", "torchrun")
    assert "RANK=0" not in line
    assert files(out) == set()


# case "one process with WORLD_SIZE=2 waits silently for 1,800 s; a rank that times out prints
# a C++ stack": rank 0 (which hosts the rendezvous) and rank 1 (which connects to it) started
# alone announce the wait at once, give up after REIDCLI_DIST_JOIN_TIMEOUT with one line
# (torch's C++ log and stack held back: capfd sees file descriptor 2) and write nothing
@pytest.mark.parametrize("rank", [0, 1])
def test_a_rank_started_alone_gives_up_in_one_line(rank, clean_launch, capfd,
                                                   tiny_synthetic_root, tiny_model, tmp_path):
    port = _free_port()
    for name, value in {**GOOD, "RANK": str(rank), "LOCAL_RANK": str(rank),
                        "MASTER_PORT": str(port), JOIN_TIMEOUT_ENV: "0.2"}.items():
        clean_launch.setenv(name, value)
    out = tmp_path / "out"
    out.mkdir()
    code, stdout, stderr = reid_in_process(*_extract_args(tiny_synthetic_root, tiny_model,
                                                          out / "m.h5"), capsys=capfd)
    line = assert_one_line_error_in_process((code, stdout, stderr),
                                            f"rank {rank} gave up after 0.2 s",
                                            f"127.0.0.1:{port}", JOIN_TIMEOUT_ENV,
                                            "nothing was written")
    assert "Traceback" not in line
    assert f"rank {rank}: waiting for 1 other rank at 127.0.0.1:{port}" in stderr
    for native in ("frame #", "Exception raised from", "socket.cpp", "TCPStore.cpp"):
        assert native not in stderr, stderr[-3000:]
    assert files(out) == set()


# case "a --dist-timeout of inf or nan": one line instead of torch's OverflowError traceback
@pytest.mark.parametrize("value", ["inf", "nan", "0"])
def test_a_timeout_that_is_not_a_duration(value, clean_launch, capsys, tiny_synthetic_root,
                                          tiny_model, tmp_path):
    for name, v in {**GOOD, "RANK": "0", "LOCAL_RANK": "0",
                    "MASTER_PORT": str(_free_port())}.items():
        clean_launch.setenv(name, v)
    result = reid_in_process(*_extract_args(tiny_synthetic_root, tiny_model, tmp_path / "m.h5"),
                             "--dist-timeout", value, capsys=capsys)
    assert_one_line_error_in_process(result, "--dist-timeout")
    assert files(tmp_path) == set()


# the same as a real process: WORLD_SIZE=2 RANK=0 alone, a short join timeout
@pytest.mark.slow
def test_a_process_alone_under_world_size_2_exits_2_in_one_line(tiny_synthetic_root,
                                                                tiny_model, tmp_path):
    port = _free_port()
    env = {**GOOD, "RANK": "0", "LOCAL_RANK": "0", "MASTER_PORT": str(port),
           JOIN_TIMEOUT_ENV: "1"}
    proc = reid(*_extract_args(tiny_synthetic_root, tiny_model, tmp_path / "m.h5"), env=env,
                cwd=tmp_path, timeout=120)
    assert_one_line_error(proc, "rank 0 gave up after 1 s", JOIN_TIMEOUT_ENV)
    assert "waiting for 1 other rank" in proc.stderr and "frame #" not in proc.stderr
    assert files(tmp_path) == set()


# case "more ranks per machine than GPUs" (LOCAL_RANK=3 on a 2-GPU machine raised torch's
# invalid-device error from set_device): refused before the rendezvous, naming LOCAL_RANK
def test_a_local_rank_beyond_the_gpus_is_named(monkeypatch):
    import torch

    from reidcli.features.distributed import DistributedEnv, rank_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    env = DistributedEnv(rank=3, world_size=4, local_rank=3, master_addr="h", master_port=1)
    with pytest.raises(UsageError, match=r"cuda:3 \(LOCAL_RANK=3\) but torch sees 2 GPUs"):
        rank_device("cuda", env)
    ok = DistributedEnv(rank=1, world_size=4, local_rank=1, master_addr="h", master_port=1)
    assert rank_device("cuda", ok) == "cuda:1"
    assert rank_device("cpu", env) == "cpu"


# the same case for `reid train` under a hand-made launch: rank 0 alone used to wait silently
# for torch's default 30 minutes; it now joins through the same announced, bounded rendezvous
def test_a_training_rank_started_alone_gives_up_in_one_line(clean_launch, capfd,
                                                            tiny_synthetic_root, tmp_path):
    port = _free_port()
    for name, value in {**GOOD, "RANK": "0", "LOCAL_RANK": "0", "MASTER_PORT": str(port),
                        JOIN_TIMEOUT_ENV: "0.2"}.items():
        clean_launch.setenv(name, value)
    result = reid_in_process("train", "bot", "--dataset", "synthetic", "--root",
                             tiny_synthetic_root, "--option", "name=tiny", "--preset", "tiny",
                             "--epochs", "1", "--device", "cpu", "--quiet", "--out",
                             tmp_path / "run", capsys=capfd)
    assert_one_line_error_in_process(result, "rank 0 gave up after 0.2 s", f"127.0.0.1:{port}",
                                     JOIN_TIMEOUT_ENV)
    assert "rank 0: waiting for 1 other rank" in result[2]
    assert sorted(p.name for p in tmp_path.iterdir()) == []
