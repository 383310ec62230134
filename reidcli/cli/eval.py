"""`reid eval` — CMC / mAP / mINP of one or several stores, optionally through a fitted model
(thin CLI)."""
from __future__ import annotations

import os
from pathlib import Path
from typing import List, Optional

import typer

HELP = ("Evaluate a feature store (optionally through a fitted model): CMC, mAP, mINP, "
        "per protocol E1–E5 / camera-split, with optional k-reciprocal re-ranking.")
CONTEXT: dict = {}


def evaluate(
    store: List[Path] = typer.Option(..., "--store", metavar="<path>", help="Feature store (.h5) to evaluate; "
                                     "repeat it, or give a quoted glob pattern, to evaluate "
                                     "several stores and report their mean ± std."),
    model: Optional[Path] = typer.Option(None, "--model", help="Fitted model (.h5) whose "
                                         "transform()/distance() is applied first."),
    feature: Optional[str] = typer.Option(None, "--feature", help="Store feature to use "
                                          "(default: the model's, else the store's first)."),
    protocol: str = typer.Option("auto", "--protocol", help="auto | market | cuhk03_sgs | "
                                 "single-shot | sysu | regdb | camera-split."),
    trials: str = typer.Option("all", "--trials", help="Protocol trials: all or e.g. 0,3."),
    rerank: bool = typer.Option(False, "--rerank", help="k-reciprocal re-ranking "
                                "(Zhong et al. 2017)."),
    k1: int = typer.Option(20, "--rerank-k1", help="Re-ranking: reciprocal neighbourhood "
                           "size k₁."),
    k2: int = typer.Option(6, "--rerank-k2", help="Re-ranking: query-expansion size k₂."),
    lambda_value: float = typer.Option(0.3, "--rerank-lambda", help="Re-ranking: weight λ "
                                       "of the original distance."),
    max_rank: int = typer.Option(50, "--max-rank", help="Length of the reported CMC curve."),
    ap: str = typer.Option("sum-of-precisions", "--ap", help="AP convention: "
                           "sum-of-precisions (torchreid/fast-reid) | market-official "
                           "(Market-1501 trapezoid)."),
    distance: str = typer.Option("auto", "--distance", help="auto (the feature's metric) | "
                                 "euclidean | sqeuclidean | cosine."),
    feat_norm: str = typer.Option("auto", "--feat-norm", help="auto (the feature's own "
                                  "rule: parts for PCB, global for BoT, else none) | none | "
                                  "global (L2 per row) | parts (L2 per --parts slice)."),
    n_parts: int = typer.Option(6, "--parts", help="PCB parts: slices for --feat-norm parts."),
    query_cams: Optional[str] = typer.Option(None, "--query-cams", help="Score only queries "
                                             "of these 0-based camids, in every domain "
                                             "(camera-split: the unseen cameras)."),
    train_cams: Optional[str] = typer.Option(None, "--train-cams", help="camera-split: "
                                             "camids seen in training (in every domain); the "
                                             "others are scored."),
    per_camera: bool = typer.Option(False, "--per-camera", help="Also report metrics per "
                                    "query camera and their valid-query-weighted mean."),
    full_cmc: bool = typer.Option(False, "--full-cmc", help="Keep the full CMC curve and "
                                  "report PUR and CMC-AUC (always on for single-shot)."),
    auc_max_rank: Optional[int] = typer.Option(None, "--auc-max-rank", help="CMC-AUC up to "
                                               "this rank (default: gallery size)."),
    sgs_repeats: int = typer.Option(10, "--sgs-repeats", help="cuhk03_sgs: gallery samplings "
                                    "per query."),
    nmi: bool = typer.Option(False, "--nmi", help="NMI between k-means clusters of the "
                             "features and camera ids (camera bias)."),
    nmi_k: str = typer.Option("cams", "--nmi-k", help="NMI clusters: cams | ids | an integer."),
    seed: int = typer.Option(0, "--seed", help="Seed of cuhk03_sgs sampling and NMI "
                             "subsampling."),
    block_size: int = typer.Option(0, "--block-size", help="Queries per block (0: as many as "
                                   "fit 2^23 distances)."),
    json_out: Optional[Path] = typer.Option(None, "--json", help="Write the report as JSON "
                                            "(- = to stdout; the table then goes to stderr)."),
    csv_out: Optional[Path] = typer.Option(None, "--csv", help="Write the CMC curve as CSV."),
    force: bool = typer.Option(False, "--force", help="Overwrite --json/--csv outputs."),
    device: str = typer.Option("auto", "--device", help="auto | cpu | cuda."),
    precision: str = typer.Option("float32", "--precision", help="Distance GEMM: float32 "
                                  "(or fp32) | bf16 (bfloat16 inputs: faster, distances "
                                  "rounded, so near-ties may reorder; the report says which "
                                  "ran)."),
    stream: str = typer.Option("auto", "--stream", help="Read the gallery from the store "
                               "block by block: auto (galleries over 1 GiB of float32 "
                               "features) | on | off. Not with --rerank, --nmi or "
                               "cuhk03_sgs / de-duplicated CMC protocols."),
    gallery_block: int = typer.Option(0, "--gallery-block", help="Streamed gallery: rows "
                                      "per block read (0: 128 MiB of features)."),
    dist_timeout: float = typer.Option(1800.0, "--dist-timeout", help="torchrun: seconds a "
                                       "rank waits for the others at each exchange."),
    quiet: bool = typer.Option(False, "--quiet", help="No table on the terminal."),
    search: Optional[int] = typer.Option(None, "--search", metavar="K", help="Instead of "
                                         "scoring: each query's K nearest gallery images "
                                         "with their distances, as CSV (stdout, or --csv) "
                                         "or JSON (--json); for stores whose images are "
                                         "unlabelled (reid extract --images)."),
) -> None:
    """Evaluate a feature store: CMC, mAP, mINP (and PUR, CMC-AUC, NMI, per camera).

    Several stores (repeated --store, or a quoted glob pattern) are each evaluated with the
    same options, then reported with their mean ± std over stores."""
    from reidcli.evaluation.store_paths import expand_store_patterns
    from reidcli.provenance import InputDigests

    stores = expand_store_patterns(store)
    read_from = stores + ([model] if model is not None else [])
    # the report's provenance hashes every input file: start now, on a thread, so that the
    # hashing overlaps the imports and store reads below instead of following the scoring;
    # only the process that writes the report hashes (rank 0 under torchrun)
    writes_report = json_out is not None and os.environ.get("RANK", "0") == "0"
    digests = InputDigests(read_from) if writes_report else None

    from reidcli.cli.context import invoked_command, set_flag_names
    from reidcli.evaluation.engine import EvalOptions
    from reidcli.cameras import parse_cameras
    from reidcli.evaluation.multi import evaluate_requests, evaluation_report
    from reidcli.evaluation.run import StoreEvalRequest
    from reidcli.progress import ENABLED
    from reidcli.provenance import make_provenance

    # library parameters set by flags of another name (errors name the flag typed);
    # values are checked by the library (EvalOptions, RerankOptions, StoreEvalRequest)
    set_flag_names({"ap_convention": "--ap", "full_curve": "--full-cmc",
                    "block_rows": "--block-size", "gallery_block_rows": "--gallery-block",
                    "lambda_value": "--rerank-lambda",
                    "k1": "--rerank-k1", "k2": "--rerank-k2", "n_parts": "--parts",
                    "query_cameras": "--query-cams", "json_out": "--json",
                    "csv_out": "--csv"})
    to_stdout = json_out is not None and str(json_out) == "-"     # --json -: JSON on stdout
    _check_outputs(json_out, csv_out, force, read_from, to_stdout)
    from reidcli.distributed_env import read_launch
    launch = read_launch()                   # torchrun: the ranks split the gallery blocks
    set_flag_names({"timeout": "--dist-timeout"})
    if launch is not None and search is not None:
        from reidcli.errors import UsageError
        raise UsageError(f"--search runs in one process, not in a torchrun launch "
                         f"({launch.world_size} ranks)", "start it without torchrun")
    if search is not None:
        given = {"--protocol": protocol != "auto", "--rerank": rerank, "--nmi": nmi,
                 "--per-camera": per_camera, "--full-cmc": full_cmc,
                 "--auc-max-rank": auc_max_rank is not None,
                 "--query-cams": query_cams is not None,
                 "--train-cams": train_cams is not None, "--stream": stream == "on",
                 "--max-rank": max_rank != 50, "--ap": ap != "sum-of-precisions",
                 "--sgs-repeats": sgs_repeats != 10, "--gallery-block": gallery_block != 0,
                 "several --store": len(stores) > 1}
        _search(stores[0], search, model, feature, trials, distance, feat_norm, n_parts,
                device, precision, block_size, json_out, csv_out, force, quiet, read_from,
                digests, [name for name, on in given.items() if on])
        return
    if len(stores) > 1:                  # one store: evaluate_store checks it as it opens it
        from reidcli.evaluation.labelled import check_labelled
        for path in stores:              # unlabelled queries or gallery: nothing to score
            check_labelled(path, trials)
    options = EvalOptions(max_rank=max_rank, ap_convention=ap, full_curve=full_cmc,
                          block_rows=block_size, sgs_repeats=sgs_repeats, seed=seed,
                          per_camera=per_camera, auc_max_rank=auc_max_rank,
                          gallery_block_rows=gallery_block, progress=ENABLED and not quiet)
    requests = [StoreEvalRequest(
        store=path, model=model, feature=feature, protocol=protocol, trials=trials,
        distance=distance, feat_norm=feat_norm, n_parts=n_parts,
        query_cams=parse_cameras(query_cams, "query_cams", owner="evaluation"),
        train_cams=parse_cameras(train_cams, "train_cams", owner="evaluation"),
        rerank=_rerank_options(k1, k2, lambda_value) if rerank else None, nmi=nmi, nmi_k=nmi_k,
        device=device, precision=precision, stream=stream, options=options)
        for path in stores]
    if launch is not None:                   # docs/evaluation.md, "Evaluation across machines"
        from reidcli.evaluation.distributed import evaluate_on_ranks
        evaluation = evaluate_on_ranks(requests, launch, timeout=dist_timeout)
        if launch.rank != 0:
            return                           # rank 0 reports, once every rank succeeded
    else:
        evaluation = evaluate_requests(requests)
    provenance = None
    if json_out is not None:
        provenance = make_provenance(command=invoked_command(), seed=seed, inputs=digests)
    report = evaluation_report(evaluation, provenance)
    _output_report(report, json_out, csv_out, force, quiet, to_stdout, read_from)


def _check_outputs(json_out: Optional[Path], csv_out: Optional[Path], force: bool,
                   read_from: list[Path], to_stdout: bool) -> None:
    """--json / --csv: writable (and not an input), and not the same file."""
    from reidcli.evaluation.errors import EvaluationError
    from reidcli.io import check_output

    for path, option in ((None if to_stdout else json_out, "--json"), (csv_out, "--csv")):
        if path is not None:
            check_output(path, force=force, option=option, inputs=read_from)
    if json_out is not None and csv_out is not None and not to_stdout and \
            json_out.resolve() == csv_out.resolve():
        raise EvaluationError("--json and --csv name the same file", "give two paths")


def _output_report(report: dict, json_out: Optional[Path], csv_out: Optional[Path],
                   force: bool, quiet: bool, to_stdout: bool, read_from: list[Path]) -> None:
    """The report's tables on the terminal (stderr when the JSON goes to stdout), its JSON
    (--json) and its CMC curve as CSV (--csv)."""
    from reidcli.evaluation.report import render_tables, write_csv, write_json

    if not quiet:
        from rich.console import Console     # only for the tables (--quiet: not loaded)

        render_tables(report, Console(stderr=to_stdout))
    if to_stdout:
        typer.echo(json_text(report), nl=False)
    elif json_out is not None:
        write_json(json_out, report, force=force, inputs=read_from)
        typer.echo(f"wrote {json_out}", err=True)
    if csv_out is not None:
        write_csv(csv_out, report, force=force, inputs=read_from)
        typer.echo(f"wrote {csv_out}", err=True)


def _rerank_options(k1: int, k2: int, lambda_value: float):
    """--rerank's options (the re-ranking module is imported only when it runs)."""
    from reidcli.evaluation.rerank import RerankOptions

    return RerankOptions(k1, k2, lambda_value)


def json_text(report: dict) -> str:
    """``report`` as the JSON text ``--json FILE`` would hold (for ``--json -``)."""
    import json

    from reidcli.io import _json_default

    return json.dumps(report, indent=2, default=_json_default) + "\n"


def _search(store, k, model, feature, trials, distance, feat_norm, n_parts, device, precision,
            block_size, json_out, csv_out, force, quiet, read_from, digests,
            refused) -> None:
    """``reid eval --search K`` (:mod:`reidcli.evaluation.search`): CSV on stdout, or the
    --csv / --json files written atomically; ``digests``: the inputs' provenance hashes
    (:class:`reidcli.provenance.InputDigests`, None without --json)."""
    import json

    from reidcli.cli.context import invoked_command
    from reidcli.errors import UsageError
    from reidcli.evaluation.search import (search_csv_text, search_json, search_store,
                                           write_search)
    from reidcli.progress import ENABLED
    from reidcli.provenance import make_provenance
    from reidcli.store import open_store

    if refused:
        raise UsageError(f"{refused[0]} does not apply to --search",
                         "--search lists nearest gallery images; drop it, or score "
                         "without --search")
    result = search_store(store, k, model=model, feature=feature, trials=trials,
                          distance=distance, feat_norm=feat_norm, n_parts=n_parts,
                          device=device, precision=precision, block_rows=block_size,
                          progress=ENABLED and not quiet)
    with open_store(store) as st:
        records = st.records
    what = f"{len(result.query_rows)} queries × top {result.meta['k']}"
    if csv_out is None and json_out is None:
        typer.echo(search_csv_text(result, records), nl=False)
    if csv_out is not None:
        write_search(csv_out, search_csv_text(result, records), force=force,
                     option="csv_out", inputs=read_from)
        typer.echo(f"wrote {csv_out}: {what}", err=True)
    if json_out is not None and str(json_out) == "-":
        typer.echo(json_text(search_json(result, records, make_provenance(
            command=invoked_command(), inputs=digests))), nl=False)
    elif json_out is not None:
        report = search_json(result, records, make_provenance(command=invoked_command(),
                                                              inputs=digests))
        write_search(json_out, json.dumps(report, indent=2) + "\n", force=force,
                     option="json_out", inputs=read_from)
        typer.echo(f"wrote {json_out}: {what}", err=True)
