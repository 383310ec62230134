"""Sampling and rendering of synthetic person images (docs/datasets.md).

Everything random comes from a numpy ``Generator(PCG64(SeedSequence([...])))`` keyed by what
it describes, so an image depends only on the parameters and its own key — never on the order
in which images are generated:

* identity attributes: ``[seed, domain, 1, pid + 2]``
* camera parameters:   ``[seed, domain, 2, cam]``  (1-based camera number)
* domain look:         ``[seed, domain, 3]``
* one image:           ``[seed, domain, pid + 2, cam, frame]``
* domain style:        ``[seed, domain, 5]``  (only when ``domain_style_strength`` > 0)
* image style:         ``[seed, domain, pid + 2, cam, frame, 1]``  (same condition)

``ir_identity_cues`` and ``domain_style_strength`` (presets ``vi`` and ``dg``) draw nothing
and change nothing at 0, so every other preset renders the bytes it rendered before them.

Rendering works on whole coordinate grids: each body part is a boolean mask over the
``H × W`` pixel-centre grid, and colours (or infrared temperatures) come from a per-part
lookup table indexed by the part-label map and the clothing pattern map.

Tuning (the generator's difficulty check, docs/datasets.md: rank-1 of HSV
stripe histograms on ``default`` d0 lies in [0.15, 0.85] and reaches ≥ 0.9 with all biases
off): at the nominal photometric ranges (gains ±0.3, offset ±25, contrast ±0.25, blur 1.2)
rank-1 is 0.00–0.07 (seeds 0–2), because 8-bin hard histograms of a camera-coloured background match
other people of the same camera. The per-camera photometric amplitudes are therefore about
a third of the nominal ones (``CAMERA_*`` below; the strength ``s`` still scales them linearly),
and the per-image background is a coarse random-colour mosaic (amplitude
``background_nuisance``) rather than a flat jittered colour.
"""
from __future__ import annotations

import dataclasses
import functools
import io
from pathlib import Path

import numpy as np
from numpy.random import PCG64, Generator, SeedSequence
from PIL import Image
from scipy.ndimage import gaussian_filter

from reidcli.data.synthetic_params import DomainParams

# --- part labels of the body map -------------------------------------------------------------
BACKGROUND, HAIR, SKIN, UPPER, LOWER, SHOES, BAG = range(7)
NUM_PARTS = 7
PART_NAMES = ("background", "hair", "skin", "upper", "lower", "shoes", "bag")

VIEWS = ("front", "back", "side")
UPPER_TEXTURES = ("plain", "hstripes", "vstripes", "checker")
UPPER_TEXTURE_PROBS = (0.40, 0.25, 0.20, 0.15)
LOWER_TEXTURES = ("plain", "hstripes")
LOWER_TEXTURE_PROBS = (0.70, 0.30)
BAGS = ("none", "backpack", "handbag")
BAG_PROBS = (0.5, 0.3, 0.2)

#: the four fixed skin tones and the dark hair / shoe tones (RGB)
SKIN_TONES = np.array([[236, 200, 172], [212, 165, 128], [165, 118, 84], [102, 72, 52]], float)
HAIR_TONES = np.array([[28, 24, 22], [58, 42, 30], [22, 22, 28], [84, 64, 46]], float)
SHOE_TONES = np.array([[30, 30, 32], [70, 52, 40], [55, 55, 60]], float)

# --- render constants (tuned for docs/datasets.md) ---------------------------
BODY_TOP = 0.04            # body top at 0.04·H (+ dy)
BODY_HEIGHT = 0.92         # body height = h·scale·0.92·H
BODY_WIDTH = 0.42          # body width = 0.42·W·build
SIDE_WIDTH = 0.65          # side view narrows the body
HEAD_END, TORSO_END, LEGS_END = 0.13, 0.52, 0.95
LEG_HALF_WIDTH = 0.17      # half width of a leg bar, fraction of the body width
BACKGROUND_GREY = 125.0    # domain base background level before the domain shift
DOMAIN_BACKGROUND = 40.0   # ± domain base colour shift per channel at s_dom = 1
DOMAIN_TINT_GAIN = 0.15    # ± per-channel domain gain at s_dom = 1
DOMAIN_TINT_OFFSET = 15.0  # ± domain illumination offset at s_dom = 1
CAMERA_GAIN = 0.10         # channel gains U(1 − 0.1s, 1 + 0.1s)  [nominal 0.3; see module doc]
CAMERA_OFFSET = 8.0        # offset U(−8s, 8s)                     [nominal 25]
CAMERA_CONTRAST = 0.08     # contrast U(1 − 0.08s, 1 + 0.08s)      [nominal 0.25]
CAMERA_BLUR = 0.8          # blur σ U(0, 0.8s)                     [nominal 1.2]
CAMERA_TINT = 5.0          # ± camera background tint per channel at s_cam = 1
BACKGROUND_JITTER = 15.0   # ± per-image background colour per channel at nuisance 1
BACKGROUND_TEXTURE = 80.0  # ± per-image background mosaic colour at nuisance 1
BACKGROUND_CELL = (6, 12)  # side of the background mosaic cells (pixels), per image
GRADIENT = -20.0           # vertical background gradient (darker floor)
GRADIENT_JITTER = 15.0     # ± per-image gradient at nuisance 1
CLUTTER_FRACTION = 0.15    # clutter band = top/bottom 15 % of the image
CLUTTER_COLOUR = 30.0      # ± clutter colour per channel at s_spatial = 1
CLUTTER_TEXTURE = 20.0     # clutter texture amplitude at s_spatial = 1
DY_JITTER, DX_JITTER, SCALE_JITTER = 0.012, 0.02, 0.015   # per-image, × s_spatial
IR_STRIPE = 0.08           # ± emissivity modulation by the clothing pattern
IR_TEMPERATURES = {HAIR: 0.6, SKIN: 0.95, SHOES: 0.4}
IR_BACKGROUND_JITTER = 0.03
IR_CLUTTER = 0.25
IR_BLUR = 1.0
# near-infrared reflectance of a dyed fabric from its visible colour (ir_identity_cues > 0):
# r = NIR_FLOOR + NIR_RANGE · (w · rgb / 255) ** NIR_GAMMA — a channel mix unlike luminance
# (red and blue dyes reflect NIR, green ones and carbon blacks absorb it) and a gamma that
# lifts the dark tones, so two colours of equal brightness can differ in NIR and the reverse
NIR_WEIGHTS = np.array([0.55, 0.10, 0.35])
NIR_FLOOR, NIR_RANGE, NIR_GAMMA = 0.08, 0.87, 0.8
# domain style (domain_style_strength s_st): per-domain colour mixing, gamma, blur,
# resolution, background grating and noise, all × s_st (docs/datasets.md, "vi and dg")
STYLE_MIX = 0.45           # weight of a random channel permutation in the colour matrix
STYLE_GAIN = 0.30          # ± per-channel domain gain
STYLE_GAMMA = 0.35         # gamma = exp(U(−0.35, 0.35)·s_st)
STYLE_BLUR = 1.6           # extra blur σ U(0, 1.6·s_st)
STYLE_DOWNSAMPLE = 1.5     # extra resolution loss: factor U(1, 1 + 1.5·s_st)
STYLE_GRATING = 45.0       # background grating amplitude U(0.3, 1)·45·s_st
STYLE_NOISE = 8.0          # extra noise std U(0, 8·s_st)
JPEG_OPTIONS = dict(format="JPEG", quality=95, subsampling=0)


# --- seeding ---------------------------------------------------------------------------------
def _rng(*key: int) -> Generator:
    return Generator(PCG64(SeedSequence([int(k) for k in key])))


def identity_rng(seed: int, domain: int, pid: int) -> Generator:
    """RNG of an identity's attributes and camera subset."""
    return _rng(seed, domain, 1, pid + 2)


def camera_rng(seed: int, domain: int, cam: int) -> Generator:
    """RNG of a camera's parameters (``cam`` 1-based)."""
    return _rng(seed, domain, 2, cam)


def domain_rng(seed: int, domain: int) -> Generator:
    """RNG of a domain's look (background, tint)."""
    return _rng(seed, domain, 3)


def layout_rng(seed: int, domain: int) -> Generator:
    """RNG of a domain's distractor and junk camera assignment."""
    return _rng(seed, domain, 4)


def image_rng(seed: int, domain: int, pid: int, cam: int, frame: int) -> Generator:
    """RNG of one image (pose, background, noise; distractors also draw their person)."""
    return _rng(seed, domain, pid + 2, cam, frame)


def style_rng(seed: int, domain: int) -> Generator:
    """RNG of a domain's style nuisances (``domain_style_strength`` > 0 only)."""
    return _rng(seed, domain, 5)


def image_style_rng(seed: int, domain: int, pid: int, cam: int, frame: int) -> Generator:
    """RNG of one image's style draws (grating phase, extra noise), apart from
    :func:`image_rng` so that the other draws stay those of generator version 1."""
    return _rng(seed, domain, pid + 2, cam, frame, 1)


def _signed(rng: Generator, size=None) -> np.ndarray | float:
    """U(-1, 1) draws."""
    return rng.uniform(-1.0, 1.0, size)


# --- sampled quantities ----------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class IdentityAttributes:
    """What a person looks like, independent of camera (docs/datasets.md). Colours are RGB
    floats in 0..255, ``height`` a fraction of H, ``build`` a width factor."""

    height: float
    build: float
    skin_rgb: tuple[float, float, float]
    hair_rgb: tuple[float, float, float]
    shoe_rgb: tuple[float, float, float]
    upper_rgb: tuple[float, float, float]
    lower_rgb: tuple[float, float, float]
    upper_texture: str
    stripe_period: int
    stripe_rgb: tuple[float, float, float]
    lower_texture: str
    bag: str
    bag_rgb: tuple[float, float, float]
    emis_upper: float
    emis_lower: float
    emis_bag: float


@dataclasses.dataclass(frozen=True)
class DomainLook:
    """A domain's palette, illumination and resolution (docs/datasets.md)."""

    index: int
    hue_centre: float                           # degrees
    hue_sigma: float                            # degrees
    background_rgb: tuple[float, float, float]
    tint_gain: tuple[float, float, float]
    tint_offset: float
    downsample: float                           # ≥ 1; 1 = full resolution


@dataclasses.dataclass(frozen=True)
class DomainStyle:
    """A domain's style nuisances (``domain_style_strength`` > 0; docs/datasets.md).

    ``mix`` is the 3×3 colour matrix applied to RGB (rows = output channels), ``gamma`` the
    tone curve on 0..1, ``blur_sigma`` and ``downsample`` the optics and resolution,
    ``grating_*`` a background stripe pattern (cycles per image height, orientation in
    radians, amplitude in grey levels) and ``noise_std`` extra sensor noise.
    """

    mix: tuple[tuple[float, float, float], ...]
    gamma: float
    blur_sigma: float
    downsample: float
    grating_frequency: float
    grating_angle: float
    grating_amplitude: float
    noise_std: float


@dataclasses.dataclass(frozen=True)
class CameraParams:
    """Biases of one camera (docs/datasets.md); ``dy``/``dx`` in pixels."""

    cam: int                                    # 1-based
    modality: str
    gains: tuple[float, float, float]
    offset: float
    contrast: float
    blur_sigma: float
    dy: float
    dx: float
    scale: float
    clutter_at_top: bool
    dominant_view: str                          # "front_back" or "side"
    tint: tuple[float, float, float]
    ir_background: float
    ir_gamma: float


@dataclasses.dataclass(frozen=True)
class ImageState:
    """Per-image pose and crop (the ``images.csv`` columns view, mirror, dy, dx, scale)."""

    view: str
    mirror: bool
    dy: float
    dx: float
    scale: float
    stride: float                               # 0..1 leg stride


@dataclasses.dataclass(frozen=True)
class RenderedImage:
    """``image`` uint8 [H, W, 3]; ``parts`` uint8 [H, W] part labels (0 = background)."""

    image: np.ndarray
    parts: np.ndarray

    @property
    def body_mask(self) -> np.ndarray:
        """bool [H, W]: pixels of the person (and bag)."""
        return self.parts != BACKGROUND


def hsv_to_rgb(hsv: np.ndarray) -> np.ndarray:
    """HSV (hue in degrees, s and v in 0..1) [..., 3] → RGB floats 0..255 [..., 3]."""
    hsv = np.asarray(hsv, float)
    h = (hsv[..., 0] % 360.0) / 60.0
    s, v = hsv[..., 1], hsv[..., 2]
    sector = np.floor(h).astype(int) % 6
    f = h - np.floor(h)
    p, q, t = v * (1 - s), v * (1 - s * f), v * (1 - s * (1 - f))
    # rows: sector 0..5; columns: which of (v, q, p, t) goes to R, G, B
    choices = np.stack([v, q, p, t], axis=-1)
    order = np.array([[0, 3, 2], [1, 0, 2], [2, 0, 3], [2, 1, 0], [3, 2, 0], [0, 2, 1]])
    rgb = np.take_along_axis(choices, order[sector], axis=-1)
    return rgb * 255.0


def _palette_colour(rng: Generator, look: DomainLook) -> tuple[float, float, float]:
    hue = (look.hue_centre + rng.normal(0.0, look.hue_sigma)) % 360.0
    sat = rng.uniform(0.3, 1.0)
    val = rng.uniform(0.25, 0.95)
    return tuple(float(c) for c in hsv_to_rgb([hue, sat, val]))


def sample_identity(rng: Generator, look: DomainLook) -> IdentityAttributes:
    """Draw a person's attributes (fixed draw order; docs/datasets.md)."""
    height = rng.uniform(0.78, 0.95)
    build = rng.uniform(0.8, 1.2)
    skin = SKIN_TONES[rng.integers(len(SKIN_TONES))]
    hair = HAIR_TONES[rng.integers(len(HAIR_TONES))]
    shoe = SHOE_TONES[rng.integers(len(SHOE_TONES))]
    upper = _palette_colour(rng, look)
    lower = _palette_colour(rng, look)
    upper_texture = UPPER_TEXTURES[rng.choice(len(UPPER_TEXTURES), p=UPPER_TEXTURE_PROBS)]
    period = int(rng.integers(3, 7))
    stripe = _palette_colour(rng, look)
    lower_texture = LOWER_TEXTURES[rng.choice(len(LOWER_TEXTURES), p=LOWER_TEXTURE_PROBS)]
    bag = BAGS[rng.choice(len(BAGS), p=BAG_PROBS)]
    bag_rgb = _palette_colour(rng, look)
    emis_upper, emis_lower, emis_bag = rng.uniform(0.3, 0.85, 3)
    as_tuple = lambda a: tuple(float(x) for x in a)  # noqa: E731
    return IdentityAttributes(
        height=float(height), build=float(build), skin_rgb=as_tuple(skin),
        hair_rgb=as_tuple(hair), shoe_rgb=as_tuple(shoe), upper_rgb=upper, lower_rgb=lower,
        upper_texture=upper_texture, stripe_period=period, stripe_rgb=stripe,
        lower_texture=lower_texture, bag=bag, bag_rgb=bag_rgb, emis_upper=float(emis_upper),
        emis_lower=float(emis_lower), emis_bag=float(emis_bag))


def sample_camera_subset(rng: Generator, dom: DomainParams) -> tuple[int, ...]:
    """Sorted 1-based cameras an identity appears in: a random subset of at least
    ``cams_per_id_min`` cameras; with the VI split at least one infrared and one visible."""
    n = dom.num_cameras
    if dom.uses_vi_split:
        low = max(dom.cams_per_id_min, 2)
        k = int(rng.integers(low, n + 1))
        ir = list(dom.ir_cameras)
        vis = dom.visible_cameras()
        first = [ir[rng.integers(len(ir))], vis[rng.integers(len(vis))]]
        rest = [c for c in range(1, n + 1) if c not in first]
        more = rng.choice(rest, size=k - 2, replace=False) if k > 2 else []
        return tuple(sorted(int(c) for c in [*first, *more]))
    k = int(rng.integers(dom.cams_per_id_min, n + 1))
    return tuple(sorted(int(c) + 1 for c in rng.choice(n, size=k, replace=False)))


def sample_domain_look(seed: int, dom: DomainParams, num_domains: int) -> DomainLook:
    """A domain's hue centre, palette spread, background colour, tint and resolution."""
    rng = domain_rng(seed, dom.index)
    s = dom.domain_shift_strength
    background = BACKGROUND_GREY + DOMAIN_BACKGROUND * s * _signed(rng, 3)
    gain = 1.0 + DOMAIN_TINT_GAIN * s * _signed(rng, 3)
    offset = DOMAIN_TINT_OFFSET * s * _signed(rng)
    return DomainLook(
        index=dom.index, hue_centre=360.0 * dom.index / num_domains,
        hue_sigma=max(20.0, 180.0 * (1.0 - 0.7 * s)),
        background_rgb=tuple(float(x) for x in background),
        tint_gain=tuple(float(x) for x in gain), tint_offset=float(offset),
        downsample=float(min(2.0, 1.0 + 0.5 * dom.index * s)))


def sample_domain_style(seed: int, dom: DomainParams) -> DomainStyle | None:
    """A domain's style nuisances, or None when ``domain_style_strength`` is 0."""
    s = dom.domain_style_strength
    if s <= 0.0:
        return None
    rng = style_rng(seed, dom.index)
    permutation = np.eye(3)[rng.permutation(3)]
    weight = min(1.0, STYLE_MIX * s)
    gains = 1.0 + STYLE_GAIN * s * _signed(rng, 3)
    mix = ((1.0 - weight) * np.eye(3) + weight * permutation) * gains[:, None]
    gamma = float(np.exp(STYLE_GAMMA * s * _signed(rng)))
    blur = STYLE_BLUR * s * rng.uniform(0.0, 1.0)
    downsample = 1.0 + STYLE_DOWNSAMPLE * s * rng.uniform(0.0, 1.0)
    frequency = rng.uniform(2.0, 10.0)
    angle = rng.uniform(0.0, np.pi)
    amplitude = STYLE_GRATING * s * rng.uniform(0.3, 1.0)
    noise = STYLE_NOISE * s * rng.uniform(0.0, 1.0)
    return DomainStyle(
        mix=tuple(tuple(float(x) for x in row) for row in mix), gamma=gamma,
        blur_sigma=float(blur), downsample=float(downsample),
        grating_frequency=float(frequency), grating_angle=float(angle),
        grating_amplitude=float(amplitude), noise_std=float(noise))


def sample_camera(seed: int, dom: DomainParams, cam: int, height: int,
                  width: int) -> CameraParams:
    """One camera's photometric, spatial, viewpoint and infrared parameters (§8.5)."""
    rng = camera_rng(seed, dom.index, cam)
    s_cam, s_sp = dom.camera_bias_strength, dom.spatial_bias_strength
    gains = 1.0 + CAMERA_GAIN * s_cam * _signed(rng, 3)
    offset = CAMERA_OFFSET * s_cam * _signed(rng)
    contrast = 1.0 + CAMERA_CONTRAST * s_cam * _signed(rng)
    blur = CAMERA_BLUR * s_cam * rng.uniform(0.0, 1.0)
    sign = 1.0 if cam % 2 == 1 else -1.0
    dy = sign * rng.uniform(0.05, 0.12) * height * s_sp
    scale = 1.0 + rng.uniform(-0.15, 0.05) * s_sp
    dx = rng.uniform(-0.06, 0.06) * width * s_sp
    tint = CAMERA_TINT * s_cam * _signed(rng, 3)
    ir_background = rng.uniform(0.05, 0.25)
    ir_gamma = rng.uniform(0.8, 1.2)
    return CameraParams(
        cam=cam, modality=dom.modality(cam), gains=tuple(float(g) for g in gains),
        offset=float(offset), contrast=float(contrast), blur_sigma=float(blur), dy=float(dy),
        dx=float(dx), scale=float(scale), clutter_at_top=cam % 2 == 1,
        dominant_view="front_back" if cam % 2 == 1 else "side",
        tint=tuple(float(t) for t in tint), ir_background=float(ir_background),
        ir_gamma=float(ir_gamma))


def sample_image_state(rng: Generator, camera: CameraParams, dom: DomainParams,
                       height: int, width: int, junk: bool = False) -> ImageState:
    """Viewpoint, mirror and crop of one image (first draws of the image RNG).

    Junk images are bad detections: the crop is moved by 35–60 % of H so most of the person
    falls outside the image.
    """
    s_sp = dom.spatial_bias_strength
    p_dominant = 0.5 + 0.4 * dom.view_bias_strength
    dominant = rng.random() < p_dominant
    front = rng.random() < 0.5
    side = (camera.dominant_view == "side") == dominant
    view = "side" if side else ("front" if front else "back")
    mirror = bool(rng.random() < 0.5)
    jitter = rng.normal(0.0, 1.0, 3)
    dy = camera.dy + s_sp * DY_JITTER * height * jitter[0]
    dx = camera.dx + s_sp * DX_JITTER * width * jitter[1]
    scale = camera.scale * (1.0 + s_sp * SCALE_JITTER * jitter[2])
    stride = rng.random()
    if junk:
        dy += (1.0 if rng.random() < 0.5 else -1.0) * rng.uniform(0.35, 0.6) * height
    return ImageState(view=view, mirror=mirror, dy=float(dy), dx=float(dx),
                      scale=float(scale), stride=float(stride))


# --- geometry --------------------------------------------------------------------------------
@functools.lru_cache(maxsize=8)
def pixel_centres(height: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Row centres float [H, 1] and column centres float [1, W] (pixel i covers [i, i+1))."""
    ys = (np.arange(height, dtype=float) + 0.5)[:, None]
    xs = (np.arange(width, dtype=float) + 0.5)[None, :]
    ys.flags.writeable = False
    xs.flags.writeable = False
    return ys, xs


def body_parts(person: IdentityAttributes, state: ImageState, height: int,
               width: int) -> tuple[np.ndarray, np.ndarray]:
    """Part labels uint8 [H, W] and clothing pattern bool [H, W] of the unmirrored person.

    Body box (docs/datasets.md): top ``0.04·H + dy``, height ``h·scale·0.92·H``,
    centre ``W/2 + dx``, width ``0.42·W·build`` (×0.65 in side view). Side views face +x.
    Even cameras shift the box up by 0.05–0.12·H at spatial strength 1, so their top lies
    above the image and the crop cuts the head (the mask then starts at row 0).
    """
    ys, xs = pixel_centres(height, width)
    side = state.view == "side"
    top = BODY_TOP * height + state.dy
    body_h = person.height * state.scale * BODY_HEIGHT * height
    cx = width / 2.0 + state.dx
    base_w = BODY_WIDTH * width * person.build
    body_w = base_w * (SIDE_WIDTH if side else 1.0)
    torso_half = body_w / 2.0 if side else 0.35 * body_w
    f = (ys - top) / body_h                                    # [H, 1] body-height fraction
    dx_c = xs - cx                                             # [1, W]
    labels = np.zeros((height, width), np.uint8)

    # legs and shoes: two bars whose centres move apart with the stride
    leg_half = LEG_HALF_WIDTH * base_w
    t = np.clip((f - TORSO_END) / (LEGS_END - TORSO_END), 0.0, 1.0)
    if side:
        spread = state.stride * 0.1 * body_h * t
        centres = (spread, -spread)
    else:
        hip = 0.5 * torso_half
        spread = hip + state.stride * 0.08 * base_w * t
        centres = (spread, -spread)
    in_legs = (f >= TORSO_END) & (f < LEGS_END)
    in_shoes = (f >= LEGS_END) & (f < 1.0)
    shoe_shift = 0.25 * leg_half if side else 0.0
    for centre in centres:
        labels[in_legs & (np.abs(dx_c - centre) <= leg_half)] = LOWER
        labels[in_shoes & (np.abs(dx_c - centre - shoe_shift) <= 1.15 * leg_half)] = SHOES

    # torso, arms and hands
    labels[(f >= HEAD_END) & (f < TORSO_END) & (np.abs(dx_c) <= torso_half)] = UPPER
    if not side:
        arm_cols = (np.abs(dx_c) > torso_half) & (np.abs(dx_c) <= body_w / 2.0)
        labels[(f >= HEAD_END + 0.01) & (f < TORSO_END - 0.02) & arm_cols] = UPPER
        labels[(f >= TORSO_END - 0.02) & (f < TORSO_END + 0.03) & arm_cols] = SKIN

    # head: ellipse over 0..0.13 of the body height, hair on its upper half
    ry = 0.5 * HEAD_END * body_h
    rx = 0.8 * ry
    head_cy = top + ry
    head_cx = cx + (0.1 * base_w if side else 0.0)
    head = ((ys - head_cy) / ry) ** 2 + ((xs - head_cx) / rx) ** 2 <= 1.0
    labels[head & (ys < head_cy)] = HAIR
    labels[head & (ys >= head_cy)] = SKIN

    # bag
    if person.bag == "backpack" and state.view != "front":
        rows = (f >= 0.16) & (f < 0.46)
        if side:
            cols = (dx_c < -torso_half) & (dx_c >= -torso_half - 0.35 * base_w)
        else:
            cols = np.abs(dx_c) <= 0.75 * torso_half
        labels[rows & cols] = BAG
    elif person.bag == "handbag":
        rows = (f >= 0.47) & (f < 0.62)
        if side:
            cols = np.abs(dx_c) <= 0.12 * base_w
        else:
            cols = (dx_c > body_w / 2.0) & (dx_c <= body_w / 2.0 + 0.22 * base_w)
        labels[rows & cols] = BAG

    # clothing pattern (stripes/checker phase), per part
    period = float(person.stripe_period)
    row_phase = (np.floor((ys - top) / period) % 2).astype(bool)            # [H, 1]
    col_phase = (np.floor((xs - (cx - body_w / 2.0)) / period) % 2).astype(bool)  # [1, W]
    upper_pattern = {
        "plain": np.zeros((1, 1), bool), "hstripes": row_phase, "vstripes": col_phase,
        "checker": row_phase ^ col_phase}[person.upper_texture]
    lower_pattern = row_phase if person.lower_texture == "hstripes" else np.zeros((1, 1), bool)
    pattern = ((labels == UPPER) & upper_pattern) | ((labels == LOWER) & lower_pattern)
    return labels, pattern


# --- backgrounds -----------------------------------------------------------------------------
def _wave(rng: Generator, height: int, width: int) -> np.ndarray:
    """A random smooth 2-D wave in [-1, 1], float [H, W]."""
    ys, xs = pixel_centres(height, width)
    fy, fx = rng.uniform(0.5, 4.0), rng.uniform(0.5, 3.0)
    phase = rng.uniform(0.0, 2 * np.pi)
    return np.sin(2 * np.pi * (fy * ys / height + fx * xs / width) + phase)


def _mosaic(rng: Generator, height: int, width: int) -> np.ndarray:
    """Random colour offsets in [-1, 1] on square cells of a random size: float [H, W, 3]."""
    cell = int(rng.integers(BACKGROUND_CELL[0], BACKGROUND_CELL[1] + 1))
    cells = _signed(rng, (-(-height // cell), -(-width // cell), 3))
    rows = np.arange(height) // cell
    cols = np.arange(width) // cell
    return cells[rows[:, None], cols[None, :]]


def _clutter_rows(camera: CameraParams, height: int) -> np.ndarray:
    """bool [H, 1]: the camera's clutter band (top 15 % for odd cameras, bottom for even)."""
    ys, _ = pixel_centres(height, 1)
    band = CLUTTER_FRACTION * height
    return ys < band if camera.clutter_at_top else ys >= height - band


def visible_background(rng: Generator, look: DomainLook, camera: CameraParams,
                       dom: DomainParams, height: int, width: int) -> np.ndarray:
    """Background canvas float [H, W, 3] (0..255 scale, unclipped) with the clutter band."""
    ys, _ = pixel_centres(height, width)
    nuisance, s_sp = dom.background_nuisance, dom.spatial_bias_strength
    colour = (np.asarray(look.background_rgb) + np.asarray(camera.tint)
              + nuisance * BACKGROUND_JITTER * _signed(rng, 3))
    gradient = GRADIENT + nuisance * GRADIENT_JITTER * _signed(rng)
    canvas = colour[None, None, :] + (gradient * (ys / height - 0.5))[..., None]
    canvas = canvas + nuisance * BACKGROUND_TEXTURE * _mosaic(rng, height, width)
    clutter_colour = CLUTTER_COLOUR * _signed(rng, 3)
    clutter_texture = CLUTTER_TEXTURE * _wave(rng, height, width)
    band = _clutter_rows(camera, height)[..., None]
    clutter = s_sp * (clutter_colour + clutter_texture[..., None] * _signed(rng, 3))
    return canvas + band * clutter


def infrared_background(rng: Generator, camera: CameraParams, dom: DomainParams,
                        height: int, width: int) -> np.ndarray:
    """Background temperature float [H, W] (0..1 scale) with the clutter band."""
    jitter = dom.background_nuisance * IR_BACKGROUND_JITTER * _signed(rng)
    texture = dom.background_nuisance * IR_BACKGROUND_JITTER * _wave(rng, height, width)
    clutter = (dom.spatial_bias_strength * IR_CLUTTER * rng.uniform(0.0, 1.0)
               * (0.5 + 0.5 * _wave(rng, height, width)))
    band = _clutter_rows(camera, height)
    return camera.ir_background + jitter + texture + band * clutter


# --- rendering -------------------------------------------------------------------------------
def _colour_table(person: IdentityAttributes) -> np.ndarray:
    """float [2, NUM_PARTS, 3]: colour per (pattern phase, part)."""
    base = np.zeros((NUM_PARTS, 3))
    base[HAIR], base[SKIN], base[SHOES] = person.hair_rgb, person.skin_rgb, person.shoe_rgb
    base[UPPER], base[LOWER], base[BAG] = person.upper_rgb, person.lower_rgb, person.bag_rgb
    alt = base.copy()
    alt[UPPER] = alt[LOWER] = person.stripe_rgb
    return np.stack([base, alt])


def nir_reflectance(rgb) -> np.ndarray:
    """Near-infrared reflectance 0..1 of fabric colours, RGB floats 0..255 [..., 3] → [...]."""
    mixed = np.clip(np.asarray(rgb, float) @ NIR_WEIGHTS / 255.0, 0.0, 1.0)
    return NIR_FLOOR + NIR_RANGE * mixed ** NIR_GAMMA


def _temperature_table(person: IdentityAttributes, cues: float = 0.0) -> np.ndarray:
    """float [2, NUM_PARTS]: infrared level per (pattern phase, part).

    ``cues`` = 0: random per-identity emissivities, colours never enter (the pattern only
    modulates them by ±IR_STRIPE). ``cues`` > 0 blends in the NIR reflectance of the garment,
    stripe and bag colours (:func:`nir_reflectance`), so the clothing's brightness order and
    its stripe contrast survive the modality change while hue is lost.
    """
    base = np.zeros(NUM_PARTS)
    for part, temp in IR_TEMPERATURES.items():
        base[part] = temp
    base[UPPER], base[LOWER], base[BAG] = person.emis_upper, person.emis_lower, person.emis_bag
    table = np.stack([base, base.copy()])
    patterned = {UPPER: person.upper_texture != "plain", LOWER: person.lower_texture != "plain"}
    for part, has_pattern in patterned.items():
        if has_pattern:
            table[0, part] -= IR_STRIPE
            table[1, part] += IR_STRIPE
    if cues > 0.0:
        nir = np.zeros((2, NUM_PARTS))
        colours = {UPPER: person.upper_rgb, LOWER: person.lower_rgb, BAG: person.bag_rgb,
                   HAIR: person.hair_rgb, SHOES: person.shoe_rgb}
        for part, rgb in colours.items():
            nir[:, part] = nir_reflectance(rgb)
        for part, has_pattern in patterned.items():
            if has_pattern:
                nir[1, part] = nir_reflectance(person.stripe_rgb)
        # skin: bright in NIR whatever its tone, a little darker for darker tones
        nir[:, SKIN] = 0.75 + 0.2 * float(np.mean(person.skin_rgb)) / 255.0
        for part in (*colours, SKIN):
            table[:, part] = (1.0 - cues) * table[:, part] + cues * nir[:, part]
    return table


def _resample(image: np.ndarray, factor: float) -> np.ndarray:
    """Bilinear downsample by ``factor`` and back up: float [H, W, C] → float [H, W, C]."""
    height, width = image.shape[:2]
    small = (max(1, round(width / factor)), max(1, round(height / factor)))
    out = np.empty_like(image, dtype=np.float32)
    for c in range(image.shape[2]):
        channel = Image.fromarray(image[..., c].astype(np.float32), mode="F")
        down = channel.resize(small, Image.BILINEAR)
        out[..., c] = np.asarray(down.resize((width, height), Image.BILINEAR))
    return out


def _grating(style: DomainStyle, style_rng_: Generator, height: int,
             width: int) -> np.ndarray:
    """The domain's background grating float [H, W, 1] (grey levels), random phase."""
    ys, xs = pixel_centres(height, width)
    u = np.cos(style.grating_angle) * ys + np.sin(style.grating_angle) * xs
    phase = style_rng_.uniform(0.0, 2 * np.pi)
    wave = np.sign(np.sin(2 * np.pi * style.grating_frequency * u / height + phase))
    return (style.grating_amplitude * wave)[..., None]


def _apply_style(image: np.ndarray, style: DomainStyle) -> np.ndarray:
    """Colour matrix, gamma, blur and resolution of a domain: float [H, W, 3] (0..255)."""
    image = np.clip(image, 0.0, 255.0) @ np.asarray(style.mix).T
    image = 255.0 * (np.clip(image, 0.0, 255.0) / 255.0) ** style.gamma
    if style.blur_sigma > 0.05:
        image = gaussian_filter(image, sigma=(style.blur_sigma, style.blur_sigma, 0),
                                mode="nearest")
    if style.downsample > 1.0:
        image = _resample(image, style.downsample)
    return image


def render_image(rng: Generator, person: IdentityAttributes, state: ImageState,
                 camera: CameraParams, look: DomainLook, dom: DomainParams,
                 height: int, width: int, style: DomainStyle | None = None,
                 style_rng_: Generator | None = None) -> RenderedImage:
    """Render one image (docs/datasets.md) from the image RNG after its state draws.

    ``style`` (with its per-image ``style_rng_``) adds the domain's style nuisances to
    visible images: a grating on the background, then colour matrix, gamma, blur,
    resolution and extra noise. Returns the uint8 [H, W, 3] image (3 equal channels for
    infrared cameras) and the part labels uint8 [H, W] after mirroring.
    """
    infrared = camera.modality == "infrared"
    styled = style is not None and not infrared
    if infrared:
        canvas = infrared_background(rng, camera, dom, height, width)[..., None]
    else:
        canvas = visible_background(rng, look, camera, dom, height, width)
    if styled:
        canvas = canvas + _grating(style, style_rng_, height, width)
    labels, pattern = body_parts(person, state, height, width)
    table = (_temperature_table(person, dom.ir_identity_cues)[..., None] if infrared
             else _colour_table(person))
    person_pixels = table[pattern.astype(np.intp), labels]                  # [H, W, C]
    image = np.where((labels != BACKGROUND)[..., None], person_pixels, canvas)
    if state.mirror:
        image, labels = image[:, ::-1], labels[:, ::-1]
    if infrared:
        image = 255.0 * np.clip(image, 0.0, 1.0) ** camera.ir_gamma
        image = gaussian_filter(image, sigma=(IR_BLUR, IR_BLUR, 0), mode="nearest")
        noise = rng.normal(0.0, 1.0, (height, width, 1))
    else:
        image = (image - 128.0) * camera.contrast + 128.0
        image = image * np.asarray(camera.gains) + camera.offset
        if camera.blur_sigma > 0.05:
            sigma = camera.blur_sigma
            image = gaussian_filter(image, sigma=(sigma, sigma, 0), mode="nearest")
        image = image * np.asarray(look.tint_gain) + look.tint_offset
        if look.downsample > 1.0:
            image = _resample(image, look.downsample)
        noise = rng.normal(0.0, 1.0, (height, width, 3))
    image = image + dom.noise_std * noise
    if styled:
        image = _apply_style(image, style)
        image = image + style.noise_std * style_rng_.normal(0.0, 1.0, (height, width, 3))
    pixels = np.clip(np.rint(image), 0, 255).astype(np.uint8)
    if pixels.shape[2] == 1:
        pixels = np.repeat(pixels, 3, axis=2)
    return RenderedImage(image=np.ascontiguousarray(pixels),
                         parts=np.ascontiguousarray(labels))


def encode_jpeg(image: np.ndarray) -> bytes:
    """JPEG bytes of a uint8 [H, W, 3] image: quality 95, 4:4:4 chroma (docs/datasets.md)."""
    buffer = io.BytesIO()
    Image.fromarray(image, mode="RGB").save(buffer, **JPEG_OPTIONS)
    return buffer.getvalue()


def write_jpeg(image: np.ndarray, path: str | Path) -> None:
    """Write :func:`encode_jpeg` bytes to ``path``."""
    Path(path).write_bytes(encode_jpeg(image))
