"""`reid demo`: the synthetic dataset through every pipeline stage that exists.

Stages run now: synthesise data → describe images (hand-crafted HSV stripe histograms and
colour-grid maps) → feature store → XQDA metric learning and C-DPCF camera-specific pooling →
a tiny BoT network trained on CPU and its BNNeck embeddings → test-time adaptation of those
embeddings (camera Norm, DART3 LITE) → evaluation of each → a CMC plot of every method and a
t-SNE of the embeddings. Each later stage adds itself here.
Everything lands in one work folder; the demo replaces its own previous outputs there.
"""
from __future__ import annotations

import dataclasses
import json
import shlex
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
    reports = [workdir / f"synthetic_{preset}_{m or 'hsv'}.json" for _, m, _ in runs]
    cnn_store, cnn_json = _train_tiny_cnn(steps, root, workdir, preset, seed, progress)
    report = json.loads(cnn_json.read_text())
    results.append({"method": "tiny BoT (reid train bot --preset tiny), BNNeck",
                    "store": str(cnn_store), **_headline(report)})
    adapted = _adapt(steps, workdir, preset, cnn_store, progress)
    for label, (store_path, json_path) in adapted.items():
        results.append({"method": f"tiny BoT + {label}", "store": str(store_path),
                        **_headline(json.loads(json_path.read_text()))})
    _plots(steps, workdir, preset, reports + [cnn_json] + [j for _, j in adapted.values()],
           cnn_store)
    return DemoResult(steps, results)


def _train_tiny_cnn(steps: list[DemoStep], root: Path, workdir: Path, preset: str,
                    seed: int, progress: bool) -> tuple[Path, Path]:
    """``reid train bot --preset tiny`` on the synthetic train split (CPU, ~20 s on the
    default preset), ``reid extract --model``, ``reid eval``."""
    from reidcli.features.layout import dataset_layout
    from reidcli.features.model_extract import extract_model_store
    from reidcli.training.config import make_config
    from reidcli.training.engine import train_model

    name = _demo_name(preset, seed)
    run = workdir / f"synthetic_{preset}_bot_tiny"
    small = preset == "tiny"
    cfg = make_config("bot", preset="tiny", dataset="synthetic", root=str(root),
                      options={"name": name}, input_size=(128, 64), epochs=2 if small else 8,
                      p=4 if small else 8, device="cpu")
    _timed(steps, "train", f"reid train bot --preset tiny --input-size 128x64 --epochs "
                           f"{cfg.epochs} --out {run}",
           lambda: train_model(cfg, run, force=True, progress=progress,
                               command=["reid", "demo"]),
           output=lambda r: str(r.model_path),
           summary=lambda r: f"{r.iterations} iterations, loss {r.first_loss:.2f} → "
                             f"{r.last_loss:.2f}, {r.images_per_s:.0f} images/s")
    store = workdir / f"synthetic_{preset}_bot_tiny.h5"
    layout = dataset_layout("synthetic", root, progress=False, name=name)
    _timed(steps, "extract", f"reid extract --model {run} → {store}",
           lambda: extract_model_store(layout, store, run, device="cpu", force=True,
                                       progress=progress, command=["reid", "demo"]))
    json_out = workdir / f"synthetic_{preset}_bot_tiny.json"
    _timed(steps, "eval", f"reid eval --store {store} --json {json_out}",
           lambda: evaluate_to_json(store, json_out, progress),
           output=lambda r: str(json_out),
           summary=lambda r: f"{r['num_valid_queries']} valid queries, feature {r['feature']}")
    return store, json_out


def _adapt(steps: list[DemoStep], workdir: Path, preset: str, store: Path,
           progress: bool) -> dict[str, tuple[Path, Path]]:
    """``reid adapt norm`` and ``reid adapt dart3-lite`` on the BoT store, then ``reid eval``
    of each; returns {label: (adapted store, report)}."""
    from reidcli.adapt import AdaptConfig, adapt_store

    out = {}
    for label, method, cfg in (("camera Norm", "norm", AdaptConfig("norm")),
                               ("DART3 LITE", "dart3-lite", AdaptConfig("dart3"))):
        adapted = workdir / f"synthetic_{preset}_bot_tiny_{method}.h5"
        _timed(steps, "adapt", f"reid adapt {method} --store {store} --out {adapted}",
               lambda c=cfg, a=adapted: adapt_store(store, a, c, force=True, progress=progress,
                                                    command=["reid", "demo"]),
               output=lambda r: str(r.out),
               summary=lambda r: f"{r.num_queries} queries, "
                                 f"{r.adaptation.per_query_seconds * 1e3:.2f} ms/query")
        json_out = workdir / f"synthetic_{preset}_bot_tiny_{method}.json"
        _timed(steps, "eval", f"reid eval --store {adapted} --json {json_out}",
               lambda a=adapted, j=json_out: evaluate_to_json(a, j, progress),
               output=lambda r, j=json_out: str(j),
               summary=lambda r: f"{r['num_valid_queries']} valid queries")
        out[label] = (adapted, json_out)
    return out


#: how the legend names the networks that made a store (its provenance's ``model.kind``)
NETWORK_NAMES = {"bot": "BoT", "pcb": "PCB"}


def cmc_label(report: dict[str, Any]) -> str:
    """Legend name of a ``reid eval --json`` report, from the report itself: what made the
    compared vectors (the network in the store's provenance, the feature, or the conv maps a
    pooling model reads) and the fitted method or the distance — e.g. ``hsv-stripes
    (euclidean)``, ``hsv-stripes + XQDA``, ``color-grid + C-DPCF``, ``BoT tiny bnneck
    (euclidean)``."""
    from reidcli.plotting.cmc import METHOD_NAMES

    prov = report.get("store_provenance") or {}
    what = report.get("feature") or ",".join(prov.get("maps") or []) or "features"
    network = prov.get("model")
    if isinstance(network, dict) and network.get("kind"):
        name = NETWORK_NAMES.get(network["kind"], network["kind"])
        what = " ".join(p for p in (name, network.get("backbone"), what) if p)
    adapt = prov.get("adapt") or {}
    if adapt.get("method"):
        method = adapt["method"]
        name = {"norm": "camera Norm", "none": "no adaptation", "tent": "TENT",
                "temp": "TEMP"}.get(method, "DART3" + (" LITE" if adapt.get("mode") == "lite"
                                                        else ""))
        what = f"{what} + {name}"
    method = (report.get("model") or {}).get("method")
    if method:
        return f"{what} + {METHOD_NAMES.get(method, method)}"
    return f"{what} ({report.get('distance') or 'euclidean'})"


def _plots(steps: list[DemoStep], workdir: Path, preset: str, reports: list[Path],
           store: Path) -> None:
    """``reid plot cmc`` of every method and ``reid plot tsne`` of the CNN embeddings."""
    from reidcli.plotting.cmc import plot_cmc
    from reidcli.plotting.tsne import plot_tsne

    labels = [cmc_label(json.loads(path.read_text())) for path in reports]
    cmc = workdir / f"synthetic_{preset}_cmc.png"
    _timed(steps, "plot", shlex.join(["reid", "plot", "cmc", *map(str, reports)]
                                     + [a for label in labels for a in ("--label", label)]
                                     + ["--out", str(cmc)]),
           lambda: plot_cmc(reports, cmc, labels=labels, force=True),
           output=lambda p: str(p.path))
    tsne = workdir / f"synthetic_{preset}_tsne.png"
    _timed(steps, "plot", f"reid plot tsne {store} --color-by camid --marker-by domain "
                          f"--split query,gallery --max-points 1000 --out {tsne}",
           lambda: plot_tsne(store, tsne, color_by="camid", marker_by="domain",
                             splits=["query", "gallery"], max_points=1000, force=True),
           output=lambda p: str(p.path))


def _fit(method: str, store: Path, out: Path, progress: bool) -> Path:
    if method == "xqda":
        from reidcli.metric.fit import fit_feature_metric_store
        from reidcli.metric.xqda import XQDA
        fit_feature_metric_store(store, out, XQDA(), feature="hsv-stripes", force=True,
                                 progress=progress, command="reid demo")
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
