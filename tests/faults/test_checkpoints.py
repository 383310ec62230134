"""Checkpoints never run code: every torch file is read with ``weights_only=True``
(reidcli.models.safe_load), and an unfinished run is not extracted from."""
from __future__ import annotations

import pickle
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

from reidcli.errors import InputFileError
from reidcli.models.checkpoint import ModelSpec, build_model, plain, save_model
from reidcli.models.safe_load import load_torch_file
from tests.faults.helpers import assert_one_line_error_in_process, reid_in_process

pytestmark = pytest.mark.usefixtures("one_torch_thread")


class _Payload:
    """Unpickling this creates the file ``marker`` (what a crafted checkpoint could do)."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _malicious(path: Path, marker: Path, wrap=lambda p: {"state_dict": p}) -> Path:
    torch.save(wrap(_Payload(marker)), path)
    return path


def _data(root: Path) -> list[str]:
    return ["--dataset", "synthetic", "--root", str(root), "--option", "name=tiny"]


def test_the_crafted_file_is_live(tmp_path):
    # control: the payload of these tests does run code when unpickled without weights_only
    marker = tmp_path / "control"
    torch.load(_malicious(tmp_path / "evil.pt", marker), weights_only=False)
    assert marker.exists()


# case: every damaged or unsafe torch file is one line naming its role, nothing executed
@pytest.mark.parametrize("case, needles", [
    ("missing", ["no such file"]),
    ("folder", ["is a directory"]),
    ("empty", ["is empty"]),
    ("random", ["not a torch file"]),
    ("truncated", ["truncated or damaged"]),
    ("plain pickle", ["plain pickle", "torch.save(model.state_dict()"]),
    ("malicious", ["needs pickle", "open)", "arbitrary code",
                   "torch.save(model.state_dict()"]),
    ("numpy inside", ["needs pickle", "numpy", "torch.save(model.state_dict()"]),
])
def test_load_torch_file_refusals(tmp_path, case, needles):
    marker = tmp_path / "marker"
    path = tmp_path / "f.pt"
    if case == "folder":
        path.mkdir()
    elif case == "empty":
        path.write_bytes(b"")
    elif case == "random":
        path.write_bytes(np.random.default_rng(0).bytes(256))
    elif case == "truncated":
        torch.save({"w": torch.zeros(1000)}, path)
        path.write_bytes(path.read_bytes()[:500])
    elif case == "plain pickle":
        path.write_bytes(pickle.dumps(_Payload(marker), protocol=4))
    elif case == "malicious":
        _malicious(path, marker)
    elif case == "numpy inside":
        torch.save({"w": np.zeros(3)}, path)
    with pytest.raises(InputFileError) as info:
        load_torch_file(path, "initial weights")
    message = info.value.message
    assert "\n" not in message and message.startswith(f"initial weights {path}")
    for needle in needles:
        assert needle in message, (needle, message)
    assert not marker.exists()


def test_load_torch_file_reads_state_dicts_of_other_toolkits(tmp_path):
    # torchreid-, fast-reid- and layumi-style files hold only tensors, dicts and numbers
    state = {"conv1.weight": torch.ones(2, 3, 1, 1)}
    styles = {"torchreid": {"state_dict": {"module." + k: v for k, v in state.items()},
                            "epoch": 60, "rank1": 0.9, "optimizer": None},
              "fastreid": {"model": {"backbone." + k: v for k, v in state.items()},
                           "iteration": 100},
              "layumi": {"model." + k: v for k, v in state.items()}}
    for name, obj in styles.items():
        torch.save(obj, tmp_path / f"{name}.pth")
        loaded = load_torch_file(tmp_path / f"{name}.pth", "initial weights")
        assert loaded.keys() == obj.keys()


def test_model_file_loads_weights_only(tmp_path):
    # case: our own model.pt needs no pickle, even when meta held numpy values and paths
    spec = ModelSpec(kind="bot", backbone="tiny", num_classes=2, input_size=(64, 32))
    meta = {"classes": [("regdb", "regdb", "all", np.int64(3))], "root": tmp_path,
            "seconds": np.float64(1.5), "cams": np.arange(2), "ids": {1, 2}}
    path = save_model(tmp_path / "model.pt", build_model(spec), spec, meta)
    payload = torch.load(path, weights_only=True)
    assert payload["meta"] == plain(meta)
    assert payload["meta"]["classes"] == [("regdb", "regdb", "all", 3)]
    assert payload["meta"]["root"] == str(tmp_path) and payload["meta"]["cams"] == [0, 1]


def test_malicious_init_is_refused_by_train(capsys, tiny_synthetic_root, tmp_path):
    # case: a crafted --init file created a file of its choosing before "no tensors match"
    marker = tmp_path / "marker"
    evil = _malicious(tmp_path / "evil.pth", marker)
    result = reid_in_process("train", "bot", *_data(tiny_synthetic_root), "--preset", "tiny",
                             "--ids-per-batch", "3", "--images-per-id", "4", "--epochs", "1",
                             "--init", evil, "--out", tmp_path / "run", capsys=capsys)
    assert_one_line_error_in_process(result, "--init", "needs pickle", "open)")
    assert not marker.exists()


def test_malicious_model_is_refused_by_extract(capsys, tiny_synthetic_root, tmp_path):
    # case: --model of reid extract unpickled the file with weights_only=False
    marker = tmp_path / "marker"
    evil = _malicious(tmp_path / "model.pt", marker, wrap=lambda p: {"format": p})
    result = reid_in_process("extract", "--model", evil, *_data(tiny_synthetic_root),
                             "--out", tmp_path / "s.h5", capsys=capsys)
    assert_one_line_error_in_process(result, "--model", "needs pickle", "open)")
    assert not marker.exists() and not (tmp_path / "s.h5").exists()


def _tiny_run(capsys, root: Path, run: Path) -> None:
    code, _, err = reid_in_process("train", "bot", *_data(root), "--preset", "tiny",
                                   "--ids-per-batch", "3", "--images-per-id", "4", "--epochs",
                                   "1", "--quiet", "--out", run, capsys=capsys)
    assert code == 0, err


def test_malicious_checkpoint_is_refused_by_resume(capsys, tiny_synthetic_root, tmp_path):
    # case: --resume unpickled RUN_DIR/checkpoint.pt with weights_only=False
    run, marker = tmp_path / "run", tmp_path / "marker"
    _tiny_run(capsys, tiny_synthetic_root, run)
    _malicious(run / "checkpoint.pt", marker, wrap=lambda p: {"format": "reidcli.model",
                                                              "config": p})
    assert zipfile.is_zipfile(run / "checkpoint.pt")
    result = reid_in_process("train", "bot", "--resume", run, capsys=capsys)
    assert_one_line_error_in_process(result, "checkpoint", "needs pickle", "open)")
    assert not marker.exists()


def test_unfinished_run_is_not_extracted_from(capsys, tiny_synthetic_root, tmp_path):
    # case: an interrupted run directory (checkpoint only) was extracted from without a word
    run = tmp_path / "run"
    _tiny_run(capsys, tiny_synthetic_root, run)
    (run / "model.pt").unlink()
    base = [*_data(tiny_synthetic_root), "--out", tmp_path / "s.h5"]
    result = reid_in_process("extract", "--model", run, *base, capsys=capsys)
    assert_one_line_error_in_process(result, "not finished", f"reid train bot --resume {run}")
    # the same run still in its .partial folder: named by the run or by the folder
    partial = run.rename(tmp_path / "run.partial")
    for given in (run, partial):
        result = reid_in_process("extract", "--model", given, *base, capsys=capsys)
        assert_one_line_error_in_process(result, "not finished", f"--resume {run}")
    assert not (tmp_path / "s.h5").exists()
