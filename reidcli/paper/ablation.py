"""``reid paper ablation dgvae|dmgnet``: a paper's ablation table in one process — every row
(:mod:`reidcli.paper.ablation_rows`) at every seed trained with the code ``reid train`` runs,
extracted and evaluated as the CLI chain does (:mod:`reidcli.paper.ablation_eval`), then ours
(mean ± std over the seeds) beside the paper's table with its claims as PASS/FAIL lines; a
verdict whose difference is inside the seeds' spread says so (docs/cli.md, "`reid paper
ablation`").

Outputs under ``out`` (each written atomically; an existing one is replaced only with
``force``, and every one is checked before the first run trains):

* ``VARIANT/seedS/`` — the run directory of ``reid train``;
* ``VARIANT/seedS.h5`` — its feature store (``reid extract --model``);
* ``VARIANT.json`` — ``reid eval`` of the variant's stores (mean ± std over seeds);
* ``ablation.json`` — the rows, seeds, files and claim verdicts, with provenance.

The comparison runs on the synthetic presets (``vi`` for DG-VAE, ``dg`` for DMG-Net, one
held-out target domain); the paper's real-data protocols are the recipes'
(recipes/dgvae_ablation.sh, recipes/dmgnet_*.sh).
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from rich.console import Console

from reidcli.errors import OutputExistsError, ParameterError, UsageError
from reidcli.naming import param
from reidcli.paper.ablation_rows import (OWNER, Ablation, Row, ablation, parse_seeds,
                                         row_config, select_rows)


@dataclasses.dataclass
class AblationResult:
    """What a run of the ablation wrote: ``results`` ``[(label, VARIANT.json)]`` in row
    order, the run directories, the claim verdicts (None: a row of the claim was not run)
    and the summary ``ablation.json``."""

    results: list[tuple[str, Path]]
    runs: list[Path]
    verdicts: list[tuple[str, bool | None]]
    summary: Path


@dataclasses.dataclass(frozen=True)
class Evaluated:
    """The data the runs are extracted on: ``reid extract --dataset D --root R --option
    K=V``."""

    dataset: str
    root: str | None
    options: Mapping[str, Any]


def _canonical(name: str) -> str:
    from reidcli.data.registry import canonical_name

    return canonical_name(name)


def evaluated_data(setup: Ablation, given: Mapping[str, Any]) -> Evaluated:
    """Where ``reid extract`` runs for this ablation: DG-VAE on its training dataset (the
    same loader options), DMG-Net on its one held-out target ``synthetic/dK`` (the synthetic
    source's loader options, ``domains=K``); UsageError / ParameterError otherwise."""
    root = given.get("root")
    if setup.paper == "dgvae":
        dataset = given.get("dataset")
        if dataset is None:
            raise UsageError(f"{param('dataset')} is required",
                             f"e.g. {param('dataset', 'synthetic')} {param('root')} DIR "
                             f"{param('options', 'name=vi')}")
        if _canonical(dataset) != "synthetic":
            raise ParameterError(OWNER, "dataset", dataset, "is not the synthetic dataset "
                                 "(the ablation runner compares on synthetic data)",
                                 "use synthetic, or recipes/dgvae_ablation.sh for RegDB / "
                                 "SYSU-MM01")
        return Evaluated("synthetic", root, dict(given.get("options") or {}))
    sources = list(given.get("sources") or [])
    if [_canonical(s) for s in sources] != ["synthetic"]:
        raise ParameterError(OWNER, "sources", ",".join(sources) or "(none)",
                             "is not the synthetic dataset (the ablation runner compares "
                             "on synthetic data)", "use synthetic, or recipes/dmgnet_*.sh "
                             "for the real benchmarks")
    targets = list(given.get("targets") or [])
    domain = targets[0].partition("/")[2] if len(targets) == 1 else ""
    if not (domain[:1] == "d" and domain[1:].isdigit()
            and _canonical(targets[0].partition("/")[0]) == "synthetic"):
        raise ParameterError(OWNER, "targets", ",".join(targets) or "(none)",
                             "names no single held-out synthetic domain",
                             "give one, e.g. synthetic/d3")
    options = dict((given.get("source_options") or {}).get(sources[0], {}))
    options["domains"] = int(domain[1:])
    return Evaluated("synthetic", root, options)


def _paths(out: Path, row: Row, seed: int) -> tuple[Path, Path]:
    return out / row.name / f"seed{seed}", out / row.name / f"seed{seed}.h5"


def check_outputs(out: Path, rows: Sequence[Row], seeds: Sequence[int], force: bool) -> None:
    """Refuse, before anything trains, an existing output without ``force`` (and a file
    where the output folder goes)."""
    if out.exists() and not out.is_dir():
        raise UsageError(f"{param('out')} {out} is a file", "give a folder path")
    existing = [p for row in rows for seed in seeds for p in _paths(out, row, seed)]
    existing += [out / f"{row.name}.json" for row in rows] + [out / "ablation.json"]
    if not force:
        for path in existing:
            if path.exists():
                raise OutputExistsError(f"{param('out')} {out} already holds {path.name} "
                                        f"({path})", f"allow overwriting ({param('force')})")


def _compare(setup: Ablation, results, console: Console):
    if setup.paper == "dgvae":
        from reidcli.paper.dgvae_compare import compare_dgvae
        return compare_dgvae("synthetic", results, "2", console=console, noise="seed")
    from reidcli.paper.dmgnet_compare import compare_dmgnet
    return compare_dmgnet(results, dataset="synthetic", console=console, noise="seed")


def run_ablation(paper: str, out: str | Path, *, variants: Sequence[str] | str | None = None,
                 seeds: Sequence[int] | str | None = (0, 1, 2),
                 given: Mapping[str, Any] | None = None, force: bool = False,
                 progress: bool = True, command: list[str] | None = None,
                 console: Console | None = None,
                 echo: Callable[[str], None] | None = None) -> AblationResult:
    """Train, extract and evaluate every row of ``variants`` (default: all) of ``paper``'s
    ablation at every seed of ``seeds`` into ``out`` (module doc), then print the comparison
    on ``console``. ``given``: the trainer's parameters as ``reid train`` takes them (None:
    not given; not ``seed`` nor what a row sets). ``command`` is recorded in every output's
    provenance; ``echo`` gets the notes (e.g. options BoT has not)."""
    setup = ablation(paper)
    rows = select_rows(setup, variants)
    seeds = parse_seeds(seeds)
    given = {k: v for k, v in (given or {}).items() if v is not None}
    echo = echo or (lambda text: None)
    data = evaluated_data(setup, given)
    configs = {(row.name, seed): row_config(setup, row, given, seed)
               for row in rows for seed in seeds}           # every config checked first
    out = Path(out)
    check_outputs(out, rows, seeds, force)
    if any(row.method != setup.trainer for row in rows):
        from reidcli.paper.ablation_rows import bot_options
        dropped = bot_options(given)[1]
        if dropped:
            echo(f"note: {', '.join(param(n) for n in dropped)} appl"
                 f"{'ies' if len(dropped) == 1 else 'y'} to the DMG-Net rows only (BoT has "
                 "no such setting)")
    _train_and_extract(out, rows, seeds, configs, data, force, progress, command,
                       given.get("workers"))
    results = []
    for row in rows:
        json_out = out / f"{row.name}.json"
        from reidcli.paper.ablation_eval import evaluate_seeds
        evaluate_seeds([_paths(out, row, s)[1] for s in seeds], json_out,
                       device=configs[(row.name, seeds[0])].device, force=force,
                       command=command)
        results.append((row.label, json_out))
    console = console or Console(width=max(Console().width, 132))
    verdicts = _compare(setup, results, console)
    summary = _write_summary(out, setup, rows, seeds, results, verdicts, force, command)
    runs = [_paths(out, row, s)[0] for row in rows for s in seeds]
    return AblationResult(results, runs, verdicts, summary)


def _train_and_extract(out: Path, rows, seeds, configs, data: Evaluated, force: bool,
                       progress: bool, command, workers: int | None) -> None:
    """Every (row, seed): ``reid train`` into ``VARIANT/seedS``, ``reid extract`` into
    ``VARIANT/seedS.h5`` (with ``workers`` loader processes when given); one progress bar
    over the runs."""
    from reidcli.paper.ablation_eval import extract_run
    from reidcli.progress import task
    from reidcli.training.engine import train_model

    with task("ablation runs", total=len(rows) * len(seeds), unit="runs",
              enabled=progress) as bar:
        for row in rows:
            (out / row.name).mkdir(parents=True, exist_ok=True)
            for seed in seeds:
                run, store = _paths(out, row, seed)
                cfg = configs[(row.name, seed)]
                train_model(cfg, run, force=force, progress=False, command=command)
                extract_run(run, store, data.dataset, data.root, data.options,
                            device=cfg.device, force=force, command=command,
                            workers=workers)
                bar.advance()


def _write_summary(out: Path, setup: Ablation, rows, seeds, results, verdicts, force: bool,
                   command) -> Path:
    """``ablation.json``: rows, seeds, files and verdicts, with provenance."""
    from reidcli.io import write_json_atomic
    from reidcli.provenance import make_provenance

    files = [p for row in rows for s in seeds for p in _paths(out, row, s)]
    summary = {
        "format": "reidcli.paper.ablation", "paper": setup.paper, "seeds": list(seeds),
        "rows": [{"variant": row.name, "label": label, "method": row.method,
                  "settings": dict(row.settings), "report": str(path),
                  "runs": [str(_paths(out, row, s)[0]) for s in seeds],
                  "stores": [str(_paths(out, row, s)[1]) for s in seeds]}
                 for row, (label, path) in zip(rows, results)],
        "claims": [{"claim": claim, "verdict": None if ok is None else
                    ("PASS" if ok else "FAIL")} for claim, ok in verdicts],
        "provenance": make_provenance(command=command, inputs=[
            p for p in files if p.is_file()] + [path for _, path in results]),
    }
    return write_json_atomic(out / "ablation.json", summary, force=force, option="out")


__all__ = ["run_ablation", "AblationResult", "evaluated_data", "check_outputs"]
