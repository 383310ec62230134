"""Fitted-model files: save/load round trip, dispatch on method, clear errors."""
from __future__ import annotations

import h5py
import numpy as np
import pytest

from reidcli import fitted, registry
from reidcli.errors import FittedModelError, OutputExistsError, UsageError


def test_linear_projection_round_trip(tmp_path):
    rng = np.random.default_rng(0)
    trials = [{"W": rng.standard_normal((6, 3)), "mean": rng.standard_normal(6)},
              {"W": rng.standard_normal((6, 3))}]
    path = fitted.save(tmp_path / "m.h5", "linear-projection", trials, {"dim": 3},
                       {"command": "test"}, feature="emb")
    assert not (tmp_path / "m.h5.partial").exists()
    model = fitted.load(path)
    assert (model.method, model.num_trials, model.feature) == ("linear-projection", 2, "emb")
    assert model.hyperparameters == {"dim": 3} and model.provenance == {"command": "test"}
    x = rng.standard_normal((4, 6)).astype(np.float32)
    t0, t1 = model.for_trial(0), model.for_trial(1)
    assert t0.metric == "euclidean"
    np.testing.assert_allclose(t0.transform(x), (x - trials[0]["mean"]) @ trials[0]["W"],
                               rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(t1.transform(x), x @ trials[1]["W"], rtol=1e-5, atol=1e-5)
    with pytest.raises(FittedModelError, match="no fit for trial 2 .it has trials 0-1"):
        model.for_trial(2)
    with pytest.raises(FittedModelError, match="6-dimensional"):
        t0.transform(np.zeros((2, 5)))


def test_single_dict_is_one_trial_and_nested_groups_round_trip(tmp_path):
    seen = {}

    def factory(arrays, hyper):
        seen.update(arrays=arrays, hyper=hyper)

        class M(fitted.TrialModel):
            metric = "custom"

            def embedded_distance(self, q, g):
                return np.zeros((len(q), len(g)))
        return M()

    registry.register_loader("test-nested", factory, paper="—", summary="test model")
    fitted.save(tmp_path / "n.h5", "test-nested",
                {"a": np.arange(3), "repeat_0": {"b": np.ones(2)}}, {"k": 1}, {})
    model = fitted.load(tmp_path / "n.h5")
    assert model.num_trials == 1
    m = model.for_trial(0)
    assert m.distance(np.zeros((2, 1)), np.zeros((3, 1))).shape == (2, 3)
    np.testing.assert_array_equal(seen["arrays"]["repeat_0"]["b"], np.ones(2))
    assert seen["hyper"] == {"k": 1}


def test_refuses_existing_output_without_force(tmp_path):
    fitted.save(tmp_path / "m.h5", "linear-projection", {"W": np.eye(2)})
    with pytest.raises(OutputExistsError):
        fitted.save(tmp_path / "m.h5", "linear-projection", {"W": np.eye(2)})
    fitted.save(tmp_path / "m.h5", "linear-projection", {"W": 2 * np.eye(2)}, force=True)
    np.testing.assert_array_equal(fitted.load(tmp_path / "m.h5").for_trial(0).W, 2 * np.eye(2))


def test_wrong_format_unknown_method_and_damaged_files(tmp_path):
    with h5py.File(tmp_path / "store.h5", "w") as h5:
        h5.attrs["format"] = "reidcli.store"
    with pytest.raises(FittedModelError, match="not a reidcli fitted model") as info:
        fitted.load(tmp_path / "store.h5")
    assert "\n" not in str(info.value) and " — " in str(info.value)
    fitted.save(tmp_path / "u.h5", "linear-projection", {"W": np.eye(2)})
    with h5py.File(tmp_path / "u.h5", "a") as h5:
        h5.attrs["method"] = "no-such-method"
    with pytest.raises(FittedModelError, match="unknown method 'no-such-method'"):
        fitted.load(tmp_path / "u.h5")
    with h5py.File(tmp_path / "e.h5", "w") as h5:
        h5.attrs["format"] = "reidcli.fitted"
        h5.attrs["method"] = "linear-projection"
    with pytest.raises(FittedModelError, match="trial_<k>"):
        fitted.load(tmp_path / "e.h5")
    (tmp_path / "t.txt").write_text("x")
    with pytest.raises(FittedModelError, match="not an HDF5 file"):
        fitted.load(tmp_path / "t.txt")
    with pytest.raises(FittedModelError, match="does not exist"):
        fitted.load(tmp_path / "missing.h5")
    fitted.save(tmp_path / "w.h5", "linear-projection", {"mean": np.zeros(2)})
    with pytest.raises(FittedModelError, match="lacks the array W"):
        fitted.load(tmp_path / "w.h5").for_trial(0)


def test_partial_trials_and_repeats(tmp_path):
    """A model fitted on store trials 1 and 3 only, with two repeats per trial."""
    def fit(scale):
        return {"W": scale * np.eye(2)}
    trials = {3: {"repeat_0": fit(1.0), "repeat_1": fit(2.0)},
              1: {"repeat_0": fit(3.0), "repeat_1": fit(4.0)}}
    fitted.save(tmp_path / "m.h5", "linear-projection", trials)
    model = fitted.load(tmp_path / "m.h5")
    assert model.trial_ids == [1, 3] and model.num_repeats == 2 and model.num_trials == 2
    assert model.covers(3) and not model.covers(0)
    np.testing.assert_array_equal(model.for_trial(1, 1).W, 4.0 * np.eye(2))
    np.testing.assert_array_equal(model.for_trial(3, 0).W, np.eye(2))
    with pytest.raises(FittedModelError, match="repeats 0..1, not 2"):
        model.for_trial(3, 2)
    with pytest.raises(FittedModelError, match="no fit for trial 0"):
        model.for_trial(0)
    with pytest.raises(UsageError, match="different numbers of repeats"):
        fitted.save(tmp_path / "x.h5", "linear-projection", {0: fit(1.0), 1: trials[1]})


def test_shared_fits_are_written_once_as_hard_links(tmp_path):
    rng = np.random.default_rng(1)
    shared = {"W": rng.standard_normal((6, 3))}
    other = {"W": rng.standard_normal((6, 3))}
    path = fitted.save(tmp_path / "m.h5", "linear-projection", [shared, shared, other, shared])
    with h5py.File(path, "r") as h5:
        assert h5["trial_1"] == h5["trial_0"] and h5["trial_3"] == h5["trial_0"]   # one object
        assert h5["trial_2"] != h5["trial_0"] and h5.attrs["num_trials"] == 4
    model = fitted.load(path)
    x = rng.standard_normal((2, 6))
    for k, arrays in enumerate([shared, shared, other, shared]):
        np.testing.assert_allclose(model.for_trial(k).transform(x), x @ arrays["W"],
                                   rtol=1e-5, atol=1e-5)
