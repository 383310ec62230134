"""Our DG-VAE results beside the paper's Tables 1–2 (Pu et al., ACM MM 2020), and the paper's
ordering claims of §4.4 checked on our numbers (used by ``recipes/dgvae_*.sh``).

``reid paper compare dgvae --dataset sysu [--table 1|2] [--protocol all]
"DG-VAE=full.json" "baseline=base.json" ...`` reads ``reid eval --json`` reports (one store
or the across-store aggregate of several) and prints, per label, our R-1, R-10, R-20, mAP and
mINP (mean ± std) with the paper's row underneath, keyed by (dataset, protocol, variant).
The paper reports only single-shot all-search on SYSU-MM01 and visible→thermal on RegDB, and
only R-1/R-10/mAP (Table 1) or R-1/mAP (Table 2): every other cell prints "-".
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

from rich.console import Console

from reidcli.errors import ParameterError
from reidcli.paper.grid import add_our_row, result_grid
from reidcli.paper.results import check_claims, load_result, paper_table

#: the paper's table columns of each dataset: registry-facing name → (paper name, CSV prefix)
PAPER_DATASETS = {"sysu": ("SYSU-MM01", "sysu"), "regdb": ("RegDB", "regdb")}
#: protocols a comparison may name, per dataset; the first is the paper's (DG-VAE paper §4.1)
PROTOCOLS = {
    "sysu": {"all": "all-search single-shot", "indoor": "indoor-search single-shot",
             "all-multi": "all-search multi-shot", "indoor-multi": "indoor-search multi-shot"},
    "regdb": {"v2t": "visible→thermal", "t2v": "thermal→visible"},
    "synthetic": {"ir-to-visible": "infrared queries, visible gallery"},
}
#: Table 2's variant names (the ``--variant`` values of ``reid train dgvae``), in row order
VARIANTS = ("baseline", "mog", "mog_lmc", "ae_tsr", "ae_tsr_idc", "ae_tsr_idc_cyc", "vae1_tsr",
            "vae1_tsr_idc", "vae1_tsr_idc_cyc", "vae2_tsr", "dgvae_nolmc", "dgvae")
#: how Table 1 names a variant
TABLE1_NAMES = {"dgvae": "DG-VAE"}
#: our metric columns: (key of load_result, key of its std, heading, paper CSV suffix or None)
METRICS = (("r1", "s1", "R-1", "r1"), ("r10", "s10", "R-10", "r10"),
           ("r20", "s20", "R-20", None), ("map", "map_std", "mAP", "map"),
           ("minp", "minp_std", "mINP", None))

#: (claim, better variant, worse variant) — DG-VAE paper §4.4 and Table 2; each is checked on
#: R-1 and on mAP (the paper states them for both datasets and both metrics)
DGVAE_CLAIMS = (
    ("dgvae > baseline", "dgvae", "baseline"),                 # Table 2, rows 12 vs 1
    ("baseline > mog", "baseline", "mog"),                     # "adding only the MoG prior ...
    ("mog_lmc > mog", "mog_lmc", "mog"),                       # ... will degrade"; ALMC helps
    ("ae_tsr > baseline", "ae_tsr", "baseline"),               # TSR helps even in an AE
    ("vae1_tsr > ae_tsr", "vae1_tsr", "ae_tsr"),               # re-sampling on IAI helps
    ("vae1_tsr_idc_cyc > vae1_tsr", "vae1_tsr_idc_cyc", "vae1_tsr"),   # idc + cyc boost a VAE
    ("vae2_tsr > vae1_tsr_idc_cyc", "vae2_tsr", "vae1_tsr_idc_cyc"),   # "mere improvement"
    ("dgvae > vae2_tsr", "dgvae", "vae2_tsr"),                 # the MoG prior beats N(0, I)
    ("dgvae > dgvae_nolmc", "dgvae", "dgvae_nolmc"),           # the last two rows
    ("dgvae > mog_lmc", "dgvae", "mog_lmc"),                   # "+13.05 / +10.86 mAP"
)
CLAIM_METRICS = (("r1", "R-1"), ("map", "mAP"))


def variant_of(label: str) -> str | None:
    """The Table 2 variant a result label names (``DG-VAE`` or ``dgvae`` → ``dgvae``,
    ``baseline`` …); None for a label that names no variant."""
    if label in VARIANTS:
        return label
    for variant, name in TABLE1_NAMES.items():
        if label == name:
            return variant
    key = label.strip().lower().replace("-", "_")
    return key if key in VARIANTS else None


@dataclasses.dataclass
class PaperRow:
    """One paper row shown under ours: where it comes from and its cells (% strings, "" when
    the paper does not report that cell) keyed like :data:`METRICS`."""

    source: str
    cells: dict[str, str]


def paper_rows(label: str, dataset: str, protocol: str, table: str) -> list[PaperRow]:
    """The paper's rows for ``label`` under (dataset, protocol): Table 1 by method name,
    Table 2 by variant. A synthetic dataset gets both real-data rows, labelled as such."""

    variant = variant_of(label)
    if table == "1":
        key, name = "method", TABLE1_NAMES.get(variant, label)
        rows = {r["method"]: r for r in paper_table("dgvae_table1")}
    else:
        key, name = "variant", variant
        rows = {r["variant"]: r for r in paper_table("dgvae_table2")}
    row = rows.get(name)
    if dataset == "synthetic":
        shown = [(d, f"paper {PAPER_DATASETS[d][0]} (real data)") for d in PAPER_DATASETS]
    elif protocol == next(iter(PROTOCOLS[dataset])):
        shown = [(dataset, f"paper Table {table}")]
    else:
        return [PaperRow("paper: not reported for this protocol", {})]
    out = []
    for column, source in shown:
        prefix = PAPER_DATASETS[column][1]
        cells = {} if row is None else {
            ours: row.get(f"{prefix}_{suffix}", "") for ours, _, _, suffix in METRICS if suffix}
        out.append(PaperRow(source if row is not None else f"{source}: no {key} {label!r}",
                            cells))
    return out


def compare_dgvae(dataset: str, results: list[tuple[str, Path]], table: str = "2",
                  protocol: str | None = None, console: Console | None = None,
                  noise: str | None = None) -> list[tuple[str, bool | None]]:
    """Print ours beside the paper's Table ``table`` (1: state of the art, 2: ablation) for
    ``dataset`` (sysu | regdb | synthetic) and the claim lines; returns ``[(claim (metric),
    passed, or None when a variant of the claim was not run)]``. ``noise="seed"``: each
    result averages one store per seed, and a verdict inside the seeds' spread says so
    (:func:`reidcli.paper.results.check_claims`)."""

    console = console or Console(width=max(Console().width, 132))
    if dataset not in PROTOCOLS:
        raise ParameterError("DG-VAE comparison", "dataset", dataset,
                             "names no dataset of the DG-VAE paper",
                             f"use one of {', '.join(PROTOCOLS)}")
    if table not in ("1", "2"):
        raise ParameterError("DG-VAE comparison", "table", table,
                             "names no comparable DG-VAE table (1: state of the art, "
                             "2: ablation)", "use 1 or 2")
    protocol = protocol or next(iter(PROTOCOLS[dataset]))
    if protocol not in PROTOCOLS[dataset]:
        raise ParameterError("DG-VAE comparison", "protocol", protocol,
                             f"is not a {dataset} protocol",
                             f"use one of {', '.join(PROTOCOLS[dataset])}")
    name = PAPER_DATASETS.get(dataset, ("synthetic",))[0]
    title = (f"{name} {PROTOCOLS[dataset][protocol]}: ours vs DG-VAE paper Table {table} (%)")
    if dataset == "synthetic":
        title += " — the paper's rows are its real-data numbers, shown for scale only"
    grid = result_grid(title, "variant", METRICS)
    ours = {}
    for label, path in results:
        res = load_result(path)
        variant = variant_of(label)
        if variant is not None:
            ours[variant] = res
        add_our_row(grid, label, variant, res, METRICS)
        for ref in paper_rows(label, dataset, protocol, table):
            grid.add_row("", "", ref.source, "",
                         *(ref.cells.get(key) or "-" for key, _, _, _ in METRICS))
        grid.add_section()
    console.print(grid)
    return check_dgvae_claims(ours, console, noise)


def check_dgvae_claims(ours: dict[str, dict], console: Console,
                       noise: str | None = None) -> list[tuple[str, bool | None]]:
    """PASS/FAIL of every claim of :data:`DGVAE_CLAIMS` whose variants were both run (on R-1
    and on mAP); one line lists the claims left unchecked. ``noise``: see
    :func:`reidcli.paper.results.check_claims`."""

    verdicts, unchecked = [], []
    for claim, better, worse in DGVAE_CLAIMS:
        for metric, heading in CLAIM_METRICS:
            named = f"{claim} ({heading})"
            if better in ours and worse in ours:
                verdicts += check_claims([(named, better, worse, False)], ours, metric, console,
                                         digits=2, noise=noise)
            else:
                unchecked.append((named, None))
    if unchecked and not verdicts:
        console.print("claims: the paper's ordering claims compare variants; run several "
                      "(e.g. dgvae and baseline) to check them")
    elif unchecked:
        names = dict.fromkeys(c.rsplit(" (", 1)[0] for c, _ in unchecked)
        console.print(f"not checked (variants not run): {'; '.join(names)}")
    return verdicts + unchecked


__all__ = ["compare_dgvae", "check_dgvae_claims", "paper_rows", "variant_of", "DGVAE_CLAIMS",
           "VARIANTS", "PROTOCOLS"]
