"""Hand-crafted re-id descriptors: HistLBP-2580 (Xiong et al. 2014 / WARCA) and LOMO-26960.

Both take uint8 RGB images [n, H, W, 3] (the registry resizes to 128×48) and return float32
[n, D]. Everything is vectorised over the batch: per-pixel codes come from array slicing and
histograms from one ``np.bincount`` over flat (image, region, bin) indices; images are
processed in chunks of ``_BATCH`` to bound memory.

``hist-lbp`` (2,580-d; WARCA paper §4.1, docs/methods/warca.md)
    6 horizontal stripes (row ``y`` is in stripe ``6·y // H``); per stripe
    8 colour channels (R, G, B, H, S, Y, Cb, Cr) × 16 bins          = 128
    uniform LBP(8, 1)  on grey                                       =  59
    uniform LBP(16, 2) on grey                                       = 243
    → 430 per stripe, each histogram L1-normalised; 6 × 430 = 2,580.
    Layout: stripe-major, then [R, G, B, H, S, Y, Cb, Cr, LBP8, LBP16].

``lomo`` (26,960-d; Liao et al., CVPR 2015)
    128×48 image, 10×10 windows with stride 5, maximal occurrence over each row of windows,
    three scales (two 2×2 average poolings: 128×48 → 64×24 → 32×12):
    rows of windows per scale      (128−10)//5+1 = 24, (64−10)//5+1 = 11, (32−10)//5+1 = 5 → 40
    bins per row                   HSV 8·8·8 = 512, SILTP(R=3) 3⁴ = 81, SILTP(R=5) 3⁴ = 81
    → 40 · (512 + 81 + 81) = 40 · 674 = 20,480 (HSV) + 3,240 + 3,240 (SILTP) = 26,960.
    Layout (as the authors' release): [HSV | SILTP R=3 | SILTP R=5]; each group is
    scale-major, then row, then bin, and gets log(1 + x) then unit L2 norm (so the whole
    vector has norm √3).
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
from scipy import ndimage

from reidcli.errors import UsageError
from reidcli.features.color_histograms import rgb_to_hsv
from reidcli.numeric import l2_normalize_rows

#: images per internal chunk (bounds the bincount arrays to a few tens of MB)
_BATCH = 64

# ---------------------------------------------------------------- hist-lbp constants
HIST_LBP_SIZE = (128, 48)
HIST_LBP_STRIPES = 6
HIST_LBP_BINS = 16
HIST_LBP_CHANNELS = ("R", "G", "B", "H", "S", "Y", "Cb", "Cr")
HIST_LBP_LBPS = ((8, 1), (16, 2))                  # (points, radius)
HIST_LBP_STRIPE_DIM = len(HIST_LBP_CHANNELS) * HIST_LBP_BINS + 59 + 243      # 430
HIST_LBP_DIM = HIST_LBP_STRIPES * HIST_LBP_STRIPE_DIM                        # 2,580

#: grey level ties: a neighbour counts as ≥ the centre within this tolerance (0..255 scale),
#: so interpolated neighbours of a flat patch give all-ones codes despite rounding
_TIE_TOL = 1e-7

# ---------------------------------------------------------------- LOMO constants
LOMO_SIZE = (128, 48)
LOMO_BLOCK = 10
LOMO_STEP = 5
LOMO_SCALES = 3
LOMO_HSV_BINS = 8
LOMO_TAU = 0.3
LOMO_RADII = (3, 5)
LOMO_RETINEX_SIGMAS = (5.0, 20.0)
LOMO_DIM = 26_960


def _check_images(images: np.ndarray, min_hw: tuple[int, int], what: str) -> np.ndarray:
    images = np.asarray(images)
    if images.ndim != 4 or images.shape[-1] != 3:
        raise UsageError(f"{what}: images have shape {images.shape}",
                         "pass uint8 RGB images [n, H, W, 3]")
    if images.shape[1] < min_hw[0] or images.shape[2] < min_hw[1]:
        raise UsageError(f"{what}: images are {images.shape[1]}×{images.shape[2]}, "
                         f"need at least {min_hw[0]}×{min_hw[1]}",
                         "resize the images (the registry uses 128×48)")
    return images


def _grey(images: np.ndarray) -> np.ndarray:
    """RGB [..., 3] (0..255) → float64 luma [...] (ITU-R BT.601 weights), 0..255."""
    rgb = np.asarray(images, dtype=np.float64)
    return rgb[..., 0] * 0.299 + rgb[..., 1] * 0.587 + rgb[..., 2] * 0.114


# ======================================================================== uniform LBP

@lru_cache(maxsize=None)
def _uniform_lbp_mapping(points: int) -> np.ndarray:
    codes = np.arange(1 << points, dtype=np.int64)
    rotated = ((codes << 1) | (codes >> (points - 1))) & ((1 << points) - 1)   # circular shift
    changed = codes ^ rotated
    transitions = ((changed[:, None] >> np.arange(points)) & 1).sum(axis=1)    # 0/1 changes
    uniform = transitions <= 2
    mapping = np.full(codes.shape, points * (points - 1) + 2, dtype=np.int64)
    mapping[uniform] = np.arange(int(uniform.sum()))
    mapping.setflags(write=False)
    return mapping


def uniform_lbp_mapping(points: int) -> np.ndarray:
    """LBP code → uniform-pattern bin: int64 [2**points], values in [0, P(P−1)+2].

    A code is uniform when its circular bit string has at most two 0/1 transitions; there
    are P(P−1)+2 of them, numbered in increasing code order, and every non-uniform code
    goes to the last bin P(P−1)+2 — so P(P−1)+3 bins (59 for P=8, 243 for P=16).
    """
    if not 1 <= points <= 24:
        raise UsageError(f"LBP with {points} points", "use 1 to 24 neighbours")
    return _uniform_lbp_mapping(int(points))


def lbp_neighbour_offsets(points: int, radius: float) -> np.ndarray:
    """(dy, dx) of the P circular neighbours: float64 [P, 2].

    Neighbour p sits at angle 2πp/P counter-clockwise from the right (image rows grow
    downwards, so dy = −R·sin, dx = R·cos); bit p of the code is neighbour p.
    """
    angle = 2.0 * np.pi * np.arange(points) / points
    offsets = np.stack([-radius * np.sin(angle), radius * np.cos(angle)], axis=1)
    return np.round(offsets, 9) + 0.0                        # snap 1e-16 noise, no −0.0


def lbp_codes(grey: np.ndarray, points: int, radius: int) -> np.ndarray:
    """Raw LBP codes of grey images [n, H, W] → int64 [n, H−2R, W−2R].

    Only pixels whose whole neighbourhood lies in the image get a code (output pixel
    (i, j) is input pixel (i+R, j+R)). Bit p is set when neighbour p ≥ centre; neighbours
    off the pixel grid are bilinearly interpolated (standard circular LBP).
    """
    grey = np.asarray(grey, dtype=np.float64)
    n, height, width = grey.shape
    r = int(radius)
    if height < 2 * r + 1 or width < 2 * r + 1:
        raise UsageError(f"LBP radius {r} on {height}×{width} images",
                         "use images at least 2R+1 pixels high and wide")
    h, w = height - 2 * r, width - 2 * r

    def shifted(oy: int, ox: int) -> np.ndarray:             # value at (y+oy, x+ox)
        return grey[:, r + oy:r + oy + h, r + ox:r + ox + w]

    centre = shifted(0, 0) - _TIE_TOL
    codes = np.zeros((n, h, w), dtype=np.int64)
    for p, (dy, dx) in enumerate(lbp_neighbour_offsets(points, r)):
        y0, x0 = int(np.floor(dy)), int(np.floor(dx))
        fy, fx = dy - y0, dx - x0
        if fy == 0 and fx == 0:
            value = shifted(y0, x0)
        elif fy == 0:                                        # lerp form: exact on flat patches
            a = shifted(y0, x0)
            value = a + fx * (shifted(y0, x0 + 1) - a)
        elif fx == 0:
            a = shifted(y0, x0)
            value = a + fy * (shifted(y0 + 1, x0) - a)
        else:
            a, b = shifted(y0, x0), shifted(y0, x0 + 1)
            c, d = shifted(y0 + 1, x0), shifted(y0 + 1, x0 + 1)
            top = a + fx * (b - a)
            bottom = c + fx * (d - c)
            value = top + fy * (bottom - top)
        codes |= (value >= centre).astype(np.int64) << p
    return codes


# ======================================================================== hist-lbp

def _ycbcr(images: np.ndarray) -> np.ndarray:
    """uint8 RGB [..., 3] → float64 Y, Cb, Cr [..., 3] in 0..255 (BT.601 studio swing:
    Y ∈ [16, 235], Cb, Cr ∈ [16, 240])."""
    rgb = np.asarray(images, dtype=np.float64) / 255.0
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    y = 16.0 + 65.481 * r + 128.553 * g + 24.966 * b
    cb = 128.0 - 37.797 * r - 74.203 * g + 112.0 * b
    cr = 128.0 + 112.0 * r - 93.786 * g - 18.214 * b
    return np.stack([y, cb, cr], axis=-1)


def _colour_bins(images: np.ndarray, bins: int) -> np.ndarray:
    """uint8 RGB [n, H, W, 3] → int64 bin index [n, H, W, 8] for R, G, B, H, S, Y, Cb, Cr.

    R, G, B, H, S use equal bins over [0, 1]; Y over [16, 235]/255 and Cb, Cr over
    [16, 240]/255 (their full range); the top value goes to the last bin.
    """
    rgb = np.asarray(images, dtype=np.float64) / 255.0
    hsv = rgb_to_hsv(images).astype(np.float64)
    ycc = _ycbcr(images)
    unit = np.concatenate([rgb, hsv[..., :2],
                           ((ycc[..., :1] - 16.0) / 219.0),
                           ((ycc[..., 1:] - 16.0) / 224.0)], axis=-1)   # [n, H, W, 8] in [0, 1]
    return np.clip(np.floor(unit * bins), 0, bins - 1).astype(np.int64)


def _stripe_of_rows(height: int, stripes: int) -> np.ndarray:
    return (np.arange(height) * stripes) // height


def _hist_lbp_chunk(images: np.ndarray) -> np.ndarray:
    n, height, width, _ = images.shape
    stripes, bins, nch = HIST_LBP_STRIPES, HIST_LBP_BINS, len(HIST_LBP_CHANNELS)
    stripe = _stripe_of_rows(height, stripes)                                # [H]
    parts = []

    # colour: one bincount over (image, stripe, channel, bin); counts per stripe are equal
    # for every channel, so L1 = divide by the stripe's pixel count
    which = _colour_bins(images, bins)                                       # [n, H, W, 8]
    cell = (stripe[:, None, None] * nch + np.arange(nch)[None, None, :]) * bins
    flat = which + cell[None] + (np.arange(n) * stripes * nch * bins)[:, None, None, None]
    counts = np.bincount(flat.ravel(), minlength=n * stripes * nch * bins)
    counts = counts.reshape(n, stripes, nch, bins).astype(np.float64)
    parts.append((counts / counts.sum(axis=3, keepdims=True)).reshape(n, stripes, nch * bins))

    # LBP: a code belongs to stripe s when its whole (2R+1)-row neighbourhood is in s
    grey = _grey(images)
    for points, radius in HIST_LBP_LBPS:
        mapping = uniform_lbp_mapping(points)
        nbins = points * (points - 1) + 3
        codes = mapping[lbp_codes(grey, points, radius)]                     # [n, h, w]
        rows = np.arange(radius, height - radius)
        same = stripe[rows - radius] == stripe[rows + radius]
        keep_rows = rows[same] - radius                                      # interior row idx
        row_stripe = stripe[rows[same]]
        sel = codes[:, keep_rows, :]                                         # [n, h', w]
        flat = (sel + (row_stripe * nbins)[None, :, None]
                + (np.arange(n) * stripes * nbins)[:, None, None])
        counts = np.bincount(flat.ravel(), minlength=n * stripes * nbins)
        counts = counts.reshape(n, stripes, nbins).astype(np.float64)
        total = counts.sum(axis=2, keepdims=True)
        parts.append(counts / np.maximum(total, 1.0))
    return np.concatenate(parts, axis=2).reshape(n, -1)


def hist_lbp(images: np.ndarray) -> np.ndarray:
    """HistLBP descriptor: uint8 RGB [n, H, W, 3] → float32 [n, 2580] (for H, W = 128, 48).

    Per horizontal stripe (6): 16-bin L1-normalised histograms of R, G, B, H, S, Y, Cb, Cr,
    then L1-normalised uniform LBP(8,1) (59 bins) and LBP(16,2) (243 bins) histograms of the
    grey image, counting only pixels whose neighbourhood lies inside the stripe.
    Any H ≥ 30, W ≥ 5 works (same dimension); the registry resizes to 128×48.
    """
    images = _check_images(images, (HIST_LBP_STRIPES * 5, 5), "hist-lbp")
    out = np.empty((len(images), HIST_LBP_DIM), dtype=np.float32)
    for start in range(0, len(images), _BATCH):
        out[start:start + _BATCH] = _hist_lbp_chunk(images[start:start + _BATCH])
    return out


# ======================================================================== LOMO pieces

def multiscale_retinex(images: np.ndarray, sigmas=LOMO_RETINEX_SIGMAS,
                       clip: float = 0.01, alpha: float = 125.0,
                       beta: float = 46.0) -> np.ndarray:
    """Multi-scale Retinex with colour restoration (MSRCR): RGB [n, H, W, 3] (0..255) →
    float64 [n, H, W, 3] in [0, 1].

    With I = RGB + 1 (Jobson, Rahman & Woodell 1997):
      MSR_c  = mean_σ [log I_c − log(G_σ ∗ I_c)]            (Gaussian surround, edges replicated)
      CR_c   = β [log(α I_c) − log Σ_c' I_c']               (colour restoration)
      MSRCR  = MSR · CR
    then a per-image "simplest colour balance": clip at the ``clip`` and 1 − ``clip``
    quantiles over all pixels and channels and stretch linearly to [0, 1] (any gain/offset
    before the stretch cancels). An image with no dynamic range (e.g. a constant image,
    where MSR ≡ 0) maps to 0.5 everywhere.
    """
    img = np.asarray(images, dtype=np.float64) + 1.0                       # [n, H, W, 3]
    log_img = np.log(img)
    msr = np.zeros_like(img)
    for sigma in sigmas:
        surround = ndimage.gaussian_filter(img, sigma=(0, sigma, sigma, 0), mode="nearest")
        msr += log_img - np.log(surround)
    msr /= len(sigmas)
    cr = beta * (np.log(alpha * img) - np.log(img.sum(axis=-1, keepdims=True)))
    msrcr = msr * cr
    flat = msrcr.reshape(len(msrcr), -1)
    lo, hi = np.quantile(flat, [clip, 1.0 - clip], axis=1)                  # [n] each
    span = (hi - lo)[:, None, None, None]
    flat_img = span <= 1e-6
    out = (msrcr - lo[:, None, None, None]) / np.where(flat_img, 1.0, span)
    out = np.clip(out, 0.0, 1.0)
    return np.where(flat_img, 0.5, out)


def siltp_codes(grey: np.ndarray, tau: float = LOMO_TAU, radius: int = 3) -> np.ndarray:
    """Scale-invariant local ternary patterns, 4 neighbours: grey [n, H, W] → int64 [n, H, W]
    in [0, 81).

    Neighbours at distance R: right, up, left, down (weights 1, 3, 9, 27); each contributes
    1 if it is < (1−τ)·centre, 2 if > (1+τ)·centre, else 0. Image borders are replicated.
    Multiplying the image by a positive constant leaves the codes unchanged.
    """
    grey = np.asarray(grey, dtype=np.float64)
    r = int(radius)
    padded = np.pad(grey, ((0, 0), (r, r), (r, r)), mode="edge")
    _, height, width = grey.shape
    lower, upper = (1.0 - tau) * grey, (1.0 + tau) * grey
    codes = np.zeros(grey.shape, dtype=np.int64)
    for weight, (oy, ox) in zip((1, 3, 9, 27), ((0, r), (-r, 0), (0, -r), (r, 0))):
        nb = padded[:, r + oy:r + oy + height, r + ox:r + ox + width]
        codes += weight * ((nb < lower).astype(np.int64) + 2 * (nb > upper))
    return codes


def max_occurrence(codes: np.ndarray, bins: int, block: int = LOMO_BLOCK,
                   step: int = LOMO_STEP) -> np.ndarray:
    """Local maximal occurrence: codes int [n, H, W] in [0, bins) → float64 [n, rows, bins].

    Histograms of ``block``×``block`` windows whose top-left corners are (step·i, step·j)
    (windows fully inside the image); for each row i of windows the bin-wise maximum over j.
    rows = (H − block)//step + 1. Computed from step×step cell histograms (block must be a
    multiple of step).
    """
    if block % step:
        raise UsageError(f"LOMO block {block} with step {step}",
                         "use a block size that is a multiple of the step")
    codes = np.asarray(codes)
    n, height, width = codes.shape
    k = block // step
    crow, ccol = height // step, width // step
    if crow < k or ccol < k:
        return np.zeros((n, 0, bins))
    cropped = codes[:, :crow * step, :ccol * step].astype(np.int64)
    cell_r = (np.arange(crow * step) // step)[None, :, None]
    cell_c = (np.arange(ccol * step) // step)[None, None, :]
    flat = ((np.arange(n)[:, None, None] * crow + cell_r) * ccol + cell_c) * bins + cropped
    cells = np.bincount(flat.ravel(), minlength=n * crow * ccol * bins)
    cells = cells.reshape(n, crow, ccol, bins)
    rows, cols = crow - k + 1, ccol - k + 1
    windows = np.zeros((n, rows, cols, bins), dtype=np.int64)
    for a in range(k):
        for b in range(k):
            windows += cells[:, a:a + rows, b:b + cols]
    return windows.max(axis=2).astype(np.float64)


def _pool2(x: np.ndarray) -> np.ndarray:
    """2×2 average pooling over axes 1, 2 of [n, H, W, ...] (odd last row/column dropped)."""
    h, w = (x.shape[1] // 2) * 2, (x.shape[2] // 2) * 2
    x = x[:, :h, :w]
    return (x[:, 0::2, 0::2] + x[:, 1::2, 0::2] + x[:, 0::2, 1::2] + x[:, 1::2, 1::2]) / 4.0


def _log_l2(blocks: list[np.ndarray]) -> np.ndarray:
    """Concatenate [n, rows_s, bins] over scales, then log(1+x) and unit L2 norm per image."""
    group = np.log1p(np.concatenate([b.reshape(len(b), -1) for b in blocks], axis=1))
    return l2_normalize_rows(group)


def _lomo_chunk(images: np.ndarray) -> np.ndarray:
    bins = LOMO_HSV_BINS
    # HSV joint histogram on the Retinex image. As in the authors' release, the pyramid
    # pools the per-channel bin indices (2×2 mean, floored) rather than the image.
    hsv = rgb_to_hsv(multiscale_retinex(images) * 255.0).astype(np.float64)
    quant = np.minimum(np.floor(hsv * bins), bins - 1)                       # [n, H, W, 3]
    hsv_blocks = []
    for scale in range(LOMO_SCALES):
        joint = (quant[..., 2] * bins * bins + quant[..., 1] * bins + quant[..., 0])
        hsv_blocks.append(max_occurrence(joint.astype(np.int64), bins ** 3))
        if scale + 1 < LOMO_SCALES:
            quant = np.floor(_pool2(quant))
    groups = [_log_l2(hsv_blocks)]
    # SILTP on the grey original (rounded to 8 bits, as rgb2gray on uint8), per radius;
    # the pyramid pools the grey image
    grey0 = np.round(_grey(images)) / 255.0
    for radius in LOMO_RADII:
        grey, blocks = grey0, []
        for scale in range(LOMO_SCALES):
            blocks.append(max_occurrence(siltp_codes(grey, LOMO_TAU, radius), 3 ** 4))
            if scale + 1 < LOMO_SCALES:
                grey = _pool2(grey)
        groups.append(_log_l2(blocks))
    return np.concatenate(groups, axis=1)


def lomo(images: np.ndarray) -> np.ndarray:
    """LOMO descriptor: uint8 RGB [n, H, W, 3] → float32 [n, D]; D = 26,960 for 128×48.

    Groups [HSV 8×8×8 joint | SILTP(τ=0.3, R=3) | SILTP(τ=0.3, R=5)], each with log(1+x)
    and unit L2 norm; see the module docstring for how 26,960 decomposes.
    """
    images = _check_images(images, (4 * LOMO_BLOCK, 4 * LOMO_BLOCK // 2), "lomo")
    chunks = [_lomo_chunk(images[s:s + _BATCH]) for s in range(0, len(images), _BATCH)]
    if not chunks:
        return np.zeros((0, LOMO_DIM), np.float32)
    return np.concatenate(chunks, axis=0).astype(np.float32)


def lomo_dim(height: int = LOMO_SIZE[0], width: int = LOMO_SIZE[1]) -> int:
    """LOMO dimension for an image size: Σ_scales rows_s · (512 + 2·81)."""
    total, h, w = 0, height, width
    for _ in range(LOMO_SCALES):
        if h >= LOMO_BLOCK and w >= LOMO_BLOCK:
            total += ((h - LOMO_BLOCK) // LOMO_STEP + 1) * (LOMO_HSV_BINS ** 3 + 2 * 3 ** 4)
        h, w = h // 2, w // 2
    return total
