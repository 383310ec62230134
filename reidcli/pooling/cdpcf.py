"""C-DPCF, DPCF, AvgP+XQDA and AvgP+pad.+XQDA on conv maps (C-DPCF paper §III).

:meth:`PoolingEstimator.fit_layer` learns one layer's weight maps (Eq. 9) and one XQDA per
(layer, map); :class:`PooledMetricModel` is the fitted model ``reid eval`` uses: it reads the
conv maps of the rows it is asked about, pools them with each image's own camera maps,
projects them and sums the L·K Mahalanobis distances (Eq. 11). Maps are read in chunks, so
memory holds one chunk of maps plus the pooled training features of one layer. Each pooling
method is a registered :class:`PoolingEstimator` subclass that owns its parameters and says
how it pools (camera-specific or shared maps, learned or average, padded or not).

A camera is the pair (domain, camid) (:mod:`reidcli.cameras`): the fitted file lists its
cameras as ``camids`` with ``camera_domains`` (docs/formats.md), and every image is pooled with
the maps of its own (domain, camid) camera.
"""
from __future__ import annotations

from typing import Callable, ClassVar

import numpy as np

from reidcli.cameras import CameraTable, camera_codes, record_camera_columns
from reidcli.errors import FittedModelError, ParameterError, UsageError
from reidcli.estimator import Estimator, store_params
from reidcli.fitted import TrialModel
from reidcli.metric.constraints import COUNT, COUNT_OR_ZERO, SEED, check_dim
from reidcli.metric.xqda import XQDA
from reidcli.params import NONE, TEXT, Options, validate_params
from reidcli.progress import track
from reidcli.registry import register
from reidcli.pooling.geometry import area_positions, position_areas, same_area_mask
from reidcli.numeric import l2_normalize_rows as l2_rows
from reidcli.pooling.pooled import (average_weights, center_and_normalize, flat_maps,
                                    pad_by_camera, pool_by_camera)
from reidcli.pooling.projection import image_blocks, random_orthonormal_projection
from reidcli.pooling.weight_maps import CrossCameraScatter, top_eigenvectors

METRICS = ("xqda", "none")
CENTERING = ("global", "per-camera")
#: constraints of the pooling parameters (every :class:`PoolingEstimator`)
CONSTRAINTS = {"K": [COUNT], "E": [COUNT_OR_ZERO],
               "seed": [SEED], "metric": [Options(METRICS)],
               "xqda_lambda": XQDA._parameter_constraints["lam"],
               "xqda_solver": XQDA._parameter_constraints["solver"],
               "xqda_dims": XQDA._parameter_constraints["max_dims"],
               "center": [Options(CENTERING)], "chunk": [COUNT]}

#: ``read(layer, rows) -> maps [len(rows), D', H, W]`` for rows in increasing order
MapReader = Callable[[str, np.ndarray], np.ndarray]


def _chunks(n: int, size: int, description: str = "chunks"):
    """Row positions [≤ size] of consecutive chunks of n rows, with progress."""
    for start in track(range(0, n, size), description=description, unit="chunks",
                       inner=True):
        yield np.arange(start, min(start + size, n))


def learn_weight_maps(read: MapReader, layer: str, layer_idx: int, rows: np.ndarray,
                      pids: np.ndarray, camids: np.ndarray, *, K: int, E: int,
                      grid: tuple[int, int], seed: int, camera_specific: bool,
                      chunk: int = 256, context: str = "") -> dict[str, np.ndarray]:
    """Weight maps of one layer (C-DPCF paper Eq. 8–9): {"weight_maps" [T, K], "eigenvalues" [K]}.

    T = C·S for ``camera_specific`` maps (C-DPCF, Eq. 6), else S (DPCF); ``E`` = 0 is "w/o R";
    ``grid`` (Gh, Gw) gives the G pooling areas; ``chunk`` images are read at a time.

    ``rows`` (increasing) are the training rows, ``pids``/``camids`` their labels (``camids``:
    camera codes of :func:`reidcli.cameras.camera_codes`, or camids of one domain). The maps
    are streamed in chunks: project (q = R^T F*), accumulate the cross-camera statistics;
    float16 maps are converted block by block inside the GEMMs, never whole.
    """
    first = read(layer, rows[:1])
    channels, height, width = first.shape[1:]
    areas = position_areas(height, width, grid)
    positions = area_positions(areas)
    size = height * width
    if E == 0:
        projection, mask = None, same_area_mask(areas)          # "w/o R": masked Grams
    else:
        dim = len(positions) * channels
        if E > dim:
            raise ParameterError("pooling", "E", E, f"exceeds the {dim}-dimensional "
                                 f"pooled features of layer {layer}",
                                 f"use E ≤ {dim} (or 0 for w/o R)")
        projection = random_orthonormal_projection(dim, E, seed, layer_idx)
        mask = None
    scatter = CrossCameraScatter(pids, camids, size, camera_specific=camera_specific,
                                 mask=mask, context=context or f"layer {layer}")
    for idx in _chunks(len(rows), chunk, f"{layer} weight maps"):
        raw = read(layer, rows[idx])
        if projection is None:   # w/o R: the stored maps (converted block by block)
            scatter.add(idx, raw.reshape(len(idx), channels, size))
        else:                    # q = R^T F* projected and accumulated task by task
            scatter.add_maps(idx, raw, projection, positions)
    weights, values = top_eigenvectors(scatter.result(), K,
                                       context=context or f"layer {layer}")
    return {"weight_maps": weights, "eigenvalues": values}


def pooled_features(read: MapReader, layer: str, rows: np.ndarray, cam_index: np.ndarray,
                    weight_maps: np.ndarray, *, grid: tuple[int, int], camera_specific: bool,
                    chunk: int = 256, dtype=np.float32) -> np.ndarray:
    """Pooled features x [n, K, G·D'] of ``rows`` (each image pooled by its camera's maps:
    ``weight_maps`` [C·S, K] when ``camera_specific``, else [S, K])."""
    out = None
    positions: list[np.ndarray] = []
    for idx in _chunks(len(rows), chunk, f"{layer} pooling"):
        raw = read(layer, rows[idx])
        if out is None:
            positions = area_positions(position_areas(raw.shape[2], raw.shape[3], grid))
            out = np.empty((len(rows), weight_maps.shape[1], len(positions) * raw.shape[1]),
                           dtype=dtype)
        # float64 copies of one bounded block of images at a time, never of the whole chunk
        for part in image_blocks(len(idx), raw[0].size * 8):
            out[idx[part]] = pool_by_camera(flat_maps(raw[part]), cam_index[idx[part]],
                                            weight_maps, positions, camera_specific)
    if out is None:
        raise UsageError(f"no rows to pool for layer {layer}", "check the store's rows")
    return out


def average_pooling_weights(read: MapReader, layer: str, rows: np.ndarray,
                            grid: tuple[int, int]) -> np.ndarray:
    """The constant average-pooling "map" w = 1/|A_g| [S, 1] (avgp, avgp-pad)."""
    raw = read(layer, rows[:1])
    areas = position_areas(raw.shape[2], raw.shape[3], grid)
    return average_weights(area_positions(areas), raw.shape[2] * raw.shape[3])


def _means(x: np.ndarray, cam_index: np.ndarray, num_cameras: int, center: str) -> np.ndarray:
    """μ [D] (global) or [C, D] (per camera) of pooled training features x [N, D]."""
    if center == "global":
        return x.mean(0)
    return np.stack([x[cam_index == c].mean(0) for c in range(num_cameras)])


def _normalized(x: np.ndarray, mean: np.ndarray, cam_index: np.ndarray) -> np.ndarray:
    if mean.ndim == 1:
        return center_and_normalize(x, mean)
    out = np.empty_like(x, dtype=np.float64)
    for c in np.unique(cam_index):
        pick = cam_index == c
        out[pick] = center_and_normalize(x[pick].astype(np.float64), mean[c])
    return out


class PooledMetricModel(TrialModel):
    """A fitted pooling trial used by ``reid eval`` (C-DPCF paper Eq. 11).

    ``pooling`` is the :class:`PoolingEstimator` class that wrote the arrays: it says how
    images are pooled (its own camera's maps or shared ones, learned or average) and arranged.
    :meth:`read_inputs` turns store rows into per-(layer, map) projections u = W^T x̃
    concatenated [n, Σr] (or unit-norm raw pooled vectors for ``metric="none"``);
    :meth:`distance` sums the L·K Mahalanobis distances (Eq. 11) with one GEMM per block.
    """

    reads = "convmaps"
    input_dim = None

    def __init__(self, arrays: dict, hyperparameters: dict, pooling: type["PoolingEstimator"]):
        self.hp = hyperparameters
        self.pooling = pooling
        try:
            read = {"K": int(hyperparameters["K"]), "E": int(hyperparameters["E"]),
                    "seed": int(hyperparameters["seed"]), "metric": hyperparameters["metric"],
                    "center": hyperparameters.get("center", "global")}
            self.grid = tuple(int(v) for v in str(hyperparameters["grid"]).split("x"))
            self.layers = list(hyperparameters["layers"])
            # files written before camera_domains: cameras of one domain
            self.cameras = CameraTable.from_lists(hyperparameters["camids"],
                                                  hyperparameters.get("camera_domains"))
        except (KeyError, ValueError, TypeError) as exc:
            raise FittedModelError(f"pooling model hyperparameters are incomplete ({exc})",
                                   "re-fit with reid fit-pooling") from None
        read = validate_params("pooling", read, {name: CONSTRAINTS[name] for name in read})
        self.num_maps = pooling.num_maps(read["K"])
        self.pooled_metric = read["metric"]
        self.chunk = pooling.default_params()["chunk"]
        self.arrays = arrays
        self.metric = pooling.method
        self._blocks: list[np.ndarray] = []
        if self.pooled_metric == "xqda":
            for layer in self.layers:
                for k in range(self.num_maps):
                    group = self._group(layer, k)
                    if "metric" not in group:
                        raise FittedModelError(f"fitted {layer}/map_{k} has no XQDA metric",
                                               "re-fit with reid fit-pooling")
                    self._blocks.append(np.asarray(group["metric"], dtype=np.float64))

    def _group(self, layer: str, k: int) -> dict:
        try:
            return self.arrays[layer][f"map_{k}"]
        except KeyError:
            raise FittedModelError(f"fitted model lacks {layer}/map_{k}",
                                   "re-fit with reid fit-pooling") from None

    def embed(self, read: MapReader, rows: np.ndarray, camids: np.ndarray,
              domains: np.ndarray | None = None) -> np.ndarray:
        """Inputs of :meth:`distance` for ``rows``: float64 [n, Σ_lk r_lk] (or Σ D for none).

        Each row's camera is (``domains``, ``camids``) [n], looked up in the fitted cameras
        (:meth:`reidcli.cameras.CameraTable.lookup`: by camid alone when the model was fitted
        on one domain); an unseen camera is a UsageError."""
        rows = np.asarray(rows, dtype=np.int64)
        order = np.argsort(rows, kind="stable")
        sorted_rows = rows[order]
        cam_index = self.cameras.lookup(None if domains is None else np.asarray(domains)[order],
                                        np.asarray(camids)[order], "reid eval")
        parts = []
        for layer in self.layers:
            weights = self.pooling.stored_weights(self.arrays, read, layer, sorted_rows,
                                                  self.grid)
            x = pooled_features(read, layer, sorted_rows, cam_index, weights, grid=self.grid,
                                camera_specific=self.pooling.camera_specific,
                                chunk=self.chunk)
            for k in range(x.shape[1]):
                xk = x[:, k].astype(np.float64)
                if self.pooled_metric == "none":
                    parts.append(l2_rows(xk))
                    continue
                group = self._group(layer, k)
                xn = _normalized(xk, np.asarray(group["mean"], dtype=np.float64), cam_index)
                xn = self.pooling.arrange(xn, cam_index, self.cameras.num_cameras)
                parts.append(xn @ np.asarray(group["proj"], dtype=np.float64))
        out = np.concatenate(parts, axis=1)
        restore = np.empty_like(order)
        restore[order] = np.arange(len(order))
        return out[restore]

    def read_inputs(self, store, rows: np.ndarray) -> np.ndarray:
        """:meth:`embed` with conv maps and cameras read from a feature store."""
        store.require_convmaps(self.layers)
        domains, camids = record_camera_columns(store.records, rows)
        return self.embed(store.convmaps, rows, camids, domains)

    def transform(self, features: np.ndarray) -> np.ndarray:
        """Inputs already come embedded from :meth:`read_inputs`: returned as float64."""
        return np.asarray(features, dtype=np.float64)

    def embedded_distance(self, query: np.ndarray, gallery: np.ndarray) -> np.ndarray:
        """δ² [q, g] = Σ_lk (u_q − u_g)^T M_lk (u_q − u_g) (Eq. 11), or Σ (1 − cos)."""
        query = np.asarray(query, dtype=np.float64)
        gallery = np.asarray(gallery, dtype=np.float64)
        if self.pooled_metric == "none":
            terms = len(self.layers) * self.num_maps
            return terms - query @ gallery.T
        qm, gm, start = np.empty_like(query), np.empty_like(gallery), 0
        for block in self._blocks:
            stop = start + block.shape[0]
            qm[:, start:stop] = query[:, start:stop] @ block
            gm[:, start:stop] = gallery[:, start:stop] @ block
            start = stop
        if start != query.shape[1]:
            raise FittedModelError(f"pooled inputs have {query.shape[1]} columns, the metric "
                                   f"blocks {start}", "re-fit with reid fit-pooling")
        aq = np.einsum("ij,ij->i", qm, query)
        ag = np.einsum("ij,ij->i", gm, gallery)
        return aq[:, None] + ag[None, :] - 2.0 * (qm @ gallery.T)


class PoolingEstimator(Estimator):
    """A pooling method fitted on conv maps (C-DPCF paper §III); each registered subclass
    (C-DPCF, DPCF, AvgP, AvgP+pad.) says how it pools through its class attributes and hooks:
    :attr:`camera_specific`, :meth:`layer_weights` / :meth:`stored_weights` (learned or
    average maps), :meth:`num_maps` and :meth:`arrange`.

    ``fit(maps, pids [N], camids [N], domains=None, rows=None)``: ``maps`` is
    ``{layer: [N, D', H, W]}`` or a :data:`MapReader` ``read(layer, rows)`` (then ``rows`` [N]
    are the training rows it reads and ``layers`` must be given); ``domains`` [N] make each
    camera the pair (domain, camid). Sets ``arrays_`` (``{layer: fit_layer(...)}``),
    ``layers_`` and ``cameras_`` (a :class:`~reidcli.cameras.CameraTable`);
    ``fitted_model()`` is the :class:`PooledMetricModel`.
    """

    reads = "convmaps"
    #: each camera pools with its own maps w^c (C-DPCF, Eq. 5–6); else one set for all cameras
    camera_specific: ClassVar[bool] = False
    _parameter_constraints = {**CONSTRAINTS, "G": [COUNT],
                              "grid": [TEXT, NONE], "layers": [TEXT, NONE]}
    _parameter_help = {"K": "Weight maps per layer (paper: 10).",
                       "E": "Random projection rank (paper: 64; 0 = w/o R).",
                       "G": "Horizontal stripes (paper: 6).",
                       "grid": "Pooling grid GhxGw (default Gx1); overrides G.",
                       "seed": "Seed of R and of the id subsets.",
                       "metric": "xqda | none (w/o V: 1 − cosine of raw pooled vectors).",
                       "xqda_lambda": "XQDA's λ: regulariser added to Σ_I.",
                       "xqda_solver": "svd (public release) | eigh (the paper's).",
                       "xqda_dims": "Cap on the XQDA subspace rank (dimension).",
                       "center": "Mean removed before L2: global | per-camera.",
                       "chunk": "Images per block of conv maps read.",
                       "layers": "Conv-map layers, e.g. conv4_x,conv5_x (default: all)."}

    _quick_params = {"K": 2, "E": 16, "G": 3}

    def __init__(self, K: int = 10, E: int = 64, G: int = 6, grid: str | None = None,
                 seed: int = 0, metric: str = "xqda", xqda_lambda: float = 0.001,
                 xqda_solver: str = "svd", xqda_dims: int | None = None,
                 center: str = "global", chunk: int = 256, layers: str | None = None):
        store_params(self, locals())

    # -- what each method says about its pooling ---------------------------------------------
    @classmethod
    def num_maps(cls, K: int) -> int:
        """Maps per layer for parameter ``K``."""
        raise NotImplementedError

    def layer_weights(self, read: MapReader, layer: str, layer_idx: int, rows: np.ndarray,
                      pids: np.ndarray, camids: np.ndarray, settings: dict,
                      context: str) -> tuple[dict, np.ndarray]:
        """(arrays kept in the fitted file, weight maps [T, K]) of one layer's training rows."""
        raise NotImplementedError

    @classmethod
    def stored_weights(cls, arrays: dict, read: MapReader, layer: str, rows: np.ndarray,
                       grid: tuple[int, int]) -> np.ndarray:
        """The weight maps [T, K] a fitted file's ``arrays`` pool ``layer`` with."""
        raise NotImplementedError

    @staticmethod
    def arrange(x: np.ndarray, cam_index: np.ndarray, num_cameras: int) -> np.ndarray:
        """Normalised pooled vectors x̃ [n, D] as XQDA sees them (as they are here)."""
        return x

    # -- parameters ----------------------------------------------------------------------------
    def settings(self) -> dict:
        """The validated parameters, ``grid`` as (Gh, Gw) (from ``grid`` or ``G``)."""
        from reidcli.pooling.geometry import parse_grid
        p = self._validated_params()
        return {**p, "grid": parse_grid(p["grid"], p["G"])}

    def hyperparameters(self, layers: list[str], cameras: CameraTable | np.ndarray) -> dict:
        """The JSON attrs of the fitted file (docs/methods/cdpcf.md): ``camids`` [C] and
        ``camera_domains`` [C] list the fitted cameras in code order (an array of camids
        is cameras of one unnamed domain)."""
        s = self.settings()
        if not isinstance(cameras, CameraTable):
            cameras = camera_codes(None, cameras)[1]
        return {"method": self.method, "K": self.num_maps(s["K"]), "E": s["E"],
                "G": s["grid"][0] * s["grid"][1], "grid": f"{s['grid'][0]}x{s['grid'][1]}",
                "layers": list(layers), "C": int(cameras.num_cameras),
                "camids": [int(c) for c in cameras.cam_ids],
                "camera_domains": [str(d) for d in cameras.domains], "seed": s["seed"],
                "metric": s["metric"], "xqda_lambda": s["xqda_lambda"],
                "xqda_solver": s["xqda_solver"], "xqda_dims": s["xqda_dims"],
                "center": s["center"]}

    def layer_list(self) -> list[str] | None:
        """``layers`` as a list (None = every layer of the maps)."""
        if self.layers is None:
            return None
        names = self.layers if isinstance(self.layers, (list, tuple)) else \
            str(self.layers).split(",")
        return [n.strip() for n in names if n.strip()] or None

    # -- fitting -------------------------------------------------------------------------------
    def fit_layer(self, read: MapReader, layer: str, layer_idx: int, rows: np.ndarray,
                  pids: np.ndarray, camids: np.ndarray, *, context: str = "",
                  settings: dict | None = None) -> dict:
        """Everything one layer contributes to a fitted trial (docs/methods/cdpcf.md layout).

        ``camids`` [N] are camera labels: codes of :func:`reidcli.cameras.camera_codes` (a
        camera is (domain, camid)), or camids when the rows come from one domain. Returns
        ``{"weight_maps", "eigenvalues", "map_<k>": {"mean", "proj", "metric"}}``
        (weight maps absent for average pooling, XQDA arrays absent for ``metric="none"``).
        """
        s = settings or self.settings()
        rows = np.asarray(rows, dtype=np.int64)
        cameras, cam_index = np.unique(np.asarray(camids, dtype=np.int64), return_inverse=True)
        arrays, weights = self.layer_weights(read, layer, layer_idx, rows, pids, camids, s,
                                             context)
        x = pooled_features(read, layer, rows, cam_index, weights, grid=s["grid"],
                            camera_specific=self.camera_specific, chunk=s["chunk"])
        for k in range(x.shape[1]):
            xk = x[:, k].astype(np.float64)
            group: dict = {}
            if s["metric"] == "xqda":
                mean = _means(xk, cam_index, len(cameras), s["center"])
                xn = self.arrange(_normalized(xk, mean, cam_index), cam_index, len(cameras))
                check_dim("pooling", s["xqda_dims"], xn.shape[1], "the pooled vectors",
                          name="xqda_dims")
                model = XQDA(lam=s["xqda_lambda"], solver=s["xqda_solver"],
                             max_dims=s["xqda_dims"], normalize="none").fit(xn, pids, camids)
                group = {"mean": mean, "proj": model.projection_.astype(np.float32),
                         "metric": model.metric_}
            arrays[f"map_{k}"] = group
        return arrays

    def fit(self, maps, pids, camids=None, *, domains=None, rows=None,
            context: str = "") -> "PoolingEstimator":
        from reidcli.pooling.projection import layer_index
        settings = self.settings()
        if callable(maps):
            read, layers = maps, self.layer_list()
            if layers is None or rows is None:
                raise UsageError("fitting from a map reader needs layers and rows",
                                 "pass layers=... and rows=...")
        else:
            layers = self.layer_list() or sorted(maps)
            missing = [layer for layer in layers if layer not in maps]
            if missing:
                raise UsageError(f"no conv maps for layer(s) {', '.join(missing)}",
                                 f"layers available: {', '.join(sorted(maps))}")
            read = lambda layer, idx: np.asarray(maps[layer])[idx]   # noqa: E731
            rows = np.arange(len(np.asarray(maps[layers[0]])))
        pids = np.asarray(pids, dtype=np.int64)
        codes, cameras = camera_codes(domains, camids)
        self.arrays_ = {layer: self.fit_layer(read, layer, layer_index(layer, layers), rows,
                                              pids, codes, context=f"{context}layer {layer}",
                                              settings=settings)
                        for layer in layers}
        self.layers_, self.cameras_ = list(layers), cameras
        return self

    def fitted_arrays(self) -> dict:
        self._check_fitted("arrays_")
        return dict(self.arrays_)

    def saved_params(self) -> dict:
        """The fitted file's hyperparameters (what :class:`PooledMetricModel` reads)."""
        self._check_fitted("arrays_")
        return self.hyperparameters(self.layers_, self.cameras_)

    @classmethod
    def model_from_arrays(cls, arrays, hyperparameters) -> PooledMetricModel:
        return PooledMetricModel(dict(arrays), dict(hyperparameters), cls)


class LearnedMapPooling(PoolingEstimator):
    """K discriminative weight maps per layer learned from cross-camera pairs (Eq. 8–9)."""

    @classmethod
    def num_maps(cls, K: int) -> int:
        return K

    def layer_weights(self, read, layer, layer_idx, rows, pids, camids, settings, context):
        s = settings
        arrays = learn_weight_maps(read, layer, layer_idx, rows, pids, camids, K=s["K"],
                                   E=s["E"], grid=s["grid"], seed=s["seed"],
                                   camera_specific=self.camera_specific, chunk=s["chunk"],
                                   context=context)
        return arrays, arrays["weight_maps"]

    @classmethod
    def stored_weights(cls, arrays, read, layer, rows, grid):
        return np.asarray(arrays[layer]["weight_maps"], dtype=np.float64)


class AveragePooling(PoolingEstimator):
    """One constant map per layer: the average of each pooling area (AvgP baselines)."""

    @classmethod
    def num_maps(cls, K: int) -> int:
        return 1

    def layer_weights(self, read, layer, layer_idx, rows, pids, camids, settings, context):
        return {}, average_pooling_weights(read, layer, rows, settings["grid"])

    @classmethod
    def stored_weights(cls, arrays, read, layer, rows, grid):
        return average_pooling_weights(read, layer, rows, grid)


@register("cdpcf", stage="fit-pooling", paper="Matsukawa & Suzuki (C-DPCF)",
          summary="C-DPCF: camera-specific discriminative weight maps + XQDA per (layer, map).",
          hidden=["chunk"])
class CDPCF(LearnedMapPooling):
    camera_specific = True


@register("dpcf", stage="fit-pooling", paper="Matsukawa & Suzuki (C-DPCF), DPCF ablation",
          summary="DPCF: one discriminative weight-map set shared by all cameras + XQDA.",
          hidden=["chunk"])
class DPCF(LearnedMapPooling):
    pass


@register("avgp", stage="fit-pooling",
          paper="Matsukawa & Suzuki (C-DPCF), AvgP+XQDA baseline",
          summary="AvgP+XQDA: stripe-average pooling, one XQDA per layer.",
          hidden=["chunk", "K", "E"])
class AvgP(AveragePooling):
    pass


@register("avgp-pad", stage="fit-pooling", paper="Matsukawa & Suzuki (C-DPCF), AvgP+pad.+XQDA "
          "baseline (CRAFT-style padding)",
          summary="AvgP+pad.+XQDA: camera zero-padded stripe averages + XQDA.",
          hidden=["chunk", "K", "E"])
class AvgPPad(AveragePooling):
    @staticmethod
    def arrange(x: np.ndarray, cam_index: np.ndarray, num_cameras: int) -> np.ndarray:
        """CRAFT-style zero padding: x̃ in camera block c_i of [n, C·D]."""
        return pad_by_camera(x, cam_index, num_cameras)
