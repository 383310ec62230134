"""Fit a metric on a stored feature over a store's protocol trials (``reid train <metric>``).

Per trial, training rows are the trial's ``train_idx`` minus distractors (pid ≤ 0); a store
without protocol trials is fitted on its ``train`` rows. The result is one fitted-model file
with a ``trial_<k>`` group per fitted trial, scored by ``reid eval --model``.
"""
from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Callable

import numpy as np

from reidcli import fitted
from reidcli.errors import UsageError
from reidcli.progress import track
from reidcli.provenance import make_provenance

#: ``fit(features [N, D], pids [N], camids [N]) -> arrays of one trial``
TrialFitter = Callable[[np.ndarray, np.ndarray, np.ndarray], dict]


#: CLI option names → the hyperparameter names a module may use for them
ALIASES = {"lambda": ("lambda", "lam", "reg", "beta"), "dim": ("dim", "dims", "n_components",
                                                              "out_dim"),
           "iterations": ("iterations", "max_iter", "n_iter"), "batch_size": ("batch_size",),
           "lr": ("lr", "learning_rate"), "kernel": ("kernel",), "seed": ("seed",),
           "iters": ("iterations",), "batch": ("batch_size",)}


def metric_fitter(method: str, module_name: str, given: dict) -> tuple[TrialFitter, dict]:
    """``(fit, hyperparameters)`` for ``reid train <method>``: the module's
    ``fit_<method>_arrays`` with the given options mapped onto its ``HYPERPARAMETERS``.

    UsageError for an option the method does not have (naming the ones it has).
    """
    import functools
    import importlib

    from reidcli.errors import NotImplementedYetError

    try:
        module = importlib.import_module(module_name)
    except ImportError:
        raise NotImplementedYetError(f"`reid train {method}` is not implemented yet in this "
                                     "release", "see CHANGELOG.md for what is available") \
            from None
    fit = getattr(module, f"fit_{method}_arrays", None)
    defaults = dict(getattr(module, "HYPERPARAMETERS", {}))
    if isinstance(defaults.get(method), dict):          # one dict per method in a module
        defaults = dict(defaults[method])
    if fit is None:
        raise NotImplementedYetError(f"`reid train {method}` is not implemented yet",
                                     "see CHANGELOG.md for what is available")
    resolved = dict(defaults)
    for key, value in given.items():
        names = [n for n in ALIASES.get(key, (key,)) if n in defaults]
        if not names:
            if key == "seed":
                continue                                # methods without randomness
            raise UsageError(f"{method} has no option {key!r}",
                             f"its hyperparameters: {', '.join(sorted(defaults)) or 'none'}")
        resolved[names[0]] = value
    return functools.partial(fit, **resolved), resolved


@dataclasses.dataclass
class MetricFitSummary:
    path: Path
    method: str
    feature: str
    trials: list[int]
    num_train_images: list[int]
    seconds: float


def fit_feature_metric_store(store_path: str | Path, out: str | Path, method: str,
                             fit: TrialFitter, hyperparameters: dict, *,
                             feature: str | None = None, trials: str | None = "all",
                             seed: int | None = None, force: bool = False,
                             progress: bool | None = None,
                             command: str | None = None) -> MetricFitSummary:
    """Fit ``fit`` on every chosen trial's training rows of ``feature``; write ``out``."""
    from reidcli.features.layout import parse_trials
    from reidcli.io import check_output
    from reidcli.pooling.fit import store_trials
    from reidcli.store import open_store

    check_output(Path(out), force, "--out")
    started = time.perf_counter()
    with open_store(store_path) as st:
        name = st.require_feature(feature)
        all_trials = store_trials(st)
        chosen = parse_trials(trials, len(all_trials))
        records = st.records
        pids = records["pid"].to_numpy(np.int64)
        camids = records["camid"].to_numpy(np.int64)
        fits, sizes = {}, []
        for k in track(chosen, description=f"train {method}", unit="trial", enabled=progress):
            rows = all_trials[k][1]
            rows = np.sort(rows[pids[rows] > 0])
            if len(rows) == 0:
                raise UsageError(f"trial {k} of store {store_path} has no training rows",
                                 "write train rows or a protocol with train_idx into the store")
            sizes.append(int(len(rows)))
            fits[k] = fit(st.features(name, rows), pids[rows], camids[rows])
        provenance = make_provenance(command, seed=seed, inputs=[store_path], method=method)
    fitted.save(out, method, fits, hyperparameters={**hyperparameters, "trials": chosen},
                provenance=provenance, feature=name, force=force)
    return MetricFitSummary(Path(out), method, name, chosen, sizes,
                            round(time.perf_counter() - started, 3))
