"""What the WARCA recipes print about the experiment they ran (docs/methods/warca.md).

``reid paper warca-protocol header STORE --dim D'`` prints the recipe's header
line: the dataset, its splits, test persons, probe/gallery draws and rule, the features and
D' — and whether that is the WARCA paper's protocol (Sect. 4.1–4.2) or how it departs.
``reid paper warca-protocol cv MODEL`` prints the (λ, η) a ``cv=true`` fit
selected on split 1's training ids (and the held-out check against the identity);
``--values`` prints just ``λ η`` for a shell ``read`` (``--with-values``: the sentence, then
``λ η`` on a second line).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from reidcli.errors import ReidError, UsageError
from reidcli.paper.script import report_error

#: the paper's protocol per dataset (WARCA Sect. 4.1–4.2, Table 2): test persons P per split
#: (None: the dataset's fixed split), D', features
PAPER_PROTOCOLS: dict[str, dict[str, Any]] = {
    "market1501": {"label": "Market-1501", "test_ids": None, "dim": 200, "features": "bow"},
    "cuhk03": {"label": "CUHK03", "test_ids": 100, "dim": 40, "features": "hist-lbp",
               "subset": "labeled", "splits": "testsets 1-10"},
    "opereid": {"label": "OpeReid", "test_ids": 119, "dim": 40, "features": "hist-lbp"},
    "cuhk01": {"label": "CUHK01", "test_ids": 486, "dim": 40, "features": "hist-lbp"},
    "viper": {"label": "VIPeR", "test_ids": 316, "dim": 100, "features": "hist-lbp"},
    "prid450s": {"label": "PRID450s", "test_ids": 225, "dim": 40, "features": "hist-lbp"},
    "caviar4reid": {"label": "CAVIAR", "test_ids": 36, "dim": 40, "features": "hist-lbp"},
    "3dpes": {"label": "3DPeS", "test_ids": 95, "dim": 40, "features": "hist-lbp"},
    "ilids": {"label": "iLIDS", "test_ids": 60, "dim": 40, "features": "hist-lbp"},
}
#: Table 3 (LOMO) rows
LOMO_DATASETS = ("viper", "cuhk01")
PAPER_SPLITS = 10
PAPER_DRAWS = 10
PAPER_DRAW_RULE = "probe_single"


def describe_store(store: str | Path, dim: int, table: str = "2") -> tuple[str, list[str]]:
    """(header line, departures from the paper's protocol) of a recipe's feature store."""
    st = _read_store_protocol(store)
    dataset = st["dataset"]
    paper = PAPER_PROTOCOLS.get(dataset)
    departures: list[str] = []
    wanted_features = "lomo" if table == "3" else (paper or {}).get("features", "hist-lbp")
    if paper is None:
        departures.append(f"{dataset!r} is not one of the paper's nine datasets")
    name = st["options"].get("protocol", st["name"])
    if paper is not None and paper["test_ids"] is None:          # Market-1501: fixed split
        parts = _fixed_split_parts(name, st["num_trials"], departures)
    else:
        parts = _drawn_split_parts(name, st["options"], st["num_trials"], st["rule"], paper,
                                   departures)
    features = st["features"]
    if wanted_features not in features:
        departures.append(f"features {', '.join(features)} (paper: {wanted_features})")
    if paper is not None and table != "3" and int(dim) != paper["dim"]:
        departures.append(f"D' = {dim} (paper: {paper['dim']})")
    label = (paper or {}).get("label", dataset)
    line = (f"WARCA Table {table} protocol on {label}: " + ", ".join(parts)
            + f"; features {', '.join(features)}; D' = {dim}")
    return line, departures


def _read_store_protocol(store: str | Path) -> dict[str, Any]:
    """The store's dataset (lower case), protocol name, options, trial count, evaluation rule
    and feature names (defaults when it holds no protocol)."""
    from reidcli.store import open_store

    with open_store(store) as st:
        proto = st.protocol
        info: dict[str, Any] = {"dataset": (st.dataset or "unknown").lower(),
                                "features": st.feature_names}
        if proto is None:
            return {**info, "name": "standard", "options": {}, "num_trials": 1,
                    "rule": "market"}
        return {**info, "name": proto.name,
                "options": dict(proto.attrs.get("options", {}) or {}),
                "num_trials": proto.num_trials, "rule": proto.eval_rule}


def _fixed_split_parts(name: Any, num_trials: int, departures: list[str]) -> list[str]:
    """Header parts of a dataset with a fixed split (Market-1501); departures appended."""
    if name not in ("standard", "market", None) and num_trials != 1:
        departures.append("the paper uses the fixed Market-1501 split")
    return [f"{name} split ({num_trials} trial)", "single query, same-camera matches "
            "dropped (E1)"]


def _drawn_split_parts(name: Any, options: dict[str, Any], num_trials: int, rule: str,
                       paper: dict[str, Any] | None, departures: list[str]) -> list[str]:
    """Header parts of a protocol of drawn splits (splits × draws, P test ids, the draw
    rule, same-camera matches, subset); departures from the paper's appended."""
    draws = int(options.get("draws", 1) or 1)
    splits = num_trials // max(draws, 1)
    draw_rule = options.get("warca_draw", "?")
    same = options.get("same_camera", "drop")
    p = options.get("test_ids", "?")
    parts = [f"{splits} splits × {draws} draws", f"P = {p} test ids",
             "one probe per test id, its other images the gallery" if
             draw_rule == "probe_single" else
             "one gallery image per test id, its other images probes",
             "same-camera matches kept" if same == "keep" or rule == "single_shot_any"
             else "same-camera matches dropped"]
    if options.get("subset"):
        parts.append(f"subset {options['subset']}")
    departures.extend(_drawn_split_departures(name, splits, draws, draw_rule, p, options,
                                             paper))
    return parts


def _drawn_split_departures(name: Any, splits: int, draws: int, draw_rule: Any, p: Any,
                            options: dict[str, Any], paper: dict[str, Any] | None) -> list[str]:
    """How a protocol of drawn splits departs from the WARCA protocol (Sect. 4.1–4.2)."""
    departures = []
    if name != "warca":
        departures.append(f"protocol {name!r} instead of the WARCA protocol")
    if splits != PAPER_SPLITS:
        departures.append(f"{splits} splits (paper: {PAPER_SPLITS})")
    if draws != PAPER_DRAWS:
        departures.append(f"{draws} draws per split (paper: {PAPER_DRAWS})")
    if draw_rule != PAPER_DRAW_RULE:
        departures.append(f"warca_draw={draw_rule} (paper: one probe per person, "
                          "warca_draw=probe_single)")
    if paper is not None and str(p) != str(paper["test_ids"]):
        departures.append(f"P = {p} test ids (paper: {paper['test_ids']})")
    if paper is not None and paper.get("subset") and \
            options.get("subset") != paper["subset"]:
        departures.append(f"subset {options.get('subset')} (paper: {paper['subset']})")
    return departures


def header(store: str | Path, dim: int, table: str = "2") -> int:
    line, departures = describe_store(store, dim, table)
    print(line)
    if departures:
        print("departs from the paper's protocol: " + "; ".join(departures))
    else:
        print("this is the paper's protocol (WARCA Sect. 4.1–4.2)")
    return 0


def _text(value) -> str:
    return value.decode() if isinstance(value, (bytes, np.bytes_)) else str(value)


def selected(model: str | Path) -> dict[str, Any]:
    """The cv selection of a fitted WARCA file's first trial: ``lam``, ``lr``, ``gamma``,
    validation rank-1 of the choice and of the identity, and the number of validation ids."""
    from reidcli import fitted

    loaded = fitted.load(model)
    if loaded.method != "warca":
        raise UsageError(f"{model} holds a {loaded.method} model, not warca",
                         "pass the cv fit of reid train warca")
    arrays = loaded.arrays(loaded.trial_ids[0])
    if "cv" not in arrays:
        raise UsageError(f"{model} was fitted without cross-validation",
                         "fit it with --param cv=true")
    config = json.loads(_text(arrays["train_config"]))
    cv = arrays["cv"]
    check = arrays.get("holdout_check") or {}
    return {"lam": float(config["lam"]), "lr": float(config["lr"]),
            "gamma": config.get("gamma_resolved"), "trial": loaded.trial_ids[0],
            "val_rank1": float(np.max(cv["rank1"])), "val_ids": int(len(cv["val_ids"])),
            "identity_rank1": None if "rank1_identity" not in check
            else float(check["rank1_identity"])}


def cv_report(model: str | Path, values: bool = False, with_values: bool = False) -> int:
    """Print the cv selection: the sentence, just ``λ η`` (``values``), or the sentence and
    then ``λ η`` on a second line (``with_values``, what a recipe reads once)."""
    sel = selected(model)
    if values:
        print(f"{sel['lam']:g} {sel['lr']:g}")
        return 0
    gamma = "" if sel["gamma"] is None else f", γ = {float(sel['gamma']):.4g}"
    identity = "" if sel["identity_rank1"] is None else \
        f"; identity {100 * sel['identity_rank1']:.1f} %"
    print(f"cross-validated once on split {sel['trial'] + 1}'s training ids "
          f"({sel['val_ids']} validation ids), reused for every split: λ = {sel['lam']:g}, "
          f"η = {sel['lr']:g}{gamma} (validation rank-1 {100 * sel['val_rank1']:.1f} %"
          f"{identity})")
    if with_values:
        print(f"{sel['lam']:g} {sel['lr']:g}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="reid paper warca-protocol",
                                     description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    head = sub.add_parser("header", help="the protocol line of a recipe's store")
    head.add_argument("store")
    head.add_argument("--dim", type=int, required=True)
    head.add_argument("--table", default="2")
    cv = sub.add_parser("cv", help="the (λ, η) a cv fit selected")
    cv.add_argument("model")
    cv.add_argument("--values", action="store_true", help="print only 'λ η'")
    cv.add_argument("--with-values", action="store_true",
                    help="print the sentence, then 'λ η' on a second line")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        if args.command == "header":
            return header(args.store, args.dim, args.table)
        return cv_report(args.model, args.values, args.with_values)
    except ReidError as exc:
        return report_error(exc)
