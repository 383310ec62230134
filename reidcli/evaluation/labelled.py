"""Whether a store's queries and gallery carry identities: CMC/mAP count matches between
labelled rows, so `reid eval` refuses a store whose queries or gallery are all pid -1 and
points to ``--search`` (:mod:`reidcli.evaluation.search`) instead."""
from __future__ import annotations

import os

import numpy as np

from reidcli.evaluation.errors import EvaluationError
from reidcli.naming import param


def unlabelled_roles(pids: np.ndarray, q_rows: np.ndarray, g_rows: np.ndarray) -> str | None:
    """``"queries"``, ``"gallery"`` or ``"queries and gallery"`` when every such row has
    pid -1 (nothing to score), else None. ``pids`` [N] of the store rows."""
    roles = [name for name, rows in (("queries", q_rows), ("gallery", g_rows))
             if len(rows) and bool((pids[rows] == -1).all())]
    return " and ".join(roles) or None


def store_unlabelled_roles(store: str | os.PathLike, trials: str | None = "all") -> str | None:
    """:func:`unlabelled_roles` over the chosen ``trials`` of a store (None: labelled)."""
    from reidcli.store import open_store

    with open_store(store) as st:
        return open_store_unlabelled_roles(st, trials)


def open_store_unlabelled_roles(st, trials: str | None = "all") -> str | None:
    """:func:`store_unlabelled_roles` of an open store ``st``."""
    from reidcli.store.trials import parse_trials

    pids = st.record_columns["pid"]
    all_trials = st.query_gallery_trials()
    chosen = parse_trials(trials, len(all_trials)) if len(all_trials) > 1 or \
        trials not in (None, "all") else [0]
    found = [unlabelled_roles(pids, all_trials[k][1], all_trials[k][2]) for k in chosen
             if k < len(all_trials)]
    return next((f for f in found if f), None)


def check_labelled(store: str | os.PathLike, trials: str | None = "all") -> None:
    """EvaluationError pointing to ``search`` when the queries or the gallery of ``store``
    are unlabelled: CMC/mAP would count no match at all."""
    _refuse_unlabelled(store, store_unlabelled_roles(store, trials))


def check_labelled_open_store(st, trials: str | None = "all") -> None:
    """:func:`check_labelled` of an open store ``st`` (its records read once)."""
    _refuse_unlabelled(st.path, open_store_unlabelled_roles(st, trials))


def _refuse_unlabelled(store, roles: str | None) -> None:
    if roles is not None:
        raise EvaluationError(f"store {store}: its {roles} are unlabelled (pid -1), so there "
                              "is nothing to score",
                              f"list each query's nearest gallery images with "
                              f"{param('search', 10)}")
