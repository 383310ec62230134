"""Evaluation during training (``--eval-every N``): the model of the current epoch is saved
as a model file, extracted on the evaluation dataset's query/gallery trials and scored under
its protocol — the same code, defaults included, as ``reid extract --model`` followed by
``reid eval`` (docs/training.md), so the numbers logged equal theirs."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

#: the numbers a training-time evaluation logs (metrics.csv columns, TensorBoard scalars)
EVAL_COLUMNS = ("mAP", "rank1", "mINP")
#: ``reid extract``'s default images per batch (the same batches give the same bits)
EXTRACT_BATCH = 256


def evaluate_model_file(model_path: str | os.PathLike, dataset: str, root: str | None,
                        options: dict[str, Any], scratch: str | os.PathLike, *,
                        device: str = "auto", workers: int | None = None) -> dict[str, float]:
    """``{"mAP", "rank1", "mINP"}`` of the model file ``model_path`` on ``dataset`` (trials
    chosen as ``reid extract --model`` does, protocol ``auto``, ``reid eval``'s defaults).
    The feature store is written into ``scratch`` (a folder the caller removes)."""
    from reidcli.evaluation.engine import EvalOptions
    from reidcli.evaluation.report import build_report
    from reidcli.evaluation.run import StoreEvalRequest, evaluate_store
    from reidcli.features.layout import dataset_layout
    from reidcli.features.model_extract import default_model_layout, extract_model_store
    from reidcli.models.checkpoint import load_model
    from reidcli.models.training_identities import training_identities

    loaded = load_model(model_path, "cpu")

    def make_layout(trials):
        return dataset_layout(dataset, root, trials=trials, progress=False, **options)

    layout, _ = default_model_layout(make_layout, training_identities(loaded.meta, loaded.path))
    store = extract_model_store(layout, Path(scratch) / "features.h5", loaded,
                                batch_size=EXTRACT_BATCH, device=device, workers=workers,
                                force=True, progress=False)
    evaluation = evaluate_store(StoreEvalRequest(store=store, device=device,
                                                 options=EvalOptions(progress=False)))
    report = build_report(evaluation.protocol, evaluation.trials, evaluation.meta, None)
    return {"mAP": float(report["mAP"]), "rank1": float(report["cmc"][0]),
            "mINP": float(report["mINP"])}


__all__ = ["EVAL_COLUMNS", "evaluate_model_file"]
