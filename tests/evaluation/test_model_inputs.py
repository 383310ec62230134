"""Models that read their own inputs from the store (e.g. conv-map pooling) go through eval
without a store feature."""
from __future__ import annotations

import numpy as np
import pandas as pd

from reidcli import fitted, registry
from reidcli.data.records import normalize_frame
from reidcli.evaluation.arrays import evaluate_arrays
from reidcli.evaluation.run import StoreEvalRequest, evaluate_store
from reidcli.store import StoreWriter


class MeanPooledMaps(fitted.TrialModel):
    """Averages a conv-map layer over space: inputs [n, C]; euclidean distance."""

    reads = "convmaps"
    metric = "mean-pool-euclidean"
    higher_is_better = False

    def __init__(self, layer: str, scale: np.ndarray):
        self.layer, self.scale = layer, scale

    def read_inputs(self, store, rows):
        maps = store.convmaps(self.layer, rows).astype(np.float64)
        return maps.mean(axis=(2, 3)) * self.scale

    def embedded_distance(self, q, g):
        return np.sqrt(((q[:, None, :] - g[None, :, :]) ** 2).sum(-1))


registry.register_loader("test-mean-pool",
                         lambda arrays, hp: MeanPooledMaps(hp["layer"], arrays["scale"]),
                         paper="—", summary="test model", reads="convmaps")


def write_map_store(tmp_path):
    """A store of conv maps only (12 ids × 4 images, 2 cameras) and a fitted mean-pool
    model; → (store, model, pids, cams, split, maps)."""
    rng = np.random.default_rng(0)
    n_ids, per = 12, 4
    pids = np.repeat(np.arange(1, n_ids + 1), per)
    cams = np.tile([0, 1, 0, 1], n_ids)
    split = np.where(np.arange(len(pids)) % per == 0, "query", "gallery")
    rec = normalize_frame(pd.DataFrame({"path": [f"{i}.jpg" for i in range(len(pids))],
                                        "pid": pids, "camid": cams, "split": split}))
    centres = rng.standard_normal((n_ids + 1, 8))
    maps = centres[pids][:, :, None, None] + 0.8 * rng.standard_normal((len(pids), 8, 3, 2))
    store = tmp_path / "maps.h5"
    with StoreWriter(store, rec) as w:          # no /features at all
        w.add_convmap("conv5", (8, 3, 2))
        w.append_convmap("conv5", maps)
    model = tmp_path / "m.h5"
    fitted.save(model, "test-mean-pool", {"scale": np.full(8, 2.0)},
                hyperparameters={"layer": "conv5"})
    return store, model, pids, cams, split, maps


def test_eval_through_model_reading_conv_maps(tmp_path):
    store, model, pids, cams, split, maps = write_map_store(tmp_path)
    got = evaluate_store(StoreEvalRequest(store=store, model=model))
    # the same numbers from the pooled features directly
    pooled = maps.astype(np.float16).astype(np.float64).mean(axis=(2, 3)) * 2.0
    q, g = split == "query", split == "gallery"
    ref = evaluate_arrays(pids[q], cams[q], pids[g], cams[g], query_features=pooled[q],
                          gallery_features=pooled[g], metric="euclidean")
    assert got.meta["feature"] is None
    assert np.isclose(got.trials[0].mAP, ref.mAP)
    assert np.allclose(got.trials[0].cmc[:10], ref.cmc[:10])


def test_streamed_gallery_through_a_model_with_its_own_distance(tmp_path):
    """The gallery read block by block through the model's read_inputs and distance: the
    in-memory numbers."""
    from reidcli.evaluation.engine import EvalOptions
    store, model, *_ = write_map_store(tmp_path)
    options = EvalOptions(max_rank=10, gallery_block_rows=7)
    kept = evaluate_store(StoreEvalRequest(store=store, model=model, stream="off",
                                           options=options))
    streamed = evaluate_store(StoreEvalRequest(store=store, model=model, stream="on",
                                               options=options))
    assert streamed.meta["gallery_streamed"] == [0]
    assert streamed.trials[0].mAP == kept.trials[0].mAP
    assert np.array_equal(streamed.trials[0].cmc, kept.trials[0].cmc)
