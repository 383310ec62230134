"""Evaluate a feature store (optionally through a fitted model) over a protocol's trials.

``evaluate_store(request)`` opens the store, picks the protocol (``auto``: from the store)
and, for each chosen trial, reads that trial's query and gallery features, builds the
distance source (features → optional ``--feat-norm`` → optional model → metric, optionally
re-ranked) and scores it with :func:`reidcli.evaluation.engine.evaluate_trial` — or, for a
gallery streamed from the store, :func:`reidcli.evaluation.streamed.evaluate_streamed`.
"""
from __future__ import annotations

import dataclasses
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from reidcli.cameras import record_cameras
from reidcli.evaluation.backend import make_backend, resolve_device
from reidcli.evaluation.distances import (FeatureMetric, ModelMetric, QueryGallery, as_slice,
                                          check_features, check_magnitude, normalize_features)
from reidcli.evaluation.engine import EvalOptions, TrialResult, evaluate_trial
from reidcli.evaluation.errors import EvaluationError
from reidcli.evaluation.protocols import (Protocol, TrialLabels, auto_protocol,
                                          check_protocol_fits, evaluated_cameras,
                                          get_protocol, identity_codes,
                                          record_column, unseen_query_cameras)
from reidcli.evaluation.scores import nmi_camera_bias
from reidcli.evaluation.streamed import (StreamedGallery, evaluate_streamed,
                                         streaming_limitation)
from reidcli.naming import param
from reidcli.progress import track

if TYPE_CHECKING:  # pragma: no cover - imported where re-ranking runs
    from reidcli.evaluation.rerank import RerankOptions


#: ``stream`` choices: auto (stream a gallery whose float32 features exceed
#: STREAM_GALLERY_ABOVE_BYTES, when the protocol allows), on, off
STREAM_MODES = ("auto", "on", "off")
STREAM_GALLERY_ABOVE_BYTES = 1 << 30


@dataclasses.dataclass
class StoreEvalRequest:
    """What ``reid eval`` was asked (CLI option names in brackets)."""

    store: Path                                  # --store
    model: Path | None = None                    # --model
    feature: str | None = None                   # --feature
    protocol: str = "auto"                       # --protocol
    trials: str | None = "all"                   # --trials
    distance: str = "auto"                       # --distance
    feat_norm: str = "auto"                      # --feat-norm
    n_parts: int = 6                             # --n-parts
    query_cams: list[int] | None = None          # --query-cams
    train_cams: list[int] | None = None          # --train-cams
    rerank: RerankOptions | None = None          # --rerank [--k1 --k2 --lambda]
    nmi: bool = False                            # --nmi
    nmi_k: str = "cams"                          # --nmi-k
    device: str = "auto"                         # --device
    precision: str = "float32"                   # --precision (distance GEMM)
    stream: str = "auto"                         # --stream (gallery read block by block)
    options: EvalOptions = dataclasses.field(default_factory=EvalOptions)
    #: under torchrun: this rank's share of every streamed gallery
    #: (:class:`reidcli.evaluation.distributed.GallerySplit`; with ``stream`` on)
    split: Any = None

    def __post_init__(self) -> None:
        from reidcli.evaluation.errors import EvaluationParameterError
        from reidcli.params import PRECISION, Options, check_param

        # `fp32` (reid adapt's spelling) is an alias: the canonical float32 is recorded
        self.precision = check_param("evaluation", "precision", self.precision, PRECISION,
                                     todo="float32, or bf16 for a faster, rounded GEMM",
                                     error=EvaluationParameterError)
        self.stream = check_param("evaluation", "stream", self.stream, Options(STREAM_MODES),
                                  todo="auto: stream galleries larger than "
                                  f"{STREAM_GALLERY_ABOVE_BYTES >> 30} GiB",
                                  error=EvaluationParameterError)


@dataclasses.dataclass
class StoreEvaluation:
    """Results of every trial plus what produced them (for the report)."""

    protocol: Protocol
    trials: list[TrialResult]
    meta: dict[str, Any]


def _parse_trials(text: str | None, num_trials: int) -> list[int]:
    from reidcli.store.trials import parse_trials
    return parse_trials(text, num_trials)


def _trial_rows(st) -> tuple[list[tuple[int, np.ndarray, np.ndarray]], Any]:
    """All trials as ``(k, query_rows, gallery_rows)``: the store's protocol trials, or one
    trial of its ``query``/``gallery`` rows."""
    proto = st.protocol
    return st.query_gallery_trials(), (proto if proto is not None and proto.trials else None)


def _train_cameras_of(st) -> list[int] | None:
    for source in (st.attrs, st.provenance):
        value = source.get("train_cams")
        if value is not None:
            try:
                return [int(c) for c in (value if isinstance(value, (list, tuple, np.ndarray))
                                         else str(value).split(","))]
            except (TypeError, ValueError):
                return None
    return None


def _training_overlap(st, plan) -> dict[str, int] | None:
    """Trial → number of its query/gallery identities that the network which wrote the
    store was trained on (its provenance's ``training_identities``, also through adapt and
    merge; :mod:`reidcli.models.training_identities`); None when the store records none.
    Any overlap warns: those scores measure memorisation, not re-identification."""
    from reidcli.models.training_identities import find_records, rows_overlap

    provenance = st.provenance
    if not find_records(provenance):
        return None
    found: dict[str, int] = {}
    exact = True
    for k, q, g in plan.trials:
        result = rows_overlap(provenance, st.records, np.concatenate([q, g]))
        if result is None:
            return None
        found[str(k)] = result[0]
        exact = exact and result[1]
    bad = {k: n for k, n in found.items() if n}
    if bad:
        counts = ", ".join(f"store trial {k}: {'≥ ' if not exact else ''}{n}"
                           for k, n in bad.items())
        warnings.warn(f"store {st.path}: query/gallery identities the network was trained on "
                      f"({counts}) — these scores measure memorisation, not "
                      "re-identification; extract the model's own trial instead")
    return found


def evaluate_store(request: StoreEvalRequest) -> StoreEvaluation:
    """Score a store over the chosen protocol's trials (see module doc).

    Features are read per trial and role (query, gallery) straight from the store, so memory
    holds one trial's features plus one distance block; a streamed gallery
    (:func:`streams_gallery`) is read block by block instead, so memory holds the queries and
    two gallery blocks (docs/evaluation.md).
    """
    from reidcli.evaluation.labelled import check_labelled_open_store
    from reidcli.store import open_store

    started = time.perf_counter()
    model = None
    if request.model is not None:
        from reidcli import fitted

        model = fitted.load(request.model)
    device = resolve_device(request.device)
    with open_store(request.store) as st:
        # unlabelled queries or gallery: nothing to score (reid eval --search instead)
        check_labelled_open_store(st, request.trials)
        plan = plan_evaluation(st, request, model)
        training_overlap = _training_overlap(st, plan)
        options = plan.options
        backend = make_backend(device)
        results: list[TrialResult] = []
        metric_name, nmi = None, None
        embedded = EmbeddingCache()
        streamed = []
        distractor_queries = 0           # query rows with pid 0: never scored (docs/errors.md)
        try:
            runs = list(_runs(plan.trials, model))
            for k, repeat, q_rows, g_rows in track(runs, description="evaluating", unit="trials",
                                                   enabled=options.progress):
                labels = TrialLabels.from_records(plan.records, plan.codes, q_rows,
                                                  g_rows, cameras=plan.cameras)
                distractor_queries += int((labels.query_pids == 0).sum())
                q_feat = _trial_inputs(st, plan, model, k, repeat, q_rows, request, "query")
                if streams_gallery(request, plan, g_rows):
                    source, metric_name = _streamed_source(st, plan, model, k, repeat, q_feat,
                                                           q_rows, g_rows, request, backend)
                    result = evaluate_streamed(source, labels, plan.protocol, options,
                                               backend=backend, trial=k,
                                               check_distances=model is not None,
                                               split=request.split)
                    streamed.append(k)
                else:
                    g_feat = _trial_inputs(st, plan, model, k, repeat, g_rows, request,
                                           "gallery")
                    metric, q_feat, g_feat, metric_name = _metric_for_trial(
                        model, k, repeat, q_feat, g_feat, request.distance, plan.info,
                        backend, rows=(q_rows, g_rows), cache=embedded,
                        precision=request.precision)
                    if request.rerank is not None:
                        from reidcli.evaluation.rerank import KReciprocalReranker
                        source = KReciprocalReranker(metric, q_feat, g_feat, request.rerank,
                                                     progress=options.progress)
                    else:
                        # rows checked as read (_trial_inputs) or transformed
                        source = QueryGallery(metric, q_feat, g_feat, owned=True,
                                              normalized=_unit_rows(st, plan, model, request),
                                              checked=True)
                    result = evaluate_trial(source, labels, plan.protocol, options,
                                            backend=backend, trial=k,
                                            check_distances=model is not None)
                    if request.nmi and nmi is None:
                        nmi = _nmi(request, plan.records, q_rows, g_rows, q_feat, g_feat)
                    del g_feat
                result.repeat = repeat
                results.append(result)
                del source, q_feat
        finally:
            backend.close()
        if distractor_queries:
            warnings.warn(f"store {st.path}: {distractor_queries} query row(s) carry pid 0, "
                          "which means distractor, and are not scored — if the store's pids "
                          "were 0-based, import it again with "
                          f"{param('pid_base', 0)} (reid store import)", stacklevel=2)
        meta = {
            "store": str(st.path), "dataset": st.dataset, "feature": plan.feature,
            # the dataset's protocol as built (e.g. SYSU-MM01's gallery draw family)
            "dataset_protocol": _dataset_protocol(st),
            "feature_metric": plan.info["metric"], "distance": metric_name,
            "model": None if model is None else {"path": str(request.model),
                                                 "method": model.method,
                                                 "num_trials": model.num_trials,
                                                 "num_repeats": model.num_repeats},
            "trials_evaluated": [k for k, _, _ in plan.trials], "device": device,
            "precision": request.precision,
            # trials whose gallery was read from the store block by block
            "gallery_streamed": streamed,
            "feat_norm": _feat_norm_label(st, plan.feature, request),
            "rerank": None if request.rerank is None else dataclasses.asdict(request.rerank),
            "options": {"max_rank": options.max_rank, "ap": options.ap_convention,
                        "query_cams": options.query_cameras,
                        "sgs_repeats": options.sgs_repeats
                        if plan.protocol.single_gallery_shot else None,
                        "seed": options.seed},
            "nmi": nmi, "store_provenance": st.provenance,
            # query/gallery identities the store's network was trained on, per trial
            "training_overlap": training_overlap,
            "seconds": round(time.perf_counter() - started, 3),
        }
    return StoreEvaluation(protocol=plan.protocol, trials=results, meta=meta)


def streams_gallery(request: StoreEvalRequest, plan, g_rows: np.ndarray) -> bool:
    """Whether a trial's gallery is read from the store block by block: ``stream`` on, or
    auto and its float32 features exceed :data:`STREAM_GALLERY_ABOVE_BYTES` (never with
    re-ranking, NMI or a protocol that needs whole distance rows: :func:`check_streaming`)."""
    if request.stream == "off":
        return False
    if request.stream == "on":
        return True
    dim = plan.info.get("dim")
    if dim is None or check_streaming(request, plan.protocol, raise_error=False) is not None:
        return False
    return len(g_rows) * int(dim) * 4 > STREAM_GALLERY_ABOVE_BYTES


def check_streaming(request: StoreEvalRequest, protocol, raise_error: bool = True) -> str | None:
    """Why this evaluation cannot stream its gallery (None when it can); with
    ``raise_error``, an EvaluationError naming the option instead."""
    why = streaming_limitation(protocol)
    if request.rerank is not None:
        why = "k-reciprocal re-ranking needs every pairwise distance"
    elif request.nmi:
        why = "NMI clusters every feature at once"
    if why is not None and raise_error and request.split is not None:
        raise EvaluationError(f"a torchrun launch splits a streamed gallery over its ranks, "
                              f"but {why}", "evaluate in one process (without torchrun)")
    if why is not None and raise_error:
        raise EvaluationError(f"{param('stream', 'on')}: {why}",
                              f"use {param('stream', 'auto')} or {param('stream', 'off')}")
    return why


def _streamed_source(st, plan, model, k: int, repeat: int | None, q_feat: np.ndarray,
                     q_rows: np.ndarray, g_rows: np.ndarray, request: StoreEvalRequest,
                     backend) -> tuple[StreamedGallery, str]:
    """The trial's queries in memory and a reader of its gallery rows: store rows read,
    checked and normalised as in memory, then through the fitted model when there is one."""
    metric, q_feat, _, name = _metric_for_trial(model, k, repeat, q_feat, None,
                                                request.distance, plan.info, backend,
                                                precision=request.precision)
    trial_model = None if model is None else _model_for(model, k, repeat)
    transforms = model is not None and model.reads == "features"

    def read_gallery(positions: np.ndarray) -> np.ndarray:
        rows = g_rows[positions]
        feats = _trial_inputs(st, plan, model, k, repeat, rows, request, "gallery")
        if transforms:
            feats = transform_rows(model, trial_model, k, repeat, feats, rows, None, "gallery")
        return feats

    source = StreamedGallery(metric, q_feat, read_gallery, len(g_rows), q_feat.shape[1],
                             normalized=_unit_rows(st, plan, model, request), owned=True)
    return source, name


def _unit_rows(st, plan, model, request: StoreEvalRequest) -> bool:
    """True when the rows the metric compares already have unit L2 norm: ``feat_norm``
    global, or none on a store feature marked ``normalized`` (and no model transform)."""
    if model is not None or plan.feature is None:
        return False
    mode, _ = resolve_feat_norm(st, plan.feature, request)
    return mode == "global" or (mode == "none" and bool(plan.info.get("normalized")))


def _runs(trials, model):
    """``(trial, repeat, query_rows, gallery_rows)`` per evaluation run: one per trial, or one
    per (trial, repeat) for a model fitted several times per trial (repeat None otherwise)."""
    repeats = model.num_repeats if model is not None else 1
    for k, q_rows, g_rows in trials:
        for r in range(repeats):
            yield k, (r if repeats > 1 else None), q_rows, g_rows


def _model_for(model, k: int, repeat: int | None):
    """The fitted model of store trial ``k``: a one-trial model serves every trial."""
    return model.for_trial(k if model.num_trials > 1 else model.trial_ids[0], repeat)


def _reads_own_inputs(model) -> bool:
    """True for models that read what they need from the store themselves (``reads ==
    "convmaps"``, e.g. C-DPCF pooling conv maps); they need no store feature."""
    return model is not None and model.reads == "convmaps"


def _trial_inputs(st, plan: dict, model, k: int, repeat: int | None, rows: np.ndarray,
                  request: StoreEvalRequest, role: str) -> np.ndarray:
    """What the distance of trial ``k`` consumes for ``rows``: store features, or the model's
    own (already transformed) inputs (``read_inputs(store, rows) -> [len(rows), d]``)."""
    if plan.feature is None:
        trial_model = _model_for(model, k, repeat)
        return check_features(trial_model.read_inputs(st, rows),
                              f"{model.method} inputs ({role} rows)")
    return _read_features(st, plan.feature, rows, request, role)


@dataclasses.dataclass
class EvalPlan:
    """What an evaluation runs: the store feature (None when the model reads its own inputs)
    and its info, the protocol, the chosen trials ``(k, query rows, gallery rows)``, the
    records with their identity codes, the ranking options, and the camera code of every
    record with the table of the evaluated cameras (a camera is (domain, camid))."""

    feature: str | None
    info: dict
    protocol: Any
    trials: list
    records: Any
    codes: np.ndarray
    options: Any
    cameras: tuple | None = None   # (camera code of every record, CameraTable)


def _dataset_protocol(st) -> dict | None:
    proto = st.protocol
    if proto is None:
        return None
    return {"name": proto.name, "options": dict(proto.attrs.get("options", {}) or {})}


def plan_evaluation(st, request: StoreEvalRequest, model) -> EvalPlan:
    """Protocol, chosen trials, labels and feature of an evaluation; user errors up front."""
    if request.query_cams is not None and request.train_cams is not None:
        raise EvaluationError(f"{param('query_cams')} and {param('train_cams')} are both given",
                              "pass one of them")
    feature, info = _plan_feature(st, request, model)
    all_trials, store_protocol = _trial_rows(st)
    protocol = _plan_protocol(st, request, all_trials, store_protocol)
    if request.stream == "on":
        check_streaming(request, protocol)
    chosen, trials = _chosen_trials(st, request, all_trials, store_protocol)
    _check_model_trials(request, model, chosen, len(all_trials))
    records = st.record_columns
    options = _camera_options(st, request, protocol, trials, records)
    evaluated = np.concatenate([np.concatenate([q, g]) for _, q, g in trials])
    return EvalPlan(feature=feature, info=info, protocol=protocol, trials=trials,
                    records=records, codes=identity_codes(records), options=options,
                    cameras=evaluated_cameras(records, evaluated))


def _plan_feature(st, request: StoreEvalRequest, model) -> tuple[str | None, dict]:
    """(store feature, its info); None and the model's own info when ``model`` reads its
    inputs from the store itself."""
    if _reads_own_inputs(model):
        if request.feature is not None:
            raise EvaluationError(f"fitted model {request.model} ({model.method}) reads its "
                                  "inputs from the store itself", f"drop {param('feature')}")
        return None, {"metric": model.method, "dim": None, "normalized": False}
    feature = _choose_feature(st, request.feature, model)
    return feature, st.feature_info(feature)


def _plan_protocol(st, request: StoreEvalRequest, all_trials: list, store_protocol):
    """The evaluation protocol: ``auto`` picks it from the dataset and the store's rule; a
    named one is checked against the evaluated rows (modality, cameras)."""
    rule = store_protocol.eval_rule if store_protocol else None
    if request.protocol == "auto":
        return auto_protocol(st.dataset, rule, len(all_trials))
    protocol = get_protocol(request.protocol)
    rows = np.concatenate([np.concatenate([q, g]) for _, q, g in all_trials])
    records = st.record_columns
    check_protocol_fits(protocol, st.dataset, rule, record_column(records, "modality")[rows]
                        if "modality" in records else (),
                        record_column(records, "camid", np.int64)[rows],
                        auto_name=auto_protocol(st.dataset, rule, len(all_trials)).name)
    return protocol


def _chosen_trials(st, request: StoreEvalRequest, all_trials: list,
                   store_protocol) -> tuple[list[int], list]:
    """(chosen trial indices, their ``(k, query rows, gallery rows)``); EvaluationError when
    a chosen trial has no query or no gallery rows."""
    if request.trials not in (None, "all") or len(all_trials) > 1:
        chosen = _parse_trials(request.trials, len(all_trials))
    else:
        chosen = [0]
    trials = [all_trials[k] for k in chosen]
    in_trial = " in a chosen trial" if store_protocol else ""
    if any(len(q) == 0 for _, q, _ in trials):
        raise EvaluationError(f"store {st.path} has no query rows" + in_trial,
                              "write query rows (split 'query') or a protocol into the store")
    if any(len(g) == 0 for _, _, g in trials):
        raise EvaluationError(f"store {st.path} has no gallery rows" + in_trial,
                              "write gallery rows (split 'gallery') into the store")
    return chosen, trials


def _check_model_trials(request: StoreEvalRequest, model, chosen: list[int],
                        num_trials: int) -> None:
    """EvaluationError when a fitted model of several trials has no fit for a chosen one."""
    if model is None or model.num_trials <= 1:
        return
    missing = [k for k in chosen if not model.covers(k)]
    if missing:
        raise EvaluationError(f"fitted model {request.model} has no fit for trial(s) "
                              f"{', '.join(map(str, missing))} of the store's "
                              f"{num_trials}-trial protocol",
                              "evaluate its trials with "
                              + param("trials", ",".join(map(str, model.trial_ids)))
                              + " or re-fit over all")


def _camera_options(st, request: StoreEvalRequest, protocol, trials: list, records):
    """The ranking options, with the query cameras evaluated when the protocol needs them
    (cameras unseen in training) or the user chose them."""
    options = request.options
    if protocol.needs_query_cams or request.query_cams is not None:
        train_cams = request.train_cams if request.train_cams is not None \
            else _train_cameras_of(st)
        query_cams = record_column(records, "camid", np.int64)[
            np.concatenate([q for _, q, _ in trials])]
        cams = unseen_query_cameras(query_cams, request.query_cams,
                                    train_cams if protocol.needs_query_cams else None)
        options = dataclasses.replace(options, query_cameras=cams)
    return options


def _read_features(st, feature: str, rows: np.ndarray, request: StoreEvalRequest,
                   role: str) -> np.ndarray:
    """A trial's query or gallery features [len(rows), D], checked and normalised.

    A contiguous run of rows is read as one slice (no index copy of a large gallery)."""
    what = f"store feature {feature!r} ({role} rows)"
    mode, parts = resolve_feat_norm(st, feature, request)
    if mode == "none":                  # both checks in one pass
        return check_features(st.features(feature, as_slice(rows)), what)
    feats = check_features(st.features(feature, as_slice(rows)), what, magnitude=False)
    feats = normalize_features(feats, mode, parts, inplace=True)     # rows read here: ours
    check_magnitude(feats, what)        # after normalisation: it may bring huge rows to 1
    return feats


def _feat_norm_label(st, feature: str, request: "StoreEvalRequest") -> str:
    mode, parts = resolve_feat_norm(st, feature, request)
    return f"parts-{parts}" if mode == "parts" else mode


def resolve_feat_norm(st, feature: str, request: "StoreEvalRequest") -> tuple[str, int]:
    """``--feat-norm auto``: the feature's own ``feat_norm`` attribute (``parts`` for PCB
    features with their ``n_parts``, ``global`` for BoT's; docs/methods/pcb.md), else ``none``."""
    if request.feat_norm != "auto":
        return request.feat_norm, request.n_parts
    if feature is None or feature not in st.feature_names:      # a model reads its inputs
        return "none", request.n_parts
    attrs = st.h5["features"][feature].attrs
    mode = attrs.get("feat_norm", "none")
    mode = mode.decode() if isinstance(mode, bytes) else str(mode)
    return mode, int(attrs.get("n_parts", request.n_parts))


def _choose_feature(st, requested: str | None, model) -> str:
    if requested is not None:
        name = st.require_feature(requested)
        if model is not None and model.feature and model.feature != name:
            raise EvaluationError(f"fitted model {model.path} was fit on feature "
                                  f"{model.feature!r}, not {name!r}",
                                  f"drop {param('feature')} or pass {param('feature', repr(model.feature))}")
        return name
    if model is not None and model.feature:
        return st.require_feature(model.feature)
    return st.default_feature()


class EmbeddingCache:
    """A fitted model's outputs per store row for one (fit, repeat) at a time, so trials that
    share a fit and rows — the draws of a WARCA split — transform each row once."""

    def __init__(self) -> None:
        self._key: tuple | None = None
        self._rows = np.empty(0, dtype=np.int64)      # sorted store rows [m]
        self._out: np.ndarray | None = None           # their outputs [m, d]

    def transform(self, trial_model, feats: np.ndarray, rows: np.ndarray,
                  key: tuple) -> np.ndarray:
        """``trial_model.transform(feats)`` for ``feats`` [n, D] of store ``rows`` [n]
        (distinct), reusing the outputs of rows seen before under the same ``key``."""
        rows = np.asarray(rows, dtype=np.int64)
        if key != self._key:
            self._key, self._rows, self._out = key, np.empty(0, dtype=np.int64), None
        pos = np.searchsorted(self._rows, rows)
        known = np.zeros(len(rows), dtype=bool) if not len(self._rows) else \
            self._rows[np.minimum(pos, len(self._rows) - 1)] == rows
        if not known.all():
            new_out = np.asarray(trial_model.transform(feats[~known]))
            all_rows = np.concatenate([self._rows, rows[~known]])
            all_out = new_out if self._out is None else np.concatenate([self._out, new_out])
            order = np.argsort(all_rows, kind="stable")
            self._rows, self._out = all_rows[order], all_out[order]
            pos = np.searchsorted(self._rows, rows)
        return self._out[pos]


def _metric_for_trial(model, k: int, repeat: int | None, q_feat: np.ndarray,
                      g_feat: np.ndarray | None, distance: str,
                      info: dict, backend, rows: tuple | None = None,
                      cache: EmbeddingCache | None = None, precision: str = "float32"):
    """(metric, query rows, gallery rows, metric name) for trial ``k``: through a fitted
    model, the rows are transformed once here and the metric compares transformed rows.
    With ``rows`` = (query rows, gallery rows) and a ``cache``, trials sharing a fit reuse the
    transformed rows. ``g_feat`` None: a streamed gallery, transformed block by block
    (:func:`transform_rows`)."""
    trial_model = None if model is None else _model_for(model, k, repeat)
    if model is not None and model.reads == "features":
        q_feat = transform_rows(model, trial_model, k, repeat, q_feat,
                                None if rows is None else rows[0], cache, "query")
        if g_feat is not None:
            g_feat = transform_rows(model, trial_model, k, repeat, g_feat,
                                    None if rows is None else rows[1], cache, "gallery")
    metric, name = _metric_of(model, trial_model, distance, info, backend, precision)
    return metric, q_feat, g_feat, name


def transform_rows(model, trial_model, k: int, repeat: int | None, feats: np.ndarray,
                   rows: np.ndarray | None, cache: EmbeddingCache | None,
                   role: str) -> np.ndarray:
    """A fitted model's transform of ``feats`` [n, D] (store ``rows`` [n]) → [n, d], checked;
    through ``cache`` when the model's trials share fits."""
    expected = trial_model.input_dim
    if expected is not None and expected != feats.shape[1]:
        raise EvaluationError(f"fitted model {model.path} expects {expected}-dimensional "
                              f"features, the store feature has {feats.shape[1]}",
                              f"evaluate the feature the model was fit on ({param('feature')})")
    if cache is not None and rows is not None and model.shares_fits:
        key = (model.fit_of(k if model.num_trials > 1 else model.trial_ids[0]), repeat)
        out = cache.transform(trial_model, feats, rows, key)
    else:
        out = trial_model.transform(feats)
    return check_features(out, f"model-transformed {role} features")


def _metric_of(model, trial_model, distance: str, info: dict, backend,
               precision: str) -> tuple[Any, str]:
    """The metric comparing (transformed) rows and its name for the report."""
    if model is None:
        name = info["metric"] if distance == "auto" else distance
        return FeatureMetric(name, backend, precision), name
    from reidcli.fitted import uses_feature_metric

    if uses_feature_metric(trial_model):
        name = trial_model.metric if distance == "auto" else distance
        return FeatureMetric(name, backend, precision), f"{model.method}+{name}"
    if distance not in ("auto",):
        raise EvaluationError(f"{param('distance', repr(distance))}: fitted model {model.path} "
                              f"({model.method}) defines its own distance",
                              f"drop {param('distance')} when evaluating through this model")
    if precision != "float32":
        raise EvaluationError(f"{param('precision', precision)}: fitted model {model.path} "
                              f"({model.method}) defines its own distance",
                              f"drop {param('precision')} when evaluating through this model")
    return ModelMetric(trial_model, backend, f"{model.method}"), model.method


def _nmi(request: StoreEvalRequest, records, q_rows, g_rows, q_feat, g_feat) -> dict:
    rows = np.concatenate([q_rows, g_rows])
    feats = np.concatenate([q_feat, g_feat])
    cams, _ = record_cameras(records, rows)            # a camera is (domain, camid)
    pids = identity_codes(records)[rows]
    return nmi_camera_bias(feats, cams, pids, k=request.nmi_k, seed=request.options.seed)


def trial_distances(store, *, model=None, feature: str | None = None, trial: int = 0,
                    feat_norm: str = "auto", query_rows: np.ndarray | None = None,
                    repeat: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Query rows [q], gallery rows [g] and the distance matrix [q, g] of one protocol trial,
    exactly as ``reid eval`` computes them (feature normalisation, fitted model, metric).

    ``query_rows`` keeps a subset of the trial's queries (store row indices). For plots
    (rank lists, distance histograms) of modest size: the matrix is built whole.
    """
    from reidcli import fitted
    from reidcli.evaluation.backend import make_backend
    from reidcli.store import open_store

    request = StoreEvalRequest(store=Path(store), model=None if model is None else Path(model),
                               feature=feature, trials=str(trial), feat_norm=feat_norm,
                               device="cpu")
    loaded = fitted.load(model) if model is not None else None
    with open_store(store) as st:
        plan = plan_evaluation(st, request, loaded)
        k, q_rows, g_rows = plan.trials[0]
        if query_rows is not None:
            q_rows = q_rows[np.isin(q_rows, query_rows)]
        if loaded is not None and repeat is None and loaded.num_repeats > 1:
            repeat = 0
        backend = make_backend("cpu")
        q_feat = _trial_inputs(st, plan, loaded, k, repeat, q_rows, request, "query")
        g_feat = _trial_inputs(st, plan, loaded, k, repeat, g_rows, request, "gallery")
        metric, q_feat, g_feat, _ = _metric_for_trial(loaded, k, repeat, q_feat, g_feat,
                                                      "auto", plan.info, backend)
        pairs = QueryGallery(metric, q_feat, g_feat)
        dist = np.asarray(pairs.block(np.arange(len(q_rows)), None), dtype=np.float64)
    return q_rows, g_rows, dist


def trial_rows(store, trial: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(query rows, gallery rows) of one trial of a store (its query/gallery split when it
    has no protocol)."""
    from reidcli.store import open_store

    with open_store(store) as st:
        trials, _ = _trial_rows(st)
    chosen = _parse_trials(str(trial), len(trials))[0]
    _, q_rows, g_rows = trials[chosen]
    return q_rows, g_rows
