"""Hand-crafted color-grid maps and `reid extract --maps`."""
from __future__ import annotations

import numpy as np

from reidcli.features.color_maps import CHANNELS, GRID, IMAGE_SIZE, color_grid_maps
from reidcli.store import open_store
from tests.cli.helpers import run_cli


def test_shape_and_per_cell_values():
    img = np.zeros((1, *IMAGE_SIZE, 3), dtype=np.uint8)
    img[0, :4, :4] = (255, 0, 0)                    # top-left cell pure red
    img[0, 4:8, :4, :] = 128                        # the cell below mid grey
    maps = color_grid_maps(img)
    assert maps.shape == (1, CHANNELS, *GRID) and maps.dtype == np.float32
    red, grey, black = maps[0, :, 0, 0], maps[0, :, 1, 0], maps[0, :, 5, 5]
    np.testing.assert_allclose(red[:3], [1, 0, 0])            # RGB means
    np.testing.assert_allclose(red[3:6], 0, atol=1e-6)         # uniform cell: no spread
    np.testing.assert_allclose(red[6:10], [1, 0, 1, 1], atol=1e-6)   # hue (1,0)·s, s, v
    np.testing.assert_allclose(grey[8], 0.0, atol=1e-6)       # s = 0 for grey
    np.testing.assert_allclose(red[12:], [0, 0, 0, 1])        # value histogram: top bin
    np.testing.assert_allclose(black[12:], [1, 0, 0, 0])
    np.testing.assert_allclose(black[:12], 0, atol=1e-6)
    assert grey[11] > 0                                       # vertical edge red→grey


def test_cells_are_local():
    rng = np.random.default_rng(0)
    a = rng.integers(0, 256, (1, *IMAGE_SIZE, 3), dtype=np.uint8)
    b = a.copy()
    b[0, 40:44, 12:16] = 255 - b[0, 40:44, 12:16]           # change one cell (row 10, col 3)
    diff = np.abs(color_grid_maps(a) - color_grid_maps(b)).sum(1)[0]
    changed = np.argwhere(diff > 1e-6)
    assert {tuple(c) for c in changed} <= {(10, 3), (9, 3), (10, 2)}  # itself + gradient nbrs
    assert (10, 3) in {tuple(c) for c in changed}


def test_extract_cli_writes_maps_and_features(capsys, tmp_path, tiny_synthetic_root):
    out = tmp_path / "s.h5"
    code, _, err = run_cli(capsys, "extract", "--dataset", "synthetic", "--root",
                           tiny_synthetic_root, "--option", "name=tiny", "--features",
                           "hsv-stripes", "--maps", "color-grid", "--out", out)
    assert code == 0, err
    with open_store(out) as st:
        assert st.convmap_layers == ["color-grid"]
        assert st.convmap_shape("color-grid") == (CHANNELS, *GRID)
        assert st.feature_names == ["hsv-stripes"]
        assert st.convmaps("color-grid", np.array([0])).dtype == np.float16
        assert "--maps" in st.provenance["command"]
    code, _, err = run_cli(capsys, "extract", "--dataset", "synthetic", "--root",
                           tiny_synthetic_root, "--option", "name=tiny", "--maps", "sift",
                           "--out", tmp_path / "x.h5")
    assert code == 2 and "unknown map(s) sift" in err and not (tmp_path / "x.h5").exists()
    code, _, err = run_cli(capsys, "extract", "--dataset", "synthetic", "--model", "run",
                           "--out", tmp_path / "y.h5")
    assert code == 2 and "--model run: no such file" in err
    code, _, err = run_cli(capsys, "extract", "--dataset", "synthetic", "--root",
                           tiny_synthetic_root, "--option", "name=tiny", "--out", out)
    assert code == 2 and "already exists" in err
