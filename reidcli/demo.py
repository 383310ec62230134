"""`reid demo`: the synthetic dataset through every pipeline stage that exists.

Stages run now: synthesise data → describe images (hand-crafted HSV stripe histograms, until
`reid extract` lands) → feature store → evaluation. Each later stage adds itself here.
Everything lands in one work folder; the demo replaces its own previous outputs there.
"""
from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any, Callable

from reidcli.data.registry import data_root


@dataclasses.dataclass
class DemoStep:
    """One stage of the demo: what ran, what it wrote, how long it took."""

    stage: str
    command: str
    output: str
    seconds: float
    summary: str = ""


@dataclasses.dataclass
class DemoResult:
    steps: list[DemoStep]
    results: list[dict[str, Any]]      # one row per evaluated store/method


def _timed(steps: list[DemoStep], stage: str, command: str, fn: Callable[[], Any],
           output: Callable[[Any], str] = str, summary: Callable[[Any], str] = lambda r: ""
           ) -> Any:
    start = time.perf_counter()
    value = fn()
    steps.append(DemoStep(stage, command, output(value), time.perf_counter() - start,
                          summary(value)))
    return value


def _demo_name(preset: str, seed: int) -> str:
    """Folder name of the demo's dataset: the preset, suffixed by a non-default seed."""
    return preset if seed == 0 else f"{preset}-seed{seed}"


def run_demo(root: str | Path | None = None, workdir: str | Path = "reid-demo",
             preset: str = "default", seed: int = 0, progress: bool = True) -> DemoResult:
    """Run the demo; returns the steps and a results table (rank-1, mAP, ... per method)."""
    from reidcli.data.synthetic import generate
    from reidcli.features.extract import extract_handcrafted_store
    from reidcli.features.layout import dataset_layout

    root = data_root(root)
    root.mkdir(parents=True, exist_ok=True)
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    steps: list[DemoStep] = []
    _timed(steps, "data", f"reid data synth --preset {preset} --out {root} --seed {seed}",
           lambda: generate(root, preset=preset, name=_demo_name(preset, seed), seed=seed,
                            progress=progress))
    layout = _timed(steps, "records", "dataset_layout('synthetic')",
                    lambda: dataset_layout("synthetic", root, progress=progress,
                                          name=_demo_name(preset, seed)),
                    output=lambda l: f"{len(l.records)} images",
                    summary=lambda l: f"{len(l.trials)} trial(s), rule {l.eval_rule}")
    store = workdir / f"synthetic_{preset}_hsv.h5"
    dataset_dir = Path(layout.records["path"].iloc[0]).parents[2]
    _timed(steps, "extract", f"hsv-stripes descriptors → {store}",
           lambda: extract_handcrafted_store(layout, store, ["hsv-stripes"], force=True,
                                             progress=progress, command=["reid", "demo"],
                                             inputs=[dataset_dir]))
    json_out = workdir / f"synthetic_{preset}_hsv.json"
    report = _timed(steps, "eval", f"reid eval --store {store} --json {json_out}",
                    lambda: evaluate_to_json(store, json_out, progress=progress),
                    output=lambda r: str(json_out),
                    summary=lambda r: f"{r['num_valid_queries']} valid queries, "
                                      f"protocol {r['protocol']}")
    results = [{"method": "HSV stripe histograms, Euclidean (hand-crafted baseline)",
                "store": str(store), **_headline(report)}]
    return DemoResult(steps, results)


def evaluate_to_json(store: Path, json_out: Path, progress: bool = True) -> dict[str, Any]:
    """``reid eval --store STORE --json OUT`` from Python; returns the report."""
    from reidcli.evaluation.engine import EvalOptions
    from reidcli.evaluation.report import build_report, write_json
    from reidcli.evaluation.run import StoreEvalRequest, evaluate_store
    from reidcli.provenance import make_provenance

    evaluation = evaluate_store(StoreEvalRequest(store=Path(store),
                                                 options=EvalOptions(progress=progress)))
    report = build_report(evaluation.protocol, evaluation.trials, evaluation.meta,
                          make_provenance(command=["reid", "demo"], inputs=[store]))
    write_json(json_out, report, force=True)
    return report


def _headline(report: dict[str, Any]) -> dict[str, Any]:
    cmc = report["cmc"]
    return {"rank-1": cmc[0], "rank-5": cmc[min(4, len(cmc) - 1)],
            "rank-10": cmc[min(9, len(cmc) - 1)], "mAP": report["mAP"],
            "mINP": report["mINP"], "queries": report["num_valid_queries"]}
