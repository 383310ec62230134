"""Evaluate several feature stores with the same options and aggregate them over stores.

DG-VAE trains one model per RegDB trial, so its 10-trial figure is a mean over 10 stores.
:func:`evaluate_stores` scores each store exactly as
:func:`reidcli.evaluation.run.evaluate_store` does (every chosen trial of its own protocol),
keeps each store's single-store report (:func:`reidcli.evaluation.report.build_report`) and
aggregates them (:func:`aggregate_reports`): a store's value of a metric is its report's value
(its mean over its own trials); the aggregate is the mean of the stores' values and their
population standard deviation (ddof 0), the convention of the per-trial std of a
single-store report. Stores that would not give comparable numbers (another protocol rule,
another feature, another feature dimension or metric) are refused before any is scored.
See docs/cli.md, "Several stores in one `reid eval`".
"""
from __future__ import annotations

import contextlib
import dataclasses
import hashlib
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from reidcli.errors import ParameterError, ReidError, UsageError
from reidcli.evaluation.errors import EvaluationError
from reidcli.evaluation.report import (build_multi_report, build_report, mean_count, mean_std,
                                       pad_curves)
from reidcli.evaluation.run import StoreEvalRequest, StoreEvaluation, evaluate_store
from reidcli.evaluation.store_paths import expand_store_patterns, file_key
from reidcli.naming import param
from reidcli.numeric import distinct

#: scalar metrics aggregated over stores (``pur`` / ``auc`` only where every store has them)
SCALAR_METRICS = ("mAP", "mINP", "pur", "auc")
#: query counts averaged over stores
COUNTS = ("num_valid_queries", "num_queries", "num_skipped_queries")


@dataclasses.dataclass
class MultiStoreEvaluation:
    """Several stores scored with the same options: per store (in request order) its request,
    its evaluation and its single-store report; ``aggregate`` is :func:`aggregate_reports`
    of those reports."""

    requests: list[StoreEvalRequest]
    evaluations: list[StoreEvaluation]
    reports: list[dict[str, Any]]
    aggregate: dict[str, Any]

    @property
    def num_stores(self) -> int:
        return len(self.reports)

    @property
    def stores(self) -> list[str]:
        """The store paths as requested."""
        return [str(r.store) for r in self.requests]


def evaluate_stores(requests: Sequence[StoreEvalRequest]) -> MultiStoreEvaluation:
    """Score every store of ``requests`` (one request per store) and aggregate over stores.

    All stores are checked first (:func:`check_stores_agree`), so a store that disagrees is
    reported before any is scored. Errors of one store name it."""
    requests = list(requests)
    if not requests:
        raise UsageError("no store to evaluate", f"give at least one {param('store')}")
    check_stores_agree(requests)
    evaluations, reports = [], []
    for request in requests:
        with _naming_store(request.store, len(requests)):
            evaluation = evaluate_store(request)
        evaluations.append(evaluation)
        report = build_report(evaluation.protocol, evaluation.trials, evaluation.meta)
        report["store"] = str(request.store)            # the path as requested
        reports.append(report)
    return MultiStoreEvaluation(requests=requests, evaluations=evaluations, reports=reports,
                                aggregate=aggregate_reports(reports))


@dataclasses.dataclass(frozen=True)
class _Setup:
    """What makes two stores' numbers comparable: the protocol, the evaluated feature and
    the distance that compares its rows (the feature's metric unless one is requested)."""

    protocol: str
    rule: str
    feature: str | None
    dim: int | None
    metric: str
    #: the store's content digest (:func:`_identity_of`) and file (:func:`file_key`): never
    #: compared for agreement, only to find one store given twice
    identity: str = dataclasses.field(default="", compare=False)
    file: Any = dataclasses.field(default=None, compare=False)


def _identity_of(store) -> str:
    """A digest of what a store's numbers depend on: its records, up to 256 evenly spaced
    rows of every feature, and its protocol's query/gallery rows. A copy of a store has the
    same digest; two stores with other features or trials do not."""
    from reidcli.store.records_io import records_digest

    h = hashlib.sha256(records_digest(store.record_columns).encode())
    n = store.num_rows
    rows = distinct(np.linspace(0, max(n - 1, 0), min(n, 256)).round().astype(np.int64))
    for name in store.feature_names:
        h.update(name.encode())
        h.update(np.ascontiguousarray(store.features(name, rows)).tobytes())
    proto = None if store.shard is not None else store.protocol
    for trial in (proto.trials if proto is not None else []):
        for key in ("query_idx", "gallery_idx"):
            h.update(np.asarray(trial[key], dtype=np.int64).tobytes())
    return h.hexdigest()


def _setup_of(request: StoreEvalRequest, models: dict) -> _Setup:
    """The protocol and feature ``evaluate_store(request)`` would use (its own planning, so
    the store's own errors — no query rows, a missing ``feature`` — come out here too)."""
    from reidcli import fitted
    from reidcli.evaluation.run import plan_evaluation
    from reidcli.store import open_store

    model = None
    if request.model is not None:
        key = Path(request.model)
        if key not in models:
            models[key] = fitted.load(key)
        model = models[key]
    with open_store(request.store) as st:
        plan = plan_evaluation(st, request, model)
        identity = _identity_of(st)
    metric = plan.info.get("metric") if request.distance == "auto" else request.distance
    return _Setup(protocol=plan.protocol.name, rule=plan.protocol.rule, feature=plan.feature,
                  dim=plan.info.get("dim"), metric=str(metric), identity=identity,
                  file=file_key(Path(request.store)))


def check_stores_agree(requests: Sequence[StoreEvalRequest]) -> None:
    """EvaluationError naming the first store whose protocol (name and rule), evaluated
    feature, feature dimension or distance differs from the first store's, or that is a store
    given before under another name (hard link, symlink) or a copy of one (same records,
    sampled features and protocol rows: :func:`_identity_of`)."""
    models: dict = {}
    first, reference = None, None
    seen: dict[Any, Path] = {}
    for request in requests:
        with _naming_store(request.store, len(requests)):
            setup = _setup_of(request, models)
        for key, how in ((setup.file, "is the same file as"),
                         (("content", setup.identity), "holds the same records, features and "
                          "protocol as")):
            if key in seen:
                raise EvaluationError(
                    f"store {request.store} {how} store {seen[key]}",
                    "give each store once: a store counted twice makes the mean and std "
                    "over stores wrong")
            seen[key] = request.store
        if reference is None:
            first, reference = request.store, setup
            continue
        store = request.store
        if (setup.protocol, setup.rule) != (reference.protocol, reference.rule):
            raise EvaluationError(
                f"store {store} is evaluated with protocol {setup.protocol} (rule "
                f"{setup.rule}), store {first} with {reference.protocol} (rule "
                f"{reference.rule})",
                f"evaluate stores of one protocol together, or set {param('protocol')}")
        if setup.feature != reference.feature:
            raise EvaluationError(
                f"store {store} evaluates feature {setup.feature!r}, store {first} "
                f"{reference.feature!r}",
                f"pass {param('feature')} with a feature every store has")
        if setup.dim != reference.dim:
            raise EvaluationError(
                f"feature {setup.feature!r} of store {store} has {setup.dim} dimensions, of "
                f"store {first} {reference.dim}",
                "evaluate stores written by the same extractor together")
        if setup.metric != reference.metric:
            raise EvaluationError(
                f"feature {setup.feature!r} of store {store} is compared by {setup.metric}, "
                f"of store {first} by {reference.metric}",
                f"set {param('distance')} for every store, or evaluate them apart")


@contextlib.contextmanager
def _naming_store(store: Path, num_stores: int):
    """A user error raised inside names ``store`` (when several are evaluated and the message
    does not already); parameter errors are the same for every store and are left as is."""
    try:
        yield
    except ReidError as exc:
        if num_stores > 1 and not isinstance(exc, ParameterError) and str(store) not in exc.what:
            exc.what = f"store {store}: {exc.what}"
            exc.args = (exc.message,)
        raise


def aggregate_reports(reports: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Mean and std over stores of single-store reports (``build_report`` dicts).

    Returns ``mAP``, ``mINP``, ``cmc`` [R] (shorter curves extended by their last value, R
    the longest), ``pur`` / ``auc`` (where every store has them), ``std`` with the same keys,
    the averaged query counts of :data:`COUNTS`, ``skipped`` (per skip reason: the mean over
    stores of each store's mean over its trials), ``skipped_total`` (per reason: the queries
    skipped in all trials of all stores), ``num_stores`` and ``stores``: one summary per
    store (its ``store`` path, ``num_trials``, counts, ``skipped`` and metrics, ``cmc``
    [R_i]). A metric is None where any store's is None (e.g. mAP under cuhk03_sgs). Std: population (ddof 0)."""
    if not reports:
        raise UsageError("no store report to aggregate", "evaluate at least one store")
    curves = pad_curves([np.asarray(r["cmc"], dtype=np.float64) for r in reports])
    out: dict[str, Any] = {"std": {}}
    for metric in SCALAR_METRICS:
        if all(metric in r for r in reports):
            out[metric], out["std"][metric] = mean_std([r[metric] for r in reports])
    out["cmc"] = curves.mean(axis=0).tolist()
    out["std"]["cmc"] = curves.std(axis=0).tolist()
    for count in COUNTS:
        out[count] = mean_count([r[count] for r in reports])
    reasons = sorted({k for r in reports for k in r.get("skipped", {})})
    out["skipped"] = {k: mean_count([r.get("skipped", {}).get(k, 0) for r in reports])
                      for k in reasons}
    out["skipped_total"] = {k: int(sum(t.get("skipped", {}).get(k, 0)
                                       for r in reports for t in r.get("trials", [])))
                            for k in reasons}
    out["num_stores"] = len(reports)
    out["stores"] = [_summary(r) for r in reports]
    return out


def _summary(report: dict[str, Any]) -> dict[str, Any]:
    """One store's line of the aggregate: its path, trial count, counts and mean metrics."""
    row = {"store": report.get("store"), "num_trials": report["num_trials"]}
    row.update({count: report[count] for count in COUNTS})
    row["skipped"] = dict(report.get("skipped", {}))
    row.update({metric: report[metric] for metric in SCALAR_METRICS if metric in report})
    row["cmc"] = list(report["cmc"])
    return row


def evaluate_requests(requests: Sequence[StoreEvalRequest]
                      ) -> StoreEvaluation | MultiStoreEvaluation:
    """``reid eval``'s scoring of its ``--store`` requests: one store by
    :func:`~reidcli.evaluation.run.evaluate_store`, several by :func:`evaluate_stores`."""
    requests = list(requests)
    return evaluate_store(requests[0]) if len(requests) == 1 else evaluate_stores(requests)


def evaluation_report(evaluation: StoreEvaluation | MultiStoreEvaluation,
                      provenance: dict[str, Any] | None = None) -> dict[str, Any]:
    """The JSON report of :func:`evaluate_requests`' result: the single-store report, or the
    stores' reports with their mean ± std (docs/formats.md)."""
    if isinstance(evaluation, MultiStoreEvaluation):
        return build_multi_report(evaluation.reports, evaluation.aggregate, provenance)
    return build_report(evaluation.protocol, evaluation.trials, evaluation.meta, provenance)


__all__ = ["MultiStoreEvaluation", "StoreEvalRequest", "evaluate_stores", "evaluate_requests",
           "evaluation_report", "expand_store_patterns", "check_stores_agree",
           "aggregate_reports"]
