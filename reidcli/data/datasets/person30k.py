"""Person30K (docs/datasets.md) through reidcli's manifest contract.

No public download, file layout or query/gallery division of Person30K is known
(**unconfirmed**), so a copy is described by ``person30k/manifest.csv`` with the columns
``path,pid,camid,site,scenario,subset`` — ``path`` relative to the manifest's folder,
``subset`` one of ``train``, ``test_a``, ``test_b``, ``test_c``. Records: ``domain = site``,
``x_site``, ``x_scenario``, ``x_subset``; pid 0 is a distractor as everywhere in reidcli.

Protocol (a **toolkit assumption**): train = the ``train`` rows; for ``test_subset`` X the
``test_x`` rows are split per (pid, camid): the first image by sorted path is a query when the
pid appears in ≥ 2 cameras of that subset, every other image is gallery. Evaluation E1.
"""
from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

import numpy as np
import pandas as pd

from reidcli.data.datasets.common import require_file
from reidcli.data.records import DatasetSplit, normalize_frame
from reidcli.data.registry import DatasetInfo, register, resolve_dataset_dir
from reidcli.data.splits import check_trial
from reidcli.data.trials import check_choice
from reidcli.errors import DatasetError

MANIFEST = "manifest.csv"
COLUMNS = ("path", "pid", "camid", "site", "scenario", "subset")
SUBSETS = {"A": "test_a", "B": "test_b", "C": "test_c"}
SUBSET_VALUES = ("train", *SUBSETS.values())
QUERY_RULE = ("query/gallery division is a reidcli toolkit assumption (unconfirmed): per "
              "(pid, camid) of the test subset, the first image by sorted path is a query if "
              "the pid appears in ≥ 2 cameras; every other image is gallery")

INFO = DatasetInfo(
    name="person30k", title="Person30K (reidcli manifest format)",
    url="no public download found (Bai et al., CVPR 2021); "
        "describe your copy with person30k/manifest.csv",
    license="unknown (no public release found); reidcli never downloads it",
    tree="person30k/\n"
         "  manifest.csv   columns path,pid,camid,site,scenario,subset\n"
         "                 (path relative to this folder; subset: train, test_a, test_b, "
         "test_c)\n  <images as listed>",
    candidates=("person30k", "Person30K", "."),
    cameras="6,497 (paper)",
    counts={"train": (568977, 12000)},
    options={"test_subset": "A"},
    protocol="train rows → test subset A (same-site), B (same-scenario) or C "
             "(different-scenario); query = first image per (pid, camera) of pids seen by "
             "≥ 2 cameras (toolkit assumption)",
    eval_rule="market",
    notes=(QUERY_RULE,
           "the manifest format itself is reidcli's contract, not part of a Person30K release",
           "domain = site; x_site, x_scenario, x_subset keep the manifest's values",
           "expected train count is the paper's (12,000 ids / 568,977 images)"),
    unconfirmed=("Person30K availability, file layout and query/gallery selection "
                 "(docs/datasets.md): the manifest and the query rule are toolkit assumptions",))


def looks_like_person30k(path: Path) -> bool:
    return (path / MANIFEST).is_file()


def _bad(path: Path, table: pd.DataFrame, mask: np.ndarray, column: str, want: str):
    """DatasetError naming the first manifest line (1 = header) whose ``column`` is bad."""
    row = int(np.flatnonzero(mask)[0])
    return DatasetError(f"person30k: {path} line {row + 2}: column {column} holds "
                        f"{table[column].iloc[row]!r}, expected {want}", "fix the manifest")


def _check_files(path: Path, rel: pd.Series) -> None:
    """Every listed image exists (one directory listing per folder, not one stat per file)."""
    base = path.parent
    listed: dict[str, set[str]] = {}
    for row, rp in enumerate(rel):
        parent, _, name = rp.rpartition("/")
        if parent not in listed:
            folder = base / parent if parent else base
            try:
                with os.scandir(folder) as entries:
                    listed[parent] = {e.name for e in entries}
            except OSError:
                listed[parent] = set()
        if name not in listed[parent]:
            raise DatasetError(f"person30k: {path} line {row + 2} lists {base / rp}, which "
                               "does not exist", "fix the manifest or the image folders")


def read_manifest(path: Path) -> pd.DataFrame:
    """The validated manifest as one record table of all rows (sorted by path)."""
    require_file(path, "person30k")
    todo = "write a CSV with the header " + ",".join(COLUMNS)
    try:
        table = pd.read_csv(path, dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise DatasetError(f"person30k: cannot parse {path} as CSV ({exc})", todo) from None
    table.columns = [str(c).strip() for c in table.columns]
    missing = [c for c in COLUMNS if c not in table.columns]
    if missing:
        raise DatasetError(f"person30k: {path} lacks column(s) {', '.join(missing)} (has: "
                           f"{', '.join(table.columns) or 'none'})", todo)
    if len(table) == 0:
        raise DatasetError(f"person30k: {path} has no rows", "list one image per row")
    table = table[list(COLUMNS)].apply(lambda col: col.str.strip())
    for col in ("pid", "camid"):
        ok = table[col].str.fullmatch(r"\d+").to_numpy()
        if not ok.all():
            raise _bad(path, table, ~ok, col, "an integer ≥ 0")
    for col in ("path", "site", "scenario"):
        empty = (table[col] == "").to_numpy()
        if empty.any():
            raise _bad(path, table, empty, col, "a non-empty value")
    subset = table["subset"].str.lower()
    wrong = ~subset.isin(SUBSET_VALUES).to_numpy()
    if wrong.any():
        raise _bad(path, table, wrong, "subset", " | ".join(SUBSET_VALUES))
    rel = table["path"].str.replace("\\", "/", regex=False)
    absolute = rel.map(lambda p: PurePosixPath(p).is_absolute() or p[1:3] == ":/").to_numpy()
    if absolute.any():
        raise _bad(path, table.assign(path=rel), absolute, "path",
                   "a path relative to the manifest's folder")
    dup = rel.duplicated().to_numpy()
    if dup.any():
        raise _bad(path, table.assign(path=rel), dup, "path", "each image listed once")
    _check_files(path, rel)
    base = path.parent
    frame = pd.DataFrame({
        "path": [str(base / p) for p in rel], "pid": table["pid"].astype(np.int64),
        "camid": table["camid"].astype(np.int64), "split": "train", "dataset": "person30k",
        "domain": table["site"], "x_site": table["site"], "x_scenario": table["scenario"],
        "x_subset": subset})
    order = np.argsort(frame["path"].map(lambda p: p.encode()).to_numpy(), kind="stable")
    return normalize_frame(frame.iloc[order].reset_index(drop=True))


def query_gallery(test: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Split one test subset (sorted by path) by the toolkit rule (module doc); distractors
    (pid 0) are never queries."""
    cams_per_pid = test.groupby("pid")["camid"].nunique()
    multi = (test["pid"].map(cams_per_pid) >= 2) & (test["pid"] > 0)
    first = ~test.duplicated(["pid", "camid"], keep="first")
    is_query = (multi & first).to_numpy()
    query, gallery = test[is_query].copy(), test[~is_query].copy()
    query["split"], gallery["split"] = "query", "gallery"
    return (normalize_frame(query.reset_index(drop=True)),
            normalize_frame(gallery.reset_index(drop=True)))


def load_person30k(root=None, trial: int = 0, test_subset: str = "A") -> DatasetSplit:
    """Load Person30K from its manifest; ``test_subset`` A | B | C picks the test rows."""
    key = check_choice("person30k", "test_subset", test_subset, tuple(SUBSETS),
                       aliases={v: k for k, v in SUBSETS.items()})
    check_trial("person30k", trial, 1, "dataset")
    folder = resolve_dataset_dir("person30k", root)
    manifest = folder / MANIFEST
    records = read_manifest(manifest)
    subset = records["x_subset"].to_numpy()
    train = normalize_frame(records[subset == "train"].reset_index(drop=True))
    test = records[subset == SUBSETS[key]]
    if len(test) == 0:
        raise DatasetError(f"person30k: {manifest} has no {SUBSETS[key]} rows",
                           "add that test subset to the manifest or pick another test_subset")
    query, gallery = query_gallery(test)
    if len(query) == 0:
        raise DatasetError(f"person30k: no person of {SUBSETS[key]} in {manifest} appears in "
                           "two cameras, so there is no query", "check the manifest's camids")
    return DatasetSplit(name="person30k", train=train, query=query, gallery=gallery,
                        eval_rule="market", trial=0, num_trials=1,
                        protocol=f"test_{key.lower()}", options={"test_subset": key})


register(INFO, load_person30k, looks_like_person30k)
