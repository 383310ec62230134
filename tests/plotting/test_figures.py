"""Every figure renders to PNG on tiny inputs; assertions on the plotted data, not pixels."""
from __future__ import annotations

import numpy as np
import pytest

from reidcli.errors import InputFileError, OutputExistsError, UsageError
from reidcli.plotting.cmc import plot_cmc
from reidcli.plotting.distances import plot_distances
from reidcli.plotting.ranklist import plot_ranklist
from reidcli.plotting.training import plot_training
from reidcli.plotting.tsne import plot_tsne
from reidcli.plotting.weight_maps import plot_weight_maps
from reidcli.store.reader import open_store
from tests.plotting.conftest import png_size


def test_cmc_curves_bands_and_legend(two_results, tmp_path):
    out = tmp_path / "cmc.png"
    plot = plot_cmc(two_results, out, max_rank=3)
    mean, std = plot.curves["C-DPCF"]
    np.testing.assert_allclose(mean, [30, 50, 70])
    np.testing.assert_allclose(std, [10, 10, 10])                  # band = std over trials
    assert plot.curves["hsv-stripes"][1] is None                   # one trial: no band
    assert plot.labels == ["C-DPCF (R1 30.0%)", "hsv-stripes (R1 10.0%)"]
    assert png_size(out)[0] > 300
    with pytest.raises(OutputExistsError):
        plot_cmc(two_results, out)
    plot_cmc(two_results, tmp_path / "cmc.svg", labels=["mine"])
    assert (tmp_path / "cmc.svg").read_text().lstrip().startswith("<?xml")
    with pytest.raises(UsageError, match="format"):
        plot_cmc(two_results, tmp_path / "cmc.jpg2")
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(InputFileError, match="no CMC"):
        plot_cmc([tmp_path / "bad.json"])


def test_tsne_points_colours_and_compare(tiny_store, tmp_path):
    out = tmp_path / "t.png"
    plot = plot_tsne(tiny_store, out, color_by="camid", marker_by="split", max_points=30,
                     compare=tiny_store, perplexity=5)
    assert len(plot.points) == 2 and plot.points[0].shape == (30, 2)
    np.testing.assert_allclose(plot.points[0], plot.points[1])     # same store, same seed
    with open_store(tiny_store) as st:
        cams = st.records["camid"].to_numpy()[plot.rows]
        pids = st.records["pid"].to_numpy()[plot.rows]
    np.testing.assert_array_equal(plot.colors, cams)
    assert (pids >= 0).all() and set(plot.markers) <= {"train", "query", "gallery"}
    assert png_size(out)[0] > png_size(out)[1]                      # two panels side by side
    with pytest.raises(UsageError, match="--color-by"):
        plot_tsne(tiny_store, color_by="colour")


def test_weight_maps_fig4_and_fig5(tmp_path):
    from reidcli.pooling.fit import fit_pooling_store
    from reidcli.pooling.cdpcf import PoolingConfig
    from reidcli.pooling.synthetic_maps import write_toy_store

    store = write_toy_store(tmp_path / "toy.h5")
    fitted = tmp_path / "cdpcf.h5"
    fit_pooling_store(store, fitted, PoolingConfig(method="cdpcf", K=3, E=8), progress=False)
    out = tmp_path / "w.png"
    plot = plot_weight_maps(fitted, out, num_maps=2)
    with open_store(store) as st:
        layers, (_, h, w) = st.convmap_layers, st.convmap_shape(st.convmap_layers[0])
        cams = sorted(set(st.records["camid"]))
    assert set(plot.maps) == {(layer, c) for layer in layers for c in cams}
    first = plot.maps[(layers[0], cams[0])]
    assert first.shape == (2, h, w)
    np.testing.assert_allclose(plot.sums[(layers[0], cams[0])].sum(),
                               np.abs(_raw_block(fitted, layers[0], 0, len(cams))).sum())
    assert png_size(out)[1] > 200
    with pytest.raises(UsageError, match="--figure"):
        plot_weight_maps(fitted, figure="fig9")


def _raw_block(fitted, layer, block, blocks):
    import h5py

    with h5py.File(fitted) as h5:
        group = next(h5[k] for k in h5 if k.startswith("trial_"))
        weights = group[layer]["weight_maps"][()]
    s = weights.shape[0] // blocks
    return weights[block * s:(block + 1) * s]


def test_ranklist_follows_the_market_rule(tiny_store, tmp_path):
    out = tmp_path / "r.png"
    plot = plot_ranklist(tiny_store, out, queries=3, topk=4)
    with open_store(tiny_store) as st:
        rec = st.records
    pid, cam = rec["pid"].to_numpy(), rec["camid"].to_numpy()
    assert plot.ranked.shape == (3, 4)
    for q, row, ok, d in zip(plot.queries, plot.ranked, plot.correct, plot.distances):
        assert (pid[row] != -1).all()                               # junk removed
        assert not ((pid[row] == pid[q]) & (cam[row] == cam[q])).any()
        np.testing.assert_array_equal(ok, pid[row] == pid[q])
        assert (np.diff(d) >= 0).all()                              # best first
    assert png_size(out)[0] > 300
    with pytest.raises(UsageError, match="--query-index"):
        plot_ranklist(tiny_store, query_index=[10**6])


def test_training_curves(run_dir, tmp_path):
    out = tmp_path / "tr.png"
    plot = plot_training(run_dir, out)
    assert set(plot.series) == {"loss", "loss_ce", "loss_tri", "lr", "acc"}
    x, y = plot.series["loss"]
    np.testing.assert_array_equal(x, np.arange(1, 13))
    assert y[0] > y[-1]
    assert png_size(out)[0] > 500
    with pytest.raises(InputFileError, match="metrics.csv"):
        plot_training(tmp_path / "nothing")


def test_distance_histograms(tiny_store, tmp_path):
    out = tmp_path / "d.png"
    plot = plot_distances(tiny_store, out)
    assert set(plot.groups) == {"intra-class", "inter-class"}
    assert plot.groups["intra-class"].mean() < plot.groups["inter-class"].mean()
    assert png_size(out)[0] > 200
