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


def test_eval_through_model_reading_conv_maps(tmp_path):
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
    got = evaluate_store(StoreEvalRequest(store=store, model=model))
    # the same numbers from the pooled features directly
    pooled = maps.astype(np.float16).astype(np.float64).mean(axis=(2, 3)) * 2.0
    q, g = split == "query", split == "gallery"
    ref = evaluate_arrays(pids[q], cams[q], pids[g], cams[g], query_features=pooled[q],
                          gallery_features=pooled[g], metric="euclidean")
    assert got.meta["feature"] is None
    assert np.isclose(got.trials[0].mAP, ref.mAP)
    assert np.allclose(got.trials[0].cmc[:10], ref.cmc[:10])
