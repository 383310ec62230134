"""Our DMG-Net results beside the paper's Tables 3–6 (Bai et al., "Person30K: A Dual-Meta
Generalization Network for Person Re-Identification", CVPR 2021), and the paper's claims
checked on our numbers (used by ``recipes/dmgnet_*.sh``).

``reid paper compare dmgnet --table 5 --setting mixed_a --dataset prid2011
"DMG-Net=x.json" "BoT=y.json"`` reads ``reid eval --json`` reports (one store, or the
across-store aggregate of a target's 10 trials) and prints, per label, our mAP and CMC@1/5/10/20
(mean ± std) with the paper's row underneath; cells the paper does not report print "-".

* ``--table 5 --setting mixed_a|mixed_b --dataset prid2011|grid|viper|ilids``: Table 5 (mAP,
  CMC@1 over 10 trials);
* ``--table 4|6 --subset A|B|C``: Person30K Tables 4 (mAP, CMC@1, CMC@5) and 6 (mAP; its
  ablation rows), one comparison for both — "protocol assumed": the paper gives no
  query/gallery rule inside a test subset, ours is reidcli's (docs/datasets.md, Person30K);
* ``--table 3 --source S --dataset T``: direct transfer (mAP / CMC@1); Person30K as target
  does not name its subset in the paper, so every subset of ours is shown beside the one value;
* ``--dataset synthetic``: our own held-out-domain runs, no paper numbers.

Labels name the paper's methods: ``DMG-Net``, ``BoT``, ``Meta-generalization`` (DMG-Net
without L_MD) and ``Meta-discrimination`` (L_MD without the meta step); other labels are shown
without a paper row.
"""
from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from rich.console import Console

from reidcli.errors import ParameterError, ReidError, UsageError
from reidcli.naming import param
from reidcli.paper.grid import add_our_row, result_grid
from reidcli.paper.results import check_claims, load_result, paper_table
from reidcli.paper.script import labelled_results, report_error

#: Table 5 settings: registry-facing name → the paper's
SETTINGS = {"mixed_a": "Mixed A", "mixed_b": "Mixed B"}
#: Table 5 targets: registry name → the paper's column
TARGETS = {"prid2011": "PRID", "grid": "GRID", "viper": "VIPeR", "ilids": "iLIDs"}
#: Person30K test subsets (DMG-Net paper §3.2)
SUBSETS = {"A": "Test-A (same-site)", "B": "Test-B (same-scenario)",
           "C": "Test-C (different-scenario)"}
#: Table 3 datasets: registry name → the paper's
TRANSFER = {"person30k": "Person30K", "market1501": "Market1501", "dukemtmc": "Dukemtmc",
            "msmt17": "MSMT17"}
#: our metric columns: (key of load_result, key of its std, heading, paper CSV column)
METRICS = (("map", "map_std", "mAP", "mAP"), ("r1", "s1", "CMC@1", "R1"),
           ("r5", "s5", "CMC@5", "R5"), ("r10", "s10", "CMC@10", None),
           ("r20", "s20", "CMC@20", None))
#: result label (lower case, "-"/"_"/" " dropped) → the paper's method name
METHOD_ALIASES = {
    "dmgnet": "DMG-Net", "dmgnetours": "DMG-Net", "bot": "BoT", "baseline": "BoT",
    "baselinebagoftricks": "BoT", "metageneralization": "Meta-generalization",
    "metageneralisation": "Meta-generalization", "nomd": "Meta-generalization",
    "metadiscrimination": "Meta-discrimination", "nometa": "Meta-discrimination",
}
PROTOCOL_ASSUMED = ("protocol assumed: the paper gives no query/gallery rule inside a "
                    "Person30K test subset; ours is reidcli's (docs/datasets.md, Person30K) — "
                    "the numbers are not directly comparable")
NULL_RESULT = ("note: a null result is information — the paper's real-data gains are 1–11 "
               "mAP points after 120 epochs on ~100k images; a small synthetic run that does "
               "not separate the methods says so, it is not a failed build")

#: (claim, better method, worse method, metrics) — Table 5 (§5.2: DMG-Net beats BoT on every
#: target of both settings)
MIXED_CLAIMS = (("DMG-Net > BoT", "DMG-Net", "BoT", ("map", "r1")),)
#: the Person30K claims (§5.1, §5.3, Tables 4 and 6) that hold on every subset
PERSON30K_CLAIMS = (
    ("DMG-Net > BoT", "DMG-Net", "BoT", ("map", "r1")),              # Table 4
    ("DMG-Net > Meta-generalization", "DMG-Net", "Meta-generalization", ("map",)),  # L_MD
    ("DMG-Net > Meta-discrimination", "DMG-Net", "Meta-discrimination", ("map",)),  # meta step
)
#: per subset, which single component helps most (Table 6: meta-discrimination on Test-A,
#: meta-generalization on Test-B/C, "~2% mAP gains on Person30K subsets Test-B and Test-C")
SUBSET_CLAIMS = {
    "A": ("Meta-discrimination > Meta-generalization (Test-A: L_MD helps most)",
          "Meta-discrimination", "Meta-generalization", ("map",)),
    "B": ("Meta-generalization > Meta-discrimination (Test-B: the meta step helps most)",
          "Meta-generalization", "Meta-discrimination", ("map",)),
    "C": ("Meta-generalization > Meta-discrimination (Test-C: the meta step helps most)",
          "Meta-generalization", "Meta-discrimination", ("map",)),
}
#: the held-out synthetic domain: the Table 6 orderings that hold on every Person30K subset
SYNTHETIC_CLAIMS = (
    ("DMG-Net > BoT", "DMG-Net", "BoT", ("map", "r1")),
    ("DMG-Net > Meta-generalization", "DMG-Net", "Meta-generalization", ("map",)),
    ("DMG-Net > Meta-discrimination", "DMG-Net", "Meta-discrimination", ("map",)),
    ("Meta-generalization > BoT", "Meta-generalization", "BoT", ("map",)),  # Table 6, A–C
)
HEADINGS = {key: heading for key, _, heading, _ in METRICS}


def method_of(label: str) -> str | None:
    """The paper's method a result label names (``DMG-Net``, ``dmgnet`` → ``DMG-Net``;
    ``BoT``, ``bot``, ``baseline`` → ``BoT``; ...); None for a label naming none."""
    key = "".join(ch for ch in label.lower() if ch.isalnum())
    return METHOD_ALIASES.get(key)


@dataclasses.dataclass(frozen=True)
class Comparison:
    """What one comparison shows: the paper's table number, its rows, the title, notes
    printed after the table and the claims to check (see the module doc)."""

    table: str
    title: str
    rows: dict[str, dict[str, str]]
    notes: tuple[str, ...] = ()
    claims: tuple = ()


def _rows(name: str, **match) -> list[dict[str, str]]:

    return [r for r in paper_table(name) if all(r[k] == v for k, v in match.items())]


def _choice(what: str, value: str | None, choices, name: str) -> str:
    if value is None:
        raise UsageError(f"this DMG-Net comparison needs {param(name)} ({what})",
                         f"give {param(name)}: one of {', '.join(choices)}")
    if value not in choices:
        raise ParameterError("DMG-Net comparison", name, value,
                             f"names no {what} of the DMG-Net paper",
                             f"use one of {', '.join(choices)}")
    return value


def comparison(table: str, dataset: str | None = None, setting: str | None = None,
               subset: str | None = None, source: str | None = None) -> Comparison:
    """The paper rows, title, notes and claims of one comparison (module doc)."""
    if dataset == "synthetic":
        return Comparison("-", "synthetic held-out domain: ours only (the paper has no "
                          "synthetic numbers)", {}, (NULL_RESULT,), SYNTHETIC_CLAIMS)
    table = _choice("comparable table", table, ("3", "4", "5", "6"), "table")
    if table == "5":
        setting = _choice("setting", setting, SETTINGS, "setting")
        dataset = _choice("Table 5 target", dataset, TARGETS, "dataset")
        rows = {r["method"]: r for r in _rows("dmgnet_table5", setting=setting, target=dataset)}
        title = (f"{SETTINGS[setting]} → {TARGETS[dataset]}: ours vs DMG-Net paper Table 5 "
                 "(%, mean ± std over the trials' stores)")
        return Comparison(table, title, rows, (), MIXED_CLAIMS)
    if table in ("4", "6"):
        subset = _choice("Person30K test subset", (subset or "").upper() or None, SUBSETS,
                         "subset")
        if dataset not in (None, "person30k"):
            raise ParameterError("DMG-Net comparison", "dataset", dataset,
                                 f"is not the dataset of Table {table}",
                                 "use person30k (or leave it out)")
        # Table 4 has mAP, CMC@1 and CMC@5 of its methods, Table 6 mAP of the ablation rows:
        # a method's row comes from Table 4 where it has one (same mAP), else from Table 6
        rows = {r["method"]: {**r, "table": "6"} for r in _rows("dmgnet_table6", subset=subset)}
        rows.update({r["method"]: {**r, "table": "4"}
                     for r in _rows("dmgnet_table4", subset=subset)})
        title = (f"Person30K {SUBSETS[subset]}: ours vs DMG-Net paper Tables 4 and 6 (%) — "
                 "protocol assumed")
        return Comparison(table, title, rows, (PROTOCOL_ASSUMED,),
                          (*PERSON30K_CLAIMS, SUBSET_CLAIMS[subset]))
    source = _choice("Table 3 source", source, TRANSFER, "source")
    dataset = _choice("Table 3 target", dataset, [t for t in TRANSFER if t != source],
                      "dataset")
    row, = _rows("dmgnet_table3", source=source, target=dataset)
    title = (f"direct transfer {TRANSFER[source]} → {TRANSFER[dataset]}: ours vs DMG-Net paper "
             "Table 3 (%)")
    notes = ()
    if dataset == "person30k":
        title += " — protocol assumed"
        notes = ("the paper does not say which Person30K test subset Table 3 uses: each of "
                 "ours is shown beside its one value", PROTOCOL_ASSUMED)
    return Comparison(table, title, {"*": row}, notes, ())


def compare_dmgnet(results: list[tuple[str, Path]], table: str = "5",
                   dataset: str | None = None, setting: str | None = None,
                   subset: str | None = None, source: str | None = None,
                   console: Console | None = None,
                   noise: str | None = None) -> list[tuple[str, bool | None]]:
    """Print ours beside the paper's rows (module doc) and the claim lines; returns
    ``[(claim (metric), passed, or None when a method of the claim was not run)]``.
    ``noise="seed"``: each result averages one store per seed, and a verdict inside the
    seeds' spread says so (:func:`reidcli.paper.results.check_claims`)."""

    console = console or Console(width=max(Console().width, 132))
    setup = comparison(table, dataset, setting, subset, source)
    grid = result_grid(setup.title, "method", METRICS)
    ours = {}
    for label, path in results:
        res = load_result(path)
        method = method_of(label)
        if method is not None:
            ours[method] = res
        add_our_row(grid, label, method, res, METRICS)
        if setup.table != "-":
            row = setup.rows.get("*") or setup.rows.get(method or "")
            if row is None:
                name = f"paper Table {setup.table}: no row {label!r}"
            else:
                name = f"paper Table {row.get('table', setup.table)}"
                if row.get("paper_label") not in (None, method):
                    name += f" ({row['paper_label']})"
            grid.add_row("", "", name, "", *((row or {}).get(col) or "-" if col else "-"
                                            for _, _, _, col in METRICS))
        grid.add_section()
    console.print(grid)
    verdicts = check_dmgnet_claims(setup.claims, ours, console, noise)
    for note in setup.notes:
        console.print(note)
    return verdicts


def check_dmgnet_claims(claims, ours: dict[str, dict], console: Console,
                        noise: str | None = None) -> list[tuple[str, bool | None]]:
    """PASS/FAIL of every (claim, better, worse, metrics) whose methods were both run, one
    line per metric; one line lists the claims left unchecked."""

    verdicts, unchecked = [], []
    for claim, better, worse, metrics in claims:
        for metric in metrics:
            named = f"{claim} ({HEADINGS[metric]})"
            if better in ours and worse in ours:
                verdicts += check_claims([(named, better, worse, False)], ours, metric,
                                         console, digits=2, noise=noise)
            else:
                unchecked.append((named, None))
    if unchecked:
        names = dict.fromkeys(c.rsplit(" (", 1)[0] for c, _ in unchecked)
        console.print(f"not checked (methods not run): {'; '.join(names)}")
    return verdicts + unchecked


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="reid paper compare dmgnet",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--table", default="5", help="3 (direct transfer), 4 (Person30K), "
                        "5 (Mixed A/B, default) or 6 (Person30K ablation)")
    parser.add_argument("--setting", default=None, help="table 5: mixed_a or mixed_b")
    parser.add_argument("--dataset", default=None, help="table 5: prid2011, grid, viper or "
                        "ilids; table 3: the target; synthetic: ours only")
    parser.add_argument("--subset", default=None, help="tables 4 and 6: A, B or C")
    parser.add_argument("--source", default=None, help="table 3: the training dataset")
    parser.add_argument("results", nargs="+", help="LABEL=result.json (labels as in the "
                        "paper: DMG-Net, BoT, Meta-generalization, Meta-discrimination)")
    args = parser.parse_args(argv)
    try:
        pairs = labelled_results(args.results, "write e.g. DMG-Net=dmgnet.json")
        compare_dmgnet(pairs, args.table, args.dataset, args.setting, args.subset, args.source)
    except ReidError as exc:
        return report_error(exc)
    return 0


__all__ = ["compare_dmgnet", "check_dmgnet_claims", "comparison", "method_of", "SETTINGS",
           "TARGETS", "SUBSETS", "MIXED_CLAIMS", "PERSON30K_CLAIMS", "SUBSET_CLAIMS",
           "SYNTHETIC_CLAIMS"]
