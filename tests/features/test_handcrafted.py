"""Hand-crafted descriptors: HistLBP-2580 and LOMO-26960 (reidcli.features.handcrafted)."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import ndimage

from reidcli.errors import UsageError
from reidcli.features import handcrafted as hc
from reidcli.features.extract import HANDCRAFTED


def _images(n, height=128, width=48, seed=0):
    return np.random.default_rng(seed).integers(0, 256, (n, height, width, 3), dtype=np.uint8)


# ----------------------------------------------------------------------------- uniform LBP

@pytest.mark.parametrize("points, bins", [(8, 59), (16, 243)])
def test_uniform_mapping_has_p_p_minus_1_plus_3_bins(points, bins):
    mapping = hc.uniform_lbp_mapping(points)
    assert mapping.shape == (2 ** points,)
    assert np.array_equal(np.unique(mapping), np.arange(bins))
    # independent uniformity check: count 0/1 changes around the circular bit string
    strings = [format(c, f"0{points}b") for c in range(2 ** points)]
    uniform = np.array([sum(s[i] != s[i - 1] for i in range(points)) <= 2 for s in strings])
    assert uniform.sum() == bins - 1
    assert (mapping[~uniform] == bins - 1).all()                 # non-uniform → last bin
    assert np.array_equal(mapping[uniform], np.arange(bins - 1))  # uniform in code order
    assert mapping[0] == 0 and mapping[2 ** points - 1] == bins - 2
    assert mapping[0b101] == bins - 1 and mapping[0b111] == 6     # after 0, 1, 2, 3, 4, 6


def test_lbp_codes_of_constant_patches_are_all_ones():
    grey = np.full((2, 7, 9), 77.3)
    for points, radius in ((8, 1), (16, 2)):
        codes = hc.lbp_codes(grey, points, radius)
        assert codes.shape == (2, 7 - 2 * radius, 9 - 2 * radius)
        assert (codes == 2 ** points - 1).all()                  # interpolated ones included
        assert (hc.uniform_lbp_mapping(points)[codes] == points * (points - 1) + 1).all()


def test_lbp_codes_of_known_tiny_patches():
    def patch(size, **bright):
        g = np.zeros((1, size, size))
        c = size // 2
        g[0, c, c] = 10.0
        for where, value in bright.items():
            if where == "right":
                g[0, c, c + 1] = value
            elif where == "below":
                g[0, c + 1, c] = value
            elif where == "above":
                g[0, c - 1, c] = value
            elif where == "right_column":
                g[0, :, -1] = value
        return g

    assert hc.lbp_codes(patch(3, right=20.0), 8, 1)[0, 0, 0] == 1          # bit 0: (0, +1)
    assert hc.lbp_codes(patch(3, above=20.0), 8, 1)[0, 0, 0] == 1 << 2     # bit 2: (−1, 0)
    assert hc.lbp_codes(patch(3, below=20.0), 8, 1)[0, 0, 0] == 1 << 6     # bit 6: (+1, 0)
    # equal neighbour counts as ≥; interpolated diagonals of a 10-vs-0 patch stay below
    assert hc.lbp_codes(patch(3, right=10.0), 8, 1)[0, 0, 0] == 1
    # (16, 2): column x=+2 at 20 → neighbour 0 (x=2) and 1, 15 (x=1.848: 0.848·20 ≥ 10)
    # are set, 2 and 14 (x=1.414: 0.414·20 < 10) are not
    code = hc.lbp_codes(patch(5, right_column=20.0), 16, 2)[0, 0, 0]
    assert code == 1 + 2 + (1 << 15)
    assert hc.uniform_lbp_mapping(16)[code] < 242                           # uniform


@pytest.mark.parametrize("points, radius", [(8, 1), (16, 2)])
def test_lbp_codes_match_a_bilinear_reference(points, radius):
    grey = np.random.default_rng(3).uniform(0, 255, (2, 9, 8))
    codes = hc.lbp_codes(grey, points, radius)
    offsets = hc.lbp_neighbour_offsets(points, radius)
    for i in range(2):
        for y in range(radius, 9 - radius):
            for x in range(radius, 8 - radius):
                coords = np.array([y + offsets[:, 0], x + offsets[:, 1]])
                values = ndimage.map_coordinates(grey[i], coords, order=1)
                expected = int(((values >= grey[i, y, x]) * (1 << np.arange(points))).sum())
                assert codes[i, y - radius, x - radius] == expected


# ----------------------------------------------------------------------------- hist-lbp

def test_hist_lbp_shape_dtype_and_per_histogram_l1():
    feats = hc.hist_lbp(_images(3))
    assert feats.shape == (3, 2580) and feats.dtype == np.float32 and hc.HIST_LBP_DIM == 2580
    stripes = feats.reshape(3, 6, 430)
    colour = stripes[..., :128].reshape(3, 6, 8, 16)
    np.testing.assert_allclose(colour.sum(-1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(stripes[..., 128:187].sum(-1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(stripes[..., 187:].sum(-1), 1.0, rtol=1e-5)
    assert (feats >= 0).all()


def test_hist_lbp_of_a_flat_red_image():
    image = np.zeros((1, 128, 48, 3), np.uint8)
    image[..., 0] = 255
    stripes = hc.hist_lbp(image).reshape(6, 430)
    # R=1, G=B=0, H=0, S=1, Y=81.5 → bin 4 of [16,235], Cb=90.2 → 5, Cr=240 → 15 of [16,240]
    hot = {0: 15, 1: 0, 2: 0, 3: 0, 4: 15, 5: 4, 6: 5, 7: 15}
    expected = np.zeros(430)
    for channel, b in hot.items():
        expected[channel * 16 + b] = 1.0
    expected[128 + 57] = 1.0                 # flat grey → all-ones code → last uniform bin
    expected[187 + 241] = 1.0
    for s in range(6):
        np.testing.assert_allclose(stripes[s], expected, atol=1e-6)


def _mirror_bins(points):
    """Uniform bin of a code → bin of the same pattern seen in a horizontal mirror."""
    mapping = hc.uniform_lbp_mapping(points)
    codes = np.arange(2 ** points)
    mirrored = np.zeros_like(codes)
    for p in range(points):                      # neighbour p ↔ neighbour (P/2 − p) mod P
        mirrored |= ((codes >> p) & 1) << ((points // 2 - p) % points)
    perm = np.zeros(points * (points - 1) + 3, dtype=np.int64)
    perm[mapping[codes]] = mapping[mirrored]
    return perm


def test_mirrored_image_gives_equal_stripe_histograms():
    images = _images(2, seed=1)
    a = hc.hist_lbp(images).reshape(2, 6, 430)
    b = hc.hist_lbp(images[:, :, ::-1]).reshape(2, 6, 430)
    assert not np.array_equal(a, b)                         # LBP bins move under mirroring…
    np.testing.assert_array_equal(a[..., :128], b[..., :128])   # colour: identical
    for start, points in ((128, 8), (187, 16)):             # …onto their mirrored patterns
        nbins = points * (points - 1) + 3
        ha, hb = a[..., start:start + nbins], b[..., start:start + nbins]
        moved = np.zeros_like(ha)
        moved[..., _mirror_bins(points)] = ha
        np.testing.assert_array_equal(moved, hb)


def test_lbp_counts_only_pixels_inside_their_stripe():
    # a sharp horizontal edge exactly on the stripe 0/1 border (row 22) must not show up
    # as an edge pattern in either stripe: both stay flat (all-ones bin)
    image = np.zeros((1, 128, 48, 3), np.uint8)
    image[0, 22:] = 200
    stripes = hc.hist_lbp(image).reshape(6, 430)
    assert stripes[0, 128 + 57] == pytest.approx(1.0) and stripes[1, 128 + 57] == 1.0
    assert stripes[0, 187 + 241] == pytest.approx(1.0) and stripes[1, 187 + 241] == 1.0


# ----------------------------------------------------------------------------- LOMO pieces

def test_retinex_of_a_constant_image_is_flat_and_gain_invariant():
    flat = np.full((2, 20, 12, 3), 90, np.uint8)
    flat[1] = (200, 30, 10)
    out = hc.multiscale_retinex(flat)
    assert out.shape == flat.shape
    np.testing.assert_array_equal(out, 0.5)
    images = np.random.default_rng(4).integers(0, 128, (2, 40, 20, 3)).astype(np.uint8)
    ret = hc.multiscale_retinex(images)
    assert ret.min() == 0.0 and ret.max() == 1.0 and ret.std() > 0.1
    # I + 1 doubles exactly for 2x + 1: MSR and colour restoration are scale invariant
    np.testing.assert_allclose(hc.multiscale_retinex(2 * images + 1), ret, atol=1e-9)


def test_siltp_codes_on_a_tiny_input():
    grey = np.array([[[0.0, 60.0, 0.0],
                      [110.0, 100.0, 140.0],
                      [0.0, 0.0, 0.0]]])
    codes = hc.siltp_codes(grey, tau=0.3, radius=1)
    # centre 100, band [70, 130]: right 140 → 2, up 60 → 1, left 110 → 0, down 0 → 1
    assert codes[0, 1, 1] == 2 * 1 + 1 * 3 + 0 * 9 + 1 * 27
    # corner (0, 0) = 0: band [0, 0]; right 60 → 2, up/left replicate itself → 0, down 110 → 2
    assert codes[0, 0, 0] == 2 + 2 * 27
    assert codes.shape == grey.shape and codes.max() < 81
    np.testing.assert_array_equal(hc.siltp_codes(np.full((1, 4, 4), 0.3)), 0)
    g = np.random.default_rng(5).uniform(0.1, 1, (2, 16, 12))
    np.testing.assert_array_equal(hc.siltp_codes(g, radius=3), hc.siltp_codes(2.5 * g, radius=3))


def test_max_occurrence_matches_a_window_loop():
    codes = np.random.default_rng(6).integers(0, 7, (2, 33, 24))
    got = hc.max_occurrence(codes, 7, block=10, step=5)
    rows = (33 - 10) // 5 + 1
    assert got.shape == (2, rows, 7)
    for i in range(2):
        for r in range(rows):
            hists = [np.bincount(codes[i, 5 * r:5 * r + 10, 5 * c:5 * c + 10].ravel(),
                                 minlength=7) for c in range((24 - 10) // 5 + 1)]
            np.testing.assert_array_equal(got[i, r], np.max(hists, axis=0))


def test_lomo_dimension_and_group_normalisation():
    assert hc.lomo_dim(128, 48) == 26_960 == hc.LOMO_DIM
    assert (24 + 11 + 5) * (8 ** 3 + 2 * 3 ** 4) == 26_960
    feats = hc.lomo(_images(2, seed=7))
    assert feats.shape == (2, 26_960) and feats.dtype == np.float32
    hsv, s3, s5 = np.split(feats, [20_480, 20_480 + 3_240], axis=1)
    for group in (hsv, s3, s5):
        np.testing.assert_allclose(np.linalg.norm(group, axis=1), 1.0, rtol=1e-5)
    assert (feats >= 0).all()
    assert hc.lomo(_images(1, 64, 32)).shape == (1, hc.lomo_dim(64, 32))


# ----------------------------------------------------------------------------- registry, speed

def test_registered_and_vectorised_over_chunks(monkeypatch):
    # the descriptors' cost model: one vectorised call per chunk of _BATCH images, never a
    # Python loop per image; chunking does not change a row (images/s, measured, with
    # `python -m benchmarks.handcrafted_speed`)
    images = _images(hc._BATCH + 1, seed=8)
    for name, dim, chunk_fn in (("hist-lbp", 2580, "_hist_lbp_chunk"),
                                ("lomo", 26_960, "_lomo_chunk")):
        desc = HANDCRAFTED[name]
        assert desc.size == (128, 48)
        chunks = []
        real = getattr(hc, chunk_fn)

        def counted(batch, real=real, chunks=chunks):
            chunks.append(len(batch))
            return real(batch)

        monkeypatch.setattr(hc, chunk_fn, counted)
        feats = desc.compute(images)
        assert chunks == [hc._BATCH, 1], (name, chunks)
        assert feats.shape == (len(images), dim) and feats.dtype == np.float32
        assert np.isfinite(feats).all()
        np.testing.assert_allclose(feats[:2], desc.compute(images[:2]), rtol=1e-5, atol=1e-7)


def test_bad_shapes_are_usage_errors():
    with pytest.raises(UsageError):
        hc.hist_lbp(np.zeros((2, 128, 48), np.uint8))
    with pytest.raises(UsageError):
        hc.lomo(np.zeros((1, 16, 8, 3), np.uint8))
