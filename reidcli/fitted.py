"""Fitted models: one HDF5 file per fit (docs/formats.md), and the typed
:class:`FittedModel` protocol that ``reid eval`` and the plots program against.

Layout::

    /            attrs: format="reidcli.fitted", method, hyperparameters (JSON),
                        provenance (JSON), feature (store feature it was fit on, or ""),
                        num_trials, num_repeats, created, reidcli_version
    /trial_<k>/  the arrays of trial k (nested groups allowed, e.g. repeat_<r>/)

:func:`load` finds the method in the registry (:mod:`reidcli.registry`) and builds each
trial's model with the method's ``load_trial(arrays, hyperparameters)`` — for estimators,
:meth:`reidcli.estimator.Estimator.model_from_arrays`.

Built in: ``linear-projection`` — ``transform(x) = (x − mean) @ W`` with ``W`` [D, d] and an
optional ``mean`` [D], euclidean distances; the way to bring a projection learned elsewhere.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
from pathlib import Path
from typing import Any, Mapping, Protocol, Sequence, runtime_checkable

import h5py
import numpy as np

from reidcli import __version__, registry
from reidcli.errors import FittedModelError, UsageError
from reidcli.io import atomic_output, verify_hdf5
from reidcli.store.schema import trial_index, trial_name

FITTED_FORMAT = "reidcli.fitted"
REPEAT_PREFIX = "repeat_"
#: what a fitted model can read at evaluation time
READS = ("features", "convmaps")
#: distances the evaluation computes itself between transformed rows
FEATURE_METRICS = ("euclidean", "sqeuclidean", "cosine")


@runtime_checkable
class FittedModel(Protocol):
    """One fitted trial, as ``reid eval`` and the plots use it.

    * ``reads``: ``"features"`` — the caller hands it a store feature [n, D] and calls
      :meth:`transform`; ``"convmaps"`` — it reads what it needs itself
      (:meth:`read_inputs`), returning rows already transformed.
    * ``input_dim``: D of the features it expects (None: any, or conv maps).
    * ``metric``: the name of the distance. One of :data:`FEATURE_METRICS` (``euclidean`` |
      ``sqeuclidean`` | ``cosine``) means that standard metric between transformed rows,
      which the evaluation computes with its own block GEMMs; any other name (``xqda``,
      ``mahalanobis``, ``cdpcf``…) means :meth:`embedded_distance` defines the distances.
    * :meth:`distance` = :meth:`embedded_distance` of the transformed rows.
    """

    reads: str
    input_dim: int | None
    metric: str

    def transform(self, features: np.ndarray) -> np.ndarray:
        """[n, D] → [n, d] (what :meth:`embedded_distance` compares)."""

    def embedded_distance(self, query: np.ndarray, gallery: np.ndarray) -> np.ndarray:
        """Transformed rows [q, d] × [g, d] → distances [q, g] (smaller = more similar)."""

    def distance(self, query: np.ndarray, gallery: np.ndarray) -> np.ndarray:
        """Raw rows [q, D] × [g, D] → distances [q, g]."""

    def read_inputs(self, store, rows: np.ndarray) -> np.ndarray:
        """Transformed rows [len(rows), d] of a store (``reads == "convmaps"``)."""


class TrialModel:
    """Defaults of :class:`FittedModel` for concrete models: feature input, identity
    :meth:`transform` and :meth:`embedded_distance` from a standard ``metric``."""

    reads = "features"
    input_dim: int | None = None
    metric: str = "euclidean"

    def transform(self, features: np.ndarray) -> np.ndarray:
        return self.check_input(features)

    def check_input(self, features: np.ndarray, dtype=None) -> np.ndarray:
        """``features`` as a 2-D array of ``input_dim`` columns (FittedModelError else)."""
        x = np.asarray(features) if dtype is None else np.asarray(features, dtype=dtype)
        if x.ndim != 2 or (self.input_dim is not None and x.shape[1] != self.input_dim):
            raise FittedModelError(f"{type(self).__name__} expects "
                                   f"{self.input_dim or 'D'}-dimensional features, got shape "
                                   f"{x.shape}", "evaluate the store feature the model was "
                                   "fit on")
        return x

    def embedded_distance(self, query: np.ndarray, gallery: np.ndarray) -> np.ndarray:
        if not uses_feature_metric(self):
            raise NotImplementedError(f"{type(self).__name__} defines no distance "
                                      f"{self.metric!r}")
        from reidcli.pairwise import pairwise_distances
        return pairwise_distances(query, gallery, self.metric)

    def distance(self, query: np.ndarray, gallery: np.ndarray) -> np.ndarray:
        return self.embedded_distance(self.transform(query), self.transform(gallery))

    def read_inputs(self, store, rows: np.ndarray) -> np.ndarray:
        raise FittedModelError(f"{type(self).__name__} reads store features, not conv maps",
                               "evaluate it on a store feature")


def uses_feature_metric(model: FittedModel) -> bool:
    """Whether ``model``'s distances are a standard metric between its transformed rows."""
    return model.metric in FEATURE_METRICS


def check_fitted_model(model: Any, method: str) -> None:
    """FittedModelError when ``model`` does not satisfy :class:`FittedModel`."""
    if not isinstance(model, FittedModel) or model.reads not in READS:
        raise FittedModelError(f"method {method!r} built a {type(model).__name__}, which is not "
                               "a FittedModel (reads, input_dim, metric, transform, "
                               "embedded_distance, distance, read_inputs)",
                               "derive the method's model from reidcli.fitted.TrialModel")


# -- built-in method -------------------------------------------------------------------------
class LinearProjection(TrialModel):
    """``transform(x) = (x − mean) @ W``; distances are euclidean on the projections.

    W: float [D, d]; mean: float [D] or None.
    """

    metric = "euclidean"

    def __init__(self, W: np.ndarray, mean: np.ndarray | None = None):
        self.W = np.asarray(W)
        self.mean = None if mean is None else np.asarray(mean)
        if self.W.ndim != 2:
            raise FittedModelError(f"linear-projection: W has shape {self.W.shape}, expected "
                                   "[D, d]", "re-fit the model")
        if self.mean is not None and self.mean.shape != (self.W.shape[0],):
            raise FittedModelError(f"linear-projection: mean has shape {self.mean.shape}, "
                                   f"expected ({self.W.shape[0]},)", "re-fit the model")

    @property
    def input_dim(self) -> int:  # type: ignore[override]
        return int(self.W.shape[0])

    @property
    def output_dim(self) -> int:
        return int(self.W.shape[1])

    def transform(self, features: np.ndarray) -> np.ndarray:
        """[n, D] → [n, d] float32."""
        x = self.check_input(features, np.float32)
        if self.mean is not None:
            x = x - self.mean.astype(np.float32)
        return (x @ self.W.astype(np.float32)).astype(np.float32)

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, Any], hyperparameters: Mapping[str, Any]
                    ) -> "LinearProjection":
        if "W" not in arrays:
            raise FittedModelError("linear-projection trial lacks the array W",
                                   "re-fit the model")
        return cls(arrays["W"], arrays.get("mean"))


registry.register_loader("linear-projection", LinearProjection.from_arrays,
                         paper="none (a container: W fitted by another tool)",
                         summary="A projection x ↦ (x − mean) W learned by any tool "
                         "(arrays W [D, d], optional mean [D]); euclidean distances.")


# -- save / load -----------------------------------------------------------------------------
def _write_group(group: h5py.Group, arrays: Mapping[str, Any]) -> None:
    for key, value in arrays.items():
        if isinstance(value, Mapping):
            _write_group(group.create_group(key), value)
        else:
            group.create_dataset(key, data=np.asarray(value))


def _read_group(group: h5py.Group) -> dict[str, Any]:
    return {key: (_read_group(item) if isinstance(item, h5py.Group) else item[()])
            for key, item in group.items()}


def save(path: str | os.PathLike, method: str,
         trials: Sequence[Mapping[str, Any]] | Mapping[Any, Any],
         hyperparameters: Mapping[str, Any] | None = None,
         provenance: Mapping[str, Any] | None = None, feature: str | None = None,
         force: bool = False, option: str = "out",
         inputs: Sequence[str | os.PathLike] = ()) -> Path:
    """Write a fitted model atomically. Refuses an existing ``path`` unless ``force``.

    ``trials`` is a list with one dict of arrays per store trial 0..n-1, a dict
    ``{store_trial_index: arrays}`` (a model fitted on some trials only) or a single dict of
    arrays (= trial 0). A trial's arrays may hold ``repeat_<r>`` groups (several fits per
    trial, e.g. C-DPCF's reduced training ids); every trial then has the same number of
    repeats. Trials given the very same arrays object are written once; the later trial
    groups are HDF5 hard links to the first (readers see ordinary groups).
    """
    if isinstance(trials, Mapping) and trials and all(isinstance(k, (int, np.integer))
                                                      for k in trials):
        items = sorted((int(k), v) for k, v in trials.items())
    elif isinstance(trials, Mapping):
        items = [(0, trials)] if trials else []
    else:
        items = list(enumerate(trials))
    if not items:
        raise UsageError("a fitted model needs at least one trial", "pass the fitted arrays")
    repeats = {_count_repeats(arrays) for _, arrays in items}
    if len(repeats) != 1:
        raise UsageError("trials of a fitted model have different numbers of repeats",
                         "fit every trial with the same number of repeats")
    # inputs: stores/models read to fit it — never overwritten (reidcli.io.check_output);
    # the file is flushed, re-opened and checked before the rename
    with atomic_output(path, force=force, option=option, inputs=inputs,
                       verify=verify_hdf5(format=FITTED_FORMAT)) as tmp:
        with h5py.File(tmp, "w") as h5:
            h5.attrs["format"] = FITTED_FORMAT
            h5.attrs["method"] = method
            h5.attrs["hyperparameters"] = json.dumps(dict(hyperparameters or {}),
                                                     sort_keys=True, default=str)
            h5.attrs["provenance"] = json.dumps(dict(provenance or {}), sort_keys=True,
                                                default=str)
            h5.attrs["feature"] = feature or ""
            h5.attrs["num_trials"] = len(items)
            h5.attrs["num_repeats"] = repeats.pop()
            h5.attrs["created"] = _dt.datetime.now(_dt.timezone.utc).isoformat(
                timespec="seconds")
            h5.attrs["reidcli_version"] = __version__
            written: dict[int, str] = {}
            for k, arrays in items:
                if id(arrays) in written:          # the same fit as an earlier trial: an
                    h5[trial_name(k)] = h5[written[id(arrays)]]      # HDF5 hard link
                    continue
                _write_group(h5.create_group(trial_name(k)), arrays)
                written[id(arrays)] = trial_name(k)
    return Path(path)


def _count_repeats(arrays: Mapping[str, Any]) -> int:
    """Number of ``repeat_<r>`` groups of a trial (1 when it has none)."""
    keys = [k for k in arrays if str(k).startswith(REPEAT_PREFIX)]
    if keys and sorted(int(str(k)[len(REPEAT_PREFIX):]) for k in keys) != list(range(len(keys))):
        raise UsageError("repeat groups must be repeat_0..repeat_<n-1>", "fix the fitted arrays")
    return max(1, len(keys))


def _attr(h5: h5py.File, key: str, default: Any = None) -> Any:
    value = h5.attrs.get(key, default)
    return value.decode() if isinstance(value, bytes) else value


def _json_attr(h5: h5py.File, key: str, path: Path) -> dict:
    raw = _attr(h5, key, "{}")
    try:
        value = json.loads(raw)
    except (TypeError, json.JSONDecodeError):
        raise FittedModelError(f"fitted model {path}: attribute {key} is not valid JSON",
                               "re-fit the model") from None
    if not isinstance(value, dict):
        raise FittedModelError(f"fitted model {path}: attribute {key} is not a JSON object",
                               "re-fit the model")
    return value


class FittedFile:
    """A loaded fitted-model file: metadata read on load, each trial's model built on first
    use and kept (the last few), so evaluation reads a trial's arrays once."""

    #: trial models kept in memory
    CACHE = 2

    def __init__(self, path: Path, info: registry.MethodInfo, hyperparameters: dict,
                 provenance: dict, feature: str | None, trial_groups: list[str],
                 num_repeats: int = 1, shared: dict[int, int] | None = None):
        self.path = path
        self.info = info
        self.method = info.name
        self.hyperparameters = hyperparameters
        self.provenance = provenance
        self.feature = feature
        self._trial_groups = trial_groups
        #: store trial index of each fitted trial, increasing
        self.trial_ids = [trial_index(g) for g in trial_groups]
        #: fits per trial (``repeat_<r>`` groups; 1 = none)
        self.num_repeats = int(num_repeats)
        #: store trial → the first trial whose fit it shares (its group is a hard link to
        #: that trial's; docs/formats.md), itself otherwise
        self._shared = dict(shared or {})
        self._cache: dict[tuple[int, int | None], Any] = {}

    @property
    def num_trials(self) -> int:
        return len(self._trial_groups)

    @property
    def reads(self) -> str:
        """What the method's models read: ``features`` or ``convmaps`` (from the registry,
        without loading a trial)."""
        return self.info.reads

    def covers(self, trial: int) -> bool:
        """Whether the model has a fit for store trial ``trial``."""
        return trial in self.trial_ids

    def arrays(self, k: int) -> dict[str, Any]:
        """The stored arrays of store trial ``k`` (nested dicts for groups)."""
        self._require(k)
        with h5py.File(self.path, "r") as h5:
            return _read_group(h5[self._trial_groups[self.trial_ids.index(k)]])

    def fit_of(self, k: int) -> int:
        """The first store trial whose fit trial ``k`` shares (``k`` itself when its group is
        its own): trials with the same ``fit_of`` have the very same model."""
        return self._shared.get(k, k)

    @property
    def shares_fits(self) -> bool:
        """Whether some trials share one fit (hard-linked groups)."""
        return len(set(self._shared.values())) < len(self._shared)

    def _require(self, k: int) -> None:
        if k not in self.trial_ids:
            raise FittedModelError(f"fitted model {self.path} has no fit for trial {k} (it has "
                                   f"{_ranges(self.trial_ids)})",
                                   "evaluate the trials it was fitted on")

    def for_trial(self, k: int, repeat: int | None = None) -> FittedModel:
        """The :class:`FittedModel` of store trial ``k`` (and repeat ``repeat``)."""
        self._require(k)
        r = None
        if self.num_repeats > 1:
            r = 0 if repeat is None else int(repeat)
            if not 0 <= r < self.num_repeats:
                raise FittedModelError(f"fitted model {self.path} has repeats 0.."
                                       f"{self.num_repeats - 1}, not {r}", "pick a valid repeat")
        key = (self.fit_of(k), r)
        if key not in self._cache:
            arrays = self.arrays(k)
            if r is not None:
                arrays = arrays[f"{REPEAT_PREFIX}{r}"]
            model = self.info.load_trial(arrays, dict(self.hyperparameters))
            check_fitted_model(model, self.method)
            if len(self._cache) >= self.CACHE:
                self._cache.pop(next(iter(self._cache)))
            self._cache[key] = model
        return self._cache[key]

    def __repr__(self) -> str:
        return f"FittedFile({str(self.path)!r}, method={self.method!r}, trials={self.num_trials})"


def load(path: str | os.PathLike) -> FittedFile:
    """Open and validate a fitted-model file; FittedModelError (one line) when it is not one."""
    path = Path(path)
    if not path.exists():
        raise FittedModelError(f"fitted model {path} does not exist",
                               "check the path (written by reid train / reid fit-pooling)")
    try:
        h5 = h5py.File(path, "r")
    except OSError:
        raise FittedModelError(f"{path} is not an HDF5 file",
                               "give a fitted model written by reid train / fit-pooling") from None
    with h5:
        fmt = _attr(h5, "format")
        if fmt != FITTED_FORMAT:
            raise FittedModelError(f"{path} is not a reidcli fitted model (format={fmt!r})",
                                   f"expected format={FITTED_FORMAT!r}; a feature store is "
                                   "evaluated as a store, not as a model")
        method = str(_attr(h5, "method"))
        _import_method_module(method)
        info = registry.lookup(method, ("train", "fit-pooling", "fitted"))
        if info is None or info.load_trial is None:
            known = ", ".join(m.name for m in registry.methods() if m.load_trial) or "none"
            raise FittedModelError(f"fitted model {path} has unknown method {method!r} "
                                   f"(known: {known})",
                                   "upgrade reidcli, or install the plugin that defines it")
        groups = sorted((k for k in h5 if trial_index(k) is not None), key=trial_index)
        if not groups or len(groups) != int(h5.attrs.get("num_trials", len(groups))):
            raise FittedModelError(f"fitted model {path} lacks some of its trial_<k> groups",
                                   "the file is damaged; re-fit the model")
        # trial groups that are the same HDF5 object (hard links: one fit shared by the
        # trials of a split) → the first such trial
        firsts: list[Any] = []
        shared: dict[int, int] = {}
        for g in groups:
            obj = h5[g]
            first = next((k for k, o in firsts if o == obj), None)
            if first is None:
                firsts.append((trial_index(g), obj))
                first = trial_index(g)
            shared[trial_index(g)] = first
        return FittedFile(path, info, _json_attr(h5, "hyperparameters", path),
                          _json_attr(h5, "provenance", path), _attr(h5, "feature") or None,
                          groups, int(h5.attrs.get("num_repeats", 1)), shared)


def _import_method_module(method: str) -> None:
    """Import the module named after ``method`` in a stage package that declares fitted
    methods (``xqda`` → ``reidcli.metric.xqda``), when there is one: the method then
    registers without :func:`reidcli.registry.discover` importing every other method module
    (`reid eval --model xqda.h5` loads XQDA only). Methods declared in a module of another
    name are still found by the registry's discovery."""
    import importlib.util

    name = method.replace("-", "_")
    if not name.isidentifier():
        return
    for stage in ("train", "fit-pooling"):
        for package in registry.STAGE_PACKAGES.get(stage, ()):
            module = f"{package}.{name}"
            try:
                found = importlib.util.find_spec(module) is not None
            except (ImportError, ValueError):
                found = False
            if found:
                registry._import(module)
                return


def _ranges(ids: Sequence[int]) -> str:
    """``[0, 1, 2, 5]`` → ``"trials 0-2, 5"``."""
    parts, start = [], None
    for i, v in enumerate(ids):
        if start is None:
            start = v
        if i + 1 == len(ids) or ids[i + 1] != v + 1:
            parts.append(str(start) if start == v else f"{start}-{v}")
            start = None
    return "trials " + ", ".join(parts)
