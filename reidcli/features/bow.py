"""Bag-of-Words colour descriptor of the Market-1501 paper (docs/methods/bow.md).

Zheng et al., "Scalable Person Re-identification: A Benchmark", ICCV 2015, §4 ("BoW"):

1. each image (128×64) is cut into non-overlapping 4×4 patches (32 × 16 = 512 patches);
   every pixel gets its 11 Colour-Names probabilities (Van de Weijer et al. 2009, the ``w2c``
   lookup table over 32×32×32 RGB bins), square-rooted, and a patch is the mean of its
   pixels → ``patch_descriptors`` [n, 512, 11];
2. a codebook of K words (K = 350) is learned with k-means on training patches;
3. every patch votes for its ``ma`` = 10 nearest words (multiple assignment), its vote
   weighted by a 2-D Gaussian mask centred on the image (background suppression);
4. votes are counted per horizontal stripe (16 stripes) → tf [n, 16, K];
5. burstiness: each term is divided by √tf (so √tf remains), then multiplied by the word's
   IDF, log(N / n_i) over the N training images;
6. stripes are concatenated (16·K = 5,600-d), L2-normalised; negative evidence subtracts the
   mean training vector, and the result is L2-normalised again (so Euclidean distance and
   dot product rank alike).

Every function is vectorised over the batch (``np.bincount`` over flat (image, stripe, word)
indices; nearest words from one distance matrix per chunk of images). Values the paper does
not pin down are listed in docs/methods/bow.md.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np

from reidcli.errors import InputFileError, ParameterError, UsageError
from reidcli.naming import param
from reidcli.numeric import l2_normalize_rows
from reidcli.params import check_seed
from reidcli.store.schema import CODEBOOKS

#: the 11 basic colour terms, in the column order of Van de Weijer's ``w2c`` table
COLOR_NAMES = ("black", "blue", "brown", "grey", "green", "orange", "pink", "purple", "red",
               "white", "yellow")
#: RGB bins of the lookup table: 32 per channel (bin = value // 8)
TABLE_BINS = 32
TABLE_ROWS = TABLE_BINS ** 3
#: name of the built-in approximation (not Van de Weijer's learned table)
BUILTIN = "builtin"
#: group of a store (or of a stand-alone file) holding fitted codebooks: /codebooks/<feature>
CODEBOOK_GROUP = CODEBOOKS
#: images per internal chunk of the encoder (bounds the [chunk·P, K] distance matrix)
_CHUNK = 64

# sRGB prototypes of the 11 colour names for the built-in table (COLOR_NAMES order)
_PROTOTYPES_RGB = np.array([
    (20, 20, 20), (40, 70, 200), (120, 70, 30), (128, 128, 128), (40, 150, 40),
    (250, 140, 20), (250, 160, 190), (130, 50, 160), (210, 30, 30), (245, 245, 245),
    (245, 230, 40)], dtype=np.float64)
#: temperature (CIELab ΔE units) of the built-in soft assignment
BUILTIN_TEMPERATURE = 15.0


# ================================================================== colour-name table

@dataclasses.dataclass(frozen=True)
class ColorNameTable:
    """RGB bin → 11 colour-name probabilities.

    ``table`` float32 [32768, 11]; row ``r//8 + 32·(g//8) + 1024·(b//8)`` (Van de Weijer's
    order), columns in :data:`COLOR_NAMES` order, rows summing to 1. ``source`` is
    ``"builtin"`` or the file it was read from; ``sha256`` identifies the values.
    """

    table: np.ndarray
    source: str
    sha256: str

    @property
    def is_builtin(self) -> bool:
        return self.source == BUILTIN

    def describe(self) -> str:
        """One line naming the table (what ``reid extract`` prints)."""
        if self.is_builtin:
            return ("built-in approximation (11 CIELab prototypes, soft assignment "
                    f"T={BUILTIN_TEMPERATURE:g}; NOT Van de Weijer's learned w2c), "
                    f"sha256 {self.sha256[:12]}")
        return f"w2c table {self.source}, sha256 {self.sha256[:12]}"


def _table_digest(table: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(table, dtype="<f4").tobytes()).hexdigest()


def _srgb_to_lab(rgb: np.ndarray) -> np.ndarray:
    """sRGB in 0..255 [..., 3] → CIELab (D65) [..., 3]."""
    c = np.asarray(rgb, dtype=np.float64) / 255.0
    lin = np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)
    xyz = lin @ np.array([[0.4124564, 0.2126729, 0.0193339],
                          [0.3575761, 0.7151522, 0.1191920],
                          [0.1804375, 0.0721750, 0.9503041]])
    xyz = xyz / np.array([0.95047, 1.0, 1.08883])
    eps, kappa = 216 / 24389, 24389 / 27
    f = np.where(xyz > eps, np.cbrt(xyz), (kappa * xyz + 16) / 116)
    return np.stack([116 * f[..., 1] - 16, 500 * (f[..., 0] - f[..., 1]),
                     200 * (f[..., 1] - f[..., 2])], axis=-1)


def builtin_color_names() -> ColorNameTable:
    """The built-in stand-in for ``w2c``: float32 [32768, 11].

    Each RGB bin's centre (8·i + 3.5) is converted to CIELab and softly assigned to 11
    hand-picked sRGB prototypes of the colour names: p ∝ exp(−ΔE² / (2·T²)), T = 15. It
    is NOT the table Van de Weijer et al. learned from Google images; stores record which
    table they used (docs/methods/bow.md, "The w2c table").
    """
    centres = np.arange(TABLE_BINS) * 8 + 3.5
    b, g, r = np.meshgrid(centres, centres, centres, indexing="ij")   # row = r + 32g + 1024b
    lab = _srgb_to_lab(np.stack([r, g, b], axis=-1).reshape(-1, 3))
    proto = _srgb_to_lab(_PROTOTYPES_RGB)
    d2 = ((lab[:, None, :] - proto[None, :, :]) ** 2).sum(-1)
    logits = -d2 / (2 * BUILTIN_TEMPERATURE ** 2)
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    table = (p / p.sum(axis=1, keepdims=True)).astype(np.float32)
    return ColorNameTable(table, BUILTIN, _table_digest(table))


def _bad_table(path: Path, what: str) -> InputFileError:
    return InputFileError(f"color-name table {path}: {what}",
                          f"give Van de Weijer's w2c.mat (variable w2c, 32768×11), w2c.txt "
                          f"(32768×14: R G B + 11) or a .npy [32768, 11], or "
                          f"{param('color_names', BUILTIN)}")


def validate_color_table(array: Any, path: Path) -> np.ndarray:
    """A loaded table → float32 [32768, 11] with rows summing to 1.

    Accepts [32768, 11] or [32768, 14] (``w2c.txt``: the bin's R, G, B then the 11
    probabilities). Raises InputFileError naming ``path`` for any other shape, negative or
    non-finite values, or rows whose sum is not 1 within 5 % (then renormalised exactly).
    """
    arr = np.asarray(array)
    if arr.dtype == object or not np.issubdtype(arr.dtype, np.number):
        raise _bad_table(path, f"holds {arr.dtype} values, not numbers")
    if arr.ndim != 2 or arr.shape[0] != TABLE_ROWS or arr.shape[1] not in (11, 14):
        raise _bad_table(path, f"has shape {arr.shape}, expected ({TABLE_ROWS}, 11) or "
                               f"({TABLE_ROWS}, 14)")
    arr = arr[:, -11:].astype(np.float64)
    if not np.isfinite(arr).all() or (arr < 0).any():
        raise _bad_table(path, "has negative or non-finite probabilities")
    sums = arr.sum(axis=1)
    if np.abs(sums - 1).max() > 0.05:
        raise _bad_table(path, f"rows sum to {sums.min():.3g}…{sums.max():.3g}, not 1")
    return (arr / sums[:, None]).astype(np.float32)


def load_color_names(source: str | os.PathLike) -> ColorNameTable:
    """``"builtin"`` or a file: ``.mat`` (variable ``w2c``), ``.npy`` or ``.txt``."""
    if str(source) == BUILTIN:
        return builtin_color_names()
    path = Path(source)
    if not path.is_file():
        raise InputFileError(f"color-name table {path} does not exist",
                             f"give the path of w2c.mat/.npy/.txt or "
                             f"{param('color_names', BUILTIN)}")
    suffix = path.suffix.lower()
    try:
        if suffix == ".npy":
            array = np.load(path, allow_pickle=False)
        elif suffix == ".mat":
            from scipy.io import loadmat
            content = loadmat(path)
            if "w2c" not in content:
                names = ", ".join(k for k in content if not k.startswith("__")) or "none"
                raise _bad_table(path, f"has no variable w2c (variables: {names})")
            array = content["w2c"]
        elif suffix == ".txt":
            array = np.loadtxt(path, dtype=np.float64, ndmin=2)
        else:
            raise _bad_table(path, f"has an unknown suffix {suffix!r}")
    except InputFileError:
        raise
    except NotImplementedError:                        # MATLAB v7.3 (HDF5) .mat
        raise _bad_table(path, "is a MATLAB v7.3 file; save it with -v7 or as .npy") \
            from None
    except (OSError, ValueError) as exc:
        raise _bad_table(path, f"cannot be read ({exc.__class__.__name__})") from None
    table = validate_color_table(array, path)
    return ColorNameTable(table, str(path), _table_digest(table))


# ================================================================== parameters

@dataclasses.dataclass(frozen=True)
class BowParams:
    """Settings of the descriptor (docs/methods/bow.md lists each one's source).

    ``size`` (H, W) of the resized image, ``patch`` side (patches do not overlap: step =
    patch), ``stripes`` horizontal stripes, ``words`` K, ``ma`` nearest words per patch,
    ``ma_sigma`` None → each of the ``ma`` words gets weight 1, else exp(−d²/σ²) (d:
    Euclidean patch–word distance), ``mask_sigma`` (σy, σx) of the Gaussian mask in
    half-image units (the image spans −1..1 both ways; None = no mask),
    ``negative_evidence`` subtract the mean training vector.
    """

    size: tuple[int, int] = (128, 64)
    patch: int = 4
    stripes: int = 16
    words: int = 350
    ma: int = 10
    ma_sigma: float | None = None
    mask_sigma: tuple[float, float] | None = (1.0, 1.0)
    negative_evidence: bool = True

    def __post_init__(self) -> None:
        h, w = self.size
        if self.patch < 1 or h % self.patch or w % self.patch:
            raise ParameterError("BoW", "patch", self.patch,
                                 f"must divide the image size {h}×{w}", "use 4 (the paper's)")
        if not 1 <= self.stripes <= h // self.patch:
            raise ParameterError("BoW", "stripes", self.stripes,
                                 f"must be in 1..{h // self.patch} (patch rows)", "use 16")
        if self.words < 1:
            raise ParameterError("BoW", "bow_words", self.words, "must be ≥ 1",
                                 "use 350 (the paper's)")
        if not 1 <= self.ma <= self.words:
            raise ParameterError("BoW", "ma", self.ma, f"must be in 1..{self.words} (words)",
                                 "use 10 (the paper's) with at least 10 words")
        if self.ma_sigma is not None and not self.ma_sigma > 0:
            raise ParameterError("BoW", "ma_sigma", self.ma_sigma, "must be > 0 or None",
                                 "use None for equal weights")
        if self.mask_sigma is not None and not min(self.mask_sigma) > 0:
            raise ParameterError("BoW", "mask_sigma", self.mask_sigma, "must be > 0",
                                 "use (1, 1)")

    @property
    def grid(self) -> tuple[int, int]:
        """(rows, cols) of patches."""
        return self.size[0] // self.patch, self.size[1] // self.patch

    @property
    def num_patches(self) -> int:
        return self.grid[0] * self.grid[1]

    @property
    def dim(self) -> int:
        """stripes · words (5,600 with the paper's 16 · 350)."""
        return self.stripes * self.words

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> "BowParams":
        raw = json.loads(text)
        raw["size"] = tuple(raw["size"])
        if raw.get("mask_sigma") is not None:
            raw["mask_sigma"] = tuple(raw["mask_sigma"])
        return cls(**raw)


# ================================================================== local descriptors

def color_name_probabilities(images: np.ndarray, table: ColorNameTable) -> np.ndarray:
    """uint8 RGB [n, H, W, 3] → float32 [n, H, W, 11] (table lookup per pixel)."""
    images = np.asarray(images)
    if images.ndim != 4 or images.shape[-1] != 3:
        raise UsageError(f"BoW: images have shape {images.shape}",
                         "pass uint8 RGB images [n, H, W, 3]")
    px = images.astype(np.int64) >> 3
    index = px[..., 0] + TABLE_BINS * px[..., 1] + TABLE_BINS * TABLE_BINS * px[..., 2]
    return table.table[index]


def patch_descriptors(images: np.ndarray, table: ColorNameTable,
                      params: BowParams = BowParams()) -> np.ndarray:
    """Colour-Names patch descriptors: uint8 [n, H, W, 3] → float32 [n, P, 11].

    Market-1501 paper §4: per pixel the 11 probabilities (L1-normalised by construction),
    square-rooted; a patch (``params.patch``² pixels, no overlap) is their mean. Patches
    are in row-major grid order (P = rows · cols = 512 for 128×64 and 4×4).
    """
    images = np.asarray(images)
    if images.shape[1:3] != tuple(params.size):
        raise UsageError(f"BoW: images are {images.shape[1]}×{images.shape[2]}, the "
                         f"descriptor needs {params.size[0]}×{params.size[1]}",
                         "resize the images first")
    n = images.shape[0]
    rows, cols = params.grid
    p = params.patch
    cn = np.sqrt(color_name_probabilities(images, table))           # [n, H, W, 11]
    cn = cn.reshape(n, rows, p, cols, p, len(COLOR_NAMES)).mean(axis=(2, 4))
    return np.ascontiguousarray(cn.reshape(n, rows * cols, len(COLOR_NAMES)),
                                dtype=np.float32)


def patch_layout(params: BowParams) -> tuple[np.ndarray, np.ndarray]:
    """(stripe int64 [P], mask weight float64 [P]) of each patch in grid order.

    Patch row ``i`` of ``rows`` is in stripe ``i·S // rows``. The mask is
    exp(−(y²/2σy² + x²/2σx²)) at the patch centre, with (x, y) in half-image units
    (−1..1) from the image centre (Market-1501 paper §4, background suppression); all
    ones when ``mask_sigma`` is None.
    """
    rows, cols = params.grid
    stripe = np.repeat(np.arange(rows) * params.stripes // rows, cols).astype(np.int64)
    if params.mask_sigma is None:
        return stripe, np.ones(rows * cols)
    y = (np.arange(rows) + 0.5) / rows * 2 - 1
    x = (np.arange(cols) + 0.5) / cols * 2 - 1
    sy, sx = params.mask_sigma
    mask = np.exp(-(y[:, None] ** 2 / (2 * sy ** 2) + x[None, :] ** 2 / (2 * sx ** 2)))
    return stripe, mask.reshape(-1)


# ================================================================== quantisation

def assign_words(descriptors: np.ndarray, centres: np.ndarray, ma: int,
                 ma_sigma: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Multiple assignment: descriptors [N, d], centres [K, d] → (words int64 [N, ma],
    weights float64 [N, ma]).

    The ``ma`` nearest centres (Euclidean), nearest first, weight 1 each, or exp(−d²/σ²)
    with ``ma_sigma`` = σ.
    """
    x = np.asarray(descriptors, dtype=np.float64)
    c = np.asarray(centres, dtype=np.float64)
    d2 = (x * x).sum(1)[:, None] - 2 * x @ c.T + (c * c).sum(1)[None, :]
    np.maximum(d2, 0, out=d2)
    if ma < c.shape[0]:
        part = np.argpartition(d2, ma - 1, axis=1)[:, :ma]
    else:
        part = np.broadcast_to(np.arange(c.shape[0]), (x.shape[0], c.shape[0]))
    part_d2 = np.take_along_axis(d2, part, axis=1)
    order = np.lexsort((part, part_d2), axis=1)            # by distance, then word index
    words = np.take_along_axis(part, order, axis=1).astype(np.int64)
    dist2 = np.take_along_axis(part_d2, order, axis=1)
    weights = np.ones_like(dist2) if ma_sigma is None else np.exp(-dist2 / ma_sigma ** 2)
    return words, weights


def term_frequencies(descriptors: np.ndarray, centres: np.ndarray,
                     params: BowParams) -> np.ndarray:
    """Mask-weighted word counts per stripe: [n, P, 11] → float64 [n, S, K].

    tf[i, s, k] = Σ over patches p of image i in stripe s with word k among their ``ma``
    nearest: mask(p) · weight(p, k).
    """
    desc = np.asarray(descriptors)
    n, num_patches, dim = desc.shape
    if num_patches != params.num_patches:
        raise UsageError(f"BoW: {num_patches} patches per image, expected "
                         f"{params.num_patches}", "compute them with patch_descriptors")
    k = centres.shape[0]
    stripe, mask = patch_layout(params)
    words, weights = assign_words(desc.reshape(-1, dim), centres, params.ma, params.ma_sigma)
    image = np.repeat(np.arange(n), num_patches)[:, None]
    patch_stripe = np.tile(stripe, n)[:, None]
    flat = (image * params.stripes + patch_stripe) * k + words                 # [n·P, ma]
    votes = weights * np.tile(mask, n)[:, None]
    tf = np.bincount(flat.ravel(), weights=votes.ravel(), minlength=n * params.stripes * k)
    return tf.reshape(n, params.stripes, k)


def inverse_document_frequency(tf: np.ndarray) -> np.ndarray:
    """IDF of each word over N images: tf [N, S, K] → float64 [K], log(N / n_k).

    n_k = images where word k received a vote (in any stripe); a word no image uses gets
    log(N) (n_k counted as 1).
    """
    present = (np.asarray(tf) > 0).any(axis=1).sum(axis=0)
    return np.log(tf.shape[0] / np.maximum(present, 1))


def bow_vectors(tf: np.ndarray, idf: np.ndarray, mean: np.ndarray | None = None
                ) -> np.ndarray:
    """tf [n, S, K] → float32 [n, S·K] (stripe-major).

    √tf · idf (tf·idf with every term divided by √tf, Market-1501 paper §4 "burstiness"),
    L2-normalised; with ``mean`` [S·K] (negative evidence) that vector is subtracted and
    the result L2-normalised again.
    """
    tf = np.asarray(tf, dtype=np.float64)
    n = tf.shape[0]
    h = (np.sqrt(tf) * np.asarray(idf, dtype=np.float64)[None, None, :]).reshape(n, -1)
    h = l2_normalize_rows(h)
    if mean is not None:
        h = l2_normalize_rows(h - np.asarray(mean, dtype=np.float64)[None, :])
    return h.astype(np.float32)


# ================================================================== codebook

@dataclasses.dataclass(frozen=True)
class BowCodebook:
    """A fitted BoW descriptor.

    ``centres`` float32 [K, 11] (k-means words), ``idf`` float32 [K], ``mean`` float32
    [S·K] (negative evidence; None when ``params.negative_evidence`` is off),
    ``color_names`` the table the words were learned with, ``params``, and ``fit_info``
    (seed, images and patches the fit used).
    """

    centres: np.ndarray
    idf: np.ndarray
    mean: np.ndarray | None
    color_names: ColorNameTable
    params: BowParams
    fit_info: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def dim(self) -> int:
        return self.params.dim

    def encode(self, images: np.ndarray) -> np.ndarray:
        """uint8 RGB [n, H, W, 3] (H, W = ``params.size``) → float32 [n, S·K]."""
        images = np.asarray(images)
        out = np.empty((images.shape[0], self.dim), dtype=np.float32)
        for start in range(0, images.shape[0], _CHUNK):
            chunk = images[start:start + _CHUNK]
            tf = term_frequencies(patch_descriptors(chunk, self.color_names, self.params),
                                  self.centres, self.params)
            out[start:start + len(chunk)] = bow_vectors(tf, self.idf, self.mean)
        return out

    # -- persistence ---------------------------------------------------------------------
    def to_arrays(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """(arrays, attrs) that :meth:`from_arrays` turns back into the codebook."""
        arrays = {"centres": self.centres, "idf": self.idf,
                  "color_names": self.color_names.table}
        if self.mean is not None:
            arrays["mean"] = self.mean
        attrs = {"method": "bow", "params": self.params.to_json(),
                 "color_names_source": self.color_names.source,
                 "color_names_sha256": self.color_names.sha256,
                 "fit_info": json.dumps(dict(self.fit_info), default=str)}
        return arrays, attrs

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray], attrs: Mapping[str, Any],
                    where: str = "codebook") -> "BowCodebook":
        try:
            params = BowParams.from_json(str(attrs["params"]))
            table = np.asarray(arrays["color_names"], dtype=np.float32)
            centres = np.asarray(arrays["centres"], dtype=np.float32)
            idf = np.asarray(arrays["idf"], dtype=np.float32)
            mean = np.asarray(arrays["mean"], dtype=np.float32) if "mean" in arrays else None
            source = str(attrs["color_names_source"])
            fit_info = json.loads(str(attrs.get("fit_info", "{}")))
        except (KeyError, ValueError, TypeError) as exc:
            raise InputFileError(f"{where} is not a BoW codebook ({exc})",
                                 "write it again with the bow descriptor") from None
        digest = _table_digest(table)
        if (table.shape != (TABLE_ROWS, len(COLOR_NAMES)) or centres.shape
                != (params.words, len(COLOR_NAMES)) or idf.shape != (params.words,)
                or (mean is not None and mean.shape != (params.dim,))
                or digest != str(attrs.get("color_names_sha256", digest))):
            raise InputFileError(f"{where}: codebook arrays do not match its parameters",
                                 "the file is damaged; write it again")
        return cls(centres, idf, mean, ColorNameTable(table, source, digest), params,
                   fit_info)

    def save(self, h5: Any, name: str = "bow") -> None:
        """Write ``/codebooks/<name>/`` (datasets centres, idf, mean, color_names; attrs)
        into an open h5py file; replaces an existing group of that name."""
        arrays, attrs = self.to_arrays()
        parent = h5.require_group(CODEBOOK_GROUP)
        if name in parent:
            del parent[name]
        group = parent.create_group(name)
        for key, value in attrs.items():
            group.attrs[key] = value
        for key, value in arrays.items():
            group.create_dataset(key, data=np.asarray(value, dtype=np.float32))

    def provenance(self) -> dict[str, Any]:
        """What a store's provenance records about this descriptor."""
        return {"color_names": self.color_names.source,
                "color_names_sha256": self.color_names.sha256,
                "color_names_builtin": self.color_names.is_builtin,
                "params": dataclasses.asdict(self.params), **dict(self.fit_info)}

    def summary(self) -> str:
        return (f"{self.params.words} words × {self.params.stripes} stripes = {self.dim}-d; "
                f"color names: {self.color_names.describe()}")


def load_codebook(path: str | os.PathLike, name: str = "bow") -> BowCodebook:
    """Read ``/codebooks/<name>`` from a store (or any HDF5 file) written by
    :meth:`BowCodebook.save`."""
    from reidcli.store.codebooks import read_codebook

    arrays, attrs = read_codebook(path, name)
    return BowCodebook.from_arrays(arrays, attrs, f"{Path(path)}:/{CODEBOOK_GROUP}/{name}")


def fit_bow(descriptors: np.ndarray, color_names: ColorNameTable,
            params: BowParams = BowParams(), *, seed: int = 0,
            max_patches: int = 100_000) -> BowCodebook:
    """Learn the codebook, IDF and mean vector from training patch descriptors.

    ``descriptors`` float32 [m, P, 11] of m training images. k-means (scikit-learn,
    ``random_state=seed``, one k-means++ start) runs on at most ``max_patches`` patches
    drawn uniformly without replacement; IDF and the negative-evidence mean are computed
    over all m images.
    """
    seed = check_seed("BoW", seed)
    from sklearn.cluster import KMeans

    desc = np.asarray(descriptors, dtype=np.float32)
    flat = desc.reshape(-1, desc.shape[-1])
    if flat.shape[0] < params.words:
        raise ParameterError("BoW", "bow_words", params.words,
                             f"exceeds the {flat.shape[0]} training patches",
                             "use fewer words or more training images")
    rng = np.random.default_rng(seed)
    if flat.shape[0] > max_patches:
        flat = flat[np.sort(rng.choice(flat.shape[0], max_patches, replace=False))]
    km = KMeans(n_clusters=params.words, n_init=1, random_state=seed, max_iter=100)
    km.fit(flat.astype(np.float64))
    centres = km.cluster_centers_.astype(np.float32)
    tf = np.concatenate([term_frequencies(desc[s:s + _CHUNK], centres, params)
                         for s in range(0, desc.shape[0], _CHUNK)])
    idf = inverse_document_frequency(tf).astype(np.float32)
    mean = None
    if params.negative_evidence:
        mean = bow_vectors(tf, idf).astype(np.float64).mean(axis=0).astype(np.float32)
    info = {"seed": int(seed), "fit_images": int(desc.shape[0]),
            "kmeans_patches": int(flat.shape[0])}
    return BowCodebook(centres, idf, mean, color_names, params, info)


def fit_bow_from_batches(batches: Iterable[np.ndarray], color_names: ColorNameTable,
                         params: BowParams = BowParams(), *, seed: int = 0,
                         max_patches: int = 100_000) -> BowCodebook:
    """:func:`fit_bow` on image batches uint8 [b, H, W, 3]: only their patch descriptors
    (float32 [b, P, 11], 22.5 KB per 128×64 image) are kept."""
    seed = check_seed("BoW", seed)                 # before the descriptors are computed
    parts = [patch_descriptors(batch, color_names, params) for batch in batches]
    if not parts or sum(len(p) for p in parts) == 0:
        raise UsageError("BoW: no training images to learn the codebook from",
                         f"extract a dataset with training rows or pass "
                         f"{param('codebook_from')}")
    return fit_bow(np.concatenate(parts), color_names, params, seed=seed,
                   max_patches=max_patches)
