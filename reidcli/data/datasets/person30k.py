"""Person30K (datasets.md §5.14) through the toolkit's manifest contract: no public layout
exists, so ``person30k/manifest.csv`` (columns ``path,pid,camid,site,scenario,subset``, paths
relative to the manifest) describes the copy. Query/gallery of a test subset: per
(pid, camera) the first image by sorted path is a query when the pid appears in ≥ 2 cameras,
everything else is gallery — a toolkit assumption."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from reidcli.data.datasets.common import require_file
from reidcli.data.records import DatasetSplit, normalize_frame
from reidcli.data.registry import DatasetInfo, register, resolve_dataset_dir
from reidcli.errors import DatasetError, UsageError

COLUMNS = ("path", "pid", "camid", "site", "scenario", "subset")
SUBSETS = {"A": "test_a", "B": "test_b", "C": "test_c"}

INFO = DatasetInfo(
    name="person30k", cameras="6,497 (paper)", title="Person30K (manifest format)",
    url="no public download found (CVPR 2021 paper, see shared/papers/dmgnet_person30k.txt)",
    license="unknown; reidcli never downloads it",
    tree="person30k/\n  manifest.csv   path,pid,camid,site,scenario,subset "
         "(subset: train, test_a, test_b, test_c; path relative to the manifest)\n  <images>",
    candidates=("person30k", "Person30K", "."),
    options={"test_subset": "A"},
    protocol="train subset → test subset A/B/C; query = first image per (pid, camera) of "
             "pids seen by ≥ 2 cameras (toolkit assumption)",
    notes=("domain = site", "pid 0 means a distractor, as everywhere in reidcli"),
    unconfirmed=("availability, file layout and query selection of Person30K",))


def read_manifest(path: Path) -> pd.DataFrame:
    """The validated manifest as a record table (all subsets, split = train)."""
    require_file(path, "person30k")
    try:
        table = pd.read_csv(path, dtype={"path": str, "site": str, "scenario": str,
                                         "subset": str})
    except (pd.errors.ParserError, ValueError) as exc:
        raise DatasetError(f"person30k: cannot parse {path} ({exc})",
                           "write a CSV with columns " + ",".join(COLUMNS)) from None
    missing = [c for c in COLUMNS if c not in table]
    if missing:
        raise DatasetError(f"person30k: {path} lacks column(s) {', '.join(missing)}",
                           "write a CSV with columns " + ",".join(COLUMNS))
    bad = sorted(set(table["subset"]) - set(SUBSETS.values()) - {"train"})
    if bad:
        raise DatasetError(f"person30k: {path} has unknown subset value(s) {', '.join(bad)}",
                           "use train, test_a, test_b or test_c")
    for col in ("pid", "camid"):
        if not pd.api.types.is_integer_dtype(table[col]) or (table[col] < 0).any():
            raise DatasetError(f"person30k: column {col} of {path} must hold integers ≥ 0",
                               "fix the manifest")
    base = path.parent
    missing_files = [p for p in table["path"].head(1000) if not (base / p).is_file()]
    if missing_files:
        raise DatasetError(f"person30k: {path} lists {base / missing_files[0]}, which does "
                           "not exist", "fix the manifest or the image folders")
    frame = pd.DataFrame({"path": [str(base / p) for p in table["path"]],
                          "pid": table["pid"],
                          "camid": table["camid"], "split": "train",
                          "dataset": "person30k", "domain": table["site"].astype(str),
                          "x_site": table["site"].astype(str),
                          "x_scenario": table["scenario"].astype(str),
                          "x_subset": table["subset"]})
    return normalize_frame(frame.sort_values("path", kind="stable").reset_index(drop=True))


def query_gallery(test: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Split a test subset into query and gallery by the manifest rule (module doc)."""
    cams_per_pid = test.groupby("pid")["camid"].nunique()
    multi = test["pid"].map(cams_per_pid) >= 2
    first = ~test.duplicated(["pid", "camid"], keep="first")      # sorted by path already
    is_query = (multi & first).to_numpy()
    query, gallery = test[is_query].copy(), test[~is_query].copy()
    query["split"], gallery["split"] = "query", "gallery"
    return normalize_frame(query.reset_index(drop=True)), normalize_frame(
        gallery.reset_index(drop=True))


def load_person30k(root=None, trial: int = 0, test_subset: str = "A") -> DatasetSplit:
    """Load Person30K from its manifest."""
    if test_subset not in SUBSETS:
        raise UsageError(f"person30k option test_subset={test_subset!r}",
                         "use test_subset=A, B or C")
    folder = resolve_dataset_dir("person30k", root)
    records = read_manifest(folder / "manifest.csv")
    subset = records["x_subset"].to_numpy()
    train = normalize_frame(records[subset == "train"].reset_index(drop=True))
    query, gallery = query_gallery(records[subset == SUBSETS[test_subset]])
    if len(query) == 0:
        raise DatasetError(f"person30k: test subset {test_subset} has no person seen by two "
                           "cameras", "check the manifest's test rows")
    return DatasetSplit(name="person30k", train=train, query=query, gallery=gallery,
                        eval_rule="market", protocol=f"test_{test_subset}",
                        options={"test_subset": test_subset})


register(INFO, load_person30k, lambda p: (p / "manifest.csv").is_file())
