"""Every figure renders to PNG on tiny inputs; assertions on the plotted data and on the
drawn matplotlib Figure (lines, bands, legends, borders, points, patches), not pixels."""
from __future__ import annotations

import numpy as np
import pytest
from matplotlib.collections import PathCollection, PolyCollection
from matplotlib.colors import to_hex, to_rgb
from matplotlib.patches import Rectangle

from reidcli.errors import InputFileError, OutputExistsError, UsageError
from reidcli.plotting.cmc import plot_cmc
from reidcli.plotting.distances import plot_distances
from reidcli.plotting.ranklist import plot_ranklist
from reidcli.plotting.training import plot_training
from reidcli.plotting.tsne import plot_tsne
from reidcli.plotting.weight_maps import plot_weight_maps
from reidcli.store.reader import open_store
from tests.plotting.conftest import png_size

GREEN, RED = "#1a9850", "#d73027"


def _data_lines(ax):
    """The Line2D of plotted series (helper lines such as axvline have '_' labels)."""
    return [ln for ln in ax.get_lines() if not ln.get_label().startswith("_")]


def test_cmc_curves_bands_and_legend(two_results, tmp_path):
    out = tmp_path / "cmc.png"
    plot = plot_cmc(two_results, out, max_rank=3)
    mean, std = plot.curves["C-DPCF"]
    np.testing.assert_allclose(mean, [30, 50, 70])
    np.testing.assert_allclose(std, [10, 10, 10])                  # band = std over trials
    assert plot.curves["hsv-stripes"][1] is None                   # one trial: no band
    assert plot.names == ["C-DPCF", "hsv-stripes"]
    assert plot.labels == ["C-DPCF — R1 30.0 %, mAP —", "hsv-stripes — R1 10.0 %, mAP —"]
    ax, = plot.figure.axes
    lines = _data_lines(ax)
    assert len(lines) == 2                                         # one line per run
    np.testing.assert_allclose(lines[0].get_ydata(), [30, 50, 70])
    np.testing.assert_allclose(lines[1].get_xdata(), [1, 2, 3])
    bands = [c for c in ax.collections if isinstance(c, PolyCollection)]
    assert len(bands) == 1                                         # only the multi-trial run
    lows_highs = bands[0].get_paths()[0].vertices[:, 1]
    assert lows_highs.min() == pytest.approx(20) and lows_highs.max() == pytest.approx(80)
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == plot.labels and all("R1" in t for t in legend)
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


def _scatter_points(ax) -> int:
    return sum(len(c.get_offsets()) for c in ax.collections if isinstance(c, PathCollection))


def test_tsne_points_colours_and_compare(tiny_store, tiny_store_lbp, tmp_path):
    out = tmp_path / "t.png"
    plot = plot_tsne(tiny_store, out, color_by="camid", marker_by="split", max_points=30,
                     compare=tiny_store_lbp, perplexity=5)
    assert len(plot.points) == 2 and plot.points[0].shape == plot.points[1].shape == (30, 2)
    assert not np.allclose(plot.points[0], plot.points[1])         # another descriptor
    assert "hsv-stripes" in plot.titles[0] and "hist-lbp" in plot.titles[1]
    with open_store(tiny_store) as st:
        cams = st.records["camid"].to_numpy()[plot.rows]
        pids = st.records["pid"].to_numpy()[plot.rows]
    np.testing.assert_array_equal(plot.colors, cams)
    assert (pids >= 0).all() and set(plot.markers) <= {"train", "query", "gallery"}
    panels = plot.figure.axes
    assert len(panels) == 2
    groups = {(c, m) for c, m in zip(plot.colors.tolist(), plot.markers.tolist())}
    for ax, pts, title in zip(panels, plot.points, plot.titles):
        assert _scatter_points(ax) == 30                           # every point drawn once
        assert len(ax.collections) == len(groups)                  # one per (camera, split)
        drawn = np.concatenate([c.get_offsets() for c in ax.collections])
        np.testing.assert_allclose(np.sort(drawn, axis=0), np.sort(pts, axis=0), rtol=1e-6)
        assert ax.get_title() == title
    legend = [t.get_text() for t in panels[-1].get_legend().get_texts()]
    # one entry per camera (colour) and per split (marker), not one per combination
    assert legend == ["camid 0", "camid 1", "split gallery", "split query", "split train"]
    assert png_size(out)[0] > png_size(out)[1]                      # two panels side by side
    with pytest.raises(UsageError, match="color_by='colour'"):
        plot_tsne(tiny_store, color_by="colour")
    with pytest.raises(UsageError, match="compare=.* holds other rows"):
        plot_tsne(tiny_store, compare=_other_rows_store(tmp_path), max_points=10)


def _other_rows_store(tmp_path):
    import pandas as pd

    from reidcli.data.records import normalize_frame
    from reidcli.store import StoreWriter

    records = normalize_frame(pd.DataFrame({"path": [f"x{i}.png" for i in range(8)],
                                            "pid": [1, 1, 2, 2, 3, 3, 4, 4],
                                            "camid": [0, 1] * 4, "split": "gallery"}))
    with StoreWriter(tmp_path / "other.h5", records) as writer:
        writer.set_feature("f", np.eye(8, dtype=np.float32))
    return tmp_path / "other.h5"


def test_weight_maps_fig4_and_fig5(toy_fit, tmp_path):
    store, fitted = toy_fit
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
    # Fig. 5: one non-empty average image per camera (camera 0 reddish, camera 1 bluish)
    assert sorted(plot.images) == cams
    for cam, image in plot.images.items():
        assert image.shape == (128, 64, 3) and image.max() > 0
        r, _, b = image.reshape(-1, 3).mean(0)
        assert (r > b) if cam == 0 else (b > r)
    # the drawn grid: one row per (layer, camera); 2 maps + average image + Σ|maps|
    axes = np.array(plot.figure.axes).reshape(len(plot.maps), 4)
    for row, key in zip(axes, plot.maps):
        assert [len(ax.images) for ax in row] == [1, 1, 1, 1]
        np.testing.assert_array_equal(row[2].images[0].get_array(), plot.images[key[1]])
        np.testing.assert_allclose(row[3].images[0].get_array(), plot.sums[key])
    assert axes[0][2].get_title() == "mean image"
    assert png_size(out)[1] > 200
    only_maps = plot_weight_maps(fitted, num_maps=3, figure="maps")
    assert len(only_maps.figure.axes) == 3 * len(only_maps.maps)
    with pytest.raises(UsageError, match="figure='fig9'"):
        plot_weight_maps(fitted, figure="fig9")


def _raw_block(fitted, layer, block, blocks):
    import h5py

    with h5py.File(fitted) as h5:
        group = next(h5[k] for k in h5 if k.startswith("trial_"))
        weights = group[layer]["weight_maps"][()]
    s = weights.shape[0] // blocks
    return weights[block * s:(block + 1) * s]


def test_ranklist_follows_the_market_rule(tiny_store, tmp_path, recwarn):
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
    assert not plot.correct.all() and plot.correct.any()            # both colours are used
    axes = np.array(plot.figure.axes).reshape(3, 5)
    for i in range(3):
        q = plot.queries[i]
        assert axes[i][0].get_title() == f"query\npid {pid[q]} cam {cam[q]}"
        for j in range(4):
            want = GREEN if plot.correct[i, j] else RED
            ax = axes[i][j + 1]
            assert {to_hex(s.get_edgecolor()) for s in ax.spines.values()} == {want}
            assert to_hex(ax.title.get_color()) == want and len(ax.images) == 1
    assert plot.missing == [] and not [w for w in recwarn if "rank list" in str(w.message)]
    assert png_size(out)[0] > 300
    with pytest.raises(UsageError, match="query_index='1000000'"):
        plot_ranklist(tiny_store, query_index=[10**6])


def test_ranklist_warns_about_missing_images(two_modality_store):
    with pytest.warns(UserWarning, match=r"rank list: none of the (\d+) image file\(s\) found "
                                         r"\(missing or unreadable\), drawn as 'image not "
                                         r"found' tiles \(first tried: /.*mm/.* — pass "
                                         r"images_root=DIR") as w:
        plot = plot_ranklist(two_modality_store, queries=2, topk=3)
    shown = {*plot.queries.tolist(), *plot.ranked.ravel().tolist()}
    assert len(plot.missing) == len(shown)                          # every distinct file once
    assert f"{len(shown)} image file(s)" in str(w[0].message)
    grey = plot.figure.axes[0].images[0].get_array()
    assert (np.asarray(grey) == 200).all()


def test_training_curves(run_dir, tmp_path):
    out = tmp_path / "tr.png"
    plot = plot_training(run_dir, out)
    assert set(plot.series) == {"loss", "loss_ce", "loss_tri", "lr", "acc"}
    x, y = plot.series["loss"]
    np.testing.assert_array_equal(x, np.arange(1, 13))
    assert y[0] > y[-1]
    panels = plot.figure.axes
    assert [ax.get_title() for ax in panels] == ["loss", "learning rate", "accuracy"]
    assert [sorted(ln.get_label() for ln in _data_lines(ax)) for ax in panels] == \
        [["loss", "loss_ce", "loss_tri"], ["lr"], ["acc"]]
    for ax in panels:                                               # 3 epochs: 2 boundaries
        bounds = [ln for ln in ax.get_lines() if ln.get_linestyle() == ":"]
        assert sorted(ln.get_xdata()[0] for ln in bounds) == [4, 8]
    assert panels[1].get_yscale() == "log"
    assert png_size(out)[0] > 500
    with pytest.raises(InputFileError, match="metrics.csv"):
        plot_training(tmp_path / "nothing")


def _bars(ax):
    return [p for p in ax.patches if isinstance(p, Rectangle)]


def test_distance_histograms(tiny_store, tmp_path):
    out = tmp_path / "d.png"
    plot = plot_distances(tiny_store, out, bins=12)
    assert set(plot.groups) == {"intra-class", "inter-class"}
    assert plot.groups["intra-class"].mean() < plot.groups["inter-class"].mean()
    ax, = plot.figure.axes
    assert len(_bars(ax)) == 2 * 12                                 # bins per group
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == [f"{name} ({len(v)})" for name, v in plot.groups.items()]
    assert png_size(out)[0] > 200


def test_cross_modality_distance_histograms(two_modality_store):
    plot = plot_distances(two_modality_store, bins=8)
    assert set(plot.groups) == {"intra-class", "intra-class cross-modality", "inter-class",
                                "inter-class cross-modality"}
    # 12 queries × 12 gallery: per query 1 same-modality and 1 cross-modality match
    assert len(plot.groups["intra-class"]) == len(plot.groups["intra-class cross-modality"]) \
        == 12
    assert len(plot.groups["inter-class"]) == len(plot.groups["inter-class cross-modality"]) \
        == 12 * 5
    assert plot.groups["intra-class"].mean() < plot.groups["intra-class cross-modality"].mean()
    ax, = plot.figure.axes
    assert len(_bars(ax)) == 4 * 8
    colours = {to_rgb(p.get_facecolor()) for p in _bars(ax)}
    assert len(colours) == 4                                        # one colour per group
