"""`reid export onnx|torchscript MODEL --out FILE`: files written, one-line errors naming the
flags, the missing-extra hint, --force semantics (in process: no torch import per case)."""
from __future__ import annotations

import json
import sys

import pytest
import torch

from reidcli.models.checkpoint import ModelSpec, build_model, save_model
from tests.faults.helpers import assert_one_line_error_in_process, reid_in_process

SIZE = (32, 16)


@pytest.fixture(scope="module")
def bot_file(tmp_path_factory):
    spec = ModelSpec(kind="bot", backbone="tiny", num_classes=3, input_size=SIZE)
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("export_cli")
    return save_model(folder / "model.pt", build_model(spec), spec)


def test_help_lists_both_formats(capsys):
    code, out, _ = reid_in_process("export", "--help", capsys=capsys)
    assert code == 0 and "onnx" in out and "torchscript" in out
    code, out, _ = reid_in_process("export", "onnx", "--help", capsys=capsys)
    assert code == 0 and "--opset" in out and "--include-normalization" in out


def test_torchscript_export_writes_the_file_and_its_json(bot_file, tmp_path, capsys):
    out = tmp_path / "bot.pt"
    code, _, err = reid_in_process("export", "torchscript", bot_file, "--out", out,
                                   "--feature", "bnneck,pool5", "--include-normalization",
                                   capsys=capsys)
    assert code == 0, err
    assert f"wrote {out} and bot.pt.json: images → bnneck [N, 128], pool5 [N, 128]" in err
    record = json.loads((tmp_path / "bot.pt.json").read_text())
    assert record["normalization_in_graph"] is True and record["features"] == ["bnneck",
                                                                              "pool5"]
    assert record["provenance"]["command"].startswith("reid export torchscript ")
    # existing output: refused without --force, naming it; replaced with it
    result = reid_in_process("export", "torchscript", bot_file, "--out", out, capsys=capsys)
    assert_one_line_error_in_process(result, "--out", "already exists", "--force")
    code, _, err = reid_in_process("export", "torchscript", bot_file, "--out", out, "--force",
                                   capsys=capsys)
    assert code == 0, err
    assert json.loads((tmp_path / "bot.pt.json").read_text())["features"] == ["bnneck"]


def test_onnx_export_with_an_opset_prints_one_line(bot_file, tmp_path, capsys):
    pytest.importorskip("onnxruntime")
    out = tmp_path / "bot.onnx"
    code, stdout, err = reid_in_process("export", "onnx", bot_file, "--out", out, "--opset",
                                        "18", capsys=capsys)
    assert code == 0, err
    assert stdout == "" and len(err.strip().splitlines()) == 1       # no exporter chatter
    assert "images → bnneck [N, 128], opset 18; parity max |Δ|" in err
    assert json.loads((tmp_path / "bot.onnx.json").read_text())["opset"] == 18


@pytest.mark.parametrize("args,needles", [
    # an unknown feature of this model
    (["--feature", "pcb_g"], ["--feature 'pcb_g' is not a feature of this bot model",
                              "bnneck, pool5"]),
    # a negative tolerance
    (["--tolerance", "-1"], ["--tolerance", "≥ 0"]),
    # --opset is for ONNX only
    (["--opset", "17"], ["No such option", "--opset"]),
])
def test_bad_options_are_one_line_errors(bot_file, tmp_path, capsys, args, needles):
    result = reid_in_process("export", "torchscript", bot_file, "--out", tmp_path / "m.pt",
                             *args, capsys=capsys)
    assert_one_line_error_in_process(result, *needles)
    assert list(tmp_path.iterdir()) == []


def test_missing_model_is_one_line(tmp_path, capsys):
    result = reid_in_process("export", "torchscript", tmp_path / "none", "--out",
                             tmp_path / "m.pt", capsys=capsys)
    assert_one_line_error_in_process(result, "MODEL", "no such file or directory")


def test_missing_onnx_extra_names_it(bot_file, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)          # import fails
    result = reid_in_process("export", "onnx", bot_file, "--out", tmp_path / "m.onnx",
                             capsys=capsys)
    assert_one_line_error_in_process(result, "onnxruntime", "not installed",
                                     "pip install 'reidcli[export]'")
    assert list(tmp_path.iterdir()) == []


def test_failed_parity_check_is_one_line_and_writes_nothing(bot_file, tmp_path, capsys,
                                                            monkeypatch):
    from reidcli.models import export

    real = export.reference_outputs
    monkeypatch.setattr(export, "reference_outputs",
                        lambda graph, inputs: [a * 1.5 + 1 for a in real(graph, inputs)])
    result = reid_in_process("export", "torchscript", bot_file, "--out", tmp_path / "m.pt",
                             "--tolerance", "1e-3", capsys=capsys)
    assert_one_line_error_in_process(result, "failed its parity check", "--tolerance 0.001",
                                     "nothing was written")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow          # full-size ResNet-50-IBN / OSNet: tens of seconds each on CPU
@pytest.mark.parametrize("name", ["fastreid-bot-r50-ibn", "torchreid-osnet_x0_25"])
def test_reid_export_onnx_of_foreign_models_passes_parity(tmp_path, capsys, name):
    """Issue 31's done-when: `reid export onnx` of a fast-reid BoT R50-ibn and a torchreid
    OSNet (checkpoints built by tests/models/test_foreign.py's helpers) passes its parity
    check at the models' own input size."""
    pytest.importorskip("onnxruntime")
    from tests.models.test_export import FOREIGN, foreign_file

    out = tmp_path / "m.onnx"
    code, _, err = reid_in_process("export", "onnx", foreign_file(tmp_path, name), "--out", out,
                                   capsys=capsys)
    assert code == 0, err
    record = json.loads((tmp_path / "m.onnx.json").read_text())
    assert record["parity"]["passed"] and record["parity"]["max_abs_diff"] <= 1e-4
    assert (record["outputs"][0]["name"], record["outputs"][0]["dim"]) == FOREIGN[name]
    assert record["input_size"] == [256, 128]
