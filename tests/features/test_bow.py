"""Market-1501 Bag-of-Words descriptor (reidcli.features.bow) on known inputs, and
`reid extract --features bow` end to end on the tiny synthetic data."""
from __future__ import annotations

import h5py
import numpy as np
import pytest
from scipy.io import savemat

from reidcli.errors import InputFileError, ParameterError
from reidcli.features.bow import (COLOR_NAMES, TABLE_ROWS, BowCodebook, BowParams,
                                  ColorNameTable, assign_words, builtin_color_names,
                                  bow_vectors, color_name_probabilities, fit_bow,
                                  inverse_document_frequency, load_codebook, load_color_names,
                                  patch_descriptors, patch_layout, term_frequencies)
from tests.cli.helpers import run_cli

RED = COLOR_NAMES.index("red")
SMALL = BowParams(size=(16, 8), patch=4, stripes=2, words=4, ma=2)


def _table(array: np.ndarray) -> ColorNameTable:
    return ColorNameTable(np.asarray(array, np.float32), "test", "x")


def _random_table(seed: int = 0) -> np.ndarray:
    p = np.random.default_rng(seed).random((TABLE_ROWS, 11))
    return p / p.sum(1, keepdims=True)


def _blocky_images(n: int, size=(16, 8), seed: int = 0) -> np.ndarray:
    """uint8 [n, H, W, 3] of 4×4 constant blocks (so patches have distinct colours)."""
    h, w = size
    rng = np.random.default_rng(seed)
    small = rng.integers(0, 256, (n, h // 4, w // 4, 3), dtype=np.uint8)
    return np.repeat(np.repeat(small, 4, axis=1), 4, axis=2)


# ------------------------------------------------------------------ colour names

def test_uniform_red_image_puts_colour_name_mass_on_red():
    image = np.zeros((1, 128, 64, 3), np.uint8)
    image[..., 0] = 255
    desc = patch_descriptors(image, builtin_color_names())           # [1, 512, 11]
    assert desc.shape == (1, 512, 11)
    assert (desc[0].argmax(axis=1) == RED).all()
    probs = color_name_probabilities(image[:, :1, :1], builtin_color_names())[0, 0, 0]
    assert probs[RED] > 0.5 and probs.sum() == pytest.approx(1.0, abs=1e-5)


def test_table_row_index_is_r_plus_32g_plus_1024b():
    table = np.zeros((TABLE_ROWS, 11))
    table[:, 0] = 1
    row = (200 // 8) + 32 * (10 // 8) + 1024 * (90 // 8)
    table[row] = 0
    table[row, RED] = 1
    pixel = np.array([[[[200, 10, 90], [10, 200, 90]]]], np.uint8)    # [1, 1, 2, 3]
    probs = color_name_probabilities(pixel, _table(table))
    assert probs[0, 0, 0, RED] == 1 and probs[0, 0, 1, 0] == 1


def test_patch_descriptor_is_mean_of_square_rooted_pixel_probabilities():
    table = _random_table()
    images = np.random.default_rng(1).integers(0, 256, (2, 16, 8, 3), dtype=np.uint8)
    desc = patch_descriptors(images, _table(table), SMALL)            # [2, 8, 11]
    px = images.astype(int) // 8
    per_pixel = np.sqrt(table[px[..., 0] + 32 * px[..., 1] + 1024 * px[..., 2]])
    for i in range(2):
        for r in range(4):
            for c in range(2):
                expected = per_pixel[i, 4 * r:4 * r + 4, 4 * c:4 * c + 4].mean(axis=(0, 1))
                np.testing.assert_allclose(desc[i, r * 2 + c], expected, rtol=1e-5)


# ------------------------------------------------------------------ layout and encoding

def test_paper_layout_is_16_stripes_of_two_patch_rows_with_a_centred_mask():
    params = BowParams()
    stripe, mask = patch_layout(params)
    assert params.dim == 16 * 350 and stripe.shape == (512,)
    np.testing.assert_array_equal(np.bincount(stripe), np.full(16, 32))
    assert stripe[0] == 0 and stripe[2 * 16] == 1 and stripe[-1] == 15
    grid = mask.reshape(32, 16)
    np.testing.assert_allclose(grid, grid[::-1, ::-1])                 # symmetric
    assert grid[15, 7] == grid.max() and grid[0, 0] == grid.min()
    y, x = (0.5 / 32) * 2 - 1, (0.5 / 16) * 2 - 1
    assert grid[0, 0] == pytest.approx(np.exp(-(y * y + x * x) / 2))


def test_multiple_assignment_orders_words_and_weights_them():
    centres = np.array([[0.0, 0], [1, 0], [3, 0]])
    words, weights = assign_words(np.array([[0.9, 0.0]]), centres, ma=2)
    np.testing.assert_array_equal(words, [[1, 0]])
    np.testing.assert_array_equal(weights, [[1.0, 1.0]])
    words, weights = assign_words(np.array([[0.9, 0.0]]), centres, ma=3, ma_sigma=0.5)
    np.testing.assert_array_equal(words, [[1, 0, 2]])
    np.testing.assert_allclose(weights, np.exp(-np.array([[0.01, 0.81, 4.41]]) / 0.25))


def test_two_word_encoding_by_hand():
    """2 patches (one per stripe) of an 8×4 image, 2 words, MA=1 then MA=2."""
    c0, c1 = np.zeros(11), np.full(11, 0.3)
    centres = np.stack([c0, c1]).astype(np.float32)
    desc = np.stack([c0 + 0.01, c1 - 0.01])[None].astype(np.float32)  # [1, 2, 11]
    m = np.exp(-0.125)                                                # mask at y=±0.5, x=0
    ma1 = BowParams(size=(8, 4), patch=4, stripes=2, words=2, ma=1)
    tf = term_frequencies(desc, centres, ma1)
    np.testing.assert_allclose(tf, [[[m, 0], [0, m]]])
    ma2 = BowParams(size=(8, 4), patch=4, stripes=2, words=2, ma=2)
    np.testing.assert_allclose(term_frequencies(desc, centres, ma2), [[[m, m], [m, m]]])

    idf = np.array([0.5, 2.0])
    vec = bow_vectors(tf, idf)
    raw = np.array([np.sqrt(m) * 0.5, 0, 0, np.sqrt(m) * 2.0])        # √tf · idf
    np.testing.assert_allclose(vec[0], raw / np.linalg.norm(raw), rtol=1e-6)
    mean = np.array([0.1, 0.2, 0.0, 0.3])
    shifted = raw / np.linalg.norm(raw) - mean                        # negative evidence
    np.testing.assert_allclose(bow_vectors(tf, idf, mean)[0],
                               shifted / np.linalg.norm(shifted), rtol=1e-6)


def test_idf_is_log_images_over_images_using_the_word():
    tf = np.zeros((4, 2, 3))
    tf[:2, 0, 0] = 1                        # word 0 in 2 images
    tf[:, 1, 1] = 0.5                       # word 1 in all 4; word 2 in none
    np.testing.assert_allclose(inverse_document_frequency(tf), [np.log(2), 0, np.log(4)])


# ------------------------------------------------------------------ fitting

def _fit(seed: int, images: np.ndarray) -> BowCodebook:
    table = builtin_color_names()
    return fit_bow(patch_descriptors(images, table, SMALL), table, SMALL, seed=seed)


def test_codebook_fit_is_deterministic_for_a_seed_and_encoding_is_batch_invariant():
    images = _blocky_images(40)
    a, b, c = _fit(0, images), _fit(0, images), _fit(5, images)
    np.testing.assert_array_equal(a.centres, b.centres)
    np.testing.assert_array_equal(a.idf, b.idf)
    assert not np.array_equal(a.centres, c.centres)
    assert a.centres.shape == (4, 11) and a.mean.shape == (SMALL.dim,)
    whole = a.encode(images)
    split = np.concatenate([a.encode(images[:7]), a.encode(images[7:])])
    np.testing.assert_allclose(whole, split, atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(whole, axis=1), 1, atol=1e-5)
    # negative evidence: the training vectors (before the last normalisation) average to 0
    assert np.abs(whole.mean(0)).max() < np.abs(whole).mean()


def test_codebook_round_trips_through_an_hdf5_group(tmp_path):
    images = _blocky_images(20)
    cb = _fit(0, images)
    with h5py.File(tmp_path / "c.h5", "w") as h5:
        cb.save(h5, "bow")
    back = load_codebook(tmp_path / "c.h5")
    assert back.params == SMALL and back.color_names.sha256 == cb.color_names.sha256
    np.testing.assert_array_equal(back.encode(images), cb.encode(images))
    with pytest.raises(InputFileError, match="holds no /codebooks/other"):
        load_codebook(tmp_path / "c.h5", "other")


def test_parameters_out_of_range_name_the_parameter():
    with pytest.raises(ParameterError, match="ma=20"):
        BowParams(words=10, ma=20)
    with pytest.raises(ParameterError, match="patch=3"):
        BowParams(patch=3)


# ------------------------------------------------------------------ w2c files

def _all_red() -> np.ndarray:
    table = np.zeros((TABLE_ROWS, 11))
    table[:, RED] = 1
    return table


@pytest.mark.parametrize("suffix", [".npy", ".mat", ".txt"])
def test_w2c_file_is_used(tmp_path, suffix):
    path = tmp_path / f"w2c{suffix}"
    if suffix == ".npy":
        np.save(path, _all_red())
    elif suffix == ".mat":
        savemat(path, {"w2c": _all_red()})
    else:                                   # w2c.txt: R G B then the 11 probabilities
        bins = np.arange(TABLE_ROWS)
        rgb = np.stack([bins % 32, bins // 32 % 32, bins // 1024], 1) * 8
        np.savetxt(path, np.hstack([rgb, _all_red()]), fmt="%g")
    table = load_color_names(path)
    assert table.source == str(path) and not table.is_builtin
    images = np.random.default_rng(0).integers(0, 256, (1, 16, 8, 3), dtype=np.uint8)
    desc = patch_descriptors(images, table, SMALL)
    assert (desc[..., RED] == 1).all() and desc.sum() == desc[..., RED].sum()
    assert table.sha256 != builtin_color_names().sha256


@pytest.mark.parametrize("content, message", [
    (np.ones((100, 11)) / 11, "has shape"),
    (-_all_red(), "negative"),
    (_all_red() * 2, "rows sum"),
])
def test_malformed_w2c_is_one_line_naming_the_file(tmp_path, content, message):
    path = tmp_path / "bad.npy"
    np.save(path, content)
    with pytest.raises(InputFileError, match=message) as info:
        load_color_names(path)
    assert str(path) in info.value.message and "\n" not in info.value.message


def test_mat_without_w2c_variable_lists_what_it_holds(tmp_path):
    path = tmp_path / "other.mat"
    savemat(path, {"table": _all_red()})
    with pytest.raises(InputFileError, match="no variable w2c .variables: table"):
        load_color_names(path)


# ------------------------------------------------------------------ reid extract

def _data(root):
    return ["--dataset", "synthetic", "--root", str(root), "--option", "name=tiny"]


def test_reid_extract_bow_writes_codebook_and_provenance_and_reuses_it(
        capsys, tiny_synthetic_root, tmp_path):
    from reidcli.store import open_store

    store = tmp_path / "s.h5"
    code, _, err = run_cli(capsys, "extract", *_data(tiny_synthetic_root), "--features", "bow",
                           "--max-images", "30", "--out", store)
    assert code == 0, err
    assert "bow: 350 words × 16 stripes = 5600-d; color names: built-in approximation" in err
    with open_store(store) as st:
        feats = st.features("bow")
        assert feats.shape == (st.num_rows, 5600)                    # the paper's 16 · 350
        fitted = st.provenance["fitted"]["bow"]
        assert fitted["color_names"] == "builtin" and fitted["color_names_builtin"] is True
        assert fitted["params"]["words"] == 350 and fitted["params"]["ma"] == 10
    np.testing.assert_allclose(np.linalg.norm(feats, axis=1), 1, atol=1e-5)
    with h5py.File(store, "r") as h5:
        num_train = len(np.unique(h5["protocol/trial_0/train_idx"][()]))
        assert fitted["fit_images"] == min(30, num_train) > 0
        assert h5["codebooks/bow/centres"].shape == (350, 11)
        assert h5["features/bow"].attrs["codebook"] == "/codebooks/bow"

    again = tmp_path / "s2.h5"
    code, _, err = run_cli(capsys, "extract", *_data(tiny_synthetic_root), "--features", "bow",
                           "--codebook-from", store, "--out", again)
    assert code == 0, err
    with open_store(again) as st:
        np.testing.assert_allclose(st.features("bow"), feats, atol=1e-6)
        assert st.provenance["fitted"]["bow"]["codebook_from"] == str(store)

    plain = tmp_path / "plain.h5"
    assert run_cli(capsys, "extract", *_data(tiny_synthetic_root), "--features",
                   "hsv-stripes", "--out", plain)[0] == 0
    code, _, err = run_cli(capsys, "extract", *_data(tiny_synthetic_root), "--features", "bow",
                           "--codebook-from", plain, "--out", tmp_path / "x.h5")
    assert code == 2 and "holds no /codebooks/bow" in err and len(err.strip().splitlines()) == 1


def test_extract_with_a_w2c_file_records_it(tiny_synthetic_root, tmp_path):
    from reidcli.features.extract import extract_handcrafted_store
    from reidcli.features.layout import dataset_layout
    from reidcli.store import open_store

    table = tmp_path / "w2c.npy"
    np.save(table, _random_table(3))
    layout = dataset_layout("synthetic", tiny_synthetic_root, name="tiny", progress=False)
    out = extract_handcrafted_store(layout, tmp_path / "s.h5", ["bow"], bow_words=6,
                                    color_names=str(table), max_images=20, progress=False)
    with open_store(out) as st:
        assert st.features("bow").shape[1] == 96
        assert st.provenance["fitted"]["bow"]["color_names"] == str(table)
        assert st.provenance["fitted"]["bow"]["color_names_builtin"] is False
