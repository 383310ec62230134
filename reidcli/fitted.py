"""Fitted models: one HDF5 file per fit, loaded by method name so ``reid eval`` needs no
method-specific code.

Layout::

    /            attrs: format="reidcli.fitted", method, hyperparameters (JSON),
                        provenance (JSON), feature (store feature it was fit on, or ""),
                        num_trials, created, reidcli_version
    /trial_<k>/  the arrays of trial k (nested groups allowed, e.g. repeat_<r>/)

A method registers a *factory* ``factory(arrays: dict, hyperparameters: dict) -> model``
with :func:`register_method`; ``arrays`` holds the trial group's datasets (nested groups as
nested dicts). The model has ``metric`` and either ``transform(features [n, D]) -> [n, d]``
(then distances use ``metric`` on the transformed features) or
``distance(query_block [q, D], gallery_block [g, D]) -> [q, g]``.

Built in: ``linear-projection`` — ``transform(x) = (x − mean) @ W`` with ``W`` [D, d] and an
optional ``mean`` [D], euclidean metric.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import h5py
import numpy as np

from reidcli import __version__
from reidcli.errors import FittedModelError, UsageError
from reidcli.io import atomic_output

FITTED_FORMAT = "reidcli.fitted"
TRIAL_PREFIX = "trial_"

_METHODS: dict[str, Callable[[dict, dict], Any]] = {}

#: modules that register the toolkit's other methods, imported when a file names one
METHOD_MODULES = {
    "xqda": "reidcli.metric.xqda", "kissme": "reidcli.metric.kissme",
    "lfda": "reidcli.metric.lfda", "klfda": "reidcli.metric.lfda",
    "warca": "reidcli.metric.warca", "rpcca": "reidcli.metric.rpcca",
    "pca": "reidcli.metric.pca",
    "cdpcf": "reidcli.pooling.cdpcf", "dpcf": "reidcli.pooling.cdpcf",
    "avgp": "reidcli.pooling.cdpcf", "avgp-pad": "reidcli.pooling.cdpcf",
}


def register_method(name: str, factory: Callable[[dict, dict], Any]) -> None:
    """Make ``method=name`` files loadable: ``factory(arrays, hyperparameters) -> model``."""
    _METHODS[name] = factory


def registered_methods() -> list[str]:
    return sorted(_METHODS)


# -- built-in method -------------------------------------------------------------------------
class LinearProjection:
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
    def input_dim(self) -> int:
        return int(self.W.shape[0])

    @property
    def output_dim(self) -> int:
        return int(self.W.shape[1])

    def transform(self, features: np.ndarray) -> np.ndarray:
        """[n, D] → [n, d] float32."""
        x = np.asarray(features, dtype=np.float32)
        if x.ndim != 2 or x.shape[1] != self.input_dim:
            raise FittedModelError(f"linear-projection expects {self.input_dim}-dimensional "
                                   f"features, got shape {x.shape}",
                                   "evaluate the store feature the model was fit on")
        if self.mean is not None:
            x = x - self.mean.astype(np.float32)
        return (x @ self.W.astype(np.float32)).astype(np.float32)


def _linear_projection(arrays: dict, hyperparameters: dict) -> LinearProjection:
    if "W" not in arrays:
        raise FittedModelError("linear-projection trial lacks the array W", "re-fit the model")
    return LinearProjection(arrays["W"], arrays.get("mean"))


register_method("linear-projection", _linear_projection)


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
         force: bool = False, option: str = "--out") -> Path:
    """Write a fitted model atomically. Refuses an existing ``path`` unless ``force``.

    ``trials`` is a list with one dict of arrays per store trial 0..n-1, a dict
    ``{store_trial_index: arrays}`` (a model fitted on some trials only, e.g. ``--trials 0,3``)
    or a single dict of arrays (= trial 0). A trial's arrays may hold ``repeat_<r>`` groups
    (several fits per trial, e.g. C-DPCF's reduced training ids); every trial then has the
    same number of repeats.
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
                         "fit every trial with the same --repeats")
    with atomic_output(path, force=force, option=option) as tmp:
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
            for k, arrays in items:
                _write_group(h5.create_group(f"{TRIAL_PREFIX}{k}"), arrays)
    return Path(path)


REPEAT_PREFIX = "repeat_"


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


class FittedModel:
    """A loaded fitted-model file (metadata read on load; trial arrays read on demand)."""

    def __init__(self, path: Path, method: str, hyperparameters: dict, provenance: dict,
                 feature: str | None, trial_groups: list[str], num_repeats: int = 1):
        self.path = path
        self.method = method
        self.hyperparameters = hyperparameters
        self.provenance = provenance
        self.feature = feature
        self._trial_groups = trial_groups
        #: store trial index of each fitted trial, increasing
        self.trial_ids = [int(g[len(TRIAL_PREFIX):]) for g in trial_groups]
        #: fits per trial (``repeat_<r>`` groups; 1 = none)
        self.num_repeats = int(num_repeats)

    @property
    def num_trials(self) -> int:
        return len(self._trial_groups)

    def covers(self, trial: int) -> bool:
        """Whether the model has a fit for store trial ``trial`` (a one-trial model covers
        every trial of a store without a protocol)."""
        return trial in self.trial_ids

    def for_trial(self, k: int, repeat: int | None = None):
        """The model of store trial ``k`` (and repeat ``repeat`` when it has repeats).

        The result has ``metric`` and ``transform`` or ``distance`` (or ``read_inputs``).
        """
        if k not in self.trial_ids:
            raise FittedModelError(f"fitted model {self.path} has no fit for trial {k} (it has "
                                   f"{_ranges(self.trial_ids)})",
                                   "evaluate the trials it was fitted on (--trials)")
        with h5py.File(self.path, "r") as h5:
            arrays = _read_group(h5[self._trial_groups[self.trial_ids.index(k)]])
        if self.num_repeats > 1:
            r = 0 if repeat is None else int(repeat)
            if not 0 <= r < self.num_repeats:
                raise FittedModelError(f"fitted model {self.path} has repeats 0.."
                                       f"{self.num_repeats - 1}, not {r}", "pick a valid repeat")
            arrays = arrays[f"{REPEAT_PREFIX}{r}"]
        model = _METHODS[self.method](arrays, dict(self.hyperparameters))
        if not (hasattr(model, "transform") or hasattr(model, "distance")):
            raise FittedModelError(f"method {self.method!r} built a model with neither "
                                   "transform() nor distance()", "fix the method's factory")
        return model

    def __repr__(self) -> str:
        return f"FittedModel({str(self.path)!r}, method={self.method!r}, trials={self.num_trials})"


def _import_method(method: str) -> None:
    """Import the module that registers ``method`` (if it is one of the toolkit's)."""
    module = METHOD_MODULES.get(str(method))
    if method in _METHODS or module is None:
        return
    import importlib
    try:
        importlib.import_module(module)
    except ImportError:
        pass


def load(path: str | os.PathLike) -> FittedModel:
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
                                   f"expected format={FITTED_FORMAT!r}; a feature store goes to "
                                   "--store, not --model")
        method = _attr(h5, "method")
        _import_method(method)
        if method not in _METHODS:
            known = ", ".join(registered_methods()) or "none"
            raise FittedModelError(f"fitted model {path} has unknown method {method!r} "
                                   f"(known: {known})",
                                   "upgrade reidcli or use the version that wrote it")
        groups = sorted((k for k in h5 if k.startswith(TRIAL_PREFIX)
                         and k[len(TRIAL_PREFIX):].isdigit()),
                        key=lambda k: int(k[len(TRIAL_PREFIX):]))
        if not groups or len(groups) != int(h5.attrs.get("num_trials", len(groups))):
            raise FittedModelError(f"fitted model {path} lacks some of its trial_<k> groups",
                                   "the file is damaged; re-fit the model")
        return FittedModel(path, method, _json_attr(h5, "hyperparameters", path),
                           _json_attr(h5, "provenance", path), _attr(h5, "feature") or None,
                           groups, int(h5.attrs.get("num_repeats", 1)))


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
