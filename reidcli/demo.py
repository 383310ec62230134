"""`reid demo`: the synthetic dataset through every pipeline stage that exists.

Stages run now: synthesise data → describe images (hand-crafted HSV stripe histograms and
colour-grid maps, until CNN extraction lands) → feature store → XQDA metric learning and C-DPCF
camera-specific pooling → evaluation of each. Each later stage adds itself here.
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
    _timed(steps, "extract", f"reid extract --features hsv-stripes --maps color-grid → {store}",
           lambda: extract_handcrafted_store(layout, store, ["hsv-stripes"],
                                             maps=["color-grid"], force=True,
                                             progress=progress, command=["reid", "demo"],
                                             inputs=[dataset_dir]))
    results = []
    runs = [("HSV stripe histograms, Euclidean (hand-crafted baseline)", None, None),
            ("HSV stripe histograms + XQDA", "xqda", "reid train xqda"),
            ("colour-grid maps + C-DPCF (K=10, E=64, G=6)", "cdpcf", "reid fit-pooling cdpcf")]
    for label, method, command in runs:
        model = None
        if method is not None:
            model = workdir / f"synthetic_{preset}_{method}.h5"
            _timed(steps, "train" if method == "xqda" else "fit-pooling",
                   f"{command} --store {store} --out {model}",
                   lambda m=method, out=model: _fit(m, store, out, progress),
                   output=lambda _, out=model: str(out))
        json_out = workdir / f"synthetic_{preset}_{method or 'hsv'}.json"
        report = _timed(steps, "eval", f"reid eval --store {store}"
                        + (f" --model {model}" if model else "") + f" --json {json_out}",
                        lambda m=model, j=json_out: evaluate_to_json(store, j, progress, m),
                        output=lambda r, j=json_out: str(j),
                        summary=lambda r: f"{r['num_valid_queries']} valid queries, "
                                          f"protocol {r['protocol']}")
        results.append({"method": label, "store": str(store), **_headline(report)})
    return DemoResult(steps, results)


def _fit(method: str, store: Path, out: Path, progress: bool) -> Path:
    if method == "xqda":
        from reidcli.metric.fit import fit_feature_metric_store
        from reidcli.metric.xqda import fit_xqda_arrays
        fit_feature_metric_store(store, out, "xqda", fit_xqda_arrays,
                                 {"lambda": 0.001, "solver": "svd", "normalize": "center-l2"},
                                 feature="hsv-stripes", force=True, progress=progress,
                                 command="reid demo")
    else:
        from reidcli.pooling.cdpcf import PoolingConfig
        from reidcli.pooling.fit import fit_pooling_store
        fit_pooling_store(store, out, PoolingConfig(method=method), force=True,
                          progress=progress, command="reid demo")
    return out


def evaluate_to_json(store: Path, json_out: Path, progress: bool = True,
                     model: Path | None = None) -> dict[str, Any]:
    """``reid eval --store STORE [--model M] --json OUT`` from Python; returns the report."""
    from reidcli.evaluation.engine import EvalOptions
    from reidcli.evaluation.report import build_report, write_json
    from reidcli.evaluation.run import StoreEvalRequest, evaluate_store
    from reidcli.provenance import make_provenance

    evaluation = evaluate_store(StoreEvalRequest(store=Path(store), model=model,
                                                 options=EvalOptions(progress=progress)))
    report = build_report(evaluation.protocol, evaluation.trials, evaluation.meta,
                          make_provenance(command=["reid", "demo"],
                                          inputs=[store] + ([model] if model else [])))
    write_json(json_out, report, force=True)
    return report


def _headline(report: dict[str, Any]) -> dict[str, Any]:
    cmc = report["cmc"]
    return {"rank-1": cmc[0], "rank-5": cmc[min(4, len(cmc) - 1)],
            "rank-10": cmc[min(9, len(cmc) - 1)], "mAP": report["mAP"],
            "mINP": report["mINP"], "queries": report["num_valid_queries"]}
