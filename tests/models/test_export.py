"""`reidcli.models.export`: every model kind to ONNX and TorchScript at tiny sizes, checked
independently of the export's own parity check (onnxruntime / torch.jit.load at batch 1 and
3 against LoadedModel.features), the sidecar JSON, refusals, --force semantics."""
from __future__ import annotations

import functools
import json
import sys
import warnings

import numpy as np
import pytest
import torch

from reidcli.errors import OutputError, OutputExistsError, ParameterError, UsageError
from reidcli.models import export as ex
from reidcli.models.checkpoint import ModelSpec, build_model, load_model, save_model
from reidcli.models.dgvae import dgvae_arch
from reidcli.provenance import sha256_file

SIZE = (32, 16)
MEAN = torch.tensor(ex.DEFAULT_MEAN).view(1, 3, 1, 1)
STD = torch.tensor(ex.DEFAULT_STD).view(1, 3, 1, 1)
#: our trainers' model kinds (DMG-Net writes a BoT: docs/methods/dmgnet.md)
SPECS = {
    "bot": ModelSpec(kind="bot", backbone="tiny", num_classes=5, input_size=SIZE),
    "pcb": ModelSpec(kind="pcb", backbone="tiny", num_classes=5, parts=2, reduced_dim=8,
                     input_size=SIZE),
    "rpp": ModelSpec(kind="pcb", backbone="tiny", num_classes=5, parts=2, reduced_dim=8,
                     rpp=True, input_size=SIZE),
    "dgvae": ModelSpec(kind="dgvae", input_size=SIZE,
                       dgvae=dgvae_arch("tiny", 4, SIZE).as_dict()),
}


@pytest.fixture(scope="module")
def model_files(tmp_path_factory):
    """{kind: model.pt} of randomly initialised tiny models, with non-trivial BN statistics."""
    folder = tmp_path_factory.mktemp("export_models")
    files = {}
    for kind, spec in SPECS.items():
        torch.manual_seed(0)
        model = build_model(spec)
        for module in model.modules():               # eval-mode BN must not be the identity
            if isinstance(module, torch.nn.modules.batchnorm._BatchNorm):
                module.running_mean.uniform_(-0.1, 0.1)
                module.running_var.uniform_(0.5, 1.5)
        files[kind] = save_model(folder / f"{kind}.pt", model, spec,
                                 meta={"method": kind, "dataset": "synthetic"})
    return files


@pytest.fixture(scope="module", autouse=True)
def torchlib_once():
    """torch's ONNX exporter rebuilds its onnxscript op registry (seconds) on every export;
    the tests build it once. Nothing changes if torch moved that function."""
    try:
        from torch.onnx._internal.exporter import _registration
        real = _registration.ONNXRegistry.from_torchlib
    except (ImportError, AttributeError):
        yield
        return
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_registration.ONNXRegistry, "from_torchlib",
                   staticmethod(functools.lru_cache(maxsize=None)(real)))
        yield


def _inputs(kind: str, batch: int, normalised: bool):
    """Seeded 0–1 images (normalised unless the graph does it) and, for DG-VAE, modalities."""
    g = torch.Generator().manual_seed(100 + batch)
    pixels = torch.rand(batch, 3, *SIZE, generator=g)
    images = (pixels - MEAN) / STD
    fed = images if normalised else pixels
    modality = torch.tensor([1, 0, 1][:batch], dtype=torch.int64)
    return images, modality, ((fed, modality) if kind == "dgvae" else (fed,))


def _expected(loaded, kind: str, images, modality, names):
    with torch.no_grad():
        feats = loaded.features(images, modality=modality) if kind == "dgvae" \
            else loaded.features(images)
    return [feats[n].numpy() for n in names]


# (kind, --include-normalization) — each kind once; normalisation in the graph on one of them
CASES = [("bot", False), ("pcb", True), ("rpp", False), ("dgvae", False)]
#: ONNX: RPP's soft pooling is PCB's graph plus one einsum (TorchScript covers it by default)
ONNX_CASES = [pytest.param(*c, marks=pytest.mark.slow) if c[0] == "rpp" else c for c in CASES]


def _jit_load(path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)        # torch.jit's deprecation notice
        return torch.jit.load(str(path))


@pytest.mark.parametrize("kind,in_graph", CASES)
def test_torchscript_every_kind_matches_the_model(model_files, tmp_path, kind, in_graph):
    loaded = load_model(model_files[kind])
    result = ex.export_torchscript(loaded, tmp_path / "m.pt", include_normalization=in_graph)
    assert result.max_abs_diff <= 1e-6
    names = result.record["features"]
    assert names == [{"bot": "bnneck", "pcb": "pcb_g", "rpp": "rpp_g",
                      "dgvae": "dgvae_idi"}[kind]]
    scripted = _jit_load(tmp_path / "m.pt")
    for batch in (1, 3):
        images, modality, fed = _inputs(kind, batch, normalised=not in_graph)
        with torch.no_grad():
            got = scripted(*fed).numpy()
        want = _expected(loaded, kind, images, modality, names)[0]
        assert got.shape == want.shape == (batch, result.record["outputs"][0]["dim"])
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)


@pytest.mark.parametrize("kind,in_graph", ONNX_CASES)
def test_onnx_every_kind_matches_the_model_in_onnxruntime(model_files, tmp_path, kind,
                                                          in_graph):
    pytest.importorskip("onnxruntime")
    import onnx
    import onnxruntime

    loaded = load_model(model_files[kind])
    out = tmp_path / "m.onnx"
    result = ex.export_onnx(loaded, out, include_normalization=in_graph)
    record = json.loads((tmp_path / "m.onnx.json").read_text())
    assert record == json.loads(json.dumps(result.record, default=str))
    assert record["parity"]["max_abs_diff"] <= 1e-4 and record["parity"]["passed"]
    assert record["normalization_in_graph"] is in_graph
    proto = onnx.load(str(out))
    assert record["opset"] == next(o.version for o in proto.opset_import if o.domain == "")
    batch_dim = proto.graph.input[0].type.tensor_type.shape.dim[0]
    assert batch_dim.dim_param and not batch_dim.dim_value           # dynamic batch axis
    session = onnxruntime.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    input_names = [i.name for i in session.get_inputs()]
    assert input_names == (["images", "modality"] if kind == "dgvae" else ["images"])
    for batch in (1, 3):
        images, modality, fed = _inputs(kind, batch, normalised=not in_graph)
        got = session.run(None, {n: t.numpy() for n, t in zip(input_names, fed)})
        want = _expected(loaded, kind, images, modality, record["features"])
        assert [g.shape for g in got] == [w.shape for w in want]
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=0, atol=1e-4)


def test_sidecar_records_what_a_consumer_needs(model_files, tmp_path):
    out = tmp_path / "bot.ts"
    ex.export_model(model_files["bot"], out, "torchscript", features=["bnneck", "gap"],
                    command=["reid", "export", "torchscript"])
    record = json.loads((tmp_path / "bot.ts.json").read_text())
    assert record["format"] == "reidcli.export" and record["exporter"] == "torchscript"
    assert record["file"] == "bot.ts" and record["input_size"] == list(SIZE)
    assert record["channel_order"] == "RGB" and record["value_range"] == [0.0, 1.0]
    assert record["mean"] == list(ex.DEFAULT_MEAN) and record["std"] == list(ex.DEFAULT_STD)
    assert record["normalization_in_graph"] is False
    assert record["inputs"] == [{"name": "images", "shape": ["N", 3, *SIZE],
                                 "dtype": "float32", "layout": "NCHW", "channel_order": "RGB",
                                 "values": "(0-1 RGB - mean) / std"}]
    assert [(o["name"], o["dim"], o["metric"]) for o in record["outputs"]] == \
        [("bnneck", 128, "euclidean"), ("pool5", 128, "euclidean")]
    assert record["features"] == ["bnneck", "pool5"] and record["opset"] is None
    assert record["versions"]["torch"] == torch.__version__
    assert record["source"]["kind"] == "bot" and record["source"]["method"] == "bot"
    assert record["source"]["spec"]["backbone"] == "tiny"
    prov = record["provenance"]
    assert prov["command"] == "reid export torchscript"
    assert prov["inputs"][0]["sha256"] == sha256_file(model_files["bot"])
    with torch.no_grad():                   # two outputs: a tuple in the feature order
        got = _jit_load(out)(torch.zeros(2, 3, *SIZE))
    assert isinstance(got, tuple) and [t.shape[1] for t in got] == [128, 128]


def test_dgvae_metric_is_cosine_and_pcb_records_its_parts(model_files, tmp_path):
    dg = ex.export_torchscript(model_files["dgvae"], tmp_path / "d.pt",
                               features=["idi", "dgvae-iai"])
    assert [(o["name"], o["metric"]) for o in dg.record["outputs"]] == \
        [("dgvae_idi", "cosine"), ("dgvae_iai", "cosine")]
    assert [i["name"] for i in dg.record["inputs"]] == ["images", "modality"]
    pcb = ex.export_torchscript(model_files["pcb"], tmp_path / "p.pt", features=["pcb_h"])
    assert [(o["name"], o["dim"], o["parts"]) for o in pcb.record["outputs"]] == \
        [("pcb_h", 2 * 8, 2)]


def test_failed_parity_check_writes_nothing_and_keeps_the_old_file(model_files, tmp_path,
                                                                   monkeypatch):
    real = ex.reference_outputs
    monkeypatch.setattr(ex, "reference_outputs",
                        lambda graph, inputs: [a + 1e-3 for a in real(graph, inputs)])
    out = tmp_path / "m.pt"
    with pytest.raises(OutputError, match=r"parity check: max \|Δ\| 0\.001 .* above "
                                          r"tolerance=0\.0001; nothing was written"):
        ex.export_torchscript(model_files["bot"], out)
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    out.write_bytes(b"user's file")
    with pytest.raises(OutputError, match="parity check"):
        ex.export_torchscript(model_files["bot"], out, force=True)
    assert out.read_bytes() == b"user's file"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.pt"]
    ok = ex.export_torchscript(model_files["bot"], out, force=True, tolerance=1e-2)
    assert 9e-4 < ok.max_abs_diff < 1.1e-3                # the tolerance is honoured


def test_force_semantics_cover_the_file_and_its_sidecar(model_files, tmp_path):
    out = tmp_path / "m.pt"
    ex.export_torchscript(model_files["bot"], out)
    with pytest.raises(OutputExistsError, match="already exists — allow overwriting"):
        ex.export_torchscript(model_files["bot"], out)
    out.unlink()                                           # the sidecar alone also blocks
    with pytest.raises(OutputExistsError, match=r"m\.pt\.json already exists"):
        ex.export_torchscript(model_files["bot"], out)
    assert not out.exists()
    before = (tmp_path / "m.pt.json").read_text()
    ex.export_torchscript(model_files["bot"], out, force=True, features=["pool5"])
    assert out.is_file() and (tmp_path / "m.pt.json").read_text() != before
    with pytest.raises(UsageError, match="is a folder"):
        ex.export_torchscript(model_files["bot"], tmp_path, force=True)
    with pytest.raises(UsageError, match="is the input"):
        ex.export_torchscript(model_files["bot"], model_files["bot"], force=True)


def test_bad_options_are_refused_in_parameter_terms(model_files, tmp_path):
    cases = [(dict(features=["pcb_g"]), "feature='pcb_g' is not a feature of this bot "
                                        "model, which gives bnneck, pool5"),
             (dict(tolerance=-1.0), "tolerance"),
             (dict(tolerance=float("nan")), "tolerance"),
             (dict(opset=17), "opset.*applies to ONNX only")]
    for options, needle in cases:
        with pytest.raises(ParameterError, match=needle):
            ex.export_torchscript(model_files["bot"], tmp_path / "m.pt", **options)
    with pytest.raises(ParameterError, match="opset"):
        ex.export_onnx(model_files["bot"], tmp_path / "m.onnx", opset=3)
    with pytest.raises(ParameterError, match="format"):
        ex.export_model(model_files["bot"], tmp_path / "m.x", "tflite")
    assert list(tmp_path.iterdir()) == []


def test_exporter_failures_are_one_line_and_write_nothing(model_files, tmp_path, monkeypatch):
    def boom(*args, **kwargs):
        raise RuntimeError("unsupported operator aten::foo\nmore detail")

    monkeypatch.setattr(torch.jit, "trace", boom)
    with pytest.raises(OutputError, match=r"the torchscript exporter failed on this model "
                                          r"\(RuntimeError: unsupported operator aten::foo\); "
                                          r"nothing was written — export to onnx instead"):
        ex.export_torchscript(model_files["bot"], tmp_path / "m.pt")
    pytest.importorskip("onnxruntime")

    def too_old(*args, **kwargs):           # an onnxscript older than torch's exporter needs
        raise ImportError("cannot import name 'opset23' from 'onnxscript.onnx_opset'")

    monkeypatch.setattr(torch.onnx, "export", too_old)
    with pytest.raises(UsageError, match=r"ONNX exporter cannot use the installed onnx/"
                                         r"onnxscript .*opset23.* — upgrade them: pip install "
                                         r"-U onnx onnxscript onnxruntime"):
        ex.export_onnx(model_files["bot"], tmp_path / "m.onnx")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("package", ex.ONNX_PACKAGES)
def test_missing_onnx_package_names_the_extra(model_files, tmp_path, monkeypatch, package):
    monkeypatch.setitem(sys.modules, package, None)           # import fails
    with pytest.raises(UsageError, match=rf"ONNX export needs {package}, which is not "
                                         r"installed — install the export extra: "
                                         r"pip install 'reidcli\[export\]'"):
        ex.export_onnx(model_files["bot"], tmp_path / "m.onnx")
    assert list(tmp_path.iterdir()) == []



def foreign_file(folder, name: str):
    """A torchreid OSNet x0.25 (fc 512) or a fast-reid BoT R50-ibn checkpoint, generated with
    the toolkits' key names by tests/models/test_foreign.py's helpers."""
    from reidcli.models.backbones import build_backbone
    from tests.models.test_foreign import fastreid_state, randomise, torchreid_state

    torch.manual_seed(0)
    trunk = "osnet_x0_25" if "osnet" in name else "resnet50_ibn_a"
    trunks = {trunk: randomise(build_backbone(trunk).state_dict(), 0)}
    if "osnet" in name:
        path, payload = folder / "osnet.pth", {
            "state_dict": torchreid_state(trunks, trunk, fc=512), "epoch": 3}
    else:
        path, payload = folder / "model_final.pth", {
            "model": fastreid_state(trunks, ibn=True), "iteration": 10}
    torch.save(payload, path)
    return path


FOREIGN = {"torchreid-osnet_x0_25": ("embed", 512), "fastreid-bot-r50-ibn": ("bnneck", 2048)}


# issue 31's done-when, in the default tier: ~15 s in all at 64×32 on 2 cores
@pytest.mark.parametrize("name", FOREIGN)
@pytest.mark.parametrize("fmt", ["onnx", "torchscript"])
def test_foreign_models_export_and_pass_parity(tmp_path, name, fmt):
    """Issue 31's done-when at a small input (64×32); the full-size `reid export onnx` runs
    are in tests/cli/test_export_cli.py (slow tier)."""
    if fmt == "onnx":
        pytest.importorskip("onnxruntime")
    loaded = load_model(foreign_file(tmp_path, name))
    assert loaded.spec.foreign["name"] == name
    loaded.spec.input_size = (64, 32)
    result = ex.export_model(loaded, tmp_path / "m.out", fmt)
    record = result.record
    assert [(o["name"], o["dim"]) for o in record["outputs"]] == [FOREIGN[name]]
    assert record["parity"]["max_abs_diff"] <= (1e-4 if fmt == "onnx" else 1e-6)
    assert record["source"]["kind"] == "foreign" and record["input_size"] == [64, 32]
    assert record["mean"] == list(loaded.spec.foreign["mean"])
