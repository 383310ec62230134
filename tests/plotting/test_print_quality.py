"""Figures a reader would keep (issue 33, item 7): each case checks the drawn matplotlib
Figure (legend entries, titles, tile texts, size × dpi) or the written file (PNG size read
with PIL, PDF objects), not pixels."""
from __future__ import annotations

import json
import re
import warnings

import numpy as np
import pytest

from reidcli.plotting.cmc import FIGURE_WIDTH, plot_cmc
from reidcli.plotting.common import PNG_DPI
from reidcli.plotting.ranklist import plot_ranklist
from reidcli.plotting.tsne import MAX_COLORS, legend_groups, plot_tsne
from reidcli.plotting.weight_maps import PAGE, WeightMapPlot, draw_weight_maps, page_layout
from reidcli.store.reader import open_store
from tests.plotting.conftest import png_size
from tests.plotting.test_readable_figures import relative_path_store  # noqa: F401 (fixture)

PLACEHOLDERS = ("dataset,", "— dataset", " store ", "feature default", "protocol ?")


def _texts(fig) -> list[str]:
    """Every non-empty text of a figure: suptitle, sup-labels, axes titles, tile texts."""
    texts = [t.get_text() for t in fig.findobj(lambda a: hasattr(a, "get_text"))]
    return [t for t in texts if t]


# case: CMC figure 781 px wide with a small legend → ≥ 6.5 in, legend ≥ 8 pt, PNG ≥ 300 dpi
def test_cmc_is_print_sized_with_a_readable_legend(two_results, tmp_path):
    out = tmp_path / "cmc.png"
    plot = plot_cmc(two_results, out, max_rank=3)
    fig, ax = plot.figure, plot.figure.axes[0]
    assert fig.get_size_inches()[0] >= 6.5 == FIGURE_WIDTH
    legend = ax.get_legend()
    assert all(t.get_fontsize() >= 8 for t in legend.get_texts())
    assert min(png_size(out)) >= 0.9 * 4.5 * PNG_DPI and PNG_DPI >= 300   # tight bbox
    from PIL import Image

    with Image.open(out) as img:
        assert round(img.info["dpi"][0]) == PNG_DPI
    # the title names the first report's dataset (else its file), never 'dataset'
    assert ax.get_title() == "CMC — viper, protocol single-shot, 2 trials"
    (tmp_path / "anon.json").write_text(json.dumps({"cmc": [0.5, 1.0]}))
    anon = plot_cmc([tmp_path / "anon.json"])
    assert anon.figure.axes[0].get_title() == "CMC — anon"


# case: CMC pdf/svg rasterised → vector output, no image object in the PDF
def test_cmc_pdf_and_svg_are_vector(two_results, tmp_path):
    plot_cmc(two_results, tmp_path / "cmc.pdf")
    plot_cmc(two_results, tmp_path / "cmc.svg")
    pdf = (tmp_path / "cmc.pdf").read_bytes()
    assert pdf.startswith(b"%PDF") and b"/Subtype /Image" not in pdf
    assert b"<image" not in (tmp_path / "cmc.svg").read_bytes()


# case: t-SNE legend with 18 entries → one entry per colour group (≤ 10, rest 'other')
# and one per marker group, outside the axes
def test_tsne_legend_is_capped_and_grouped():
    cams = np.repeat(np.arange(14), np.arange(14, 0, -1))           # 14 cameras, skewed
    groups, names = legend_groups(cams, MAX_COLORS, "camid")
    assert len(names) == MAX_COLORS <= 10
    assert names[:-1] == [f"camid {c}" for c in range(MAX_COLORS - 1)]  # the most frequent
    assert names[-1] == f"other camid values ({14 - MAX_COLORS + 1})"
    assert (groups[cams >= MAX_COLORS - 1] == MAX_COLORS - 1).all()
    few, names = legend_groups(np.array(["b", "a", "b"]), 3, "domain")
    assert names == ["domain a", "domain b"] and few.tolist() == [1, 0, 1]


# case: before/after panels look identical, title carries the command line, 'store' fallback
def test_tsne_titles_axes_and_legend(two_modality_store, tmp_path):
    from tests.plotting.test_readable_figures import _adapted_copy

    after = _adapted_copy(two_modality_store, tmp_path / "adapted.h5")
    plot = plot_tsne(two_modality_store, compare=after, max_points=100, perplexity=3,
                     color_by="pid", marker_by="modality", seed=3)
    fig = plot.figure
    left, right = fig.axes
    assert left.get_xlim() == right.get_xlim() and left.get_ylim() == right.get_ylim()
    title = fig._suptitle.get_text()
    assert title == "t-SNE of mm — f" and "reid " not in "".join(_texts(fig))
    footer = fig._supxlabel.get_text()
    assert "left: mm, right: adapted" in footer and "one joint t-SNE (seed 3)" in footer
    assert re.search(r"features moved by [0-9.]+ % on average", footer)   # what differs
    legend = right.get_legend()
    labels = [t.get_text() for t in legend.get_texts()]
    assert labels == [f"pid {p}" for p in range(1, 7)] + ["modality infrared",
                                                          "modality visible"]
    assert all(t.get_fontsize() >= 8 for t in legend.get_texts())
    fig.canvas.draw()
    box, axes_box = legend.get_window_extent(), right.get_window_extent()
    assert box.x0 >= axes_box.x1                                    # outside the axes
    assert not any(p in t for t in _texts(fig) for p in PLACEHOLDERS)


# case: the same seed gives the same map (t-SNE made faster: PCA first, fewer iterations)
def test_tsne_is_deterministic_for_a_seed():
    from reidcli.plotting.tsne import embed_2d

    feats = np.random.default_rng(0).standard_normal((60, 80)).astype(np.float32)
    np.testing.assert_array_equal(embed_2d(feats, 5, 10), embed_2d(feats, 5, 10))


# case: weight maps rendered at 955 × 5,824 px → a page-sized grid, several blocks per row
def test_weight_maps_fit_a_page():
    rng = np.random.default_rng(0)
    keys = [(layer, c) for layer in ("conv3_x", "conv4_x", "conv5_x") for c in range(6)]
    maps = {k: rng.standard_normal((4, 24, 8)) for k in keys}
    data = WeightMapPlot(maps=maps, sums={k: np.abs(m).sum(0) for k, m in maps.items()},
                         images={c: rng.random((16, 8, 3)) for c in range(6)})
    draw_weight_maps(data, "C-DPCF weight maps — fit.h5", num_maps=4)
    width, height = data.figure.get_size_inches()
    assert width <= PAGE[0] and height <= PAGE[1]
    assert len(data.figure.axes) == 18 * 6                          # every cell drawn
    per_row, cell = page_layout(18, 6, 3.0)
    assert per_row >= 2 and cell > 0.25                             # several maps per row
    ylabels = [ax.get_ylabel() for ax in data.figure.axes if ax.get_ylabel()]
    assert len(ylabels) == 18 and ylabels[1] == "conv3_x\ncam 1"
    assert width * PNG_DPI <= 2490 and height * PNG_DPI <= 3510      # A4 at 300 dpi


# case: rank-list tiles without pid/camid/distance; 'feature default' in the title
def test_ranklist_tiles_say_pid_camid_distance(tiny_store):
    plot = plot_ranklist(tiny_store, queries=2, topk=3)
    with open_store(tiny_store) as st:
        rec = st.records
    pid, cam = rec["pid"].to_numpy(), rec["camid"].to_numpy()
    axes = np.array(plot.figure.axes).reshape(2, 4)
    for i in range(2):
        q = plot.queries[i]
        assert axes[i][0].get_title() == f"query\npid {pid[q]} cam {cam[q]}"
        for j in range(3):
            g = plot.ranked[i, j]
            assert axes[i][j + 1].get_title() == \
                f"{j + 1} · d {plot.distances[i, j]:.3g}\npid {pid[g]} cam {cam[g]}"
            assert axes[i][j + 1].title.get_fontsize() <= 8
    title = plot.figure._suptitle.get_text()
    assert title == "rank lists — synthetic (hsv), feature hsv-stripes, trial 0"
    assert not any(p in t for t in _texts(plot.figure) for p in PLACEHOLDERS)


# case: without images every tile grey and '1 image file(s) missing' → placeholders that say
# so, one warning that says none was found, how many, and the first path
def test_ranklist_without_any_image_says_so(two_modality_store):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        plot = plot_ranklist(two_modality_store, queries=2, topk=3)
    messages = [str(w.message) for w in caught if "rank list" in str(w.message)]
    shown = {*plot.queries.tolist(), *plot.ranked.ravel().tolist()}
    assert len(messages) == 1
    assert messages[0].startswith(f"rank list: none of the {len(shown)} image file(s) found")
    assert f"first tried: {plot.missing[0]}" in messages[0]
    assert messages[0].endswith("— pass images_root=DIR, the folder the store's image "
                                "paths are relative to")
    for ax in plot.figure.axes:
        assert [t.get_text() for t in ax.texts] == ["image\nnot found"]


def test_ranklist_counts_some_missing_images(relative_path_store, tmp_path):
    """Some images found, some not: 'k image file(s) missing … of n'."""
    store, root = relative_path_store
    (root / "imgs" / "1_1.png").unlink()
    with pytest.warns(UserWarning, match=r"rank list: 1 image file\(s\) missing or "
                                         r"unreadable of \d+, drawn as 'image not found'"):
        plot = plot_ranklist(store, query_index=[0], topk=4, images_root=root)
    placeholders = [ax for ax in plot.figure.axes if ax.texts]
    assert len(placeholders) == 1
