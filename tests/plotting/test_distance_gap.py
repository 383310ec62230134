"""`reid plot distances` as DG-VAE paper Fig. 5(b): cross-modality intra- vs inter-class
distances between L2-normalised features and the gap δ = mean(inter) − mean(intra)."""
from __future__ import annotations

import numpy as np
import pytest

from reidcli.errors import ParameterError
from reidcli.evaluation.run import trial_distances
from reidcli.plotting.distances import distance_gap, plot_distances, resolve_normalize
from reidcli.store.reader import open_store
from tests.cli.helpers import run_cli


def _by_hand(store):
    """(same identity [q, g], cross-modality [q, g], normalised Euclidean distances [q, g])
    of trial 0, computed here from the raw rows."""
    with open_store(store) as st:
        records, feats = st.records, st.features("f")
        q, g = st.query_gallery_trials()[0][1:]
    unit = feats / np.linalg.norm(feats, axis=1, keepdims=True)
    dist = np.linalg.norm(unit[q][:, None, :] - unit[g][None, :, :], axis=2)
    pid, mod = records["pid"].to_numpy(), records["modality"].astype(str).to_numpy()
    return pid[q][:, None] == pid[g][None, :], mod[q][:, None] != mod[g][None, :], dist


def test_default_is_normalised_euclidean_and_delta_is_cross_modality(two_modality_store):
    plot = plot_distances(two_modality_store, bins=8)
    same, cross, dist = _by_hand(two_modality_store)
    assert plot.normalized
    np.testing.assert_allclose(np.sort(plot.groups["intra-class cross-modality"]),
                               np.sort(dist[same & cross]), rtol=1e-5)
    np.testing.assert_allclose(np.sort(plot.groups["inter-class"]),
                               np.sort(dist[~same & ~cross]), rtol=1e-5)
    assert all(((v >= 0) & (v <= 2 + 1e-6)).all() for v in plot.groups.values())
    expected = dist[~same & cross].mean() - dist[same & cross].mean()
    assert plot.gap == pytest.approx(expected, rel=1e-5)
    assert plot.gap == pytest.approx(distance_gap(plot.groups))
    title = plot.figure.axes[0].get_title()
    assert f"δ cross-modality = mean inter − mean intra = {plot.gap:.3f}" in title
    assert "L2-normalised" in plot.figure.axes[0].get_xlabel()


def test_no_normalize_uses_the_eval_distance(two_modality_store):
    plot = plot_distances(two_modality_store, bins=8, normalize=False)
    assert not plot.normalized
    _, _, raw = trial_distances(two_modality_store, feature="f")
    same, cross, _ = _by_hand(two_modality_store)
    np.testing.assert_allclose(np.sort(plot.groups["intra-class cross-modality"]),
                               np.sort(raw[same & cross]), rtol=1e-5)
    assert plot.gap == pytest.approx(raw[~same & cross].mean() - raw[same & cross].mean(),
                                     rel=1e-5)
    assert raw.max() > 2                  # the raw features are not on the [0, 2] scale


def test_delta_without_modalities_and_without_both_kinds():
    groups = {"intra-class": np.array([0.2, 0.4]), "inter-class": np.array([1.0, 1.4])}
    assert distance_gap(groups) == pytest.approx(0.9)
    assert distance_gap({"intra-class": np.array([0.2])}) is None
    mixed = {**groups, "intra-class cross-modality": np.array([0.5]),
             "inter-class cross-modality": np.array([0.7])}
    assert distance_gap(mixed) == pytest.approx(0.2)


def test_normalize_and_a_fitted_model():
    assert resolve_normalize(None, None) is True
    assert resolve_normalize(None, "model.h5") is False
    assert resolve_normalize(False, None) is False
    with pytest.raises(ParameterError, match="fitted model"):
        resolve_normalize(True, "model.h5")


def test_cli_prints_delta(capsys, two_modality_store, tmp_path):
    out = tmp_path / "d.png"
    code, stdout, err = run_cli(capsys, "plot", "distances", "--store", two_modality_store,
                                "--out", out, "--bins", "8")
    assert code == 0, err
    expected = plot_distances(two_modality_store, bins=8).gap
    assert f"delta = {expected:.4f}" in stdout and "L2-normalised" in stdout
    code, stdout, err = run_cli(capsys, "plot", "distances", "--store", two_modality_store,
                                "--out", tmp_path / "r.png", "--no-normalize")
    assert code == 0, err
    assert "L2-normalised" not in stdout and out.is_file()
