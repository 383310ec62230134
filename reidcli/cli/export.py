"""`reid export onnx|torchscript MODEL --out FILE` — a trained model as a portable file (thin
CLI over :mod:`reidcli.models.export`; torch and the exporters load only when a command
runs).

The exported graph takes a float32 [N, 3, H, W] image batch, RGB, normalised with the model's
mean/std (``--include-normalization``: plain 0–1 RGB), N dynamic, and returns the store
feature ``reid extract`` writes by default (or those named with ``--feature``). ``FILE.json``
beside it records the input size, normalisation, outputs, opset and the parity check.
"""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

HELP = "Export a trained model to ONNX or TorchScript (with a parity check)."
app = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False, help=HELP)

MODEL = typer.Argument(..., metavar="MODEL", help="A reid train run directory or its "
                       "model.pt.")
OUT = typer.Option(..., "--out", help="File to write (FILE.json is written beside it).")
FEATURE = typer.Option(None, "--feature", help="Store feature(s) to output, e.g. pcb_h or "
                       "bnneck,pool5 (repeatable; default: the one reid extract makes the "
                       "store's default).")
TOLERANCE = typer.Option(1e-4, "--tolerance", help="Largest max |Δ| the parity check "
                         "accepts between the exported file and the model.")
NORMALIZATION = typer.Option(False, "--include-normalization", help="Bake mean/std into the "
                             "graph: inputs are 0–1 RGB.")
FORCE = typer.Option(False, "--force", help="Overwrite FILE and FILE.json.")
ARCH = typer.Option(None, "--arch", help="The architecture of a foreign checkpoint when its "
                    "keys do not tell (docs/models.md lists them).")
ALLOW_PARTIAL = typer.Option(False, "--allow-partial", help="Load a foreign checkpoint with "
                             "missing or unexpected tensors anyway (warns).")


def _names(values: Optional[List[str]]) -> list[str]:
    return [v.strip() for item in values or [] for v in item.split(",") if v.strip()]


def _run(fmt: str, model: Path, out: Path, feature, opset, tolerance: float,
         include_normalization: bool, force: bool, arch: Optional[str],
         allow_partial: bool) -> None:
    from reidcli.cli.context import invoked_command, set_flag_names

    set_flag_names({"model": "MODEL"})
    from reidcli.models.export import export_model, require_onnx

    if fmt == "onnx":
        require_onnx()                  # before the model loads: the one-line hint first
    result = export_model(model, out, fmt, features=_names(feature) or None, opset=opset,
                          tolerance=tolerance, include_normalization=include_normalization,
                          force=force, command=invoked_command(), arch=arch,
                          allow_partial=allow_partial)
    record = result.record
    outputs = ", ".join(f"{o['name']} [N, {o['dim']}]" for o in record["outputs"])
    inputs = ", ".join(i["name"] for i in record["inputs"])
    parity = record["parity"]
    opset_text = f", opset {record['opset']}" if record.get("opset") is not None else ""
    typer.echo(f"wrote {result.path} and {result.sidecar.name}: {inputs} → {outputs}"
               f"{opset_text}; parity max |Δ| {parity['max_abs_diff']:.2g} "
               f"(≤ {parity['tolerance']:g}, batches "
               f"{' and '.join(str(b) for b in parity['batch_sizes'])})", err=True)


@app.command("onnx")
def onnx(model: Path = MODEL, out: Path = OUT, feature: Optional[List[str]] = FEATURE,
         opset: Optional[int] = typer.Option(None, "--opset", help="ONNX opset (default: "
                                             "the exporter's)."),
         tolerance: float = TOLERANCE, include_normalization: bool = NORMALIZATION,
         force: bool = FORCE, arch: Optional[str] = ARCH,
         allow_partial: bool = ALLOW_PARTIAL) -> None:
    """ONNX via torch.export, checked in onnxruntime (needs the export extra)."""
    _run("onnx", model, out, feature, opset, tolerance, include_normalization, force, arch,
         allow_partial)


@app.command("torchscript")
def torchscript(model: Path = MODEL, out: Path = OUT, feature: Optional[List[str]] = FEATURE,
                tolerance: float = TOLERANCE, include_normalization: bool = NORMALIZATION,
                force: bool = FORCE, arch: Optional[str] = ARCH,
                allow_partial: bool = ALLOW_PARTIAL) -> None:
    """TorchScript via torch.jit.trace, checked by loading it back."""
    _run("torchscript", model, out, feature, None, tolerance, include_normalization, force,
         arch, allow_partial)
