"""`reid store info|import|merge` — thin wrappers over :mod:`reidcli.store`.

The store read is ``--store``, the store written ``--out`` (docs/cli.md); the positional
STORE / OUT of earlier releases still work, with one deprecation line."""
from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from reidcli.cli.context import invoked_command, required_option, set_flag_names

app = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False)


@app.command("info")
def info(
    store: Optional[Path] = typer.Option(None, "--store", help="Feature store (.h5). "
                                         "Required."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """Print a store's contents: rows per split, features, conv maps, protocol, provenance."""
    from rich.console import Console
    from rich.table import Table

    from reidcli.store import open_store
    from reidcli.store.summary import store_summary

    store = required_option(store, metavar="STORE", flag="--store")
    with open_store(store) as st:
        summary = store_summary(st)
    if as_json:
        typer.echo(json.dumps(summary, indent=2, default=str))
        return
    console = Console()
    console.print(f"[bold]{summary['path']}[/bold]  dataset={summary['dataset'] or '—'}  "
                  f"rows={summary['rows']}  schema={summary['attrs'].get('schema')}  "
                  f"created={summary['attrs'].get('created', '—')}")
    if summary["shard"]:
        console.print(f"shard {summary['shard'][0]}/{summary['shard'][1]} — join with "
                      "reid store merge")
    table = Table(title="records", caption="ids: identities (pid ≥ 1); distractors: rows of "
                  "pid 0, junk: rows of pid -1 (never scored as queries)", caption_justify="left")
    for col in ("split", "images", "ids", "distractors", "junk", "cams", "modalities",
                "domains"):
        table.add_column(col, justify="left" if col in ("split", "modalities", "domains")
                         else "right")
    for split, s in summary["splits"].items():
        table.add_row(split, str(s["images"]), str(s["ids"]), str(s["distractors"]),
                      str(s["junk"]), str(s["cams"]), ",".join(s["modalities"]),
                      _short(",".join(s["domains"])))
    console.print(table)
    if summary["features"] or summary["convmaps"]:
        ft = Table(title="features and conv maps")
        for col in ("group", "name", "shape", "dtype", "metric", "normalized"):
            ft.add_column(col)
        for name, f in summary["features"].items():
            ft.add_row("features", name, "×".join(map(str, f["shape"])), f["dtype"],
                       f["metric"], str(f["normalized"]))
        for name, c in summary["convmaps"].items():
            ft.add_row("convmaps", name, "×".join(map(str, c["shape"])), c["dtype"], "", "")
        console.print(ft)
    else:
        console.print("no features or conv maps")
    proto = summary["protocol"]
    console.print(f"protocol: {proto['name']} ({proto['trials']} trial(s), rule "
                  f"{proto['eval_rule']})" if proto else "protocol: none (train/query/gallery rows)")
    if summary["adapt"]:
        console.print(f"adaptation groups: {', '.join(summary['adapt'])}")
    prov = summary["provenance"]
    if prov:
        versions = prov.get("versions", {})
        console.print(f"provenance: {prov.get('command', '—')} (seed {prov.get('seed')}, "
                      f"reidcli {versions.get('reidcli', '?')}, torch {versions.get('torch', '—')}"
                      f", {len(prov.get('inputs', []))} input(s) hashed)")


def _short(text: str, width: int = 40) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"


@app.command("import")
def import_(
    out: Optional[Path] = typer.Option(None, "--out", help="Output store (.h5). Required."),
    npz: Optional[Path] = typer.Option(None, "--npz", help=".npz with features, pid, camid, "
                                       "split [, modality, domain, path, dataset, frame]."),
    mat: Optional[Path] = typer.Option(None, "--mat", help="MATLAB .mat (v5 or v7.3) with "
                                       "variables named as the --npz arrays."),
    mat_var: List[str] = typer.Option([], "--mat-var", metavar="KEY=VAR", help="KEY=VAR: read array KEY "
                                      "(features, pid, camid, split, ...) from the .mat "
                                      "variable VAR. Repeatable."),
    features: Optional[Path] = typer.Option(None, "--features", help="Features .npy [N, D]."),
    labels: Optional[Path] = typer.Option(None, "--labels", help="CSV with pid,camid,split,..."),
    pid: Optional[Path] = typer.Option(None, "--pid", help="pid .npy [N]."),
    camid: Optional[Path] = typer.Option(None, "--camid", help="0-based camid .npy [N]."),
    split: Optional[Path] = typer.Option(None, "--split", help="split .npy [N] of strings."),
    modality: Optional[Path] = typer.Option(None, "--modality", help="modality .npy [N]."),
    name: str = typer.Option("imported", "--name", help="Feature name in the store."),
    metric: str = typer.Option("euclidean", "--distance", help="Distance of the feature: "
                               "euclidean | cosine."),
    dataset: str = typer.Option("", "--dataset", help="Dataset name, if known (picks the "
                                "evaluation protocol)."),
    camid_base: Optional[int] = typer.Option(
        None, "--camid-base", help="How the input numbers cameras: 1 subtracts 1 from every "
        "camid (stores are 0-based), 0 keeps them. Without it, camids that start at 1 with "
        "no 0 are refused as probably 1-based."),
    pid_base: Optional[int] = typer.Option(
        None, "--pid-base", help="How the input numbers identities: 0 adds 1 to every pid "
        ">= 0 (person 0 becomes 1, since pid 0 means distractor), 1 keeps them. Without it, "
        "query rows with pid 0 get a warning."),
    force: bool = typer.Option(False, "--force", help="Overwrite --out."),
) -> None:
    """Build a store from embeddings made by any other tool."""
    from reidcli.store import open_store
    from reidcli.store.importer import import_store
    from reidcli.store.matfile import parse_mat_names

    set_flag_names({"labels_csv": "--labels", "feature_name": "--name",
                    "metric": "--distance", "mat_var": "--mat-var"})
    out = required_option(out, metavar="OUT", flag="--out")
    arrays = {k: v for k, v in (("pid", pid), ("camid", camid), ("split", split),
                                 ("modality", modality)) if v is not None}
    path = import_store(out, npz=npz, mat=mat, mat_names=parse_mat_names(mat_var),
                        features=features, labels_csv=labels,
                        label_arrays=arrays or None, feature_name=name, metric=metric,
                        dataset=dataset, force=force, camid_base=camid_base,
                        pid_base=pid_base, command=invoked_command())
    with open_store(path) as st:
        n, d = st.num_rows, st.feature_info(name)["dim"]
    typer.echo(f"wrote {path}: {n} rows, feature {name!r} of dimension {d}"
               + ("; pids shifted by +1 (--pid-base 0)" if pid_base == 0 else ""))


@app.command("merge")
def merge(
    shards: List[Path] = typer.Argument(..., help="Shard stores written with --shard i/n."),
    out: Optional[Path] = typer.Option(None, "--out", help="Output store (.h5). Required."),
    force: bool = typer.Option(False, "--force", help="Overwrite --out."),
) -> None:
    """Join shards written with --shard i/n into one store."""
    from reidcli.store import open_store
    from reidcli.store.merge import merge_shards

    out = required_option(out, metavar="OUT", flag="--out")
    path = merge_shards(out, shards, force=force, command=invoked_command())
    with open_store(path) as st:
        typer.echo(f"wrote {path}: {st.num_rows} rows from {len(shards)} shards")
