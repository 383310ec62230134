"""``reid adapt``: read a store, adapt its queries (and normalise its gallery), write the
adapted store (docs/methods/dart3.md). :func:`adapt_features` is the in-memory core, usable on any
:class:`~reidcli.adapt.inputs.AdaptInputs` (see :func:`inputs_from_arrays`)."""
from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from reidcli.adapt.config import AdaptConfig, adapt_method, label_of
from reidcli.adapt.inputs import AdaptInputs, CameraTable, read_inputs
from reidcli.adapt.norm import normalized_gallery
from reidcli.adapt.statistics import CameraStatistics, camera_statistics
from reidcli.errors import UsageError
from reidcli.naming import param

if TYPE_CHECKING:
    from reidcli.adapt.loop import LoopResult


@dataclasses.dataclass
class Adaptation:
    """Result of :func:`adapt_features`: ``queries`` [Ns, d] adapted embeddings of the selected
    queries (selection order), ``gallery`` [Ng, d] the gallery to score them against,
    ``arrays`` the ``/adapt`` datasets, ``loop`` the online run (None for none/norm)."""

    config: AdaptConfig
    queries: np.ndarray
    gallery: np.ndarray
    arrays: dict[str, np.ndarray]
    stats: CameraStatistics
    loop: "LoopResult | None"
    seconds: float
    runner: Any = None

    @property
    def per_query_seconds(self) -> float:
        return self.seconds / max(len(self.queries), 1)


def inputs_from_arrays(queries: np.ndarray, query_cams: np.ndarray, gallery: np.ndarray,
                       gallery_cams: np.ndarray, *, query_cams_selected: list[int] | None = None,
                       grounding: np.ndarray | None = None,
                       grounding_cams: np.ndarray | None = None,
                       feature: str = "features") -> AdaptInputs:
    """:class:`AdaptInputs` from in-memory embeddings (Nq×d, Ng×d) and 0-based camera ids,
    for library use without a store (one domain; no images). ``feature`` names the
    embedding (a model's feature name for the model-based methods)."""
    queries = np.asarray(queries, np.float32)
    gallery = np.asarray(gallery, np.float32)
    pool = np.empty((0, queries.shape[1]), np.float32) if grounding is None else \
        np.asarray(grounding, np.float32)
    pool_cams = np.empty(0, np.int64) if grounding_cams is None else \
        np.asarray(grounding_cams, np.int64)
    all_cams = np.concatenate([np.asarray(query_cams, np.int64),
                               np.asarray(gallery_cams, np.int64), pool_cams])
    cam_ids, codes = np.unique(all_cams, return_inverse=True)
    nq, ng = len(queries), len(gallery)
    q_cams = np.asarray(query_cams, np.int64)
    selected = np.arange(nq) if query_cams_selected is None else \
        np.flatnonzero(np.isin(q_cams, query_cams_selected))
    records = pd.DataFrame({"pid": np.zeros(nq + ng, np.int64), "camid": all_cams[:nq + ng],
                            "split": ["query"] * nq + ["gallery"] * ng,
                            "path": [""] * (nq + ng)})
    return AdaptInputs(store=Path("<arrays>"), feature=feature, feature_attrs={}, trial=0,
                       num_trials=1, records=records, query_rows=np.arange(nq),
                       gallery_rows=np.arange(nq, nq + ng), queries=queries, gallery=gallery,
                       query_codes=codes[:nq].astype(np.int64),
                       gallery_codes=codes[nq:nq + ng].astype(np.int64), selected=selected,
                       cameras=CameraTable(cam_ids.astype(np.int64),
                                           np.array([""] * len(cam_ids), dtype=object)),
                       grounding_rows=np.arange(len(pool)), grounding=pool,
                       grounding_codes=codes[nq + ng:].astype(np.int64), store_attrs={})


def adapt_features(inputs: AdaptInputs, config: AdaptConfig, *, model=None,
                   images_root: str | os.PathLike | None = None,
                   progress: bool = False) -> Adaptation:
    """Run ``config.method`` on ``inputs`` (docs/methods/dart3.md).

    ``model`` is a run directory / model file or a loaded
    :class:`~reidcli.models.checkpoint.LoadedModel` (full DART3, TENT, TEMP).
    """
    from reidcli.device import resolve_device

    cfg = config.resolved()
    if cfg.uses_model and model is None:
        mode = f" {param('mode', cfg.params['mode'])}" if "mode" in cfg.params else ""
        raise UsageError(f"{cfg.method}{mode} re-runs the backbone on the query images and "
                         f"needs {param('model')}",
                         f"pass {param('model', 'RUN_DIR')} (and "
                         f"{param('images_root', 'DIR')}), or use dart3 "
                         f"{param('mode', 'lite')} / norm, which need only the stored "
                         "embeddings")
    n_cams = inputs.cameras.num_cameras
    stats = camera_statistics(inputs.queries, inputs.query_codes, inputs.gallery,
                              inputs.gallery_codes, n_cams, mode=cfg.stats, ddof=cfg.std_ddof,
                              eps=cfg.eps, max_per_camera=cfg.stats_max_per_camera,
                              seed=cfg.seed, extra_feats=inputs.grounding,
                              extra_codes=inputs.grounding_codes)
    sel = inputs.selected
    arrays: dict[str, np.ndarray] = {"cam_ids": inputs.cameras.cam_ids}
    if len(set(inputs.cameras.domains.tolist())) > 1:
        arrays["cam_domains"] = inputs.cameras.domains.astype(str).astype(object)
    initial = {"M_q_init": stats.mean_q, "S_q_init": stats.std_q, "M_g": stats.mean_g,
               "S_g": stats.std_g}
    g_norm = lambda: normalized_gallery(inputs.gallery, inputs.gallery_codes, stats)
    info = adapt_method(cfg.method)
    closed_form = info.extras.get("closed_form")
    if closed_form is not None:                     # seconds: the queries' processing only
        started = time.perf_counter()
        q = closed_form(inputs.queries[sel], inputs.query_codes[sel], stats, cfg)
        seconds = time.perf_counter() - started
        if info.extras.get("normalizes_gallery"):   # Alg 1: Q̃ and G̃ with the initial values
            arrays.update(initial, M_q=stats.mean_q, S_q=stats.std_q)
            gallery = g_norm()
        else:
            gallery = inputs.gallery.copy()
        return Adaptation(cfg, q, gallery, arrays, stats, None, seconds)

    import torch                    # online methods only: none/norm import no torch

    from reidcli.adapt.loop import plan_batches, run_loop

    torch.manual_seed(cfg.seed)
    device = resolve_device(cfg.device, owner="adaptation")
    runner = _runner(cfg, inputs, model, device) if cfg.uses_model else None
    adapter, gallery_out = info.extras["build"](cfg, inputs, stats, runner, g_norm, device)
    batch_bn = cfg.uses_model and cfg.bn_mode == "batch"
    plan = plan_batches(inputs.query_codes[sel], batch_size=cfg.batch_size, order=cfg.order,
                        seed=cfg.seed, split_by_camera=cfg.split_by_query_camera,
                        merge_single=batch_bn, grounding=cfg.grounding,
                        pool_size=len(inputs.grounding), min_rows=2 if batch_bn else 1,
                        camera_label=inputs.cameras.label)
    images = _image_batches(inputs, plan, sel, runner, images_root, cfg) if runner else None
    loop = run_loop(adapter, plan, selected=sel, query_codes=inputs.query_codes,
                    grounding_codes=inputs.grounding_codes, dim=inputs.dim, steps=cfg.steps,
                    optimizer=cfg.optimizer, lr=cfg.lr, episodic=cfg.episodic, emit=cfg.emit,
                    images=images, device=device, progress=progress)
    arrays.update(_merge_states(loop))
    arrays.update(order=loop.order, batch_id=loop.batch_id, loss=loop.losses)
    return Adaptation(cfg, loop.embeddings, gallery_out, arrays, stats, loop, loop.seconds,
                      runner)


def _runner(cfg: AdaptConfig, inputs: AdaptInputs, model, device):
    from reidcli.adapt.base import BackboneRunner
    from reidcli.models.checkpoint import LoadedModel, load_model

    loaded = model if isinstance(model, LoadedModel) else load_model(model, device)
    runner = BackboneRunner(loaded, inputs.feature, cfg.bn_mode,
                            flip=bool(inputs.feature_attrs.get("flip", False)))
    runner.check_dim(inputs.dim)
    return runner


def _image_batches(inputs: AdaptInputs, plan, sel: np.ndarray, runner, images_root, cfg):
    """A DataLoader yielding each planned batch's images (queries, then grounding rows)."""
    from reidcli.data.image_dataset import ImageRecordDataset, make_loader

    rows = np.concatenate([inputs.query_rows, inputs.grounding_rows])
    frame = pd.DataFrame({"path": inputs.image_paths(rows, images_root),
                          "pid": inputs.records["pid"].to_numpy(np.int64)[rows],
                          "camid": inputs.records["camid"].to_numpy(np.int64)[rows]})
    dataset = ImageRecordDataset(frame, runner.loaded.transform, return_index=False)
    nq = len(inputs.query_rows)
    batches = [np.concatenate([sel[q], nq + g]).tolist()
               for q, g in zip(plan.query_pos, plan.ground_pos)]
    loader = make_loader(dataset, batch_sampler=batches, workers=cfg.workers,
                         device=runner.loaded.device, seed=cfg.seed)
    return (item["image"] for item in loader)


def _merge_states(loop: "LoopResult") -> dict[str, np.ndarray]:
    """The state to write: the last stream's, with each per-camera stream's own camera rows
    of M_q/S_q (the other cameras of a stream keep their initial values)."""
    if not loop.stream_states:
        return {}
    merged = {k: np.array(v, copy=True) for k, v in loop.stream_states[-1].items()}
    if len(loop.stream_states) > 1:
        for cam, state in zip(loop.stream_cameras, loop.stream_states):
            for key in ("M_q", "S_q"):
                if cam is not None and key in state:
                    merged[key][cam] = state[key][cam]
    return merged


@dataclasses.dataclass
class AdaptStoreResult:
    """What ``reid adapt`` wrote and measured."""

    out: Path
    adaptation: Adaptation
    num_queries: int

    @property
    def seconds(self) -> float:
        return self.adaptation.seconds


def adapt_store(store: str | os.PathLike, out: str | os.PathLike, config: AdaptConfig, *,
                model: str | os.PathLike | None = None,
                images_root: str | os.PathLike | None = None,
                save_model: str | os.PathLike | None = None, force: bool = False,
                drop_convmaps: bool = False, progress: bool = True,
                command: list[str] | None = None) -> AdaptStoreResult:
    """Adapt ``store`` with ``config`` and write the adapted store ``out`` (docs/methods/dart3.md)."""
    from reidcli import __version__
    from reidcli.store.adapted import write_adapted_store
    from reidcli.io import check_output
    from reidcli.provenance import make_provenance

    cfg = config.resolved()
    check_output(out, force=force, inputs=[store])
    if save_model is not None:
        check_output(save_model, force=force, option="save_model", inputs=[store, out])
    inputs = read_inputs(store, feature=cfg.feature, trial=cfg.trial, query_cams=cfg.query_cams,
                         grounding=cfg.grounding, grounding_split=cfg.grounding_split)
    cfg = dataclasses.replace(cfg, feature=inputs.feature)
    result = adapt_features(inputs, cfg, model=model, images_root=images_root,
                            progress=progress)
    if save_model is not None:
        if result.runner is None:
            raise UsageError(f"{param('save_model')}: {cfg.method} does not change a model",
                             f"use it with a method that re-runs the backbone (dart3 "
                             f"{param('mode', 'full')}, tent, temp …)")
        _save_adapted_model(result.runner, save_model, cfg, store)
    q_rows = inputs.query_rows[inputs.selected]
    arrays = dict(result.arrays, query_rows=q_rows)
    attrs = {"method": cfg.method, "mode": str(cfg.params.get("mode", "")),
             "feature": inputs.feature, "params_json": cfg.as_params(),
             "input_store": str(store), "reidcli_version": __version__,
             "adapt_seconds": float(result.seconds),
             "per_query_seconds": float(result.per_query_seconds), "trial": int(cfg.trial),
             "num_queries": int(len(q_rows)),
             "model": "" if model is None else str(model)}
    inputs_used = [store] + ([_model_file(model)] if model is not None else [])
    source = inputs.store_provenance
    prov = make_provenance(command=command, seed=cfg.seed, inputs=inputs_used,
                           model=source.get("model"),
                           adapt={**cfg.as_params(),
                                  "label": label_of(adapt_method(cfg.method), cfg.as_params())},
                           source_provenance=source)
    path = write_adapted_store(store, out, method=cfg.method, feature=inputs.feature,
                               trial=cfg.trial, query_rows=q_rows, query_values=result.queries,
                               gallery_rows=inputs.gallery_rows, gallery_values=result.gallery,
                               adapt_arrays=arrays, adapt_attrs=attrs, provenance=prov,
                               force=force, drop_convmaps=drop_convmaps)
    return AdaptStoreResult(out=path, adaptation=result, num_queries=len(q_rows))


def _model_file(model) -> str:
    from reidcli.models.checkpoint import resolve_model_file
    return str(resolve_model_file(model))


def _save_adapted_model(runner, path, cfg: AdaptConfig, store) -> None:
    from reidcli.models.checkpoint import save_model

    runner.bn.restore_modes()
    meta = dict(runner.loaded.meta, adapted_by=cfg.method, adapt_params=cfg.as_params(),
                adapted_store=str(store))
    save_model(path, runner.loaded.module, runner.loaded.spec, meta=meta)


__all__ = ["Adaptation", "AdaptStoreResult", "adapt_features", "adapt_store",
           "inputs_from_arrays"]
