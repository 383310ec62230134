"""The common estimator check, run over every registered estimator (scikit-learn's
estimator_checks idea): parameters, validation in fit, NotFittedError, determinism, and
fit → save → load → the same distances → the same distances through ``reid eval``."""
from __future__ import annotations

import numpy as np
import pytest

from reidcli import fitted, registry
from reidcli.errors import NotFittedError, ParameterError, UsageError
from reidcli.params import NONE, Interval, Options

ESTIMATORS = [m.name for m in registry.methods() if m.estimator is not None]


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    """A small conv-map store (40 persons × 2 cameras, 1 half/half trial) with its training,
    query and gallery rows, labels, feature rows and conv maps."""
    from reidcli.synthetic.conv_maps import write_toy_store
    from reidcli.store import open_store

    path = write_toy_store(tmp_path_factory.mktemp("estimators") / "toy.h5", persons=40,
                           trials=1)
    with open_store(path) as st:
        trial = st.protocol.trials[0]
        records = st.records
        layers = st.convmap_layers
        data = {"path": path, "train": np.sort(trial["train_idx"]),
                "query": np.asarray(trial["query_idx"]),
                "gallery": np.asarray(trial["gallery_idx"]),
                "pids": records["pid"].to_numpy(np.int64),
                "camids": records["camid"].to_numpy(np.int64),
                "features": st.features("pcb_g"),
                "maps": {layer: st.convmaps(layer, np.arange(len(records))) for layer in layers}}
    return data


def _quick(info):
    return info.make_estimator(info.estimator._quick_params)


def _fit(estimator, toy):
    rows = toy["train"]
    if estimator.reads == "convmaps":
        maps = {layer: m[rows] for layer, m in toy["maps"].items()}
        return estimator.fit(maps, toy["pids"][rows], toy["camids"][rows])
    return estimator.fit(toy["features"][rows], toy["pids"][rows], toy["camids"][rows])


def _distances(model, toy, store):
    """Query × gallery distances of a FittedModel on the toy rows."""
    if model.reads == "convmaps":
        q = model.read_inputs(store, toy["query"])
        g = model.read_inputs(store, toy["gallery"])
        return model.embedded_distance(q, g)
    return model.distance(toy["features"][toy["query"]], toy["features"][toy["gallery"]])


def _assert_close(got, want):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * max(np.abs(want).max(), 1.0))


def _violating_value(constraints):
    """A value none of the constraints accepts (None when we cannot build one)."""
    for c in constraints:
        if isinstance(c, Options):
            return "__not_an_option__"
        if isinstance(c, Interval) and c.low is not None:
            return c.low - 1
        if isinstance(c, Interval) and c.high is not None:
            return c.high + 1
    return None


def test_every_stage_registers_its_methods():
    names = set(ESTIMATORS)
    assert {"xqda", "kissme", "lfda", "klfda", "rpcca", "pca", "warca"} <= names
    assert {"cdpcf", "dpcf", "avgp", "avgp-pad"} <= names
    assert registry.get("linear-projection").stage == "fitted"


@pytest.mark.parametrize("name", ESTIMATORS)
def test_parameters_follow_the_signature(name):
    info = registry.get(name)
    cls = info.estimator
    estimator = cls()
    assert estimator.get_params() == cls.default_params() == info.defaults()
    clone = cls(**estimator.get_params())
    assert clone.get_params() == estimator.get_params()
    copy = estimator.clone()                      # what the fit over a store's trials fits
    assert type(copy) is cls and copy is not estimator
    assert copy.get_params() == estimator.get_params()
    assert set(cls._parameter_constraints) <= set(cls.default_params()), \
        "constraints for parameters the constructor does not take"
    with pytest.raises(UsageError, match="no parameter 'no_such'"):
        cls(no_such=1)
    with pytest.raises(NotFittedError):
        estimator.fitted_arrays()


@pytest.mark.parametrize("name", ESTIMATORS)
def test_fit_validates_every_constrained_parameter(name, toy):
    info = registry.get(name)
    for parameter in info.parameters:
        bad = _violating_value([c for c in parameter.constraints if c is not NONE])
        if bad is None:
            continue
        estimator = info.estimator(**{**info.estimator._quick_params, parameter.name: bad})
        with pytest.raises(ParameterError) as error:
            _fit(estimator, toy)
        assert error.value.parameter == parameter.name
        assert f"{parameter.name}=" in str(error.value) and "\n" not in str(error.value)


@pytest.mark.parametrize("name", ESTIMATORS)
def test_fit_save_load_same_distances_then_eval(name, toy, tmp_path):
    from reidcli.evaluation.run import StoreEvalRequest, evaluate_store, trial_distances
    from reidcli.store import open_store

    info = registry.get(name)
    estimator = _fit(_quick(info), toy)
    again = _fit(_quick(info), toy)                      # same parameters, same numbers
    live = estimator.fitted_model()
    assert isinstance(live, fitted.FittedModel)
    path = estimator.save(tmp_path / "m.h5")
    loaded = fitted.load(path)
    assert loaded.method == name and loaded.reads == info.reads
    model = loaded.for_trial(0)
    assert isinstance(model, fitted.FittedModel) and type(model) is type(live)
    with open_store(toy["path"]) as store:
        want = _distances(live, toy, store)
        _assert_close(_distances(model, toy, store), want)
        _assert_close(_distances(again.fitted_model(), toy, store), want)
    # the same distances through reid eval's own path (transform once, block metric)
    q_rows, g_rows, dist = trial_distances(toy["path"], model=path)
    np.testing.assert_array_equal(q_rows, toy["query"])
    np.testing.assert_array_equal(g_rows, toy["gallery"])
    _assert_close(dist, want)
    result = evaluate_store(StoreEvalRequest(store=toy["path"], model=path))
    assert 0.0 <= result.trials[0].mAP <= 1.0 and result.meta["model"]["method"] == name
