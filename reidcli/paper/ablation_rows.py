"""The rows of the two ablations ``reid paper ablation`` trains (docs/methods/dgvae.md,
docs/methods/dmgnet.md): what each row sets, and the reid train config of a (row, seed).

* ``dgvae``: DG-VAE paper Table 2, one row per ``--variant`` of ``reid train dgvae``
  (:data:`reidcli.paper.dgvae_compare.VARIANTS`, in the table's order).
* ``dmgnet``: DMG-Net paper Table 6 — BoT (``reid train bot`` on the same merged sources),
  Meta-discrimination (``--no-meta``), Meta-generalization (``--md-weight 0``), DMG-Net — and
  the paired-batch control (``--no-meta --md-weight 0``, not in the paper) under its own name.
  One budget (recipes/_dmgnet_chain.sh): BoT draws P×K images a step, DMG-Net 2·P·K, so BoT
  runs twice the given iterations per epoch; DMG-Net's ``--preset tiny`` is BoT's
  ``dmgnet_tiny`` (the same sizes).

A (row, seed) config is built exactly as ``reid train`` builds it from the same options
(:func:`reidcli.training.config.make_config`), so the run is the same bytes as the chain's.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Sequence

from reidcli.errors import ParameterError
from reidcli.params import check_seed

OWNER = "ablation"


@dataclasses.dataclass(frozen=True)
class Row:
    """One row of an ablation: its folder name (and ``variants`` value), the label the
    paper comparison reads, the trainer that trains it and the parameters it sets."""

    name: str
    label: str
    method: str
    settings: Mapping[str, Any]


@dataclasses.dataclass(frozen=True)
class Ablation:
    """A paper's ablation: the trainer whose options the command takes, its rows in the
    paper's order, and the trainer parameters the rows and seeds set (no option of their
    own)."""

    paper: str
    trainer: str
    rows: Mapping[str, Row]
    fixed: tuple[str, ...]


def _dgvae_rows() -> dict[str, Row]:
    from reidcli.paper.dgvae_compare import VARIANTS

    return {v: Row(v, "DG-VAE" if v == "dgvae" else v, "dgvae", {"variant": v})
            for v in VARIANTS}


def _dmgnet_rows() -> dict[str, Row]:
    from reidcli.paper.dmgnet_budget import PAIRED_CONTROL

    return {"bot": Row("bot", "BoT", "bot", {}),
            "metadisc": Row("metadisc", "Meta-discrimination", "dmgnet", {"no_meta": True}),
            "metagen": Row("metagen", "Meta-generalization", "dmgnet", {"md_weight": 0.0}),
            "dmgnet": Row("dmgnet", "DMG-Net", "dmgnet", {}),
            "paired": Row("paired", PAIRED_CONTROL, "dmgnet",
                          {"no_meta": True, "md_weight": 0.0})}


def ablation(paper: str) -> Ablation:
    """The ablation of ``paper`` (``dgvae`` or ``dmgnet``)."""
    if paper == "dgvae":
        return Ablation("dgvae", "dgvae", _dgvae_rows(), ("variant", "seed"))
    if paper == "dmgnet":
        return Ablation("dmgnet", "dmgnet", _dmgnet_rows(), ("no_meta", "seed"))
    raise ParameterError(OWNER, "paper", paper, "has no ablation here", "use dgvae or dmgnet")


PAPERS = ("dgvae", "dmgnet")


def _names(value: Sequence[str] | str | None) -> list[str]:
    items = value.split(",") if isinstance(value, str) else list(value or [])
    return [str(v).strip() for v in items if str(v).strip()]


def select_rows(setup: Ablation, variants: Sequence[str] | str | None) -> list[Row]:
    """The rows named by ``variants`` (a comma list or names; None or empty: every row), in
    the order given, each once; ParameterError naming ``variants`` for an unknown one."""
    names = _names(variants) or list(setup.rows)
    for name in names:
        if name not in setup.rows:
            raise ParameterError(OWNER, "variants", name,
                                 f"is not a row of the {setup.paper} ablation",
                                 f"use {', '.join(setup.rows)}")
    return [setup.rows[n] for n in dict.fromkeys(names)]


def parse_seeds(seeds: Sequence[int] | str | None) -> list[int]:
    """Seeds from ``0,1,2`` or a sequence (None: 0,1,2), each an integer in [0, 2³²) and
    once; ParameterError naming ``seeds`` otherwise."""
    items = _names(seeds) if isinstance(seeds, str) else list(seeds if seeds is not None
                                                              else (0, 1, 2))
    if not items:
        raise ParameterError(OWNER, "seeds", seeds, "names no seed", "e.g. 0,1,2")
    out = []
    for item in items:
        try:
            value = int(item) if isinstance(item, str) else item
        except ValueError:
            raise ParameterError(OWNER, "seeds", item, "is not an integer",
                                 "e.g. 0,1,2") from None
        out.append(check_seed(OWNER, value, "seeds"))
    if len(set(out)) != len(out):
        raise ParameterError(OWNER, "seeds", ",".join(map(str, out)), "repeats a seed",
                             "give each seed once")
    return out


def bot_options(given: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The options of the BoT row from the DMG-Net options ``given`` (None: not given), under
    the one-budget rule (module doc): the parameters BoT has, ``preset`` tiny → dmgnet_tiny,
    ``iters_per_epoch`` doubled. Also returns the given DMG-Net parameters BoT has not (they
    apply to the DMG-Net rows only)."""
    from reidcli.training.config import method_parameters

    known = {p.name for p in method_parameters("bot")} | {"dataset", "root", "options",
                                                          "preset"}
    out, dropped = {}, []
    for name, value in given.items():
        if value is None:
            continue
        if name not in known:
            dropped.append(name)
            continue
        if name == "preset" and value == "tiny":
            value = "dmgnet_tiny"
        if name == "iters_per_epoch":
            value = 2 * value
        out[name] = value
    return out, dropped


def training_dataset(method: str, values: Mapping[str, Any]) -> str | None:
    """The dataset ``reid train`` records for ``values``: its ``dataset``, else the sources
    joined with ``+`` (DMG-Net's ``sources``; BoT's optional ``sources``)."""
    from reidcli.training.config import method_info

    extras = method_info(method).extras
    for key in ("data_parameter", "sources_parameter"):
        names = values.get(extras.get(key) or "")
        if names:
            return "+".join(names)
    return values.get("dataset")


def row_config(setup: Ablation, row: Row, given: Mapping[str, Any], seed: int):
    """The TrainConfig of ``row`` at ``seed``: the options ``given`` (parameters of the
    ablation's trainer, None = not given; the BoT row takes :func:`bot_options`), the row's
    settings and the seed — what ``reid train`` builds from the same options."""
    from reidcli.training.config import make_config

    for name in setup.fixed:
        if given.get(name) is not None:
            what = "seeds" if name == "seed" else "variants"
            raise ParameterError(OWNER, name, given[name], "is set by each run of the "
                                 "ablation", f"choose the runs with {what} instead")
    values = dict(given)
    if row.method != setup.trainer:
        values, _ = bot_options(values)
    values.update(row.settings)
    values["seed"] = seed
    dataset = training_dataset(row.method, values)
    preset, root = values.pop("preset", None), values.pop("root", None)
    options = values.pop("options", None) or {}
    values.pop("dataset", None)
    return make_config(row.method, preset=preset, dataset=dataset or "synthetic",
                       root=None if root is None else str(root), options=options, **values)


__all__ = ["Row", "Ablation", "ablation", "PAPERS", "select_rows", "parse_seeds",
           "bot_options", "training_dataset", "row_config"]
