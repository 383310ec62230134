"""Print our results beside a paper table (used by ``recipes/*.sh``).

``reid paper compare cdpcf --dataset viper "C-DPCF=cdpcf.json" "DPCF=dpcf.json"``
reads ``reid eval --json`` reports and prints rank-1/5/10/20 and PUR (mean ± std over trials)
with the paper's rank-1 where the paper prints one ("n/a (figure only)" otherwise), then the
paper's qualitative ordering claims as PASS/FAIL lines computed from our numbers.
``reid paper compare warca --dataset viper "WARCA-χ²=w.json" "KISSME=k.json"``
does the same against WARCA's Table 2 (``--table 3`` for the LOMO comparison).
``reid paper compare dart3 --table 1 --dataset msmt17_5cam "No-adapt=n.json" ...``
prints mAP / rank-1 beside DART3's Table 1 (new camera) or Table 2 (cross-dataset), for both
of the paper's backbones, and DART3's ordering claims as PASS/FAIL lines.
``reid paper compare dgvae --dataset sysu --table 2 "dgvae=d.json" "baseline=b.json"``
prints R-1/R-10/R-20/mAP/mINP beside DG-VAE's Table 1 or 2 and its ablation claims
(:mod:`reidcli.paper.dgvae_compare`).
``reid paper compare dmgnet --table 5 --setting mixed_a --dataset prid2011
"DMG-Net=d.json" "BoT=b.json"`` prints mAP/CMC beside DMG-Net's Tables 3–6 and its claims
(:mod:`reidcli.paper.dmgnet_compare`, which has its own options).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

from reidcli.errors import ParameterError, ReidError, UsageError
from reidcli.paper.results import RANKS, check_claims, fmt, load_result, paper_table
from reidcli.paper.script import labelled_results, report_error

#: (claim, better method, worse method, allow equality) — C-DPCF paper, Fig. 3
CDPCF_CLAIMS = (
    ("DPCF > AvgP+XQDA", "DPCF", "AvgP+XQDA", False),
    ("AvgP+XQDA > PCB (source)", "AvgP+XQDA", "PCB (source)", False),
    ("C-DPCF ≥ DPCF", "C-DPCF", "DPCF", True),
    ("AvgP+pad.+XQDA < AvgP+XQDA", "AvgP+XQDA", "AvgP+pad.+XQDA", False),
)


def compare(paper: str, dataset: str, results: list[tuple[str, Path]],
            console: Console | None = None) -> list[tuple[str, bool | None]]:
    """Print the comparison table and claim lines; returns ``[(claim, passed or None)]``."""
    console = console or Console(width=max(Console().width, 132))
    if paper != "cdpcf":
        raise UsageError(f"no paper table for {paper!r}",
                         "use: cdpcf, warca, dart3, dgvae or dmgnet")
    rows = {r["method"]: r for r in paper_table("cdpcf_table1")}
    if dataset not in next(iter(rows.values())):
        console.print(f"note: Table I has no {dataset!r} column (it covers viper, grid, "
                      "prid450s, cuhk01); paper values are shown as n/a")
    table = Table(title=f"{dataset}: ours vs C-DPCF paper Table I (rank-1 %)")
    for col in ("method", "trials", *(f"rank-{r}" for r in RANKS), "PUR", "paper rank-1"):
        table.add_column(col, justify="right" if col != "method" else "left")
    ours = {}
    for label, path in results:
        res = load_result(path)
        ours[label] = res
        paper_value = rows.get(label, {}).get(dataset) or (
            "n/a (figure only)" if dataset in next(iter(rows.values())) else "n/a")
        table.add_row(label, str(res["trials"]),
                      *(fmt(res[f"r{r}"], res[f"s{r}"]) for r in RANKS),
                      fmt(res["pur"]), paper_value)
    console.print(table)
    return check_claims(CDPCF_CLAIMS, ours, "r1", console)


#: registry name → WARCA paper dataset label
WARCA_DATASETS = {"viper": "VIPeR", "prid450s": "PRID450s", "cuhk01": "CUHK01",
                  "cuhk03": "CUHK03", "ilids": "iLIDS", "market1501": "Market-1501",
                  "caviar4reid": "CAVIAR", "3dpes": "3DPeS", "opereid": "OpeReid"}


def compare_warca(dataset: str, results: list[tuple[str, Path]], table: str = "2",
                  console: Console | None = None) -> dict[str, dict]:
    """WARCA Table 2 (rank-1, rank-5, AUC mean ± std) or Table 3 (LOMO: rank 1/5/10/20)
    beside ours; labels are the paper's method names (e.g. ``WARCA-χ²``, ``KISSME``)."""
    console = console or Console(width=max(Console().width, 132))
    name = WARCA_DATASETS.get(dataset, dataset)
    ours = {label: load_result(path) for label, path in results}
    if table == "3":
        paper = {r["method"]: r for r in paper_table("warca_table3") if r["dataset"] == name}
        t = Table(title=f"{name}: ours vs WARCA paper Table 3 (LOMO features)")
        for col in ("method", "splits × draws", "rank-1", "rank-5", "rank-10", "rank-20",
                    "paper"):
            t.add_column(col, justify="left" if col == "method" else "right")
        for label, res in ours.items():
            ref = paper.get(label.split(" ")[0].split("-")[0])
            t.add_row(label, res["trials_label"], *(fmt(res[f"r{r}"], res[f"s{r}"])
                                                   for r in RANKS),
                      " / ".join(ref[k] for k in ("r1", "r5", "r10", "r20")) if ref else "n/a")
        console.print(t)
        return ours
    paper = {(r["method"], r["metric"]): r for r in paper_table("warca_table2")
             if r["dataset"] == name}
    if not paper:
        console.print(f"note: WARCA Table 2 has no {name!r} row; paper values are n/a")
    t = Table(title=f"{name}: ours vs WARCA paper Table 2 (mean ± std over splits, %)")
    for col in ("method", "splits × draws", "rank-1", "paper rank-1", "rank-5", "paper rank-5",
                "AUC", "paper AUC*"):
        t.add_column(col, justify="left" if col == "method" else "right")

    def ref(label, metric):
        row = paper.get((label, metric))
        return f"{row['mean']} ± {row['std']}" if row else "n/a"
    for label, res in ours.items():
        t.add_row(label, res["trials_label"], fmt(res["r1"], res["s1"]), ref(label, "rank1"),
                  fmt(res["r5"], res["s5"]), ref(label, "rank5"), fmt(res.get("auc")),
                  ref(label, "auc"))
    console.print(t)
    console.print("* the paper does not define its AUC (docs/methods/warca.md); ours is the mean CMC "
                  "over all ranks — compare rank-1/5 first")
    return ours


#: (claim, better method, worse method, allow equality) on mAP — DART3 §4.2–4.3, Tab 1–2
DART3_CLAIMS = (
    ("Norm ≥ No-adapt", "Norm", "No-adapt", True),
    ("DART3 LITE ≥ Norm", "DART3 LITE", "Norm", True),
    ("DART3 LITE > No-adapt", "DART3 LITE", "No-adapt", False),
    ("DART3 > No-adapt", "DART3", "No-adapt", False),
)
DART3_BACKBONES = ("TransReID", "CLIP-ReID")


def compare_dart3(dataset: str, results: list[tuple[str, Path]], table: str = "1",
                  console: Console | None = None) -> list[tuple[str, bool | None]]:
    """DART3 Table 1 (``dataset`` e.g. ``msmt17_5cam``) or Table 2 (``msmt17_to_duke``):
    our mAP / rank-1 beside the paper's for TransReID and CLIP-ReID (labels as in the paper:
    No-adapt, TENT, TEMP, Norm, DART3, DART3 LITE, Upper Bound)."""
    console = console or Console(width=max(Console().width, 132))
    if table not in ("1", "2"):
        raise ParameterError("DART3 comparison", "table", table,
                             "names no DART3 table here (they are 1 and 2)", "use 1 or 2")
    rows = [r for r in paper_table(f"dart3_table{table}") if r["dataset"] == dataset]
    if not rows:
        known = sorted({r["dataset"] for r in paper_table(f"dart3_table{table}")})
        console.print(f"note: DART3 Table {table} has no {dataset!r} column "
                      f"(it has {', '.join(known)}); paper values are n/a")
    paper = {(r["backbone"], r["method"]): r for r in rows}
    t = Table(title=f"{dataset}: ours vs DART3 paper Table {table} (mAP / rank-1 %; the "
              "paper's backbones are TransReID and CLIP-ReID)")
    for col in ("method", "mAP", "rank-1", *(f"{b} mAP / R1" for b in DART3_BACKBONES)):
        t.add_column(col, justify="left" if col == "method" else "right")
    ours = {}
    for label, path in results:
        res = load_result(path)
        ours[label] = res
        refs = [paper.get((b, label)) for b in DART3_BACKBONES]
        t.add_row(label, fmt(res["map"], res["map_std"]), fmt(res["r1"], res["s1"]),
                  *(f"{r['mAP']} / {r['R1']}" if r else "n/a" for r in refs))
    console.print(t)
    return check_claims(DART3_CLAIMS, ours, "map", console, " (mAP)", digits=2)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["dmgnet"]:                       # its own options (--setting, --subset …)
        from reidcli.paper.dmgnet_compare import main as dmgnet_main
        return dmgnet_main(argv[1:])
    parser = argparse.ArgumentParser(prog="reid paper compare",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("paper", help="paper: cdpcf | warca | dart3 | dgvae | dmgnet (see "
                        "reid paper compare dmgnet --help)")
    parser.add_argument("--table", default=None, help="warca: 2 (default) or 3 (LOMO); "
                        "dart3: 1 (default, new camera) or 2 (cross-dataset); "
                        "dgvae: 2 (default, ablation) or 1 (state of the art)")
    parser.add_argument("--dataset", required=True, help="column, e.g. viper; dgvae: sysu, "
                        "regdb or synthetic")
    parser.add_argument("--protocol", default=None, help="dgvae only: sysu all (default), "
                        "indoor, all-multi, indoor-multi; regdb v2t (default), t2v")
    parser.add_argument("results", nargs="+", help="LABEL=result.json (labels as in the paper)")
    args = parser.parse_args(argv)
    try:
        pairs = labelled_results(args.results, "C-DPCF=cdpcf.json")
        if args.protocol is not None and args.paper != "dgvae":
            raise UsageError(f"--protocol is for the dgvae comparison, not {args.paper}",
                             "drop --protocol")
        if args.paper == "warca":
            compare_warca(args.dataset, pairs, args.table or "2")
        elif args.paper == "dart3":
            compare_dart3(args.dataset, pairs, args.table or "1")
        elif args.paper == "dgvae":
            from reidcli.paper.dgvae_compare import compare_dgvae
            compare_dgvae(args.dataset, pairs, args.table or "2", args.protocol)
        else:
            compare(args.paper, args.dataset, pairs)
    except ReidError as exc:
        return report_error(exc)
    return 0
