"""Export a trained model to ONNX or TorchScript, checked against the model it came from
(docs/cli.md, "Exporting a model").

The exported graph is :class:`FeatureGraph`: it takes a float32 image batch
``images`` [N, 3, H, W] — RGB, values in 0–1 then normalised with the model's mean/std
(the test transform of ``reid extract``), or plain 0–1 RGB with ``include_normalization``
— and returns the store feature(s) ``reid extract`` writes, raw: one [N, D] tensor per
feature (the store's default feature unless others are asked for; PCB: the part features
concatenated part-major, [N, p·C]). The batch axis N is dynamic. A DG-VAE with separate
visible and infrared trunks takes a second input ``modality`` [N] int64 (0 visible,
1 infrared; DG-VAE paper §3.1): the graph runs both trunks on every row and keeps each row's
own, so that it has no data-dependent shapes.

Beside the exported file, ``<file>.json`` records what a consumer needs: input size,
channel order, value range, mean/std (and whether the graph applies them), inputs, outputs
(name, dimension, metric), opset, versions, the parity check and the source model's
provenance.

Parity check: before the file is moved into place it is loaded back — by onnxruntime on CPU
(ONNX) or ``torch.jit.load`` (TorchScript) — and run on seeded random batches of
:data:`PARITY_BATCHES` images; its outputs are compared with the source model's
(:meth:`reidcli.models.checkpoint.LoadedModel.features`). A maximum absolute difference
above ``tolerance`` is an error and nothing is written.

ONNX needs the optional packages ``onnx``, ``onnxruntime`` and ``onnxscript``
(``pip install 'reidcli[export]'``).
"""
from __future__ import annotations

import contextlib
import copy
import dataclasses
import importlib
import io
import json
import os
import warnings
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import numpy as np
import torch
from torch import nn

from reidcli.errors import OutputError, ParameterError, UsageError
from reidcli.io import atomic_output, check_output, write_json_atomic
from reidcli.naming import param
from reidcli.params import Interval, check_param

EXPORT_FORMAT = "reidcli.export"
EXPORT_FORMAT_VERSION = 1
FORMATS = ("onnx", "torchscript")
#: default bound of the parity check's maximum absolute difference
DEFAULT_TOLERANCE = 1e-4
#: batch sizes of the parity check (1 and another than the tracing batch: the axis is dynamic)
PARITY_BATCHES = (1, 3)
#: batch size of the example the graph is traced/exported with (not 0 or 1, which
#: torch.export would specialise on)
EXAMPLE_BATCH = 2
#: packages ONNX export needs (the ``export`` extra of pyproject.toml)
ONNX_PACKAGES = ("onnx", "onnxruntime", "onnxscript")
INSTALL_HINT = "pip install 'reidcli[export]'"
#: ImageNet statistics of :mod:`reidcli.data.transforms` (the models' test transform)
DEFAULT_MEAN = (0.485, 0.456, 0.406)
DEFAULT_STD = (0.229, 0.224, 0.225)
#: the lowest ONNX opset a user may ask for
MIN_OPSET = 7
OWNER = "export"


def sidecar_path(path: str | os.PathLike) -> Path:
    """``model.onnx`` → ``model.onnx.json`` (the description written beside the export)."""
    path = Path(path)
    return path.with_name(path.name + ".json")


def require_onnx() -> dict[str, str]:
    """Import the ONNX packages; ``{package: version}``. One-line :class:`UsageError` naming
    the ``export`` extra when one is missing."""
    missing, found = [], {}
    for name in ONNX_PACKAGES:
        try:
            module = importlib.import_module(name)
        except ImportError:
            missing.append(name)
        else:
            found[name] = str(getattr(module, "__version__", "unknown"))
    if missing:
        verb = "is" if len(missing) == 1 else "are"
        raise UsageError(f"ONNX export needs {', '.join(missing)}, which {verb} not installed",
                         f"install the export extra: {INSTALL_HINT}")
    return found


# -- the graph ---------------------------------------------------------------------------------
def _dgvae_two_trunks(module: nn.Module) -> bool:
    return getattr(module, "trunk_visible", None) is not getattr(module, "trunk_infrared", None)


class FeatureGraph(nn.Module):
    """The exported function: ``images`` [N, 3, H, W] float32 (+ ``modality`` [N] int64 for a
    two-trunk DG-VAE) → one store feature [N, D] (a tuple of them when several are asked
    for), raw as ``reid extract`` stores them.

    ``include_normalization``: ``images`` are 0–1 RGB and the graph subtracts ``mean`` and
    divides by ``std`` itself (buffers [1, 3, 1, 1])."""

    def __init__(self, loaded, names: Sequence[str], include_normalization: bool = False,
                 mean: Sequence[float] = DEFAULT_MEAN, std: Sequence[float] = DEFAULT_STD,
                 interpolation: str = "bilinear"):
        super().__init__()
        self.net = loaded.module                  # registered: its weights are the graph's
        self.kind = loaded.kind
        self.names = list(names)
        self.include_normalization = bool(include_normalization)
        self.mean_values = tuple(float(v) for v in mean)
        self.std_values = tuple(float(v) for v in std)
        self.interpolation = str(interpolation)         # of the resize before the graph
        self.register_buffer("mean", torch.tensor(mean, dtype=torch.float32).view(1, 3, 1, 1))
        self.register_buffer("std", torch.tensor(std, dtype=torch.float32).view(1, 3, 1, 1))
        object.__setattr__(self, "_loaded", loaded)   # not a submodule: no second registration

    @property
    def takes_modality(self) -> bool:
        return self.kind == "dgvae" and _dgvae_two_trunks(self.net)

    def _dgvae(self, images: torch.Tensor, modality: torch.Tensor | None
               ) -> dict[str, torch.Tensor]:
        """μ_φ (and μ_ψ) of DG-VAE (paper §3.4); each row through its own trunk, chosen with
        ``torch.where`` instead of the model's row gather so the graph has no data-dependent
        shapes."""
        net = self.net
        if modality is None:
            f = net.trunk_visible(images)
        else:
            infrared = (modality != 0).reshape(-1, 1, 1, 1)
            f = torch.where(infrared, net.trunk_infrared(images), net.trunk_visible(images))
        out = {"dgvae_idi": net.encode_idi(f)[0]}
        if "dgvae_iai" in self.names:
            out["dgvae_iai"] = net.encode_iai(f)[0]
        return out

    def forward(self, images: torch.Tensor, modality: torch.Tensor | None = None):
        if self.include_normalization:
            images = (images - self.mean) / self.std
        if self.kind == "dgvae":
            feats = self._dgvae(images, modality)
        else:
            feats = self._loaded.features(images)
        out = tuple(feats[name] for name in self.names)
        return out[0] if len(out) == 1 else out


# -- options -----------------------------------------------------------------------------------
def _normal_name(name: str) -> str:
    return str(name).strip().lower().replace("-", "_")


def resolve_features(loaded, features: Sequence[str] | None = None) -> list[str]:
    """Store feature names to export: ``features`` (``pcb-g`` or ``pcb_g``), checked against
    the model's, or the store's default feature (what ``reid extract`` makes
    ``default_feature``: ``pcb_g``, ``rpp_g``, ``bnneck``, ``dgvae_idi``)."""
    from reidcli.models.checkpoint import DEFAULT_FEATURES, FEATURE_ALIASES

    available = list(loaded.feature_names)
    if not features:
        default = DEFAULT_FEATURES.get(loaded.family) or available[:1]
        return [default[0]]

    out: list[str] = []
    for name in features:
        canon = FEATURE_ALIASES.get(str(name).strip().lower(), _normal_name(name))
        if canon not in available:
            raise ParameterError(OWNER, "feature", name,
                                 f"is not a feature of this {loaded.family} model, which gives "
                                 f"{', '.join(available)}", "pick from those")
        if canon not in out:
            out.append(canon)
    return out


def _check_format(fmt: str) -> str:
    canon = str(fmt).strip().lower()
    if canon not in FORMATS:
        raise ParameterError(OWNER, "format", fmt, f"must be one of {', '.join(FORMATS)}")
    return canon


def _test_transform(loaded) -> tuple[tuple[float, ...], tuple[float, ...], str]:
    """(mean, std, interpolation) of the model's test transform: ImageNet statistics and
    bilinear resizing (:mod:`reidcli.data.transforms`), or what a foreign model's
    architecture record says (its toolkit's, ``spec.foreign``)."""
    record = getattr(loaded.spec, "foreign", None) or {}
    mean = record.get("mean") or DEFAULT_MEAN
    std = record.get("std") or DEFAULT_STD
    interpolation = str(record.get("interpolation") or "bilinear")
    return tuple(float(v) for v in mean), tuple(float(v) for v in std), interpolation


# -- parity ------------------------------------------------------------------------------------
def example_inputs(graph: FeatureGraph, input_size: tuple[int, int], batch: int,
                   seed: int = 0) -> tuple[torch.Tensor, ...]:
    """Seeded inputs of ``batch`` rows: 0–1 "pixels" (normalised unless the graph does it)
    and, for a two-trunk DG-VAE, alternating modalities starting with infrared."""
    generator = torch.Generator().manual_seed(seed + batch)
    h, w = input_size
    images = torch.rand(batch, 3, h, w, generator=generator)
    if not graph.include_normalization:
        images = (images - graph.mean) / graph.std
    if not graph.takes_modality:
        return (images.contiguous(),)
    modality = (torch.arange(batch) + 1) % 2
    return images.contiguous(), modality.to(torch.int64)


@torch.no_grad()
def reference_outputs(graph: FeatureGraph, inputs: Sequence[torch.Tensor]
                      ) -> list[np.ndarray]:
    """The source model's own features for ``inputs`` (through its
    :class:`~reidcli.models.checkpoint.LoadedModel`, not the graph's code)."""
    loaded = graph._loaded
    images = inputs[0]
    if graph.include_normalization:
        images = (images - graph.mean) / graph.std
    if loaded.kind == "dgvae":
        modality = inputs[1] if len(inputs) > 1 else torch.zeros(len(images), dtype=torch.int64)
        feats = loaded.features(images, modality=modality)
    else:
        feats = loaded.features(images)
    return [feats[name].float().cpu().numpy() for name in graph.names]


@dataclasses.dataclass
class Parity:
    """Result of a parity check: ``max_abs_diff`` over every output and batch,
    ``max_rel_diff`` (the same divided by the largest |reference value|), output ``dims``."""

    max_abs_diff: float
    max_rel_diff: float
    dims: list[int]
    tolerance: float
    batches: tuple[int, ...] = PARITY_BATCHES

    def as_dict(self, runtime: str) -> dict[str, Any]:
        return {"runtime": runtime, "batch_sizes": list(self.batches),
                "max_abs_diff": self.max_abs_diff, "max_rel_diff": self.max_rel_diff,
                "tolerance": self.tolerance, "passed": True}


def compare_outputs(graph: FeatureGraph, run, input_size: tuple[int, int], tolerance: float,
                    what: str) -> Parity:
    """Run ``run(inputs) → list of arrays`` (the exported file) and the source model on each
    :data:`PARITY_BATCHES` batch; :class:`OutputError` when a shape differs or the largest
    absolute difference exceeds ``tolerance`` (NaN counts as a failure)."""
    diffs, scale, dims = [], 0.0, []
    for batch in PARITY_BATCHES:
        inputs = example_inputs(graph, input_size, batch)
        expected = reference_outputs(graph, inputs)
        got = [np.asarray(a, dtype=np.float32) for a in run(inputs)]
        shapes = [a.shape for a in got]
        if shapes != [e.shape for e in expected]:
            raise OutputError(f"{what} failed its parity check: at batch {batch} it returns "
                              f"shapes {shapes}, the model {[e.shape for e in expected]}; "
                              "nothing was written",
                              "export to the other format, or report the model's "
                              "architecture")
        for a, e in zip(got, expected):
            if a.size:
                diffs.append(float(np.max(np.abs(a - e))))           # NaN stays NaN
                scale = max(scale, float(np.max(np.abs(e))))
        dims = [int(a.shape[1]) for a in got]
    worst = float(np.max(diffs)) if diffs else 0.0
    if not np.isfinite(worst) or worst > tolerance:
        shown = f"{worst:.3g}" if np.isfinite(worst) else "NaN/inf"
        raise OutputError(f"{what} failed its parity check: max |Δ| {shown} against the "
                          f"model's own features is above {param('tolerance', f'{tolerance:g}')}"
                          "; nothing was written",
                          "export to the other format, or raise "
                          f"{param('tolerance')} if that difference is acceptable")
    return Parity(max_abs_diff=worst, max_rel_diff=worst / scale if scale else 0.0,
                  dims=dims, tolerance=tolerance)


# -- writers -----------------------------------------------------------------------------------
@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """The exporters' own warnings (deprecations, tracer notes) and progress prints (onnxscript's
    optimiser) are not the user's business; failures still raise."""
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        yield


def _exporter_failed(exc: Exception, fmt: str) -> OutputError:
    first = (str(exc).strip().splitlines() or [""])[0][:200]
    other = "torchscript" if fmt == "onnx" else "onnx"
    return OutputError(f"the {fmt} exporter failed on this model ({type(exc).__name__}: "
                       f"{first}); nothing was written",
                       f"export to {other} instead, or report the model's architecture")


def _input_names(graph: FeatureGraph) -> list[str]:
    return ["images", "modality"] if graph.takes_modality else ["images"]


@torch.no_grad()
def _write_onnx(graph: FeatureGraph, tmp: Path, input_size: tuple[int, int],
                opset: int | None) -> int:
    """Export ``graph`` with torch's ONNX exporter (torch.export based) to ``tmp``, every
    weight inside the file; returns the opset written."""
    names = _input_names(graph)
    example = example_inputs(graph, input_size, EXAMPLE_BATCH)
    batch = torch.export.Dim("batch", min=1)
    dynamic = {name: {0: batch} for name in names}
    try:
        with _quiet():
            program = torch.onnx.export(graph, example, None, dynamo=True, input_names=names,
                                        output_names=list(graph.names), opset_version=opset,
                                        dynamic_shapes=dynamic, verbose=False)
    except ImportError as exc:         # an onnxscript older than this torch's exporter needs
        raise UsageError(f"torch {torch.__version__}'s ONNX exporter cannot use the installed "
                         f"onnx/onnxscript ({type(exc).__name__}: {exc}); nothing was written",
                         "upgrade them: pip install -U onnx onnxscript onnxruntime") from exc
    except (RuntimeError, ValueError, TypeError, NotImplementedError, AssertionError,
            torch.onnx.OnnxExporterError) as exc:
        raise _exporter_failed(exc, "onnx") from exc
    program.save(tmp, external_data=False)          # weights inside: one file to rename
    import onnx

    proto = onnx.load(str(tmp), load_external_data=False)
    written = next((int(o.version) for o in proto.opset_import if o.domain in ("", "ai.onnx")),
                   None)
    if opset is not None and written != opset:
        raise OutputError(f"the onnx exporter wrote opset {written}, not the "
                          f"{param('opset', opset)} asked for; nothing was written",
                          f"drop {param('opset')} or ask for {written}")
    return written


def _run_onnx(tmp: Path, names: Sequence[str]):
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    session = onnxruntime.InferenceSession(str(tmp), options,
                                           providers=["CPUExecutionProvider"])

    def run(inputs: Sequence[torch.Tensor]) -> list[np.ndarray]:
        return session.run(None, {n: t.numpy() for n, t in zip(names, inputs)})
    return run


@torch.no_grad()
def _write_torchscript(graph: FeatureGraph, tmp: Path, input_size: tuple[int, int]) -> None:
    example = example_inputs(graph, input_size, EXAMPLE_BATCH)
    try:
        with _quiet():
            traced = torch.jit.trace(graph, example, check_trace=False)
    except (RuntimeError, ValueError, TypeError, NotImplementedError, AssertionError) as exc:
        raise _exporter_failed(exc, "torchscript") from exc
    with _quiet():                            # torch.jit's deprecation notice
        torch.jit.save(traced, str(tmp))


def _run_torchscript(tmp: Path):
    with _quiet():                            # torch.jit's deprecation notice
        module = torch.jit.load(str(tmp), map_location="cpu").eval()

    @torch.no_grad()
    def run(inputs: Sequence[torch.Tensor]) -> list[np.ndarray]:
        out = module(*inputs)
        out = out if isinstance(out, (tuple, list)) else (out,)
        return [o.float().numpy() for o in out]
    return run


# -- the sidecar -------------------------------------------------------------------------------
def _source_record(loaded) -> dict[str, Any]:
    from reidcli.models.checkpoint import plain

    meta = loaded.meta if isinstance(loaded.meta, Mapping) else {}
    record: dict[str, Any] = {"kind": loaded.kind, "family": loaded.family,
                              "spec": plain(loaded.spec.as_dict())}
    for key in ("method", "dataset", "epoch"):
        if key in meta:
            record[key] = plain(meta[key])
    return record


def _outputs(graph: FeatureGraph, dims: Sequence[int], spec) -> list[dict[str, Any]]:
    from reidcli.models.checkpoint import feature_dims, feature_metric

    try:
        parts = {k: int(v[1]) for k, v in feature_dims(spec).items()}
    except (KeyError, TypeError, ValueError):
        parts = {}
    return [{"name": name, "shape": ["N", int(dim)], "dtype": "float32", "dim": int(dim),
             "parts": parts.get(name, 1), "metric": feature_metric(spec, name)}
            for name, dim in zip(graph.names, dims)]


def describe_export(graph: FeatureGraph, fmt: str, file: Path, input_size: tuple[int, int],
                    parity: Parity, opset: int | None, versions: Mapping[str, str],
                    command: Sequence[str] | str | None = None) -> dict[str, Any]:
    """The sidecar JSON record of an export (see the module docstring)."""
    from reidcli.provenance import make_provenance

    loaded = graph._loaded
    h, w = (int(v) for v in input_size)
    mean, std = list(graph.mean_values), list(graph.std_values)
    inputs = [{"name": "images", "shape": ["N", 3, h, w], "dtype": "float32",
               "layout": "NCHW", "channel_order": "RGB",
               "values": "0-1 RGB" if graph.include_normalization else
               "(0-1 RGB - mean) / std"}]
    if graph.takes_modality:
        inputs.append({"name": "modality", "shape": ["N"], "dtype": "int64",
                       "values": "0 visible, 1 infrared"})
    runtime = "onnxruntime CPUExecutionProvider" if fmt == "onnx" else "torch.jit.load (CPU)"
    return {
        "format": EXPORT_FORMAT, "format_version": EXPORT_FORMAT_VERSION,
        "exporter": fmt, "file": file.name,
        "input_size": [h, w], "channel_order": "RGB", "value_range": [0.0, 1.0],
        "mean": mean, "std": std, "normalization_in_graph": graph.include_normalization,
        "resize": f"{graph.interpolation} (antialiased) to {h}x{w}, aspect ratio not kept",
        "inputs": inputs, "outputs": _outputs(graph, parity.dims, loaded.spec),
        "features": list(graph.names), "opset": opset,
        "versions": {"torch": torch.__version__, **dict(versions)},
        "parity": parity.as_dict(runtime),
        "source": _source_record(loaded),
        "provenance": make_provenance(command=command, inputs=[loaded.path]),
    }


# -- entry points ------------------------------------------------------------------------------
@dataclasses.dataclass
class ExportResult:
    """What :func:`export_model` wrote: the model file, its sidecar JSON and the record."""

    path: Path
    sidecar: Path
    record: dict[str, Any]

    @property
    def max_abs_diff(self) -> float:
        return float(self.record["parity"]["max_abs_diff"])


def _on_cpu(loaded):
    if loaded.device.type == "cpu":
        return loaded
    module = copy.deepcopy(loaded.module).cpu().eval()
    return dataclasses.replace(loaded, module=module, device=torch.device("cpu"))


def export_model(model, path: str | os.PathLike, fmt: str = "onnx", *,
                 features: Sequence[str] | None = None, opset: int | None = None,
                 tolerance: float = DEFAULT_TOLERANCE, include_normalization: bool = False,
                 force: bool = False, command: Sequence[str] | str | None = None,
                 arch: str | None = None, allow_partial: bool = False) -> ExportResult:
    """Export ``model`` (a :class:`~reidcli.models.checkpoint.LoadedModel`, or a run
    directory / model file to load) to ``path`` as ``fmt`` ("onnx" | "torchscript") and its
    description to ``<path>.json``.

    ``features``: store features to output (default: the store's default feature);
    ``opset``: ONNX opset (default: the exporter's); ``tolerance``: the largest max |Δ| the
    parity check accepts; ``include_normalization``: the graph takes 0–1 RGB and normalises
    itself; ``arch``/``allow_partial``: how a foreign checkpoint path loads
    (:func:`~reidcli.models.checkpoint.load_model`). Both files are written atomically; an
    existing one needs ``force``; a failing parity check writes nothing."""
    fmt = _check_format(fmt)
    tolerance = check_param(OWNER, "tolerance", tolerance, Interval(float, 0, None))
    if opset is not None:
        if fmt != "onnx":
            raise ParameterError(OWNER, "opset", opset, "applies to ONNX only",
                                 "drop it for a TorchScript export")
        opset = check_param(OWNER, "opset", opset, Interval(int, MIN_OPSET, None))
    versions = require_onnx() if fmt == "onnx" else {}
    from reidcli.models.checkpoint import load_model, resolve_model_file

    source = model.path if hasattr(model, "features") else resolve_model_file(model)
    path, sidecar = Path(path), sidecar_path(path)
    check_output(path, force=force, option="out", inputs=[source])
    check_output(sidecar, force=force, option="out", inputs=[source])
    loaded = _on_cpu(model if hasattr(model, "features") else
                     load_model(source, device="cpu", arch=arch, allow_partial=allow_partial))
    names = resolve_features(loaded, features)
    mean, std, interpolation = _test_transform(loaded)
    graph = FeatureGraph(loaded, names, include_normalization, mean, std,
                         interpolation).eval()
    input_size = tuple(int(v) for v in loaded.input_size)
    what = f"the {fmt} export of {loaded.path}"
    written_opset = None
    with atomic_output(path, force=force, option="out", inputs=[loaded.path]) as tmp:
        if fmt == "onnx":
            written_opset = _write_onnx(graph, tmp, input_size, opset)
            run = _run_onnx(tmp, _input_names(graph))
        else:
            _write_torchscript(graph, tmp, input_size)
            run = _run_torchscript(tmp)
        parity = compare_outputs(graph, run, input_size, tolerance, what)
        record = describe_export(graph, fmt, path, input_size, parity, written_opset,
                                 versions, command)
        json.dumps(record, default=str)               # serialisable before anything moves
    write_json_atomic(sidecar, record, force=True, option="out", inputs=[loaded.path])
    return ExportResult(path=path, sidecar=sidecar, record=record)


def export_onnx(model, path: str | os.PathLike, **options: Any) -> ExportResult:
    """:func:`export_model` to ONNX (opset chosen by the exporter unless ``opset``)."""
    return export_model(model, path, "onnx", **options)


def export_torchscript(model, path: str | os.PathLike, **options: Any) -> ExportResult:
    """:func:`export_model` to TorchScript (``torch.jit.trace``)."""
    return export_model(model, path, "torchscript", **options)


__all__ = ["FeatureGraph", "ExportResult", "Parity", "export_model", "export_onnx",
           "export_torchscript", "require_onnx", "resolve_features", "sidecar_path",
           "compare_outputs", "reference_outputs", "example_inputs", "describe_export",
           "FORMATS", "DEFAULT_TOLERANCE", "PARITY_BATCHES", "INSTALL_HINT", "EXPORT_FORMAT"]
