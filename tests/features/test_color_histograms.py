"""HSV stripe histograms and the image-loading helper."""
from __future__ import annotations

import colorsys

import numpy as np
import pytest
from PIL import Image

from reidcli.errors import InputFileError, UsageError
from reidcli.features.color_histograms import hsv_stripe_histograms, load_images, rgb_to_hsv


def _random_images(n, height=128, width=64, seed=0):
    return np.random.default_rng(seed).integers(0, 256, (n, height, width, 3), dtype=np.uint8)


def test_shape_dtype_and_unit_norm():
    features = hsv_stripe_histograms(_random_images(3), stripes=6, bins=8)
    assert features.shape == (3, 6 * 3 * 8) and features.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(features, axis=1), 1.0, rtol=1e-6)
    assert (features >= 0).all()


def test_mirrored_image_gives_the_same_descriptor():
    images = _random_images(2, seed=1)
    mirrored = images[:, :, ::-1]
    assert not np.array_equal(images, mirrored)
    np.testing.assert_array_equal(hsv_stripe_histograms(images), hsv_stripe_histograms(mirrored))


def test_two_colour_image_lands_in_the_expected_bins():
    bins, stripes = 8, 2
    image = np.zeros((1, 12, 4, 3), np.uint8)
    image[0, :6] = (255, 0, 0)          # red top stripe: hue 0, saturation 1, value 1
    image[0, 6:] = (0, 0, 255)          # blue bottom stripe: hue 240°, saturation 1, value 1
    got = hsv_stripe_histograms(image, stripes=stripes, bins=bins)[0]
    expected = np.zeros(stripes * 3 * bins)
    blue_bin = int(240 / 360 * bins)
    for stripe, hue_bin in ((0, 0), (1, blue_bin)):
        for channel, which in ((0, hue_bin), (1, bins - 1), (2, bins - 1)):
            expected[(stripe * 3 + channel) * bins + which] = 24      # 6 rows × 4 columns
    np.testing.assert_allclose(got, expected / np.linalg.norm(expected), rtol=1e-6)
    assert blue_bin == 5


def test_grey_pixels_have_zero_hue_and_saturation():
    image = np.full((1, 6, 2, 3), 128, np.uint8)
    got = hsv_stripe_histograms(image, stripes=1, bins=8)[0].reshape(3, 8)
    assert got[0, 0] > 0 and got[1, 0] > 0 and got[2, int(128 / 255 * 8)] > 0
    assert np.count_nonzero(got) == 3


def test_matches_a_per_image_reference_across_batches():
    images = _random_images(70, height=12, width=5, seed=2)      # more than one internal batch
    features = hsv_stripe_histograms(images, stripes=3, bins=4)
    hsv = rgb_to_hsv(images)
    for i in (0, 63, 64, 69):
        ref = []
        for stripe in range(3):
            rows = slice(stripe * 4, (stripe + 1) * 4)
            for channel in range(3):
                values = hsv[i, rows, :, channel].ravel()
                which = np.minimum((values * 4).astype(int), 3)
                ref.append(np.bincount(which, minlength=4))
        ref = np.concatenate(ref).astype(float)
        np.testing.assert_allclose(features[i], ref / np.linalg.norm(ref), rtol=1e-6)


def test_rgb_to_hsv_matches_colorsys():
    colours = _random_images(1, height=20, width=20, seed=3)[0].reshape(-1, 3)
    ours = rgb_to_hsv(colours)
    ref = np.array([colorsys.rgb_to_hsv(*(c / 255.0)) for c in colours])
    np.testing.assert_allclose(ours, ref, atol=1e-6)


def test_bad_input_shapes():
    with pytest.raises(UsageError, match="pass uint8 \\[N, H, W, 3\\]"):
        hsv_stripe_histograms(np.zeros((4, 4, 3), np.uint8))
    with pytest.raises(UsageError, match="stripes=6"):
        hsv_stripe_histograms(np.zeros((1, 4, 4, 3), np.uint8))


def test_load_images(tmp_path):
    a = _random_images(1, 8, 4, seed=4)[0]
    Image.fromarray(a).save(tmp_path / "a.png")
    Image.fromarray(a[..., 0]).save(tmp_path / "b.png")          # greyscale → 3 equal channels
    Image.fromarray(_random_images(1, 6, 4)[0]).save(tmp_path / "c.png")
    both = load_images([tmp_path / "a.png", tmp_path / "b.png"])
    assert both.shape == (2, 8, 4, 3) and both.dtype == np.uint8
    np.testing.assert_array_equal(both[0], a)
    np.testing.assert_array_equal(both[1], np.repeat(a[..., :1], 3, axis=2))
    with pytest.raises(UsageError, match="different sizes"):
        load_images([tmp_path / "a.png", tmp_path / "c.png"])
    assert load_images([tmp_path / "a.png", tmp_path / "c.png"], size=(6, 4)).shape == (2, 6, 4, 3)
    with pytest.raises(InputFileError, match="cannot read image .*missing.png"):
        load_images([tmp_path / "missing.png"])
    assert load_images([], size=(8, 4)).shape == (0, 8, 4, 3)
