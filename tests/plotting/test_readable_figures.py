"""Figures a reader can trust: CMC curves that stay visible when equal, whole-rank ticks,
mAP and a report-made name in the legend; weight-map titles and colour bars that never
overprint; rank lists that find images under ``images_root``; t-SNE before/after panels in
one frame."""
from __future__ import annotations

import itertools
import json
import re

import numpy as np
import pytest

from reidcli.plotting.cmc import plot_cmc, report_label
from reidcli.plotting.ranklist import plot_ranklist
from reidcli.plotting.weight_maps import WeightMapPlot, draw_weight_maps, plot_weight_maps
from reidcli.store.reader import open_store

BOT = {"kind": "bot", "backbone": "tiny"}


def _report(tmp_path, name, cmc, m_ap=0.4, **fields):
    report = {"protocol": "market", "dataset": "synthetic", "cmc": cmc, "mAP": m_ap,
              "trials": [{"cmc": cmc}], **fields}
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(report))
    return path


# -- CMC -----------------------------------------------------------------------------------------
def test_equal_cmc_curves_stay_apart_and_ticks_are_whole_ranks(tmp_path):
    cmc = list(np.linspace(0.5, 0.95, 20))
    paths = [_report(tmp_path, f"run{i}", cmc, m_ap=0.3 + 0.1 * i, feature="imported")
             for i in range(5)]                                     # 5 equal curves
    plot = plot_cmc(paths, max_rank=20)
    ax, = plot.figure.axes
    lines = [ln for ln in ax.get_lines() if not ln.get_label().startswith("_")]
    assert len(lines) == 5
    styles = {(ln.get_marker(), ln.get_linestyle()) for ln in lines}
    assert len(styles) == 5                                         # distinct pairs
    assert len({ln.get_linestyle() for ln in lines}) > 1
    # equal curves put their markers on different ranks
    marked = [tuple(np.arange(1, 21)[ln.get_markevery()[0]::ln.get_markevery()[1]])
              for ln in lines]
    assert len(set(marked)) > 1
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(plot.figure).draw()
    ticks = ax.get_xticks()
    visible = ticks[(ticks >= ax.get_xlim()[0]) & (ticks <= ax.get_xlim()[1])]
    assert len(visible) >= 3 and np.array_equal(visible, np.round(visible))
    assert visible.min() == 1 and visible.max() <= 20
    assert all(re.fullmatch(r"\d+", t.get_text()) for t in ax.get_xticklabels())
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert [t.split(" — ")[1] for t in legend] == [
        f"R1 50.0 %, mAP {100 * (0.3 + 0.1 * i):.1f} %" for i in range(5)]
    # the same default label: told apart by the file names, never by a counter
    assert plot.names == [f"imported [run{i}]" for i in range(5)]
    assert not any(re.search(r"\(\d+\)", t) for t in legend)


def test_clashing_labels_from_other_folders_name_the_folder(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    paths = [_report(tmp_path / d, "eval", [0.5, 0.7], feature="f") for d in "ab"]
    plot = plot_cmc(paths, labels=["same", "same"])
    assert plot.names == ["same [a/eval]", "same [b/eval]"]


def test_clashing_labels_name_the_store_they_evaluated(tmp_path):
    """The same method on several stores: each legend name carries its store; on one store
    (or stores of one name) the report files tell them apart."""
    paths = [_report(tmp_path, f"r{i}", [0.5, 0.7], feature="f", store=f"/x/{s}.h5")
             for i, s in enumerate(("market", "duke", "market"))]
    assert plot_cmc(paths[:2]).names == ["f [market]", "f [duke]"]
    assert plot_cmc([paths[0], paths[2]]).names == ["f [r0]", "f [r2]"]


def test_default_labels_say_what_made_the_result():
    rerank = {"feature": "bnneck", "distance": "euclidean",
              "rerank": {"k1": 20, "k2": 6, "lambda_value": 0.3},
              "store_provenance": {"model": {"kind": "bot", "backbone": "resnet50"}}}
    assert report_label(rerank) == \
        "BoT resnet50 bnneck (euclidean) + k-reciprocal re-ranking"
    assert report_label({**rerank, "rerank": None}) == "BoT resnet50 bnneck (euclidean)"
    adapted = {"feature": "bnneck", "distance": "euclidean",
               "store_provenance": {"model": BOT, "adapt": {"method": "dart3",
                                                            "mode": "lite"}}}
    assert report_label(adapted) == "BoT tiny bnneck + DART3 LITE (euclidean)"
    for method, mode, name in (("dart3", "full", "DART3"), ("norm", "", "camera Norm"),
                               ("tent", "", "TENT"), ("temp", "", "TEMP")):
        prov = {"model": BOT, "adapt": {"method": method, "mode": mode}}
        assert report_label({**adapted, "store_provenance": prov}) == \
            f"BoT tiny bnneck + {name} (euclidean)"
    # an adapted store's network may only be in its input store's provenance
    nested = {"adapt": {"method": "tent"}, "source_provenance": {"model": BOT}}
    assert report_label({**adapted, "store_provenance": nested}) == \
        "BoT tiny bnneck + TENT (euclidean)"
    fitted = {"feature": "hsv-stripes", "distance": "xqda", "model": {"method": "xqda"}}
    assert report_label(fitted) == "hsv-stripes + XQDA"
    pooled = {"feature": None, "model": {"method": "cdpcf"},
              "store_provenance": {"maps": ["color-grid"]}, "rerank": {"k1": 20}}
    assert report_label(pooled) == "color-grid + C-DPCF + k-reciprocal re-ranking"
    pcb = {"feature": "parts", "distance": "cosine",
           "store_provenance": {"model": {"kind": "pcb", "backbone": "resnet50", "rpp": True}}}
    assert report_label(pcb) == "PCB+RPP resnet50 parts (cosine)"


def test_plot_cmc_uses_the_report_label_by_default(tmp_path):
    path = _report(tmp_path, "r", [0.5, 0.6], feature="bnneck", distance="euclidean",
                   rerank={"k1": 20}, store_provenance={"model": BOT})
    plot = plot_cmc([path])
    assert plot.labels == ["BoT tiny bnneck (euclidean) + k-reciprocal re-ranking — R1 50.0 %, "
                           "mAP 40.0 %"]


# -- weight maps ---------------------------------------------------------------------------------
def _text_boxes(fig):
    """(name, window bbox) of every title, row label, suptitle and colour-bar inset."""
    renderer = fig.canvas.get_renderer()
    boxes = [("suptitle", fig._suptitle.get_window_extent(renderer))]
    for i, ax in enumerate(fig.axes):
        for text in (ax.title, ax.yaxis.label):
            if text.get_text():
                boxes.append((f"axes {i}: {text.get_text()!r}",
                              text.get_window_extent(renderer)))
        for child in ax.child_axes:
            boxes.append((f"colour bar of axes {i}", child.get_tightbbox(renderer)))
    return boxes


def _overlaps(fig):
    """Pairs of text / colour-bar boxes that overlap each other or a map panel, once drawn
    (on an Agg canvas: a figure released from pyplot keeps only a base canvas)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig).draw()
    renderer = fig.canvas.get_renderer()
    boxes = _text_boxes(fig)
    images = [(f"image axes {i}", ax.get_window_extent(renderer))
              for i, ax in enumerate(fig.axes)]
    pairs = list(itertools.combinations(boxes, 2)) + list(itertools.product(boxes, images))
    return [(a[0], b[0]) for a, b in pairs if a[1].overlaps(b[1])]


def test_weight_map_titles_never_overprint_for_10_maps_6_cameras():
    rng = np.random.default_rng(0)
    keys = [("conv4_x", c) for c in range(6)]
    maps = {k: rng.standard_normal((10, 24, 8)) * (1 + k[1]) for k in keys}
    data = WeightMapPlot(maps=maps, sums={k: np.abs(m).sum(0) for k, m in maps.items()},
                         images={c: rng.random((128, 64, 3)) for c in range(6)})
    draw_weight_maps(data, "C-DPCF weight maps — a_long_fitted_file_name.h5", num_maps=10)
    fig = data.figure
    assert len(fig.axes) == 6 * 12                                  # 10 maps + image + Σ
    assert _overlaps(fig) == []
    assert len(data.colorbars) == 2 * 6                             # maps + Σ, per row
    assert all(bar.ax in ax.child_axes for bar, ax in
               zip(data.colorbars[::2], np.array(fig.axes).reshape(6, 12)[:, 9]))
    # a row's maps share one symmetric scale, read off its colour bar
    for r, key in enumerate(keys):
        low, high = data.colorbars[2 * r].mappable.get_clim()
        assert high == pytest.approx(np.abs(maps[key]).max()) and low == -high


def test_fitted_weight_maps_have_colour_bars(toy_fit):
    plot = plot_weight_maps(toy_fit[1], num_maps=3)
    assert plot.colorbars and all(bar.ax.get_ylim()[1] > bar.ax.get_ylim()[0]
                                  for bar in plot.colorbars)
    assert _overlaps(plot.figure) == []


# -- rank list -----------------------------------------------------------------------------------
@pytest.fixture
def relative_path_store(tmp_path):
    """A store whose records name images relatively (``imgs/…``), the files written under
    ``tmp_path/elsewhere``."""
    import pandas as pd
    from PIL import Image

    from reidcli.data.records import normalize_frame
    from reidcli.store import StoreWriter

    pid, cam = (a.ravel() for a in np.meshgrid(np.arange(1, 5), [0, 1], indexing="ij"))
    paths = [f"imgs/{p}_{c}.png" for p, c in zip(pid, cam)]
    root = tmp_path / "elsewhere"
    (root / "imgs").mkdir(parents=True)
    for i, path in enumerate(paths):
        Image.fromarray(np.full((32, 16, 3), 30 * i, np.uint8)).save(root / path)
    records = normalize_frame(pd.DataFrame({"path": paths, "pid": pid, "camid": cam,
                                            "split": np.where(cam == 0, "query", "gallery")}))
    feats = np.eye(8, dtype=np.float32)[pid] + 0.1 * cam[:, None]
    with StoreWriter(tmp_path / "rel.h5", records) as writer:
        writer.set_feature("f", feats.astype(np.float32))
    return tmp_path / "rel.h5", root


def test_ranklist_finds_images_under_images_root(relative_path_store, tmp_path, monkeypatch,
                                                 recwarn):
    store, root = relative_path_store
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")                              # not where images are
    plot = plot_ranklist(store, queries=2, topk=2, images_root=root)
    assert plot.missing == [] and not [w for w in recwarn if "rank list" in str(w.message)]
    drawn = np.asarray(plot.figure.axes[0].images[0].get_array())
    assert not (drawn == 200).all()                                  # a real image, not grey
    with pytest.warns(UserWarning) as caught:
        plot = plot_ranklist(store, queries=2, topk=2)
    message = str(caught[0].message)
    assert "\n" not in message and " — pass images_root=DIR" in message
    tried = str(tmp_path / "cwd" / "imgs")
    assert f"first tried: {tried}" in message and plot.missing[0].startswith(tried)


# -- t-SNE ---------------------------------------------------------------------------------------
def _adapted_copy(source, out):
    """``source`` with camera 1's features shifted, provenance as written by reid adapt."""
    from reidcli.store import StoreWriter

    with open_store(source) as st:
        records, feats = st.records, st.features("f", np.arange(st.num_rows))
    cams = records["camid"].to_numpy()
    prov = {"command": "reid adapt dart3-lite", "model": BOT,
            "adapt": {"method": "dart3", "mode": "lite"}}
    with StoreWriter(out, records, dataset="mm", provenance=prov) as writer:
        writer.set_feature("f", (feats - 1.5 * cams[:, None]).astype(np.float32))
    return out


def test_tsne_before_after_is_one_joint_embedding(two_modality_store, tmp_path, monkeypatch):
    from reidcli.plotting import tsne

    calls = []
    real = tsne.embed_2d
    monkeypatch.setattr(tsne, "embed_2d",
                        lambda feats, *a, **k: calls.append(len(feats)) or real(feats, *a, **k))
    after = _adapted_copy(two_modality_store, tmp_path / "adapted.h5")
    plot = tsne.plot_tsne(two_modality_store, compare=after, splits=["query"],
                          max_points=100, perplexity=3, color_by="modality")
    with open_store(two_modality_store) as st:
        splits = st.records["split"].to_numpy()[plot.rows]
        num_query = int((st.records["split"] == "query").sum())
    assert set(splits) == {"query"} and len(plot.rows) == num_query  # splits= filters
    assert plot.joint and calls == [2 * len(plot.rows)]              # one t-SNE of both
    assert plot.titles[0].startswith("before: f\n")
    assert plot.titles[1].startswith("after: BoT tiny f + DART3 LITE\n")
    left, right = plot.figure.axes
    assert left.get_xlim() == right.get_xlim() and left.get_ylim() == right.get_ylim()


def test_tsne_of_another_descriptor_is_aligned_to_the_first():
    from reidcli.plotting.tsne import align_2d

    rng = np.random.default_rng(1)
    ref = rng.standard_normal((30, 2))
    angle = 1.1
    rot = np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
    moved = 3.0 * (ref @ rot) * [1, -1] + [5, -2]                    # rotated, mirrored
    np.testing.assert_allclose(align_2d(moved, ref), ref, atol=1e-9)
