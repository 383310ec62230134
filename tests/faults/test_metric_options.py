"""Edge values of `reid train <metric>`, `reid fit-pooling <method>` and BoW extraction
(issue 28: "numbers at the edges reach library code unchecked: negative or huge seeds in BoW
extraction and WARCA; --dim above the feature dimension"). Each is one line naming the flag,
exit 2, nothing written."""
from __future__ import annotations

import pytest

from tests.faults.helpers import assert_one_line_error_in_process, reid_in_process

HUGE = "100000000000000000000"          # 1e20 as an integer (typer's int options parse it)


@pytest.fixture(scope="module")
def toy_store(tmp_path_factory):
    """A conv-map store: features ``pcb_g`` [N, 48], 20 persons × 2 cameras (10 training
    persons: 20 training rows), maps of 16 channels."""
    from reidcli.synthetic.conv_maps import write_toy_store

    return write_toy_store(tmp_path_factory.mktemp("metric-options") / "toy.h5", persons=20,
                           trials=1)


#: (command words, arguments, needles of the error line); one per reported case
CASES = [
    # seeds: negative or beyond [0, 2³²) (case "--seed -1, 1e20 in WARCA")
    (["train", "warca"], ["--param", "seed=-1"], ["--param seed", "-1", "[0, 4294967295]"]),
    (["train", "warca"], ["--param", f"seed={HUGE}"], ["--param seed"]),
    (["train", "kissme"], ["--param", "seed=4294967296"], ["--seed 4294967296"]),
    (["train", "klfda"], ["--param", "seed=-3"], ["--seed -3"]),
    (["train", "rpcca"], ["--param", f"seed={HUGE}"], ["--seed"]),
    (["fit-pooling", "cdpcf"], ["--seed", "-1"], ["--seed"]),
    (["fit-pooling", "dpcf"], ["--seed", HUGE], ["--seed"]),
    # --dim above the input's dimension (case "--dim above the feature dimension")
    (["train", "pca"], ["--dim", "1000"], ["--dim 1000", "input features (48)",
                                            "at most --dim 48"]),
    (["train", "lfda"], ["--dim", "49"], ["--dim 49", "(48)"]),
    (["train", "kissme"], ["--dim", "1000"], ["--dim 1000", "(48)"]),
    (["train", "xqda"], ["--dim", "1000"], ["--dim 1000", "(48)"]),
    (["train", "warca"], ["--dim", "1000", "--iterations", "1"], ["--dim 1000", "(48)"]),
    (["train", "klfda"], ["--dim", "1000", "--param", "kernel=rbf"],
     ["--dim 1000", "kernel space", "(20)"]),
    (["train", "rpcca"], ["--dim", "1000", "--param", "kernel=rbf"],
     ["--dim 1000", "kernel space", "(20)"]),
    (["fit-pooling", "avgp"], ["--dim", "100000"], ["--dim 100000", "pooled vectors"]),
    # counts past any size numpy/torch can hold: overflow tracebacks before
    (["train", "rpcca"], ["--param", f"max_iter={HUGE}"], ["--iterations"]),
    (["train", "warca"], ["--param", f"batch_size={HUGE}"], ["--batch-size"]),
    (["train", "lfda"], ["--param", f"knn={HUGE}"], ["--param knn"]),
    (["fit-pooling", "cdpcf"], ["--param", f"chunk={HUGE}"], ["--param chunk"]),
    (["fit-pooling", "cdpcf"], ["--train-ids", "5", "--repeats", "1000000"], ["--repeats"]),
    # devices: a name torch does not know (traceback before)
    (["train", "xqda"], ["--param", "device=gpu"], ["--param device", "cpu, cuda"]),
    (["train", "klfda"], ["--param", "device=abc"], ["--param device"]),
    (["train", "rpcca"], ["--param", "device=cuda:x"], ["--param device"]),
    (["train", "warca"], ["--param", "device=tpu"], ["--param device"]),
    # non-finite and negative values stay refused
    (["train", "xqda"], ["--reg", "nan"], ["--reg"]),
    (["train", "warca"], ["--lr", "inf"], ["--lr"]),
    (["train", "kissme"], ["--param", "ridge=-1"], ["--param ridge"]),
]


@pytest.mark.parametrize("command,args,needles", CASES,
                         ids=[" ".join(c + a) for c, a, _ in CASES])
def test_edge_values_are_one_line(capsys, toy_store, tmp_path, command, args, needles):
    out = tmp_path / "m.h5"
    result = reid_in_process(*command, "--store", toy_store, "--out", out, "--quiet", *args,
                             capsys=capsys)
    assert_one_line_error_in_process(result, *needles)
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == []


def test_cuda_device_without_a_gpu_is_one_line(capsys, toy_store, tmp_path):
    """A CUDA device on a machine without one: one line, not torch's assertion."""
    from reidcli.device import no_nvidia_driver

    if not no_nvidia_driver():
        pytest.skip("this machine may have a GPU")
    result = reid_in_process("train", "xqda", "--store", toy_store, "--out", tmp_path / "m.h5",
                             "--param", "device=cuda", capsys=capsys)
    assert_one_line_error_in_process(result, "--param device", "CUDA")


@pytest.mark.parametrize("seed", ["-1", HUGE])
def test_bow_extraction_seed_out_of_range(capsys, tiny_synthetic_root, tmp_path, seed):
    """Case "negative or huge seeds in BoW extraction": k-means' ValueError before."""
    out = tmp_path / "s.h5"
    result = reid_in_process("extract", "--dataset", "synthetic", "--root", tiny_synthetic_root,
                             "--option", "name=tiny", "--features", "bow", "--seed", seed,
                             "--out", out, capsys=capsys)
    assert_one_line_error_in_process(result, "--seed")
    assert not out.exists()


def test_library_names_the_parameter():
    """Without the CLI the errors name the parameter and the dimension."""
    import numpy as np

    from reidcli.errors import ParameterError
    from reidcli.features.bow import fit_bow
    from reidcli.metric.pca import PCA
    from reidcli.metric.xqda import XQDA

    x = np.random.default_rng(0).standard_normal((30, 6))
    pids, cams = np.arange(30) % 10, (np.arange(30) // 10) % 2
    with pytest.raises(ParameterError, match=r"PCA parameter dim=7 is above the dimension of "
                                             r"the input features \(6\) — use at most dim=6"):
        PCA(dim=7).fit(x)
    with pytest.raises(ParameterError, match="XQDA parameter max_dims=7"):
        XQDA(max_dims=7).fit(x, pids, cams)
    assert PCA(dim=6).fit(x).projection_.shape == (6, 6)       # the dimension itself is fine
    with pytest.raises(ParameterError, match="BoW parameter seed=-1"):
        fit_bow(np.zeros((2, 4, 11), np.float32), None, seed=-1)


def test_device_index_beyond_the_gpus_is_refused(monkeypatch):
    """``cuda:7`` on a two-GPU machine: one line, not torch's "invalid device ordinal"."""
    import torch

    from reidcli import device
    from reidcli.errors import ParameterError
    from reidcli.metric.constraints import check_device

    monkeypatch.setattr(device, "no_nvidia_driver", lambda: False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert check_device("XQDA", "cuda:1") == "cuda:1"
    with pytest.raises(ParameterError, match=r"device='cuda:7' names a GPU this machine does "
                                             r"not have \(2 visible\)"):
        check_device("XQDA", "cuda:7")
